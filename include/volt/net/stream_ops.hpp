// volt/net/stream_ops.hpp: the awaitable read and write operations of the
// stream sockets (TcpStream, UnixStream, and their halves).
//
// Each is returned by the socket's member function of the same name and is
// awaited once:
//
//   co_await s.read(buf)        -> Expected<std::size_t>  (0: end of stream)
//   co_await s.read_exact(buf)  -> Expected<void>   (errc::unexpected_eof;
//                                  on TCP, one receive when the bytes are there)
//   co_await s.write(buf)       -> Expected<std::size_t>  (>= 1 byte)
//   co_await s.write_all(buf)   -> Expected<void>
//   co_await s.writev(bufs)     -> Expected<std::size_t>  (one sendmsg)
//   co_await s.peek(buf)        -> Expected<std::size_t>  (0: end of stream;
//                                  the bytes stay queued for the next read)
//   co_await s.read_buf(vec)    -> Expected<std::size_t>  (appended; 0: end)
//   co_await s.ready(interest)  -> Expected<Readiness>
//
// Guarantees (see detail/io_operation.hpp for the mechanism):
//  - Waiting allocates nothing; each operation takes one unit of the task's
//    cooperative budget.
//  - Errors are the system's codes: compare with std::errc
//    (connection_reset, broken_pipe, ...). Writes use MSG_NOSIGNAL: a write
//    to a closed connection returns broken_pipe and never raises SIGPIPE.
//  - A socket that was closed (its handle reset) while the operation waited
//    (from another task, through a half) gives errc::closed.
//  - Cancellation (destroying the awaitable, e.g. by timeout or select):
//    read and write have done nothing when cancelled while waiting;
//    read_exact and write_all may have moved a prefix (as in Tokio, they are
//    not cancel-safe).
//  - The buffers must stay valid until the operation completes or is
//    destroyed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "volt/detail/io_operation.hpp"
#include "volt/expected.hpp"
#include "volt/io/buffer.hpp"
#include "volt/net/syscall_op.hpp"

namespace volt::net {

class [[nodiscard]] Read : public detail::SyscallOp {
 public:
  Read(const volt::detail::IoHandle& h, io::MutableBuffer buf) noexcept
      : SyscallOp(h, volt::detail::Interest::kRead, &step), buf_(buf) {}
  Expected<std::size_t> await_resume() noexcept { return outcome(done_); }

 private:
  static Step step(IoOperation& op) noexcept;
  io::MutableBuffer buf_;
  std::size_t done_ = 0;
};

// On a TCP socket (IoHandle::reports_queue) each receive also asks how many
// bytes are left queued. When the buffer is filled and nothing is left, the
// operation ends kDoneDrained: the next read waits for the driver's edge
// instead of paying a system call that would say EAGAIN (one receive per
// message instead of two, for request/response traffic of known sizes).
class [[nodiscard]] ReadExact : public detail::SyscallOp {
 public:
  ReadExact(const volt::detail::IoHandle& h, io::MutableBuffer buf) noexcept
      : SyscallOp(h, volt::detail::Interest::kRead, &step),
        buf_(buf),
        reports_queue_(h.reports_queue()) {}
  Expected<void> await_resume() noexcept {
    Expected<void> r = outcome();
    if (r && eof_) return errc::unexpected_eof;
    return r;
  }

 private:
  static Step step(IoOperation& op) noexcept;
  io::MutableBuffer buf_;
  std::size_t done_ = 0;
  bool eof_ = false;
  bool reports_queue_;
};

class [[nodiscard]] Write : public detail::SyscallOp {
 public:
  Write(const volt::detail::IoHandle& h, io::ConstBuffer buf) noexcept
      : SyscallOp(h, volt::detail::Interest::kWrite, &step), buf_(buf) {}
  Expected<std::size_t> await_resume() noexcept { return outcome(done_); }

 private:
  static Step step(IoOperation& op) noexcept;
  io::ConstBuffer buf_;
  std::size_t done_ = 0;
};

class [[nodiscard]] WriteAll : public detail::SyscallOp {
 public:
  WriteAll(const volt::detail::IoHandle& h, io::ConstBuffer buf) noexcept
      : SyscallOp(h, volt::detail::Interest::kWrite, &step), buf_(buf) {}
  Expected<void> await_resume() noexcept { return outcome(); }

