#include "volt/net/accept.hpp"

#include <unistd.h>

#include <cerrno>
#include <utility>

#include "net/socket_util.hpp"
#include "volt/time/clock.hpp"

namespace volt::net::detail {

using Step = volt::detail::IoOperation::Step;

AcceptBase::~AcceptBase() {
  if (accepted_ >= 0) ::close(accepted_);
}

namespace {

bool out_of_resources(int err) noexcept {
  return err == EMFILE || err == ENFILE || err == ENOBUFS || err == ENOMEM;
}

}  // namespace

Step AcceptBase::step(IoOperation& op) noexcept {
  auto& self = static_cast<AcceptBase&>(op);
  if (self.backing_off_) {
    if (!self.backoff_.fired()) return Step::kRetryLater;  // woken early
    self.backing_off_ = false;
  }
  const int fd = accept_fd(self.fd(), self.peer_, self.peer_len_);
  if (fd >= 0) {
    self.accepted_ = fd;
    return Step::kDone;
  }
  if (fd == -EAGAIN || fd == -EWOULDBLOCK) return Step::kWouldBlock;
  // Out of descriptors: the queued connection stays queued and the
  // readiness set (only kWouldBlock clears it), so an immediate retry would
  // fail the same way: wait kAcceptBackoff, then try once more (see the
  // header). The timer is this operation's; destroying it cancels.
  if (out_of_resources(-fd) && !self.backed_off_) {
    self.backed_off_ = true;
    if (self.backoff_.arm(volt::time::now() + kAcceptBackoff, current_task_waker())) {
      self.backing_off_ = true;
      return Step::kRetryLater;
    }
  }
  self.error_ = -fd;
  return Step::kDone;
}

std::error_code AcceptBase::adopt(volt::detail::IoHandle& out) noexcept {
  // The listener's registration, not its handle: the listener may have been
  // closed and destroyed meanwhile; our use keeps the registration (and its
  // runtime) alive.
  if (std::error_code ec =
          volt::detail::IoHandle::open_like(std::exchange(accepted_, -1), source(), out))
    return ec;
  // The connection inherited the listener's socket options, TCP_INQ among
  // them (see enable_queue_hint).
  out.set_reports_queue(reports_queue_);
  return {};
}

Expected<int> try_accept_fd(const volt::detail::IoHandle& listener, sockaddr_storage& peer,
                            socklen_t& peer_len) noexcept {
  const volt::detail::IoUse use(listener);
  if (use.fd() < 0) return errc::closed;
  const std::uint64_t seen = use.readiness();
  const int fd = accept_fd(use.fd(), peer, peer_len);
  if (fd >= 0) return fd;
  if (fd == -EAGAIN || fd == -EWOULDBLOCK) use.clear_readiness(seen, volt::detail::Interest::kRead);
  return errno_code(-fd);
}

}  // namespace volt::net::detail
