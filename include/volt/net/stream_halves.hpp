// volt/net/stream_halves.hpp: the read and write halves a stream socket
// splits into, written once for any stream type S (UnixStream uses them as
// UnixStream::ReadHalf, ::WriteHalf, ::OwnedReadHalf, ::OwnedWriteHalf).
//
//   auto [reader, writer] = std::move(stream).into_split();
//   volt::spawn(pump(std::move(writer)));        // writes in one task
//   co_await reader.read(buf);                   // reads in this one
//
// S must offer read, read_exact, readable, try_read, peek, try_peek,
// read_buf, peer_addr (read side) and write, write_all, writev, flush,
// shutdown, writable, try_write (write side), and ready(Interest) (both), with
// the signatures of stream_ops.hpp / stream_socket.hpp, callable on a const
// S, and be move-constructible (for the owned halves). (Members of a class
// template: one S lacks is an error only where it is called.)
//
// Guarantees:
//  - A read half and a write half of one stream may be used by two tasks at
//    once (the readiness registration keeps a waiter list per direction).
//  - Borrowed halves (split) point to the stream, which must outlive them;
//    dropping them changes nothing.
//  - Owned halves (into_split) share one allocation holding the stream; the
//    socket closes when both are gone. As Tokio's: dropping the owned write
//    half shuts the write direction down (shutdown(SHUT_WR): the peer reads
//    end of stream) even while the read half lives on; forget() drops it
//    without that. reunite() gives the stream back only to the two halves of
//    one split (errc::invalid_argument otherwise, both halves left as they
//    were), and shuts nothing down. Owned halves are move-only; a moved-from
//    or reunited half gives errc::closed from every operation (as a
//    moved-from socket does) and reunites with nothing.
//  - The halves model io::AsyncRead / io::AsyncWrite when S does.
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

#include "volt/expected.hpp"
#include "volt/io/async_io.hpp"
#include "volt/io/buffer.hpp"
#include "volt/net/stream_ops.hpp"

namespace volt::net {

template <class S>
struct StreamHalves;

template <class S>
class StreamReadHalf {
 public:
  auto read(io::MutableBuffer buf) const noexcept { return stream_->read(buf); }
  auto read_exact(io::MutableBuffer buf) const noexcept { return stream_->read_exact(buf); }
  auto readable() const noexcept { return stream_->readable(); }
  auto try_read(io::MutableBuffer buf) const noexcept { return stream_->try_read(buf); }
  auto peek(io::MutableBuffer buf) const noexcept { return stream_->peek(buf); }
  auto try_peek(io::MutableBuffer buf) const noexcept { return stream_->try_peek(buf); }
  auto read_buf(std::vector<std::byte>& vec) const { return stream_->read_buf(vec); }
  auto ready(Interest interest) const noexcept { return stream_->ready(interest); }
  auto peer_addr() const noexcept { return stream_->peer_addr(); }

 private:
  friend struct StreamHalves<S>;
  explicit StreamReadHalf(const S* s) noexcept : stream_(s) {}
  const S* stream_;
};

template <class S>
class StreamWriteHalf {
 public:
  auto write(io::ConstBuffer buf) const noexcept { return stream_->write(buf); }
  auto write_all(io::ConstBuffer buf) const noexcept { return stream_->write_all(buf); }
  auto writev(std::span<const io::ConstBuffer> bufs) const noexcept {
    return stream_->writev(bufs);
  }
  auto flush() const noexcept { return stream_->flush(); }
  auto shutdown() const noexcept { return stream_->shutdown(); }
  auto writable() const noexcept { return stream_->writable(); }
  auto try_write(io::ConstBuffer buf) const noexcept { return stream_->try_write(buf); }
  auto ready(Interest interest) const noexcept { return stream_->ready(interest); }

 private:
  friend struct StreamHalves<S>;
  explicit StreamWriteHalf(const S* s) noexcept : stream_(s) {}
  const S* stream_;
};

template <class S>
class OwnedStreamWriteHalf;

namespace detail {
// What an empty owned half (moved from, or after reunite()) forwards to: an
// empty S, whose every operation gives errc::closed. Without it such a half
// dereferenced a null shared_ptr (a crash where a socket reports an error).
template <class S>
const S& empty_stream() noexcept {
  static const S empty{};
  return empty;
}
}  // namespace detail

template <class S>
class OwnedStreamReadHalf {
 public:
  // Move-only: one owner per half (see OwnedStreamWriteHalf).
  OwnedStreamReadHalf(const OwnedStreamReadHalf&) = delete;
  OwnedStreamReadHalf& operator=(const OwnedStreamReadHalf&) = delete;
  OwnedStreamReadHalf(OwnedStreamReadHalf&&) noexcept = default;
  OwnedStreamReadHalf& operator=(OwnedStreamReadHalf&&) noexcept = default;
  ~OwnedStreamReadHalf() = default;

