// volt/io/buf_reader.hpp: BufReader<R>, a read buffer in front of a stream
// (Tokio's BufReader + AsyncBufReadExt), and Lines, its lines one by one.
//
// Reading a socket a line or a few bytes at a time costs a system call per
// read; a BufReader reads up to `capacity` bytes at once and serves small
// reads, read_until and read_line from memory.
//
//   volt::io::BufReader reader(std::move(stream));      // owns the stream
//   volt::io::BufReader<TcpStream&> borrowed(stream);   // or refers to it
//   std::string line;
//   while ((co_await reader.read_line(line)).value() != 0) {
//     handle(line);  // includes the '\n' (none on a last unterminated line)
//     line.clear();
//   }
//
//   auto lines = volt::io::BufReader(std::move(stream)).lines();
//   while (std::optional<std::string> l = (co_await lines.next_line()).value())
//     handle(*l);    // without "\n" / "\r\n"
//
// Members:
//   read(buf)                AsyncRead: buffered bytes first; a read at least
//                            as large as the capacity with nothing buffered
//                            goes straight to the inner stream (no copy).
//   read_until(delim, out)   appends up to and including `delim`; returns the
//                            count appended, 0 = end of stream.
//   read_line(out)           read_until('\n', out).
//   lines()                  a Lines: next_line() gives each line without its
//                            "\n" or "\r\n", std::nullopt at end of stream.
//   fill_buf() / consume(n)  the buffered bytes (reading once if there are
//                            none; empty = end of stream) / mark n used.
//   buffer()                 the buffered bytes, without reading.
//   get_ref/get_mut/into_inner, capacity()
//   write/flush/shutdown     forwarded to the inner stream when it is also an
//                            AsyncWrite, so a BufReader over a socket is still
//                            a full-duplex stream.
//
// Guarantees:
//  - Nothing read is lost: bytes leave the buffer only into the caller's
//    buffer or string. On an error, read_until / read_line keep what they
//    appended before it in `out` and return the error; a later call
//    continues after those bytes.
//  - Cancel safety: read, fill_buf, read_until, read_line and next_line are
//    cancel-safe (if the inner read() is): an operation destroyed while
//    waiting (select, timeout, abort) has consumed only what it already
//    appended to `out` (for next_line: kept inside the Lines, so the next
//    call returns the whole line).
//  - Lines have no length limit: read_until grows `out` until the delimiter
//    or the end of the stream arrives, so a peer that never sends '\n' makes
//    the string grow without bound. Bound it yourself where the peer is
//    untrusted (e.g. timeout, or read with fill_buf/consume and a limit).
//  - No UTF-8 validation (C++ strings are bytes).
//  - Allocation: the buffer, once, in the constructor; each operation is one
//    coroutine frame from the recycling frame pool; `out` grows as needed.
//  - into_inner() drops the buffered bytes (read them first with buffer()).
//  - Bad input: capacity 0 throws volt::Error(errc::invalid_argument).
// Preconditions: one operation at a time (the BufReader is used by one task,
// as the stream it wraps); the BufReader, and `out`, outlive the returned
// Task; a moved-from BufReader may only be destroyed or assigned to.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>

#include "volt/error.hpp"
#include "volt/expected.hpp"
#include "volt/io/async_io.hpp"
#include "volt/io/buffer.hpp"
#include "volt/task/task.hpp"

namespace volt::io {

template <class B>
class Lines;

// R: the stream type (owned), or a reference to it (BufReader<S&> refers to
// a stream that must outlive it).
template <class R>
requires AsyncRead<std::remove_reference_t<R>>
class BufReader {
 public:
  using Inner = std::remove_reference_t<R>;
  static constexpr std::size_t kDefaultCapacity = 8192;

  explicit BufReader(R inner, std::size_t capacity = kDefaultCapacity)
      : inner_(std::forward<R>(inner)), buf_(allocate(capacity)), cap_(capacity) {}
  BufReader(BufReader&&) = default;
  BufReader& operator=(BufReader&&) = default;

  // AsyncRead. Buffered bytes first; with none buffered, one read of the
  // inner stream (into the buffer, or straight into `dst` if `dst` is at
  // least as large as the buffer). 0 = end of stream (or an empty `dst`).
  Task<Expected<std::size_t>> read(MutableBuffer dst) {
    if (dst.empty()) co_return std::size_t{0};
    if (pos_ == end_ && dst.size() >= cap_) {
      // Copying through the buffer would only add a memcpy.
      Expected<std::size_t> n = co_await inner_.read(dst);
      co_return n;
    }
    if (pos_ == end_) {
      Expected<std::size_t> n = co_await refill();
      if (!n) co_return n.error();
      if (*n == 0) co_return std::size_t{0};
    }
    const std::size_t n = std::min(end_ - pos_, dst.size());
    std::memcpy(dst.data(), buf_.get() + pos_, n);
    pos_ += n;
    co_return n;
  }

