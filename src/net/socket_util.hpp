// Small system-call helpers shared by the socket types.
#pragma once

#include <sys/socket.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <optional>
#include <system_error>

#include "volt/detail/io_operation.hpp"
#include "volt/expected.hpp"

namespace volt::net::detail {

inline std::error_code errno_code(int err = errno) noexcept {
  return {err, std::system_category()};
}

// socket(2), non-blocking and close-on-exec, registered with the current
// runtime's driver into `out`. For sockets that are ready for I/O as they
// are (UDP). A stream socket must be registered only once it is listening
// or its connect(2) has started (new_socket, then IoHandle::open): a fresh
// unconnected stream socket reports EPOLLHUP (see io_source.hpp).
std::error_code open_socket(int family, int type, volt::detail::IoHandle& out) noexcept;
// socket(2), non-blocking and close-on-exec, not registered: the descriptor,
// or -errno.
int new_socket(int family, int type) noexcept;

// socketpair(2) of AF_UNIX sockets of `type`, non-blocking and close-on-exec,
// both registered with the current runtime's driver. On failure neither
// handle is set and both descriptors are closed.
std::error_code open_socket_pair(int type, volt::detail::IoHandle& first,
                                 volt::detail::IoHandle& second) noexcept;

// accept4 of one connection (non-blocking, close-on-exec): the descriptor,
// or -errno. Retries EINTR and ECONNABORTED (a peer that gave up while
// queued: the next one is taken instead).
int accept_fd(int listen_fd, sockaddr_storage& peer, socklen_t& peer_len) noexcept;

// Sets TCP_INQ (Linux 4.18): each recvmsg that asks for it reports how many
// bytes are still queued, so a read that fills its buffer can tell whether
// it drained the socket (ReadExact, stream_ops.cpp). Accepted sockets
// inherit it from their listener. True if set; false (harmless: reads just
// get no report) on older kernels or non-TCP descriptors.
bool enable_queue_hint(int fd) noexcept;

// connect(2) that completes at once (UDP and Unix datagram sockets: it only
// records the default peer), retrying EINTR.
Expected<void> connect_now(int fd, const sockaddr* addr, socklen_t len) noexcept;
// The same on a registered socket, holding a use of its descriptor
// (errc::closed once closed).
Expected<void> connect_now(const volt::detail::IoHandle& h, const sockaddr* addr,
                           socklen_t len) noexcept;

// getsockname / getpeername of `h` into an address type A (SocketAddr,
// UnixAddr); errc::closed for an empty or closed handle.
template <class A>
Expected<A> socket_name(const volt::detail::IoHandle& h, bool peer) noexcept {
  const volt::detail::IoUse use(h);
  if (use.fd() < 0) return errc::closed;
  sockaddr_storage storage{};
  socklen_t len = sizeof storage;
  auto* sa = reinterpret_cast<sockaddr*>(&storage);
  const int r = peer ? ::getpeername(use.fd(), sa, &len) : ::getsockname(use.fd(), sa, &len);
  if (r < 0) return errno_code();
  return A::from_sockaddr(sa, len);
}

// Waits for a non-blocking connect(2) on `h` to finish (TcpStream::connect,
// TcpSocket::connect). Write readiness says the attempt ended; SO_ERROR
// says how (0 and a peer name: connected).
class ConnectWait : public volt::detail::IoOperation {
 public:
  explicit ConnectWait(const volt::detail::IoHandle& h) noexcept
      : IoOperation(h, volt::detail::Interest::kWrite, &step) {}
  Expected<void> await_resume() noexcept {
    finish();
    if (closed()) return errc::closed;
    if (error_ != 0) return errno_code(error_);
    return {};
  }

 private:
  static Step step(IoOperation& op) noexcept;
  int error_ = 0;
};

// Socket options of a registered socket, holding a use of its descriptor
// (errc::closed once closed).
Expected<void> set_flag(const volt::detail::IoHandle& h, int level, int option, bool on) noexcept;
Expected<bool> get_flag(const volt::detail::IoHandle& h, int level, int option) noexcept;
// SO_ERROR: the pending error (0 if none), cleared by reading it.
Expected<std::optional<std::error_code>> take_socket_error(int fd) noexcept;

// `f(fd)` while holding a use of `h`'s descriptor; errc::closed (without
// calling f) for an empty or closed handle. For the option setters and
// getters of registered sockets, which are written against a plain
// descriptor so that TcpSocket (not registered yet) shares them.
template <class F>
auto with_fd(const volt::detail::IoHandle& h, F f) noexcept -> decltype(f(0)) {
  const volt::detail::IoUse use(h);
  if (use.fd() < 0) return errc::closed;
  return f(use.fd());
}

// Option helpers on a descriptor (errc::closed for a negative one); errors
// are the system's (errno).
Expected<void> set_int_option(int fd, int level, int option, int value) noexcept;
Expected<int> get_int_option(int fd, int level, int option) noexcept;
// SO_LINGER: nullopt is "off" (close returns at once, the kernel sends what
// is queued in the background); a duration is "on" with that many seconds
// (0: close resets the connection). Negative or more than INT_MAX seconds:
// errc::invalid_argument.
Expected<void> set_linger(int fd, std::optional<std::chrono::seconds> linger) noexcept;
Expected<std::optional<std::chrono::seconds>> get_linger(int fd) noexcept;
// Unicast hop limit: IP_TTL on an AF_INET socket, IPV6_UNICAST_HOPS on an
// AF_INET6 one (the family from SO_DOMAIN). The kernel takes 1..255 (EINVAL
// otherwise; on IPv6, -1 restores the route's default, not exposed here).
Expected<void> set_ttl(int fd, std::uint32_t ttl) noexcept;
Expected<std::uint32_t> get_ttl(int fd) noexcept;
// getsockname of a descriptor we own (TcpSocket, before registration).
Expected<sockaddr_storage> local_name(int fd, socklen_t& len) noexcept;

}  // namespace volt::net::detail