  auto read(io::MutableBuffer buf) const noexcept { return stream().read(buf); }
  auto read_exact(io::MutableBuffer buf) const noexcept { return stream().read_exact(buf); }
  auto readable() const noexcept { return stream().readable(); }
  auto try_read(io::MutableBuffer buf) const noexcept { return stream().try_read(buf); }
  auto peek(io::MutableBuffer buf) const noexcept { return stream().peek(buf); }
  auto try_peek(io::MutableBuffer buf) const noexcept { return stream().try_peek(buf); }
  auto read_buf(std::vector<std::byte>& vec) const { return stream().read_buf(vec); }
  auto ready(Interest interest) const noexcept { return stream().ready(interest); }
  auto peer_addr() const noexcept { return stream().peer_addr(); }
  // The stream, if `write` is this one's other half.
  Expected<S> reunite(OwnedStreamWriteHalf<S>& write) noexcept {
    if (!stream_ || stream_ != write.stream_) return errc::invalid_argument;
    S stream = std::move(*stream_);
    stream_.reset();
    write.stream_.reset();  // empty: its destructor shuts nothing down
    return stream;
  }

 private:
  friend struct StreamHalves<S>;
  explicit OwnedStreamReadHalf(std::shared_ptr<S> s) noexcept : stream_(std::move(s)) {}
  const S& stream() const noexcept { return stream_ ? *stream_ : detail::empty_stream<S>(); }
  std::shared_ptr<S> stream_;
};

// Dropping it shuts the write direction down (Tokio's OwnedWriteHalf): a
// writer task that ends, or a proxy direction that is done, lets the peer
// read end of stream although the read half, in another task, keeps the
// socket open. Without it the peer waited for ever (a read to the end never
// ended) until the read half went too. Hence move-only: a copy dropped while
// another copy still wrote would have ended the direction under it.
template <class S>
class OwnedStreamWriteHalf {
 public:
  OwnedStreamWriteHalf(const OwnedStreamWriteHalf&) = delete;
  OwnedStreamWriteHalf& operator=(const OwnedStreamWriteHalf&) = delete;
  // The moved-from half is left empty (shared_ptr's move): it shuts nothing.
  OwnedStreamWriteHalf(OwnedStreamWriteHalf&&) noexcept = default;
  OwnedStreamWriteHalf& operator=(OwnedStreamWriteHalf&& other) noexcept {
    if (this != &other) {
      shutdown_on_drop();  // the half assigned over is dropped
      stream_ = std::move(other.stream_);
    }
    return *this;
  }
  ~OwnedStreamWriteHalf() { shutdown_on_drop(); }

  auto write(io::ConstBuffer buf) const noexcept { return stream().write(buf); }
  auto write_all(io::ConstBuffer buf) const noexcept { return stream().write_all(buf); }
  auto writev(std::span<const io::ConstBuffer> bufs) const noexcept {
    return stream().writev(bufs);
  }
  auto flush() const noexcept { return stream().flush(); }
  auto shutdown() const noexcept { return stream().shutdown(); }
  auto writable() const noexcept { return stream().writable(); }
  auto try_write(io::ConstBuffer buf) const noexcept { return stream().try_write(buf); }
  auto ready(Interest interest) const noexcept { return stream().ready(interest); }

  // Drops this half without shutting the write direction down (Tokio's
  // forget()): the socket closes when the read half goes. The half is empty
  // afterwards.
  void forget() noexcept { stream_.reset(); }

 private:
  friend struct StreamHalves<S>;
  friend class OwnedStreamReadHalf<S>;
  explicit OwnedStreamWriteHalf(std::shared_ptr<S> s) noexcept : stream_(std::move(s)) {}
  const S& stream() const noexcept { return stream_ ? *stream_ : detail::empty_stream<S>(); }
  // shutdown(SHUT_WR) if this half still holds the stream; errors (the peer
  // gone, the socket closed) are ignored, as Tokio's drop does.
  void shutdown_on_drop() noexcept {
    if (!stream_) return;
    // StreamSocket::shutdown() makes its system call when called and
    // returns a ready awaitable, so it can run from a destructor (no wait).
    static_assert(
        std::is_same_v<decltype(std::declval<const S&>().shutdown()), io::Ready<Expected<void>>>,
        "S::shutdown() must act when called (a ready awaitable)");
    (void)stream_->shutdown().await_resume();
  }
  std::shared_ptr<S> stream_;
};

// Builds the halves (for S's split() and into_split()).
template <class S>
struct StreamHalves {
  static std::pair<StreamReadHalf<S>, StreamWriteHalf<S>> borrow(const S& s) noexcept {
    return {StreamReadHalf<S>(&s), StreamWriteHalf<S>(&s)};
  }
  static std::pair<OwnedStreamReadHalf<S>, OwnedStreamWriteHalf<S>> own(S&& s) {
    auto shared = std::make_shared<S>(std::move(s));
    return {OwnedStreamReadHalf<S>(shared), OwnedStreamWriteHalf<S>(shared)};
  }
};

}  // namespace volt::net
