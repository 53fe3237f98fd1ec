// volt/net/tcp.hpp: TCP sockets on the runtime's I/O driver.
//
//   auto listener = volt::net::TcpListener::bind(*volt::net::SocketAddr::parse("127.0.0.1:0"));
//   for (;;) {
//     auto accepted = co_await listener->accept();
//     if (!accepted) { co_await volt::sleep(10ms); continue; }   // e.g. EMFILE
//     volt::spawn(echo(std::move(accepted->first)));
//   }
//
//   volt::Task<void> echo(volt::net::TcpStream s) {
//     char buf[4096];
//     for (;;) {
//       auto n = co_await s.read(buf);
//       if (!n || *n == 0) co_return;                    // error or end of stream
//       if (!co_await s.write_all(volt::io::ConstBuffer(buf, *n))) co_return;
//     }
//   }
//
// TcpListener: bind (SO_REUSEADDR, IPv4 or IPv6, IPV6_V6ONLY left to the
// system default), accept, try_accept, local_addr. TcpStream: connect (to an
// address, or to "host:port" through lookup_host), the read/write operations
// of stream_ops.hpp (peek, read_buf, ready(Interest) included), shutdown,
// nodelay, linger, ttl, addresses, split halves. To set options before
// bind/listen/connect (reuseport, buffer sizes, keepalive...), build the
// socket with TcpSocket (tcp_socket.hpp).
//
// Guarantees:
//  - Every descriptor is non-blocking, close-on-exec, registered once with
//    the runtime's driver, and closed exactly once when its owner goes.
//  - accept() on a descriptor shortage (EMFILE, ENFILE, ENOBUFS, ENOMEM)
//    returns that error; the pending connection stays queued and the next
//    accept() tries the system call again at once, so a loop that backs off
//    (sleeps) and retries serves it when descriptors are freed, never busy
//    loops on a stale readiness, never loses the listener.
//  - Operations need a runtime: creating a socket outside one gives
//    errc::no_runtime. Awaiting a moved-from socket's operation gives
//    errc::closed.
//  - A TcpStream can be used by two tasks at once, one reading and one
//    writing (split() gives halves that say so in their types). Two tasks
//    reading at once is allowed but their bytes interleave unpredictably.
//  - Errors are values (Expected), never exceptions; SIGPIPE is never raised.
//
// Connect with a timeout: `co_await volt::timeout(2s, TcpStream::connect(a))`,
// or TcpStream::connect_timeout(a, 2s); a timed-out attempt closes its socket.
#pragma once

#include <sys/socket.h>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>

#include "volt/detail/io_operation.hpp"
#include "volt/expected.hpp"
#include "volt/io/async_io.hpp"
#include "volt/io/buffer.hpp"
#include "volt/net/accept.hpp"
#include "volt/net/socket_addr.hpp"
#include "volt/net/stream_halves.hpp"
#include "volt/net/stream_ops.hpp"
#include "volt/net/stream_socket.hpp"
#include "volt/task/task.hpp"

namespace volt::net {

class TcpStream : public StreamSocket {
 public:
  // An empty stream: every operation gives errc::closed.
  TcpStream() noexcept = default;
  TcpStream(TcpStream&&) noexcept = default;
  TcpStream& operator=(TcpStream&&) noexcept = default;

  // Connects to `addr`. Errors: connection_refused, timed_out (the
  // system's), network_unreachable, errc::no_runtime...
  static Task<Expected<TcpStream>> connect(SocketAddr addr);
  // Resolves "host:port" (lookup_host) and tries each address in turn; the
  // error is the last attempt's.
  static Task<Expected<TcpStream>> connect(std::string host_port);
  // connect(addr) bounded by `limit`: errc::timed_out when it elapses.
  static Task<Expected<TcpStream>> connect_timeout(SocketAddr addr, std::chrono::nanoseconds limit);

