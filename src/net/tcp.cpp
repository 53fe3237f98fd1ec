#include "volt/net/tcp.hpp"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

#include "net/socket_util.hpp"
#include "volt/net/lookup_host.hpp"
#include "volt/time/timeout.hpp"

namespace volt::net {

using volt::detail::IoHandle;

// ---- TcpStream ----

Task<Expected<TcpStream>> TcpStream::connect(SocketAddr addr) {
  const int fd = detail::new_socket(addr.is_v6() ? AF_INET6 : AF_INET, SOCK_STREAM);
  if (fd < 0) co_return detail::errno_code(-fd);
  const bool hint = detail::enable_queue_hint(fd);
  int r;
  do {
    r = ::connect(fd, addr.as_sockaddr(), addr.sockaddr_len());
  } while (r < 0 && errno == EINTR);
  if (r < 0 && errno != EINPROGRESS) {
    const int err = errno;
    ::close(fd);
    co_return detail::errno_code(err);
  }
  // Registered only now that the connect has started (see new_socket).
  TcpStream stream;
  if (std::error_code ec = IoHandle::open(fd, stream.handle_)) co_return ec;
  stream.handle_.set_reports_queue(hint);
  if (r == 0) co_return stream;
  Expected<void> done = co_await detail::ConnectWait(stream.handle_);
  if (!done) co_return done.error();
  co_return stream;
}

Task<Expected<TcpStream>> TcpStream::connect(std::string host_port) {
  Expected<std::vector<SocketAddr>> addrs = co_await lookup_host(std::move(host_port));
  if (!addrs) co_return addrs.error();
  std::error_code last = make_error_code(errc::host_not_found);
  for (const SocketAddr& addr : *addrs) {
    Expected<TcpStream> stream = co_await connect(addr);
    if (stream) co_return std::move(*stream);
    last = stream.error();
  }
  co_return last;
}

Task<Expected<TcpStream>> TcpStream::connect_timeout(SocketAddr addr,
                                                     std::chrono::nanoseconds limit) {
  Expected<Expected<TcpStream>> result = co_await volt::timeout(limit, connect(addr));
  if (!result) co_return result.error();
  co_return std::move(*result);
}

Expected<TcpStream> TcpStream::from_fd(int fd) noexcept {
  const bool hint = detail::enable_queue_hint(fd);
  TcpStream stream;
  if (std::error_code ec = IoHandle::open(fd, stream.handle_)) return ec;
  stream.handle_.set_reports_queue(hint);
  return stream;
}

Expected<void> TcpStream::set_nodelay(bool on) const noexcept {
  return detail::set_flag(handle_, IPPROTO_TCP, TCP_NODELAY, on);
}

Expected<bool> TcpStream::nodelay() const noexcept {
  return detail::get_flag(handle_, IPPROTO_TCP, TCP_NODELAY);
}

Expected<void> TcpStream::set_linger(std::optional<std::chrono::seconds> linger) const noexcept {
  return detail::with_fd(handle_, [&](int fd) { return detail::set_linger(fd, linger); });
}

Expected<std::optional<std::chrono::seconds>> TcpStream::linger() const noexcept {
  return detail::with_fd(handle_, [](int fd) { return detail::get_linger(fd); });
}

Expected<void> TcpStream::set_ttl(std::uint32_t ttl) const noexcept {
  return detail::with_fd(handle_, [&](int fd) { return detail::set_ttl(fd, ttl); });
}

Expected<std::uint32_t> TcpStream::ttl() const noexcept {
  return detail::with_fd(handle_, [](int fd) { return detail::get_ttl(fd); });
}

Expected<SocketAddr> TcpStream::local_addr() const noexcept {
  return detail::socket_name<SocketAddr>(handle_, false);
}

Expected<SocketAddr> TcpStream::peer_addr() const noexcept {
  return detail::socket_name<SocketAddr>(handle_, true);
}

// ---- TcpListener ----

Expected<TcpListener> TcpListener::bind(const SocketAddr& addr, int backlog) noexcept {
  if (backlog <= 0) return errc::invalid_argument;
  const int fd = detail::new_socket(addr.is_v6() ? AF_INET6 : AF_INET, SOCK_STREAM);
  if (fd < 0) return detail::errno_code(-fd);
  auto fail = [fd](int err) {
    ::close(fd);
    return detail::errno_code(err);
  };
  // SO_REUSEADDR: a restarted server can bind while old connections linger
  // in TIME_WAIT (it does not allow two listeners on one port on Linux).
  const int on = 1;
  if (::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on) < 0) return fail(errno);
  if (::bind(fd, addr.as_sockaddr(), addr.sockaddr_len()) < 0) return fail(errno);
  if (::listen(fd, backlog) < 0) return fail(errno);
  // Accepted connections inherit it: no system call per connection.
  const bool hint = detail::enable_queue_hint(fd);
  // Registered only now that it listens (see new_socket).
  TcpListener listener;
  if (std::error_code ec = IoHandle::open(fd, listener.handle_)) return ec;
  listener.handle_.set_reports_queue(hint);
  return listener;
}

Expected<TcpListener> TcpListener::bind(std::string_view addr, int backlog) noexcept {
  Expected<SocketAddr> parsed = SocketAddr::parse(addr);
  if (!parsed) return parsed.error();
  return bind(*parsed, backlog);
}

Expected<SocketAddr> TcpListener::local_addr() const noexcept {
  return detail::socket_name<SocketAddr>(handle_, false);
}

}  // namespace volt::net
