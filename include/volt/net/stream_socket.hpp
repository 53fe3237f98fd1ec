// volt/net/stream_socket.hpp: StreamSocket, the operations every connected
// stream socket has (TcpStream and UnixStream derive from it and add
// connecting, addresses and their own options).
//
//   // Look at a request's first bytes without taking them:
//   char head[4];
//   auto n = co_await s.peek(head);           // the same bytes come from read
//   // Read everything until the end of stream into a growing vector:
//   std::vector<std::byte> all;
//   while (auto got = co_await s.read_buf(all)) { if (*got == 0) break; }
//   // Wait for either direction, and learn whether the peer hung up:
//   auto r = co_await s.ready(volt::net::Interest::kReadable | volt::net::Interest::kWritable);
//   if (r && r->read_closed) { /* the peer shut down its write side */ }
//
// See stream_ops.hpp for what each operation gives and guarantees. A
// default-constructed or moved-from socket gives errc::closed from every
// operation.
#pragma once

#include <sys/socket.h>

#include <cstddef>
#include <optional>
#include <span>
#include <system_error>
#include <utility>
#include <vector>

#include "volt/detail/io_operation.hpp"
#include "volt/expected.hpp"
#include "volt/io/async_io.hpp"
#include "volt/io/buffer.hpp"
#include "volt/net/stream_ops.hpp"

namespace volt::net {

namespace detail {
class AcceptBase;
template <class Stream, class Addr>
class AcceptOp;
template <class Stream, class Addr>
Expected<std::pair<Stream, Addr>> try_accept(const volt::detail::IoHandle& listener) noexcept;
}  // namespace detail

class StreamSocket {
 public:
  Read read(io::MutableBuffer buf) const noexcept { return Read(handle_, buf); }
  ReadExact read_exact(io::MutableBuffer buf) const noexcept { return ReadExact(handle_, buf); }
  Write write(io::ConstBuffer buf) const noexcept { return Write(handle_, buf); }
  WriteAll write_all(io::ConstBuffer buf) const noexcept { return WriteAll(handle_, buf); }
  Writev writev(std::span<const io::ConstBuffer> bufs) const noexcept {
    return Writev(handle_, bufs);
  }
  // Sockets have nothing to flush: ready at once (for io::AsyncWrite).
  io::Ready<Expected<void>> flush() const noexcept { return io::Ready<Expected<void>>({}); }
  // Ends the write direction (shutdown(SHUT_WR)): the peer reads end of
  // stream; reading continues. Awaitable for io::AsyncWrite; never waits.
  io::Ready<Expected<void>> shutdown() const noexcept {
    return io::Ready<Expected<void>>(detail::shutdown(handle_, SHUT_WR));
  }
  // Copies queued bytes into `buf` without taking them (MSG_PEEK); waits
  // like read() while nothing is queued; 0 at the end of stream. The next
  // read (or peek) gives the same bytes again.
  Peek peek(io::MutableBuffer buf) const noexcept { return Peek(handle_, buf); }
  // One read appended to `vec`: the bytes land after vec.size() and the
  // vector grows by the count returned (0: end of stream; on an error it is
  // unchanged). Growth: if vec has no spare capacity, this call first
  // reserves max(2 * capacity(), kReadBufMinCapacity) (here, when the
  // operation is made: it may throw std::bad_alloc; waiting never
  // allocates); with spare capacity it reads at most that much, and at most
  // kReadBufMaxRead (64 KiB). The bytes received into are zero-filled
  // before each receive (std::vector cannot expose uninitialised bytes).
  // Cancel-safe: a cancelled read_buf read nothing and left vec's size as
  // it was (its capacity may have grown).
  ReadBuf read_buf(std::vector<std::byte>& vec) const {
    detail::reserve_read_buf(vec);
    return ReadBuf(handle_, vec);
  }
  // Waits until a read (or a write) may make progress.
  net::Ready readable() const noexcept { return {handle_, volt::detail::Interest::kRead}; }
  net::Ready writable() const noexcept { return {handle_, volt::detail::Interest::kWrite}; }
  // Waits until any direction of `interest` is ready, and gives the set of
  // events seen (readable, writable, read_closed, write_closed, error; see
  // Readiness in stream_ops.hpp). Cancel-safe.
  ReadyEvents ready(Interest interest) const noexcept { return ReadyEvents(handle_, interest); }

  Expected<std::size_t> try_read(io::MutableBuffer buf) const noexcept {
    return detail::try_read(handle_, buf);
  }
  Expected<std::size_t> try_write(io::ConstBuffer buf) const noexcept {
    return detail::try_write(handle_, buf);
  }
  // peek's try_ form: resource_unavailable_try_again when nothing is queued.
  Expected<std::size_t> try_peek(io::MutableBuffer buf) const noexcept {
    return detail::try_peek(handle_, buf);
  }

  // The pending socket error (SO_ERROR), cleared by reading it.
  Expected<std::optional<std::error_code>> take_error() const noexcept {
    return detail::take_error(handle_);
  }

  int native_handle() const noexcept { return handle_.native_handle(); }
  explicit operator bool() const noexcept { return static_cast<bool>(handle_); }
  // Closes now, as the destructor does; any task may call it while others
  // use the socket (through a half): their operations, waiting or starting
  // later, complete with errc::closed and never touch the descriptor number
  // again. The descriptor is closed once no operation is inside a system
  // call on it, so a woken operation delays it only until its task runs.
  void close() noexcept { handle_.close(); }

 protected:
  friend class detail::AcceptBase;
  template <class Stream, class Addr>
  friend class detail::AcceptOp;
  template <class Stream, class Addr>
  friend Expected<std::pair<Stream, Addr>> detail::try_accept(
      const volt::detail::IoHandle& listener) noexcept;
  // What an accept fills in (a connection it made).
  static volt::detail::IoHandle& handle_of(StreamSocket& s) noexcept { return s.handle_; }

  StreamSocket() noexcept = default;
  StreamSocket(StreamSocket&&) noexcept = default;
  StreamSocket& operator=(StreamSocket&&) noexcept = default;
  ~StreamSocket() = default;

  volt::detail::IoHandle handle_;
};

}  // namespace volt::net
