// volt/io/buf_writer.hpp: BufWriter<W>, a write buffer in front of a stream
// (Tokio's BufWriter).
//
// Many small writes to a socket cost a system call (and often a packet)
// each; a BufWriter gathers them in memory and writes them out in one go
// when the buffer is full, on flush() and on shutdown().
//
//   volt::io::BufWriter out(std::move(stream));        // owns the stream
//   volt::io::BufWriter<TcpStream&> borrowed(stream);  // or refers to it
//   for (const Row& row : rows)
//     (co_await volt::io::write_all(out, format(row))).value();
//   (co_await out.flush()).value();   // nothing has necessarily left before
//
// Members:
//   write(bytes)   AsyncWrite: copies into the buffer. If the bytes do not
//                  fit behind what is buffered, the buffer is written out
//                  first; bytes at least as large as the capacity then go
//                  straight to the inner stream (no copy, one write, which
//                  may be partial as any write()).
//   flush()        writes out the whole buffer, then flushes the inner stream.
//   shutdown()     writes out the whole buffer, then shuts the inner stream
//                  down (its write direction: the peer reads end of stream).
//   buffer()       the bytes buffered and not yet written out.
//   get_ref/get_mut/into_inner, capacity()
//   read(buf)      forwarded to the inner stream when it is also an
//                  AsyncRead, so a BufWriter over a socket is still a
//                  full-duplex stream.
//
// Guarantees:
//  - Order: bytes reach the inner stream in the order they were written,
//    whether they went through the buffer or straight through.
//  - write() returns the count it accepted: all of a non-empty buffer when
//    it is copied into the buffer; what the inner write() accepted when it
//    goes straight through. It writes the buffer out only when it must.
//  - Errors: an error (or errc::write_zero, an inner write() that accepted
//    nothing) while writing the buffer out is returned; the bytes not yet
//    written stay buffered (nothing is duplicated or dropped) and the next
//    flush() carries on from there. A write() that fails this way accepted
//    none of its own bytes.
//  - Cancel safety: write(), flush() and shutdown() destroyed while waiting
//    keep the buffer consistent: bytes the inner stream accepted are never
//    written again, the rest stay buffered.
//  - Dropping a BufWriter (or into_inner()) with bytes still buffered loses
//    them, as Tokio's: a destructor cannot wait for a write. flush() or
//    shutdown() before dropping; buffer().empty() says whether anything is
//    left. (Writing them from the destructor would need either a blocking
//    write, which a stream does not offer and would stall a worker, or a
//    detached task that outlives the writer and whose error nobody sees.)
//  - Allocation: the buffer, once, in the constructor; each operation is one
//    coroutine frame from the recycling frame pool.
//  - Bad input: capacity 0 throws volt::Error(errc::invalid_argument).
// Preconditions: one write-side operation at a time; the BufWriter outlives
// the returned Tasks, and the bytes passed to write() outlive its Task; a
// moved-from BufWriter may only be destroyed or assigned to.
#pragma once

#include <cstddef>
#include <cstring>
#include <memory>
#include <type_traits>
#include <utility>

#include "volt/error.hpp"
#include "volt/expected.hpp"
#include "volt/io/async_io.hpp"
#include "volt/io/buffer.hpp"
#include "volt/task/task.hpp"

namespace volt::io {

// W: the stream type (owned), or a reference to it (BufWriter<S&> refers to
// a stream that must outlive it).
template <class W>
requires AsyncWrite<std::remove_reference_t<W>>
class BufWriter {
 public:
  using Inner = std::remove_reference_t<W>;
  static constexpr std::size_t kDefaultCapacity = 8192;

  explicit BufWriter(W inner, std::size_t capacity = kDefaultCapacity)
      : inner_(std::forward<W>(inner)), buf_(allocate(capacity)), cap_(capacity) {}
  BufWriter(BufWriter&&) = default;
  BufWriter& operator=(BufWriter&&) = default;

  // AsyncWrite (see the header contract).
  Task<Expected<std::size_t>> write(ConstBuffer src) {
    if (src.empty()) co_return std::size_t{0};
    if (end_ + src.size() > cap_) {
      Expected<void> drained = co_await write_out();
      if (!drained) co_return drained.error();
    }
    if (src.size() >= cap_) {
      // The buffer is empty here: the bytes cannot overtake buffered ones.
      Expected<std::size_t> n = co_await inner_.write(src);
      co_return n;
    }
    std::memcpy(buf_.get() + end_, src.data(), src.size());
    end_ += src.size();
    co_return src.size();
  }

  Task<Expected<void>> flush() {
    if (begin_ != end_) {
      Expected<void> drained = co_await write_out();
      if (!drained) co_return drained;
    }
    Expected<void> flushed = co_await inner_.flush();
    co_return flushed;
  }

  Task<Expected<void>> shutdown() {
    if (begin_ != end_) {
      Expected<void> drained = co_await write_out();
      if (!drained) co_return drained;
    }
    Expected<void> shut = co_await inner_.shutdown();
    co_return shut;
  }

  // The bytes buffered and not yet written to the inner stream.
  ConstBuffer buffer() const noexcept { return ConstBuffer(buf_.get() + begin_, end_ - begin_); }
  std::size_t capacity() const noexcept { return cap_; }

  const Inner& get_ref() const noexcept { return inner_; }
  Inner& get_mut() noexcept { return inner_; }
  // The inner stream (the reference, for BufWriter<S&>); buffered bytes are
  // dropped: flush() first.
  W into_inner() && { return std::forward<W>(inner_); }

  // Read side of a duplex inner stream, passed through.
  auto read(MutableBuffer dst) requires AsyncRead<Inner> { return inner_.read(dst); }

 private:
  static std::unique_ptr<std::byte[]> allocate(std::size_t capacity) {
    if (capacity == 0) throw Error(errc::invalid_argument, "BufWriter capacity must be > 0");
    return std::make_unique_for_overwrite<std::byte[]>(capacity);
  }

  // Writes the buffered bytes to the inner stream until none are left.
  // begin_ advances as each write is accepted, so an error or a cancellation
  // leaves exactly the unwritten bytes buffered.
  Task<Expected<void>> write_out() {
    while (begin_ != end_) {
      Expected<std::size_t> n =
          co_await inner_.write(ConstBuffer(buf_.get() + begin_, end_ - begin_));
      if (!n) co_return n.error();
      if (*n == 0) co_return errc::write_zero;
      begin_ += *n;
    }
    begin_ = end_ = 0;
    co_return Expected<void>();
  }

  W inner_;
  std::unique_ptr<std::byte[]> buf_;
  std::size_t cap_;
  std::size_t begin_ = 0;  // first byte not yet written out
  std::size_t end_ = 0;    // end of the buffered bytes
};

}  // namespace volt::io
