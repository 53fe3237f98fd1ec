#include "volt/net/tcp_socket.hpp"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <utility>

#include "net/socket_util.hpp"

namespace volt::net {

using volt::detail::IoHandle;

namespace {

Expected<TcpSocket> make(int family, TcpSocket (*wrap)(int)) noexcept {
  const int fd = detail::new_socket(family, SOCK_STREAM);
  if (fd < 0) return detail::errno_code(-fd);
  return wrap(fd);
}

Expected<void> set_flag(int fd, int level, int option, bool on) noexcept {
  return detail::set_int_option(fd, level, option, on ? 1 : 0);
}

Expected<bool> get_flag(int fd, int level, int option) noexcept {
  Expected<int> v = detail::get_int_option(fd, level, option);
  if (!v) return v.error();
  return *v != 0;
}

Expected<void> set_uint(int fd, int level, int option, std::uint32_t value) noexcept {
  if (value > INT_MAX) return errc::invalid_argument;
  return detail::set_int_option(fd, level, option, static_cast<int>(value));
}

Expected<std::uint32_t> get_uint(int fd, int level, int option) noexcept {
  Expected<int> v = detail::get_int_option(fd, level, option);
  if (!v) return v.error();
  return static_cast<std::uint32_t>(*v);
}

Expected<void> set_seconds(int fd, int option, std::chrono::seconds s) noexcept {
  if (s.count() < 0 || s.count() > INT_MAX) return errc::invalid_argument;
  return detail::set_int_option(fd, IPPROTO_TCP, option, static_cast<int>(s.count()));
}

Expected<std::chrono::seconds> get_seconds(int fd, int option) noexcept {
  Expected<int> v = detail::get_int_option(fd, IPPROTO_TCP, option);
  if (!v) return v.error();
  return std::chrono::seconds(*v);
}

}  // namespace

TcpSocket& TcpSocket::operator=(TcpSocket&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.release();
  }
  return *this;
}

TcpSocket::~TcpSocket() {
  if (fd_ >= 0) ::close(fd_);
}

Expected<TcpSocket> TcpSocket::new_v4() noexcept {
  return make(AF_INET, [](int fd) { return TcpSocket(fd); });
}

Expected<TcpSocket> TcpSocket::new_v6() noexcept {
  return make(AF_INET6, [](int fd) { return TcpSocket(fd); });
}

Expected<void> TcpSocket::set_reuseaddr(bool on) const noexcept {
  return set_flag(fd_, SOL_SOCKET, SO_REUSEADDR, on);
}
Expected<bool> TcpSocket::reuseaddr() const noexcept {
  return get_flag(fd_, SOL_SOCKET, SO_REUSEADDR);
}
Expected<void> TcpSocket::set_reuseport(bool on) const noexcept {
  return set_flag(fd_, SOL_SOCKET, SO_REUSEPORT, on);
}
Expected<bool> TcpSocket::reuseport() const noexcept {
  return get_flag(fd_, SOL_SOCKET, SO_REUSEPORT);
}
Expected<void> TcpSocket::set_send_buffer_size(std::uint32_t bytes) const noexcept {
  return set_uint(fd_, SOL_SOCKET, SO_SNDBUF, bytes);
}
Expected<std::uint32_t> TcpSocket::send_buffer_size() const noexcept {
  return get_uint(fd_, SOL_SOCKET, SO_SNDBUF);
}
Expected<void> TcpSocket::set_recv_buffer_size(std::uint32_t bytes) const noexcept {
  return set_uint(fd_, SOL_SOCKET, SO_RCVBUF, bytes);
}
Expected<std::uint32_t> TcpSocket::recv_buffer_size() const noexcept {
  return get_uint(fd_, SOL_SOCKET, SO_RCVBUF);
}
Expected<void> TcpSocket::set_keepalive(bool on) const noexcept {
  return set_flag(fd_, SOL_SOCKET, SO_KEEPALIVE, on);
}
Expected<bool> TcpSocket::keepalive() const noexcept {
  return get_flag(fd_, SOL_SOCKET, SO_KEEPALIVE);
}
Expected<void> TcpSocket::set_keepalive_idle(std::chrono::seconds idle) const noexcept {
  return set_seconds(fd_, TCP_KEEPIDLE, idle);
}
Expected<std::chrono::seconds> TcpSocket::keepalive_idle() const noexcept {
  return get_seconds(fd_, TCP_KEEPIDLE);
}
Expected<void> TcpSocket::set_keepalive_interval(std::chrono::seconds interval) const noexcept {
  return set_seconds(fd_, TCP_KEEPINTVL, interval);
}
Expected<std::chrono::seconds> TcpSocket::keepalive_interval() const noexcept {
  return get_seconds(fd_, TCP_KEEPINTVL);
}
Expected<void> TcpSocket::set_keepalive_count(std::uint32_t probes) const noexcept {
  return set_uint(fd_, IPPROTO_TCP, TCP_KEEPCNT, probes);
}
Expected<std::uint32_t> TcpSocket::keepalive_count() const noexcept {
  return get_uint(fd_, IPPROTO_TCP, TCP_KEEPCNT);
}
Expected<void> TcpSocket::set_linger(std::optional<std::chrono::seconds> linger) const noexcept {
  return detail::set_linger(fd_, linger);
}
Expected<std::optional<std::chrono::seconds>> TcpSocket::linger() const noexcept {
  return detail::get_linger(fd_);
}
Expected<void> TcpSocket::set_nodelay(bool on) const noexcept {
  return set_flag(fd_, IPPROTO_TCP, TCP_NODELAY, on);
}
Expected<bool> TcpSocket::nodelay() const noexcept {
  return get_flag(fd_, IPPROTO_TCP, TCP_NODELAY);
}

