// volt/net/unix.hpp: Unix-domain sockets (AF_UNIX) on the runtime's I/O
// driver: UnixListener and UnixStream (SOCK_STREAM), UnixDatagram
// (SOCK_DGRAM).
//
//   auto listener = volt::net::UnixListener::bind("/run/app/api.sock").value();
//   for (;;) {
//     auto accepted = co_await listener.accept();
//     if (!accepted) { co_await volt::sleep(10ms); continue; }   // e.g. EMFILE
//     volt::spawn(serve(std::move(accepted->first)));
//   }
//
//   auto client = (co_await volt::net::UnixStream::connect("/run/app/api.sock")).value();
//   co_await client.write_all(std::string_view("hello\n"));
//
//   auto [a, b] = volt::net::UnixStream::pair().value();          // socketpair
//   auto d = volt::net::UnixDatagram::bind("@my-service").value();  // abstract name
//
// Addresses are UnixAddr (socket_addr.hpp): a pathname, a Linux abstract name
// written "@name" (no file; it disappears with the last socket bound to it),
// or unnamed (an unbound socket, a socketpair end). Functions taking a path
// as text parse it with UnixAddr::from_path.
//
// Guarantees:
//  - Every descriptor is non-blocking, close-on-exec, registered once with the
//    runtime's driver, and closed exactly once when its owner goes.
//  - The socket FILE of a pathname bind is never removed by volt (as in Tokio
//    and std): closing a listener leaves the file, and binding a path where
//    a file exists fails with std::errc::address_in_use. Remove a stale file
//    (std::filesystem::remove) before binding, and after closing if wanted.
//  - Bad addresses are clear errors, nothing is created: a path longer than
//    UnixAddr::kMaxPathLen (107 bytes), empty, or holding a NUL byte gives
//    errc::invalid_argument. Connecting to a path with no file gives
//    std::errc::no_such_file_or_directory; to a file no socket listens on,
//    std::errc::connection_refused.
//  - UnixStream: the stream operations of stream_ops.hpp (io::AsyncRead and
//    io::AsyncWrite), shutdown (half-close), split halves usable from two
//    tasks at once. Writes never raise SIGPIPE (std::errc::broken_pipe).
//  - UnixStream::connect never waits on Linux: it succeeds, or fails at once.
//    When the listener's accept queue (its backlog) is full it gives
//    std::errc::resource_unavailable_try_again; retry later (Linux offers no
//    readiness event for "the queue has room").
//  - UnixListener::accept on a descriptor shortage (EMFILE, ENFILE...) gives
//    that error and leaves the connection queued; the next accept() retries
//    the system call at once (a loop that backs off recovers).
//  - UnixDatagram: the operations of datagram_ops.hpp. Unix datagrams are
//    reliable and ordered: a send to a receiver whose queue is full waits
//    (or, for try_ forms, gives resource_unavailable_try_again) instead of
//    dropping. A datagram from an unbound sender has an unnamed address (no
//    reply can be sent to it). Linux wakes a waiting sender when the
//    receiver's queue drains only if the sender is connect()ed to it (or has
//    datagrams of its own in that queue): a sender that feeds a busy receiver
//    should connect and use send (an unconnected send_to may otherwise wait
//    for a writability report that comes late; Tokio has the same limit).
//  - Creating a socket outside a runtime gives errc::no_runtime; operations
//    on an empty (moved-from or closed) socket give errc::closed. Errors are
//    values (Expected), never exceptions.
#pragma once

#include <sys/socket.h>

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "volt/detail/io_operation.hpp"
#include "volt/expected.hpp"
#include "volt/io/async_io.hpp"
#include "volt/io/buffer.hpp"
#include "volt/net/accept.hpp"
#include "volt/net/datagram_ops.hpp"
#include "volt/net/datagram_socket.hpp"
#include "volt/net/socket_addr.hpp"
#include "volt/net/stream_halves.hpp"
#include "volt/net/stream_ops.hpp"
#include "volt/net/stream_socket.hpp"
#include "volt/task/task.hpp"

namespace volt::net {

class UnixStream : public StreamSocket {
 public:
  // An empty stream: every operation gives errc::closed.
  UnixStream() noexcept = default;
  UnixStream(UnixStream&&) noexcept = default;
  UnixStream& operator=(UnixStream&&) noexcept = default;

  // Connects to the listener at `addr` / `path` (see the header comment for
  // the errors).
  static Task<Expected<UnixStream>> connect(UnixAddr addr);
  static Task<Expected<UnixStream>> connect(std::string path);
  // Two connected, unnamed streams (socketpair).
  static Expected<std::pair<UnixStream, UnixStream>> pair() noexcept;