  // Appends bytes to `out` up to and including the first `delim`, or up to
  // the end of the stream. Returns how many were appended: 0 only at the end
  // of the stream. An error leaves what was appended before it in `out`.
  Task<Expected<std::size_t>> read_until(char delim, std::string& out) {
    std::size_t total = 0;
    for (;;) {
      if (pos_ == end_) {
        Expected<std::size_t> n = co_await refill();
        if (!n) co_return n.error();
        if (*n == 0) co_return total;
      }
      const char* begin = reinterpret_cast<const char*>(buf_.get() + pos_);
      const std::size_t avail = end_ - pos_;
      const void* hit = std::memchr(begin, static_cast<unsigned char>(delim), avail);
      const std::size_t take =
          hit ? static_cast<std::size_t>(static_cast<const char*>(hit) - begin) + 1 : avail;
      // Appended before consumed, and both before the next suspension: a
      // cancellation at the co_await above never loses bytes.
      out.append(begin, take);
      pos_ += take;
      total += take;
      if (hit) co_return total;
    }
  }

  // read_until('\n', out): the line with its '\n' (none on a last line that
  // has none; "\r\n" stays as it came).
  Task<Expected<std::size_t>> read_line(std::string& out) { return read_until('\n', out); }

  // The buffered bytes, reading the inner stream once if there are none.
  // Empty: end of stream. Valid until the next operation on this BufReader.
  Task<Expected<ConstBuffer>> fill_buf() {
    if (pos_ == end_) {
      Expected<std::size_t> n = co_await refill();
      if (!n) co_return n.error();
    }
    co_return buffer();
  }
  // Marks the first n buffered bytes as used (clamped to what is buffered).
  void consume(std::size_t n) noexcept { pos_ += std::min(n, end_ - pos_); }
  // The buffered bytes, without reading.
  ConstBuffer buffer() const noexcept { return ConstBuffer(buf_.get() + pos_, end_ - pos_); }
  std::size_t capacity() const noexcept { return cap_; }

  // Lines of this reader (which must outlive it), or, from an rvalue, of a
  // reader moved into the Lines.
  Lines<BufReader&> lines() & { return Lines<BufReader&>(*this); }
  Lines<BufReader> lines() && { return Lines<BufReader>(std::move(*this)); }

  const Inner& get_ref() const noexcept { return inner_; }
  Inner& get_mut() noexcept { return inner_; }
  // The inner stream (the reference, for BufReader<S&>); buffered bytes are
  // dropped.
  R into_inner() && { return std::forward<R>(inner_); }

  // Write side of a duplex inner stream, passed through unbuffered.
  auto write(ConstBuffer src) requires AsyncWrite<Inner> { return inner_.write(src); }
  auto flush() requires AsyncWrite<Inner> { return inner_.flush(); }
  auto shutdown() requires AsyncWrite<Inner> { return inner_.shutdown(); }

 private:
  static std::unique_ptr<std::byte[]> allocate(std::size_t capacity) {
    if (capacity == 0) throw Error(errc::invalid_argument, "BufReader capacity must be > 0");
    return std::make_unique_for_overwrite<std::byte[]>(capacity);
  }

  // Precondition: the buffer is empty. One read of the inner stream into it.
  // The indices change only once bytes have arrived, so a cancelled refill
  // leaves the reader as it was (empty).
  Task<Expected<std::size_t>> refill() {
    Expected<std::size_t> n = co_await inner_.read(MutableBuffer(buf_.get(), cap_));
    if (n) {
      pos_ = 0;
      end_ = *n;
    }
    co_return n;
  }

  R inner_;
  std::unique_ptr<std::byte[]> buf_;
  std::size_t cap_;
  std::size_t pos_ = 0;  // next unread byte in buf_
  std::size_t end_ = 0;  // end of the valid bytes in buf_
};

// The lines of a BufReader, one next_line() at a time (Tokio's Lines).
// B is BufReader<R>& (BufReader::lines() &) or BufReader<R> (owned, from
// std::move(reader).lines()).
template <class B>
class Lines {
 public:
  using Reader = std::remove_reference_t<B>;

  explicit Lines(B reader) : reader_(std::forward<B>(reader)) {}

  // The next line without its "\n" or "\r\n" (a lone '\r' at the end of a
  // last, unterminated line is kept, as Tokio); std::nullopt at the end of
  // the stream. An error is returned as it is; the part of the line read
  // before it is kept and the next call returns the whole line.
  Task<Expected<std::optional<std::string>>> next_line() {
    Expected<std::size_t> n = co_await reader_.read_until('\n', pending_);
    if (!n) co_return n.error();
    // *n == 0 with bytes pending: the end of the stream after an error that
    // interrupted the last line; it is still a line.
    if (*n == 0 && pending_.empty()) co_return std::optional<std::string>();
    std::size_t len = pending_.size();
    if (len > 0 && pending_[len - 1] == '\n') {
      --len;
      if (len > 0 && pending_[len - 1] == '\r') --len;
    }
    // Copied out rather than moved: pending_ keeps its capacity, so a long
    // line costs one allocation (the copy), not a series of regrowths.
    std::optional<std::string> line(std::in_place, pending_.data(), len);
    pending_.clear();
    co_return line;
  }

  const Reader& get_ref() const noexcept { return reader_; }
  Reader& get_mut() noexcept { return reader_; }
  // The reader (the reference, for a Lines of a borrowed reader); a partial
  // line held after an error is dropped.
  B into_inner() && { return std::forward<B>(reader_); }

 private:
  B reader_;
  std::string pending_;  // the line being read (survives errors, cancellation)
};

}  // namespace volt::io