Expected<void> TcpSocket::bind(const SocketAddr& addr) const noexcept {
  if (fd_ < 0) return errc::closed;
  if (::bind(fd_, addr.as_sockaddr(), addr.sockaddr_len()) < 0) return detail::errno_code();
  return {};
}

Expected<SocketAddr> TcpSocket::local_addr() const noexcept {
  socklen_t len = 0;
  Expected<sockaddr_storage> name = detail::local_name(fd_, len);
  if (!name) return name.error();
  return SocketAddr::from_sockaddr(reinterpret_cast<const sockaddr*>(&*name), len);
}

Expected<TcpListener> TcpSocket::listen(int backlog) && noexcept {
  // Consumed whatever happens: the descriptor is ours from here on.
  const int fd = release();
  if (fd < 0) return errc::closed;
  if (backlog <= 0) {
    ::close(fd);
    return errc::invalid_argument;
  }
  if (::listen(fd, backlog) < 0) {
    const int err = errno;
    ::close(fd);
    return detail::errno_code(err);
  }
  // As TcpListener::bind: accepted connections inherit TCP_INQ.
  const bool hint = detail::enable_queue_hint(fd);
  TcpListener listener;
  // Registered only now that it listens (see new_socket); closed on failure.
  if (std::error_code ec = IoHandle::open(fd, listener.handle_)) return ec;
  listener.handle_.set_reports_queue(hint);
  return listener;
}

Task<Expected<TcpStream>> TcpSocket::connect(SocketAddr addr) && {
  // Not a coroutine: the descriptor moves into the task's frame now, so
  // `*this` is empty on return and the frame (destroyed, awaited or not)
  // closes the descriptor unless the connection takes it.
  return connect_owned(std::move(*this), addr);
}

Task<Expected<TcpStream>> TcpSocket::connect_owned(TcpSocket socket, SocketAddr addr) {
  if (socket.fd_ < 0) co_return errc::closed;
  const bool hint = detail::enable_queue_hint(socket.fd_);
  int r;
  do {
    r = ::connect(socket.fd_, addr.as_sockaddr(), addr.sockaddr_len());
  } while (r < 0 && errno == EINTR);
  if (r < 0 && errno != EINPROGRESS) co_return detail::errno_code();  // ~socket closes
  // Registered only now that the connect has started (see new_socket).
  TcpStream stream;
  if (std::error_code ec = IoHandle::open(socket.release(), stream.handle_)) co_return ec;
  stream.handle_.set_reports_queue(hint);
  if (r == 0) co_return stream;
  Expected<void> done = co_await detail::ConnectWait(stream.handle_);
  if (!done) co_return done.error();
  co_return stream;
}

}  // namespace volt::net