 private:
  static Step step(IoOperation& op) noexcept;
  io::ConstBuffer buf_;
};

// One sendmsg of up to kMaxBuffers buffers (IOV_MAX-safe); the rest of a
// longer list is ignored, as a short write.
class [[nodiscard]] Writev : public detail::SyscallOp {
 public:
  static constexpr std::size_t kMaxBuffers = 64;
  Writev(const volt::detail::IoHandle& h, std::span<const io::ConstBuffer> bufs) noexcept
      : SyscallOp(h, volt::detail::Interest::kWrite, &step), bufs_(bufs) {}
  Expected<std::size_t> await_resume() noexcept { return outcome(done_); }

 private:
  static Step step(IoOperation& op) noexcept;
  std::span<const io::ConstBuffer> bufs_;
  std::size_t done_ = 0;
};

// Waits until the socket is (or may be) ready for `interest`; gives
// Expected<void> (errc::closed if the socket was closed meanwhile). Useful
// before a try_ operation; a readiness report can be spurious, so the try_
// operation may still give resource_unavailable_try_again.
class [[nodiscard]] Ready : public volt::detail::IoOperation {
 public:
  Ready(const volt::detail::IoHandle& h, volt::detail::Interest interest) noexcept
      : IoOperation(h, interest, &step) {}
  Expected<void> await_resume() noexcept {
    finish();
    if (closed()) return errc::closed;
    return {};
  }

 private:
  static Step step(IoOperation&) noexcept { return Step::kDone; }
};

// recv(2) with MSG_PEEK: copies up to buf.size() of the queued bytes and
// leaves them queued, so the next read (or peek) gives them again. Waits like
// read while nothing is queued; 0 is the end of stream (or an empty buffer).
// A peek never clears the readiness (the bytes are still there).
class [[nodiscard]] Peek : public detail::SyscallOp {
 public:
  Peek(const volt::detail::IoHandle& h, io::MutableBuffer buf) noexcept
      : SyscallOp(h, volt::detail::Interest::kRead, &step), buf_(buf) {}
  Expected<std::size_t> await_resume() noexcept { return outcome(done_); }

 private:
  static Step step(IoOperation& op) noexcept;
  io::MutableBuffer buf_;
  std::size_t done_ = 0;
};

// read_buf's growth: a full vector's capacity becomes
// max(2 * capacity(), kReadBufMinCapacity). One read_buf receives at most
// kReadBufMaxRead bytes (so it zero-fills at most that much of a large
// vector's spare capacity, not all of it).
inline constexpr std::size_t kReadBufMinCapacity = 4096;
inline constexpr std::size_t kReadBufMaxRead = 64 * 1024;

// One read appended to a vector's spare capacity: the bytes land at
// [size(), min(capacity(), size() + kReadBufMaxRead)), the vector grows by
// the count, which is returned (0: end of stream). Growth rule: the vector
// is given spare capacity when the socket's read_buf() creates this
// operation, not while it waits (see StreamSocket::read_buf). The vector's
// size only changes inside the system call's step (never while waiting): a
// cancelled read_buf leaves it as it was. The vector must stay alive, and
// untouched by others, until the operation completes or is destroyed.
class [[nodiscard]] ReadBuf : public detail::SyscallOp {
 public:
  ReadBuf(const volt::detail::IoHandle& h, std::vector<std::byte>& vec) noexcept
      : SyscallOp(h, volt::detail::Interest::kRead, &step), vec_(&vec) {}
  Expected<std::size_t> await_resume() noexcept { return outcome(done_); }

