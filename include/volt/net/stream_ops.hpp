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
#include <span>

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

namespace detail {
// The try_ forms: one system call, no waiting; would-block is
// std::errc::resource_unavailable_try_again. They clear the registration's
// readiness on EAGAIN, so a following readiness wait really waits.
Expected<std::size_t> try_read(const volt::detail::IoHandle& h, io::MutableBuffer buf) noexcept;
Expected<std::size_t> try_write(const volt::detail::IoHandle& h, io::ConstBuffer buf) noexcept;
// shutdown(2) of one or both directions; a socket that is not connected
// gives std::errc::not_connected.
Expected<void> shutdown(const volt::detail::IoHandle& h, int how) noexcept;
}  // namespace detail

}  // namespace volt::net