  Expected<void> set_nodelay(bool on) const noexcept;
  Expected<bool> nodelay() const noexcept;
  // SO_LINGER. nullopt (the default): close returns at once and the kernel
  // sends what is queued in the background. A duration (whole seconds, the
  // kernel's unit): on; 0s makes close discard unsent data and reset the
  // connection (the peer sees std::errc::connection_reset): the useful
  // setting. Beware a duration above 0: Linux's close(2) then waits up to
  // that long for unsent data to be acknowledged even on a non-blocking
  // descriptor, so the thread that drops the socket (a runtime worker)
  // stalls (why Tokio deprecated its set_linger). Negative or above INT_MAX
  // seconds: errc::invalid_argument.
  Expected<void> set_linger(std::optional<std::chrono::seconds> linger) const noexcept;
  Expected<std::optional<std::chrono::seconds>> linger() const noexcept;
  // Hop limit of outgoing packets: IP_TTL on an IPv4 stream,
  // IPV6_UNICAST_HOPS on an IPv6 one. 1..255, else std::errc::invalid_argument
  // (from the kernel).
  Expected<void> set_ttl(std::uint32_t ttl) const noexcept;
  Expected<std::uint32_t> ttl() const noexcept;
  Expected<SocketAddr> local_addr() const noexcept;
  Expected<SocketAddr> peer_addr() const noexcept;

  // Halves (stream_halves.hpp): a read half and a write half usable by two
  // tasks at once. Borrowed halves refer to this stream, which must outlive
  // them; owned halves share one allocation holding it, and reunite() gives
  // it back. Dropping the owned write half shuts the write direction down
  // (the peer reads end of stream), as Tokio's does; forget() does not.
  using ReadHalf = StreamReadHalf<TcpStream>;
  using WriteHalf = StreamWriteHalf<TcpStream>;
  using OwnedReadHalf = OwnedStreamReadHalf<TcpStream>;
  using OwnedWriteHalf = OwnedStreamWriteHalf<TcpStream>;
  std::pair<ReadHalf, WriteHalf> split() const noexcept {
    return StreamHalves<TcpStream>::borrow(*this);
  }
  std::pair<OwnedReadHalf, OwnedWriteHalf> into_split() && {
    return StreamHalves<TcpStream>::own(std::move(*this));
  }

  // Adopts a connected, non-blocking stream socket (closed on failure).
  static Expected<TcpStream> from_fd(int fd) noexcept;

 private:
  friend class TcpSocket;  // connect() waits on handle_
};

class TcpListener {
 public:
  TcpListener() noexcept = default;
  TcpListener(TcpListener&&) noexcept = default;
  TcpListener& operator=(TcpListener&&) noexcept = default;

  // socket + SO_REUSEADDR + bind + listen(backlog). Errors:
  // address_in_use, permission_denied, errc::no_runtime...
  static Expected<TcpListener> bind(const SocketAddr& addr, int backlog = 1024) noexcept;
  // bind(SocketAddr::parse(text)): errc::invalid_argument if it does not parse.
  static Expected<TcpListener> bind(std::string_view addr, int backlog = 1024) noexcept;

  // The next connection (accept.hpp): cancel-safe; out of descriptors, the
  // error is returned and the next accept() retries at once.
  using Accept = detail::AcceptOp<TcpStream, SocketAddr>;
  Accept accept() const noexcept { return Accept(handle_); }
  Expected<std::pair<TcpStream, SocketAddr>> try_accept() const noexcept {
    return detail::try_accept<TcpStream, SocketAddr>(handle_);
  }

  Expected<SocketAddr> local_addr() const noexcept;
  int native_handle() const noexcept { return handle_.native_handle(); }
  explicit operator bool() const noexcept { return static_cast<bool>(handle_); }
  // Closes now; a waiting accept() gives errc::closed (any task may call it).
  void close() noexcept { handle_.close(); }

 private:
  friend class TcpSocket;  // listen() fills handle_
  volt::detail::IoHandle handle_;
};

static_assert(io::AsyncRead<TcpStream> && io::AsyncWrite<TcpStream>);
static_assert(io::AsyncRead<TcpStream::OwnedReadHalf> && io::AsyncWrite<TcpStream::OwnedWriteHalf>);
static_assert(io::AsyncRead<TcpStream::ReadHalf> && io::AsyncWrite<TcpStream::WriteHalf>);

}  // namespace volt::net
