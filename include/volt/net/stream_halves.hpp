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
//  - Borrowed halves (split) point to the stream, which must outlive them.
//    Owned halves (into_split) share one allocation holding the stream; the
//    socket closes when both are gone. reunite() gives the stream back only
//    to the two halves of one split (errc::invalid_argument otherwise, both
//    halves left as they were).
//  - The halves model io::AsyncRead / io::AsyncWrite when S does.
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "volt/expected.hpp"
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

template <class S>
class OwnedStreamReadHalf {
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
  // The stream, if `write` is this one's other half.
  Expected<S> reunite(OwnedStreamWriteHalf<S>& write) noexcept {
    if (!stream_ || stream_ != write.stream_) return errc::invalid_argument;
    S stream = std::move(*stream_);
    stream_.reset();
    write.stream_.reset();
    return stream;
  }

 private:
  friend struct StreamHalves<S>;
  explicit OwnedStreamReadHalf(std::shared_ptr<S> s) noexcept : stream_(std::move(s)) {}
  std::shared_ptr<S> stream_;
};

template <class S>
class OwnedStreamWriteHalf {
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
  friend class OwnedStreamReadHalf<S>;
  explicit OwnedStreamWriteHalf(std::shared_ptr<S> s) noexcept : stream_(std::move(s)) {}
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
