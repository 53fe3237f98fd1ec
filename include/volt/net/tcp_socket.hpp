// volt/net/tcp_socket.hpp: TcpSocket, a TCP socket not yet listening or
// connected, for setting options that must come before bind, listen or
// connect (Tokio's TcpSocket).
//
//   // Two servers sharing one port (the kernel spreads connections):
//   auto s = volt::net::TcpSocket::new_v4().value();
//   s.set_reuseaddr(true).value();
//   s.set_reuseport(true).value();
//   s.bind(*volt::net::SocketAddr::parse("0.0.0.0:8080")).value();
//   volt::net::TcpListener listener = std::move(s).listen(1024).value();
//
//   // A client with keepalive probes after 60 s idle, every 10 s, 5 times:
//   auto c = volt::net::TcpSocket::new_v4().value();
//   c.set_keepalive(true).value();
//   c.set_keepalive_idle(std::chrono::seconds(60)).value();
//   c.set_keepalive_interval(std::chrono::seconds(10)).value();
//   c.set_keepalive_count(5).value();
//   volt::Expected<volt::net::TcpStream> stream = co_await std::move(c).connect(server);
//
// Guarantees:
//  - new_v4 / new_v6 make a non-blocking, close-on-exec descriptor with no
//    option set (in particular no SO_REUSEADDR, unlike TcpListener::bind);
//    they need no runtime. The descriptor is registered with the current
//    runtime's driver only by listen() or connect() (a fresh unconnected
//    stream socket reports a hang-up to epoll), which therefore need one
//    (errc::no_runtime otherwise).
//  - Every setter is one setsockopt(2) and its getter one getsockopt(2):
//    the getter reports what the kernel holds (for the buffer sizes that is
//    Linux's doubled value, see below). Errors are the system's codes
//    (std::errc::invalid_argument for an out-of-range value the kernel
//    refuses); values that do not fit the kernel's int give
//    errc::invalid_argument before any system call.
//  - listen() and connect() consume the socket (called on an rvalue:
//    std::move(s).listen(n)). Afterwards, success or failure, `s` is empty,
//    as is a moved-from or default-constructed TcpSocket: every setter,
//    getter, bind, listen and connect gives errc::closed, native_handle()
//    is -1, and operator bool is false. On failure the descriptor has been
//    closed. A TcpSocket that is destroyed unconsumed closes its descriptor.
//  - connect() takes the descriptor at the call (the returned task owns
//    it): a task never awaited, or destroyed while connecting, closes it.
//    Like TcpStream::connect, it waits on the driver for the non-blocking
//    connect(2) and gives connection_refused, timed_out... as values.
//  - A TcpSocket is for one task at a time (a builder, not shared); the
//    TcpListener / TcpStream it becomes follow their own rules.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>

#include "volt/expected.hpp"
#include "volt/net/socket_addr.hpp"
#include "volt/net/tcp.hpp"
#include "volt/task/task.hpp"

namespace volt::net {

class TcpSocket {
 public:
  // An empty socket (see the guarantees): every call gives errc::closed.
  TcpSocket() noexcept = default;
  TcpSocket(TcpSocket&& other) noexcept : fd_(other.release()) {}
  TcpSocket& operator=(TcpSocket&& other) noexcept;
  TcpSocket(const TcpSocket&) = delete;
  TcpSocket& operator=(const TcpSocket&) = delete;
  ~TcpSocket();

  // socket(AF_INET / AF_INET6, SOCK_STREAM). Errors: EMFILE, ENFILE,
  // address_family_not_supported (new_v6 on a host without IPv6)...
  static Expected<TcpSocket> new_v4() noexcept;
  static Expected<TcpSocket> new_v6() noexcept;

  // SO_REUSEADDR: bind a port whose old connections linger in TIME_WAIT.
  Expected<void> set_reuseaddr(bool on) const noexcept;
  Expected<bool> reuseaddr() const noexcept;
  // SO_REUSEPORT: several sockets (of one user), each with it set before
  // bind, may bind the same address and port; for listeners the kernel
  // spreads incoming connections among them.
  Expected<void> set_reuseport(bool on) const noexcept;
  Expected<bool> reuseport() const noexcept;
  // SO_SNDBUF / SO_RCVBUF in bytes. Linux doubles the value set (for its
  // bookkeeping) and clamps it to [a small minimum, net.core.wmem_max /
  // rmem_max]; the getter gives the kernel's number.
  Expected<void> set_send_buffer_size(std::uint32_t bytes) const noexcept;
  Expected<std::uint32_t> send_buffer_size() const noexcept;
  Expected<void> set_recv_buffer_size(std::uint32_t bytes) const noexcept;
  Expected<std::uint32_t> recv_buffer_size() const noexcept;
  // SO_KEEPALIVE, and its timing: TCP_KEEPIDLE (idle time before the first
  // probe), TCP_KEEPINTVL (between probes), whole seconds, 1..32767 on
  // Linux; TCP_KEEPCNT (unanswered probes before the connection is
  // dropped), 1..127. The timing applies once keepalive is on; it is
  // inherited by the TcpStream (and by connections a listener accepts).
  Expected<void> set_keepalive(bool on) const noexcept;
  Expected<bool> keepalive() const noexcept;
  Expected<void> set_keepalive_idle(std::chrono::seconds idle) const noexcept;
  Expected<std::chrono::seconds> keepalive_idle() const noexcept;
  Expected<void> set_keepalive_interval(std::chrono::seconds interval) const noexcept;
  Expected<std::chrono::seconds> keepalive_interval() const noexcept;
  Expected<void> set_keepalive_count(std::uint32_t probes) const noexcept;
  Expected<std::uint32_t> keepalive_count() const noexcept;
  // SO_LINGER, as TcpStream::set_linger (read its warning about durations
  // above 0).
  Expected<void> set_linger(std::optional<std::chrono::seconds> linger) const noexcept;
  Expected<std::optional<std::chrono::seconds>> linger() const noexcept;
  // TCP_NODELAY (kept by the stream connect() makes).
  Expected<void> set_nodelay(bool on) const noexcept;
  Expected<bool> nodelay() const noexcept;

  // bind(2). Errors: address_in_use, address_not_available,
  // permission_denied, invalid_argument (already bound; or an address of
  // the other family)...
  Expected<void> bind(const SocketAddr& addr) const noexcept;
  // getsockname(2): the bound address (port 0 in the bind: the one picked).
  Expected<SocketAddr> local_addr() const noexcept;

  // listen(2) and registration: the socket becomes a TcpListener (unbound:
  // the kernel picks a port on the wildcard address). backlog <= 0:
  // errc::invalid_argument. Consumes the socket (see the guarantees).
  Expected<TcpListener> listen(int backlog) && noexcept;
  // Connects to `addr` (a v4 socket to a v6 address gives
  // address_family_not_supported). Consumes the socket at the call.
  Task<Expected<TcpStream>> connect(SocketAddr addr) &&;

  // The descriptor, or -1 when empty.
  int native_handle() const noexcept { return fd_; }
  explicit operator bool() const noexcept { return fd_ >= 0; }

 private:
  explicit TcpSocket(int fd) noexcept : fd_(fd) {}
  int release() noexcept {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }
  static Task<Expected<TcpStream>> connect_owned(TcpSocket socket, SocketAddr addr);

  int fd_ = -1;
};

}  // namespace volt::net
