#include "volt/net/unix.hpp"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

#include "net/socket_util.hpp"

namespace volt::net {

using volt::detail::Interest;
using volt::detail::IoHandle;
using volt::detail::IoOperation;
using Step = IoOperation::Step;

namespace {

// socket + bind for UnixListener and UnixDatagram.
std::error_code open_bound(int type, const UnixAddr& addr, IoHandle& out) noexcept {
  // An unnamed address would make bind() autobind to a random abstract name
  // on Linux: not what "bind to this address" means.
  if (addr.is_unnamed()) return make_error_code(errc::invalid_argument);
  if (std::error_code ec = detail::open_socket(AF_UNIX, type, out)) return ec;
  if (::bind(out.fd(), addr.as_sockaddr(), addr.sockaddr_len()) < 0) {
    const std::error_code ec = detail::errno_code();
    out.reset();
    return ec;
  }
  return {};
}

}  // namespace

// ---- UnixStream ----

Task<Expected<UnixStream>> UnixStream::connect(UnixAddr addr) {
  if (addr.is_unnamed()) co_return make_error_code(errc::invalid_argument);
  UnixStream stream;
  if (std::error_code ec = detail::open_socket(AF_UNIX, SOCK_STREAM, stream.handle_)) co_return ec;
  // On Linux a non-blocking AF_UNIX connect completes at once or fails (a
  // full backlog is EAGAIN, not EINPROGRESS): nothing to wait for.
  Expected<void> done =
      detail::connect_now(stream.handle_.fd(), addr.as_sockaddr(), addr.sockaddr_len());
  if (!done) co_return done.error();
  co_return stream;
}

Task<Expected<UnixStream>> UnixStream::connect(std::string path) {
  Expected<UnixAddr> addr = UnixAddr::from_path(path);
  if (!addr) co_return addr.error();
  co_return co_await connect(*addr);
}

Expected<std::pair<UnixStream, UnixStream>> UnixStream::pair() noexcept {
  UnixStream a;
  UnixStream b;
  if (std::error_code ec = detail::open_socket_pair(SOCK_STREAM, a.handle_, b.handle_)) return ec;
  return std::pair<UnixStream, UnixStream>(std::move(a), std::move(b));
}

Expected<UnixStream> UnixStream::from_fd(int fd) noexcept {
  UnixStream stream;
  if (std::error_code ec = IoHandle::open(fd, stream.handle_)) return ec;
  return stream;
}

Expected<UnixAddr> UnixStream::local_addr() const noexcept {
  if (!handle_) return errc::closed;
  return detail::socket_name<UnixAddr>(handle_.fd(), false);
}

Expected<UnixAddr> UnixStream::peer_addr() const noexcept {
  if (!handle_) return errc::closed;
  return detail::socket_name<UnixAddr>(handle_.fd(), true);
}

Expected<std::optional<std::error_code>> UnixStream::take_error() const noexcept {
  return detail::take_socket_error(handle_.fd());
}

// ---- UnixListener ----

Expected<UnixListener> UnixListener::bind(const UnixAddr& addr, int backlog) noexcept {
  if (backlog <= 0) return errc::invalid_argument;
  UnixListener listener;
  if (std::error_code ec = open_bound(SOCK_STREAM, addr, listener.handle_)) return ec;
  if (::listen(listener.handle_.fd(), backlog) < 0) return detail::errno_code();
  return listener;
}

Expected<UnixListener> UnixListener::bind(std::string_view path, int backlog) noexcept {
  Expected<UnixAddr> addr = UnixAddr::from_path(path);
  if (!addr) return addr.error();
  return bind(*addr, backlog);
}

Expected<UnixAddr> UnixListener::local_addr() const noexcept {
  if (!handle_) return errc::closed;
  return detail::socket_name<UnixAddr>(handle_.fd(), false);
}

Step UnixListener::Accept::step(IoOperation& op) noexcept {
  auto& self = static_cast<Accept&>(op);
  const int fd = detail::accept_fd(self.listener_->handle_.fd(), self.peer_, self.peer_len_);
  if (fd >= 0) {
    self.fd_ = fd;
    return Step::kDone;
  }
  if (fd == -EAGAIN || fd == -EWOULDBLOCK) return Step::kWouldBlock;
  // EMFILE and friends: reported with the readiness left set, so the next
  // accept() retries the system call at once (the queued connection raises
  // no new edge).
  self.error_ = -fd;
  return Step::kDone;
}

UnixListener::Accept::~Accept() {
  if (fd_ >= 0) ::close(fd_);
}

Expected<std::pair<UnixStream, UnixAddr>> UnixListener::Accept::await_resume() noexcept {
  finish();
  if (closed()) return errc::closed;
  if (error_ != 0) return detail::errno_code(error_);
  UnixStream stream;
  const int fd = std::exchange(fd_, -1);
  if (std::error_code ec = IoHandle::open_like(fd, listener_->handle_, stream.handle_)) return ec;
  Expected<UnixAddr> addr = detail::received_addr<UnixAddr>(peer_, peer_len_);
  if (!addr) return addr.error();
  return std::pair<UnixStream, UnixAddr>(std::move(stream), *addr);
}

Expected<std::pair<UnixStream, UnixAddr>> UnixListener::try_accept() const noexcept {
  if (!handle_) return errc::closed;
  const std::uint64_t seen = volt::detail::io_readiness(handle_);
  sockaddr_storage peer{};
  socklen_t peer_len = 0;
  const int fd = detail::accept_fd(handle_.fd(), peer, peer_len);
  if (fd < 0) {
    if (fd == -EAGAIN || fd == -EWOULDBLOCK)
      volt::detail::io_clear_readiness(handle_, seen, Interest::kRead);
    return detail::errno_code(-fd);
  }
  UnixStream stream;
  if (std::error_code ec = IoHandle::open_like(fd, handle_, stream.handle_)) return ec;
  Expected<UnixAddr> addr = detail::received_addr<UnixAddr>(peer, peer_len);
  if (!addr) return addr.error();
  return std::pair<UnixStream, UnixAddr>(std::move(stream), *addr);
}

// ---- UnixDatagram ----

Expected<UnixDatagram> UnixDatagram::bind(const UnixAddr& addr) noexcept {
  UnixDatagram socket;
  if (std::error_code ec = open_bound(SOCK_DGRAM, addr, socket.handle_)) return ec;
  return socket;
}

Expected<UnixDatagram> UnixDatagram::bind(std::string_view path) noexcept {
  Expected<UnixAddr> addr = UnixAddr::from_path(path);
  if (!addr) return addr.error();
  return bind(*addr);
}

Expected<UnixDatagram> UnixDatagram::unbound() noexcept {
  UnixDatagram socket;
  if (std::error_code ec = detail::open_socket(AF_UNIX, SOCK_DGRAM, socket.handle_)) return ec;
  return socket;
}

Expected<std::pair<UnixDatagram, UnixDatagram>> UnixDatagram::pair() noexcept {
  UnixDatagram a;
  UnixDatagram b;
  if (std::error_code ec = detail::open_socket_pair(SOCK_DGRAM, a.handle_, b.handle_)) return ec;
  return std::pair<UnixDatagram, UnixDatagram>(std::move(a), std::move(b));
}

Expected<UnixDatagram> UnixDatagram::from_fd(int fd) noexcept {
  UnixDatagram socket;
  if (std::error_code ec = IoHandle::open(fd, socket.handle_)) return ec;
  return socket;
}

Expected<void> UnixDatagram::connect(const UnixAddr& peer) const noexcept {
  if (peer.is_unnamed()) return errc::invalid_argument;
  return detail::connect_now(handle_.fd(), peer.as_sockaddr(), peer.sockaddr_len());
}

Expected<void> UnixDatagram::connect(std::string_view path) const noexcept {
  Expected<UnixAddr> addr = UnixAddr::from_path(path);
  if (!addr) return addr.error();
  return connect(*addr);
}

Expected<UnixAddr> UnixDatagram::local_addr() const noexcept {
  if (!handle_) return errc::closed;
  return detail::socket_name<UnixAddr>(handle_.fd(), false);
}

Expected<UnixAddr> UnixDatagram::peer_addr() const noexcept {
  if (!handle_) return errc::closed;
  return detail::socket_name<UnixAddr>(handle_.fd(), true);
}

Expected<std::optional<std::error_code>> UnixDatagram::take_error() const noexcept {
  return detail::take_socket_error(handle_.fd());
}

}  // namespace volt::net
