// volt/io/util.hpp: the loops every stream user writes, once, for any
// io::AsyncRead / io::AsyncWrite (Tokio's AsyncReadExt / AsyncWriteExt).
//
//   read_exact(r, buf)        fills all of buf, or errc::unexpected_eof
//   write_all(w, bytes)       writes all of bytes, or errc::write_zero
//   read_to_end(r, out)       appends everything up to the end of stream to
//                             a std::string or std::vector of bytes
//   read_to_string(r, out)    the same, into a std::string
//
// Example:
//
//   char header[8];
//   (co_await volt::io::read_exact(stream, header)).value();
//   std::string body;
//   std::size_t n = (co_await volt::io::read_to_end(stream, body)).value();
//   (co_await volt::io::write_all(stream, std::string_view("ok\n"))).value();
//
// Guarantees:
//  - read_exact: success means every byte of `buf` was read. If the stream
//    ends first the result is errc::unexpected_eof; the bytes that did arrive
//    are at the front of `buf` (their count is not reported: they were
//    consumed from the stream and belong to a message that will never be
//    complete). An error from read() is returned as it is. An empty `buf`
//    succeeds at once without reading.
//  - write_all: success means every byte was accepted by write(). A write()
//    that accepts 0 bytes of a non-empty buffer gives errc::write_zero
//    (instead of looping for ever); an error from write() is returned as it
//    is. It does not flush: call w.flush() when the bytes must leave a
//    buffering writer.
//  - read_to_end / read_to_string: append to `out` (what was there is kept)
//    and return the number of bytes appended. On an error, the bytes read
//    before it stay appended to `out` (nothing read is lost) and the error is
//    returned. They grow `out` geometrically, reading straight into its
//    spare capacity (no intermediate copy); a stream that never ends grows
//    `out` until memory runs out, as Tokio's.
//  - Cancel safety: read_exact and write_all are not cancel-safe in the
//    Tokio sense (a cancelled read_exact has consumed an unknown prefix).
//    read_to_end / read_to_string cancelled while waiting leave `out` with
//    exactly the bytes read so far (no zero padding), provided the stream's
//    read() is itself cancel-safe.
//  - No allocation besides the coroutine frame (from the recycling frame
//    pool) and the growth of `out`.
// Preconditions: the stream and the buffers outlive the returned Task.
#pragma once

#include <algorithm>
#include <cstddef>
#include <string>
#include <vector>

#include "volt/error.hpp"
#include "volt/expected.hpp"
#include "volt/io/async_io.hpp"
#include "volt/io/buffer.hpp"
#include "volt/task/task.hpp"

namespace volt::io {

template <AsyncRead R>
Task<Expected<void>> read_exact(R& r, MutableBuffer buf) {
  while (!buf.empty()) {
    Expected<std::size_t> n = co_await r.read(buf);
    if (!n) co_return n.error();
    if (*n == 0) co_return errc::unexpected_eof;
    buf = buf.after(*n);
  }
  co_return Expected<void>();
}

template <AsyncWrite W>
Task<Expected<void>> write_all(W& w, ConstBuffer bytes) {
  while (!bytes.empty()) {
    Expected<std::size_t> n = co_await w.write(bytes);
    if (!n) co_return n.error();
    if (*n == 0) co_return errc::write_zero;
    bytes = bytes.after(*n);
  }
  co_return Expected<void>();
}

namespace detail {

// A growable byte container read_to_end can read into: std::string or a
// std::vector of a byte type.
template <class C>
concept ByteContainer = requires(C& c, std::size_t n) {
  c.resize(n);
  { c.data() } -> std::convertible_to<const void*>;
  c.capacity();
}
&&ByteLike<typename C::value_type>;

// Shrinks `out` back to its valid length when destroyed, so that a
// read_to_end that fails or is cancelled while `out` is grown over spare room
// leaves no padding behind.
template <class C>
struct TrimOnExit {
  C& out;
  std::size_t valid;
  ~TrimOnExit() { out.resize(valid); }
};

}  // namespace detail

template <AsyncRead R, detail::ByteContainer C>
Task<Expected<std::size_t>> read_to_end(R& r, C& out) {
  // Smallest spare room offered to one read: small reads cost a call each.
  constexpr std::size_t kMinRead = 4096;
  const std::size_t start = out.size();
  detail::TrimOnExit<C> trim{out, start};
  for (;;) {
    // Read into the spare capacity; grow geometrically when it is short, so
    // appending N bytes costs O(N) copying overall.
    std::size_t room = out.capacity() - trim.valid;
    if (room < kMinRead) room = std::max(kMinRead, trim.valid);
    out.resize(trim.valid + room);
    MutableBuffer spare(out.data() + trim.valid, room);
    Expected<std::size_t> n = co_await r.read(spare);
    if (!n) co_return n.error();  // trim restores the valid length
    if (*n == 0) co_return trim.valid - start;
    trim.valid += *n;
  }
}

template <AsyncRead R>
Task<Expected<std::size_t>> read_to_string(R& r, std::string& out) {
  // C++ strings are bytes: unlike Tokio's, no UTF-8 validation.
  return read_to_end(r, out);
}

}  // namespace volt::io