 private:
  static Step step(IoOperation& op) noexcept;
  std::vector<std::byte>* vec_;
  std::size_t done_ = 0;
};

// Directions for ready(): kReadable, kWritable, or both
// (Interest::kReadable | Interest::kWritable).
enum class Interest : std::uint8_t { kReadable = 1, kWritable = 2 };
constexpr Interest operator|(Interest a, Interest b) noexcept {
  return static_cast<Interest>(static_cast<std::uint8_t>(a) | static_cast<std::uint8_t>(b));
}
constexpr bool is_readable(Interest set) noexcept {
  return (static_cast<std::uint8_t>(set) & static_cast<std::uint8_t>(Interest::kReadable)) != 0;
}
constexpr bool is_writable(Interest set) noexcept {
  return (static_cast<std::uint8_t>(set) & static_cast<std::uint8_t>(Interest::kWritable)) != 0;
}

// What ready() saw: the readiness the runtime's driver recorded for the
// socket (epoll: EPOLLIN -> readable, EPOLLOUT -> writable, EPOLLRDHUP ->
// readable + read_closed, EPOLLHUP -> both and both closed, EPOLLERR -> both
// and error), restricted to the interest asked for (error is reported with
// either). Tokio's `Ready`; named Readiness here because net::Ready is the
// awaitable of readable()/writable().
//  - readable / writable: a read (write) may make progress. May be
//    spurious: a try_read can still say resource_unavailable_try_again,
//    which also clears the recorded readiness so the next ready() waits.
//  - read_closed: the peer shut down its write side (shutdown(SHUT_WR) or
//    close); reads will give the queued bytes, then 0. It stays set.
//  - write_closed: writes can no longer be delivered (the connection is
//    gone both ways: EPOLLHUP).
//  - error: a socket error is pending (take_error() reads it).
// A new socket starts "readable and writable" before the driver's first
// report (see detail/io_operation.hpp); the closed flags appear once the
// driver has seen the hang-up.
struct Readiness {
  bool readable = false;
  bool writable = false;
  bool read_closed = false;
  bool write_closed = false;
  bool error = false;
  constexpr bool is_empty() const noexcept {
    return !readable && !writable && !read_closed && !write_closed && !error;
  }
  friend constexpr bool operator==(const Readiness&, const Readiness&) noexcept = default;
};

// Waits until the recorded readiness has any flag of `interest` (for
// kReadable: readable, read_closed or error; for kWritable: writable,
// write_closed or error), then gives it. errc::closed if the socket was (or
// gets) closed; an interest with neither direction (Interest{}) gives
// errc::invalid_argument at once. Cancel-safe: nothing is consumed.
// Waiting allocates nothing.
class [[nodiscard]] ReadyEvents : public volt::detail::IoOperation {
 public:
  ReadyEvents(const volt::detail::IoHandle& h, Interest interest) noexcept
      : IoOperation(valid(interest) ? h : no_handle(), to_detail(interest), &step),
        interest_(interest) {}
  Expected<Readiness> await_resume() noexcept {
    finish();
    if (!valid(interest_)) return errc::invalid_argument;
    if (closed()) return errc::closed;
    return seen_;
  }

 private:
  static constexpr bool valid(Interest i) noexcept { return is_readable(i) || is_writable(i); }
  static constexpr volt::detail::Interest to_detail(Interest i) noexcept {
    return static_cast<volt::detail::Interest>(static_cast<std::uint8_t>(i) & 3);
  }
  // An empty handle: the operation completes at once (as closed), for an
  // invalid interest, which no readiness would ever satisfy.
  static const volt::detail::IoHandle& no_handle() noexcept {
    static const volt::detail::IoHandle empty;
    return empty;
  }
  static Step step(IoOperation& op) noexcept;
  Interest interest_;
  Readiness seen_;
};

namespace detail {
// The try_ forms: one system call, no waiting; would-block is
// std::errc::resource_unavailable_try_again. They clear the registration's
// readiness on EAGAIN, so a following readiness wait really waits.
Expected<std::size_t> try_read(const volt::detail::IoHandle& h, io::MutableBuffer buf) noexcept;
Expected<std::size_t> try_write(const volt::detail::IoHandle& h, io::ConstBuffer buf) noexcept;
// recv with MSG_PEEK: the bytes stay queued.
Expected<std::size_t> try_peek(const volt::detail::IoHandle& h, io::MutableBuffer buf) noexcept;
// Gives `vec` spare capacity for read_buf (see StreamSocket::read_buf).
void reserve_read_buf(std::vector<std::byte>& vec);
// shutdown(2) of one or both directions; a socket that is not connected
// gives std::errc::not_connected.
Expected<void> shutdown(const volt::detail::IoHandle& h, int how) noexcept;
}  // namespace detail

}  // namespace volt::net
