// volt/net/stream_socket.hpp: StreamSocket, the operations every connected
// stream socket has (TcpStream and UnixStream derive from it and add
// connecting, addresses and their own options).
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
  // Waits until a read (or a write) may make progress.
  net::Ready readable() const noexcept { return {handle_, volt::detail::Interest::kRead}; }
  net::Ready writable() const noexcept { return {handle_, volt::detail::Interest::kWrite}; }

  Expected<std::size_t> try_read(io::MutableBuffer buf) const noexcept {
    return detail::try_read(handle_, buf);
  }
  Expected<std::size_t> try_write(io::ConstBuffer buf) const noexcept {
    return detail::try_write(handle_, buf);
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
