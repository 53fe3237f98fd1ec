#include "volt/net/unix.hpp"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

#include "net/socket_util.hpp"

namespace volt::net {

using volt::detail::IoHandle;
using volt::detail::IoOperation;
using Step = IoOperation::Step;

namespace {

// socket + bind (+ listen if backlog > 0) for UnixListener and
// UnixDatagram, registered only once bound and listening: an unconnected
// stream socket reports EPOLLHUP (see new_socket in socket_util.hpp).
std::error_code open_bound(int type, const UnixAddr& addr, IoHandle& out,
                           int backlog = 0) noexcept {
  // An unnamed address would make bind() autobind to a random abstract name
  // on Linux: not what "bind to this address" means.
  if (addr.is_unnamed()) return make_error_code(errc::invalid_argument);
  const int fd = detail::new_socket(AF_UNIX, type);
  if (fd < 0) return detail::errno_code(-fd);
  if (::bind(fd, addr.as_sockaddr(), addr.sockaddr_len()) < 0 ||
      (backlog > 0 && ::listen(fd, backlog) < 0)) {
    const std::error_code ec = detail::errno_code();
    ::close(fd);
    return ec;
  }
  return IoHandle::open(fd, out);
}

}  // namespace

// ---- UnixStream ----

Task<Expected<UnixStream>> UnixStream::connect(UnixAddr addr) {
  if (addr.is_unnamed()) co_return make_error_code(errc::invalid_argument);
  const int fd = detail::new_socket(AF_UNIX, SOCK_STREAM);
  if (fd < 0) co_return detail::errno_code(-fd);
  // On Linux a non-blocking AF_UNIX connect completes at once or fails (a
  // full backlog is EAGAIN, not EINPROGRESS): nothing to wait for.
  Expected<void> done = detail::connect_now(fd, addr.as_sockaddr(), addr.sockaddr_len());
  if (!done) {
    ::close(fd);
    co_return done.error();
  }
  // Registered once connected (see open_bound).
  UnixStream stream;
  if (std::error_code ec = IoHandle::open(fd, stream.handle_)) co_return ec;
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
  return detail::socket_name<UnixAddr>(handle_, false);
}

Expected<UnixAddr> UnixStream::peer_addr() const noexcept {
  return detail::socket_name<UnixAddr>(handle_, true);
}

// ---- UnixListener ----

Expected<UnixListener> UnixListener::bind(const UnixAddr& addr, int backlog) noexcept {
  if (backlog <= 0) return errc::invalid_argument;
  UnixListener listener;
  if (std::error_code ec = open_bound(SOCK_STREAM, addr, listener.handle_, backlog)) return ec;
  return listener;
}

Expected<UnixListener> UnixListener::bind(std::string_view path, int backlog) noexcept {
  Expected<UnixAddr> addr = UnixAddr::from_path(path);
  if (!addr) return addr.error();
  return bind(*addr, backlog);
}

Expected<UnixAddr> UnixListener::local_addr() const noexcept {
  return detail::socket_name<UnixAddr>(handle_, false);
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
  return detail::connect_now(handle_, peer.as_sockaddr(), peer.sockaddr_len());
}

Expected<void> UnixDatagram::connect(std::string_view path) const noexcept {
  Expected<UnixAddr> addr = UnixAddr::from_path(path);
  if (!addr) return addr.error();
  return connect(*addr);
}

Expected<UnixAddr> UnixDatagram::local_addr() const noexcept {
  return detail::socket_name<UnixAddr>(handle_, false);
}

Expected<UnixAddr> UnixDatagram::peer_addr() const noexcept {
  return detail::socket_name<UnixAddr>(handle_, true);
}

}  // namespace volt::net
