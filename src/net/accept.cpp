#include "volt/net/accept.hpp"

#include <unistd.h>

#include <cerrno>
#include <utility>

#include "net/socket_util.hpp"

namespace volt::net::detail {

using Step = volt::detail::IoOperation::Step;

AcceptBase::~AcceptBase() {
  if (accepted_ >= 0) ::close(accepted_);
}

Step AcceptBase::step(IoOperation& op) noexcept {
  auto& self = static_cast<AcceptBase&>(op);
  const int fd = accept_fd(self.fd_, self.peer_, self.peer_len_);
  if (fd >= 0) {
    self.accepted_ = fd;
    return Step::kDone;
  }
  if (fd == -EAGAIN || fd == -EWOULDBLOCK) return Step::kWouldBlock;
  // EMFILE and friends: reported, and the readiness is left set (only
  // kWouldBlock clears it), so the next accept() retries at once.
  self.error_ = -fd;
  return Step::kDone;
}

std::error_code AcceptBase::adopt(volt::detail::IoHandle& out) noexcept {
  if (std::error_code ec =
          volt::detail::IoHandle::open_like(std::exchange(accepted_, -1), *listener_, out))
    return ec;
  // The connection inherited the listener's socket options, TCP_INQ among
  // them (see enable_queue_hint).
  out.set_reports_queue(listener_->reports_queue());
  return {};
}

Expected<int> try_accept_fd(const volt::detail::IoHandle& listener, sockaddr_storage& peer,
                            socklen_t& peer_len) noexcept {
  if (!listener) return errc::closed;
  const std::uint64_t seen = volt::detail::io_readiness(listener);
  const int fd = accept_fd(listener.fd(), peer, peer_len);
  if (fd >= 0) return fd;
  if (fd == -EAGAIN || fd == -EWOULDBLOCK)
    volt::detail::io_clear_readiness(listener, seen, volt::detail::Interest::kRead);
  return errno_code(-fd);
}

}  // namespace volt::net::detail