  // This end's address (usually unnamed for a connecting stream) and the
  // peer's (the listener's address for a connected client).
  Expected<UnixAddr> local_addr() const noexcept;
  Expected<UnixAddr> peer_addr() const noexcept;

  // Halves usable from two tasks at once (stream_halves.hpp). Dropping the
  // owned write half shuts the write direction down, as Tokio's does.
  using ReadHalf = StreamReadHalf<UnixStream>;
  using WriteHalf = StreamWriteHalf<UnixStream>;
  using OwnedReadHalf = OwnedStreamReadHalf<UnixStream>;
  using OwnedWriteHalf = OwnedStreamWriteHalf<UnixStream>;
  // Borrowed: this stream must outlive them.
  std::pair<ReadHalf, WriteHalf> split() const noexcept {
    return StreamHalves<UnixStream>::borrow(*this);
  }
  // Owned: one shared allocation; the socket closes when both are gone.
  std::pair<OwnedReadHalf, OwnedWriteHalf> into_split() && {
    return StreamHalves<UnixStream>::own(std::move(*this));
  }

  // Adopts a connected, non-blocking AF_UNIX stream socket (closed on failure).
  static Expected<UnixStream> from_fd(int fd) noexcept;
};

class UnixListener {
 public:
  UnixListener() noexcept = default;
  UnixListener(UnixListener&&) noexcept = default;
  UnixListener& operator=(UnixListener&&) noexcept = default;

  // socket + bind + listen(backlog). Errors: address_in_use (the path
  // exists, or the abstract name is taken), no_such_file_or_directory (a
  // missing directory), permission_denied, errc::invalid_argument (a bad
  // path or backlog <= 0), errc::no_runtime...
  static Expected<UnixListener> bind(const UnixAddr& addr, int backlog = 1024) noexcept;
  static Expected<UnixListener> bind(std::string_view path, int backlog = 1024) noexcept;

  // The next connection (accept.hpp): cancel-safe; out of descriptors, the
  // error is returned and the next accept() retries at once.
  using Accept = detail::AcceptOp<UnixStream, UnixAddr>;
  Accept accept() const noexcept { return Accept(handle_); }
  Expected<std::pair<UnixStream, UnixAddr>> try_accept() const noexcept {
    return detail::try_accept<UnixStream, UnixAddr>(handle_);
  }

  Expected<UnixAddr> local_addr() const noexcept;
  int native_handle() const noexcept { return handle_.native_handle(); }
  explicit operator bool() const noexcept { return static_cast<bool>(handle_); }
  // Closes now; the socket file stays (see the header comment).
  void close() noexcept { handle_.close(); }

 private:
  volt::detail::IoHandle handle_;
};

class UnixDatagram : public DatagramSocket<UnixAddr> {
 public:
  // An empty socket: every operation gives errc::closed.
  UnixDatagram() noexcept = default;
  UnixDatagram(UnixDatagram&&) noexcept = default;
  UnixDatagram& operator=(UnixDatagram&&) noexcept = default;

  // A socket bound to `addr` / `path` (errors as UnixListener::bind).
  static Expected<UnixDatagram> bind(const UnixAddr& addr) noexcept;
  static Expected<UnixDatagram> bind(std::string_view path) noexcept;
  // A socket with no address: it can send_to (its datagrams arrive from an
  // unnamed address) and, after connect, send and recv.
  static Expected<UnixDatagram> unbound() noexcept;
  // Two connected, unnamed sockets (socketpair).
  static Expected<std::pair<UnixDatagram, UnixDatagram>> pair() noexcept;

  // The default peer (synchronous): send() goes there, and only its
  // datagrams are received. Errors: no_such_file_or_directory,
  // connection_refused, errc::invalid_argument (a bad path)...
  Expected<void> connect(const UnixAddr& peer) const noexcept;
  Expected<void> connect(std::string_view path) const noexcept;

  Expected<UnixAddr> local_addr() const noexcept;
  // The connected peer; std::errc::not_connected before connect().
  Expected<UnixAddr> peer_addr() const noexcept;

  // Adopts a non-blocking AF_UNIX datagram socket (closed on failure).
  static Expected<UnixDatagram> from_fd(int fd) noexcept;
};

static_assert(io::AsyncRead<UnixStream> && io::AsyncWrite<UnixStream>);
static_assert(io::AsyncRead<UnixStream::OwnedReadHalf> &&
              io::AsyncWrite<UnixStream::OwnedWriteHalf>);
static_assert(io::AsyncRead<UnixStream::ReadHalf> && io::AsyncWrite<UnixStream::WriteHalf>);

}  // namespace volt::net
