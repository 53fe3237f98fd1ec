// volt/io/pipe.hpp: asynchronous pipe ends (PipeReader, PipeWriter) on the
// runtime's I/O driver, and io::pipe() to make a connected pair. The piped
// stdin/stdout/stderr of a child process (volt/process/process.hpp) are
// these types.
//
//   auto pair = volt::io::pipe();                    // Expected<{reader, writer}>
//   if (!pair) co_return pair.error();               // EMFILE, errc::no_runtime...
//   auto [reader, writer] = std::move(*pair);
//   co_await volt::io::write_all(writer, std::string_view("hello"));
//   writer.close();                                  // the reader sees end of stream
//   std::string text;
//   co_await volt::io::read_to_string(reader, text); // "hello"
//
// PipeReader models io::AsyncRead, PipeWriter io::AsyncWrite: BufReader,
// BufWriter, copy, read_to_string and write_all work on them.
//
// Guarantees:
//  - Both ends are non-blocking, close-on-exec, registered once with the
//    current runtime's driver (the same machinery as sockets:
//    detail/io_operation.hpp), and closed exactly once when their owner goes
//    or close() is called. Waiting allocates nothing.
//  - Errors are values (Expected): the errno of read(2)/write(2) as a
//    std::system_category code; errc::closed for a closed or empty end;
//    errc::no_runtime when made outside a runtime.
//  - A write to a pipe whose reading end is gone returns broken_pipe and
//    never kills the process with SIGPIPE. How: the first pipe or child made
//    by volt sets SIGPIPE's disposition to SIG_IGN if it is SIG_DFL (as
//    Rust's standard library does at start-up; a handler the program
//    installed is left alone and still runs, and the write still returns
//    broken_pipe); children spawned by volt get SIG_DFL back. Consequence:
//    the program's own writes to a closed pipe (printf to a closed stdout)
//    get EPIPE instead of terminating it. Weighed against masking SIGPIPE
//    around every write (two extra system calls per write, and consuming the
//    pending signal after an EPIPE): one sigaction, once, costs nothing per
//    write.
//  - Cancellation (destroying the awaitable: timeout, select): read and
//    write have done nothing when cancelled while waiting; write_all may
//    have written a prefix.
//  - One task may read while another writes (different ends); two tasks
//    using one end at once get their bytes interleaved unpredictably.
//  - close() may be called from any task while another waits on the end:
//    that operation completes with errc::closed.
#pragma once

#include <cstddef>
#include <utility>

#include "volt/detail/io_operation.hpp"
#include "volt/expected.hpp"
#include "volt/io/async_io.hpp"
#include "volt/io/buffer.hpp"
#include "volt/net/stream_ops.hpp"
#include "volt/net/syscall_op.hpp"

namespace volt::process {
class Command;
class Stdio;
}  // namespace volt::process

namespace volt::io {

class PipeReader;
class PipeWriter;
Expected<std::pair<PipeReader, PipeWriter>> pipe() noexcept;

namespace detail {

// One read(2) into the buffer (0: end of stream, every writer closed).
class [[nodiscard]] PipeRead : public net::detail::SyscallOp {
 public:
  PipeRead(const volt::detail::IoHandle& h, MutableBuffer buf) noexcept
      : SyscallOp(h, volt::detail::Interest::kRead, &step), buf_(buf) {}
  Expected<std::size_t> await_resume() noexcept { return outcome(done_); }

 private:
  static Step step(IoOperation& op) noexcept;
  MutableBuffer buf_;
  std::size_t done_ = 0;
};

// One write(2) of at least one byte (a short count when the pipe is full).
class [[nodiscard]] PipeWrite : public net::detail::SyscallOp {
 public:
  PipeWrite(const volt::detail::IoHandle& h, ConstBuffer buf) noexcept
      : SyscallOp(h, volt::detail::Interest::kWrite, &step), buf_(buf) {}
  Expected<std::size_t> await_resume() noexcept { return outcome(done_); }

 private:
  static Step step(IoOperation& op) noexcept;
  ConstBuffer buf_;
  std::size_t done_ = 0;
};

// write(2) until every byte is written (not cancel-safe: a prefix may be).
class [[nodiscard]] PipeWriteAll : public net::detail::SyscallOp {
 public:
  PipeWriteAll(const volt::detail::IoHandle& h, ConstBuffer buf) noexcept
      : SyscallOp(h, volt::detail::Interest::kWrite, &step), buf_(buf) {}
  Expected<void> await_resume() noexcept { return outcome(); }

 private:
  static Step step(IoOperation& op) noexcept;
  ConstBuffer buf_;
};

// Sets SIGPIPE to SIG_IGN if it is SIG_DFL, once per process (see above).
void ignore_sigpipe_once() noexcept;
// Makes `fd` non-blocking and close-on-exec and registers it with the
// current runtime into `out` (fd closed on failure).
std::error_code adopt(int fd, volt::detail::IoHandle& out) noexcept;

}  // namespace detail

class PipeReader {
 public:
  // An empty end: every operation gives errc::closed.
  PipeReader() noexcept = default;
  PipeReader(PipeReader&&) noexcept = default;
  PipeReader& operator=(PipeReader&&) noexcept = default;

  // Adopts `fd`, the reading end of a pipe (or a FIFO, a character device):
  // made non-blocking and close-on-exec, registered with the current
  // runtime. The descriptor is closed on failure too.
  static Expected<PipeReader> from_fd(int fd) noexcept;

  // co_await: Expected<std::size_t>, 0 at end of stream.
  detail::PipeRead read(MutableBuffer buf) const noexcept { return {handle_, buf}; }
  // Waits until a read may make progress (errc::closed if closed meanwhile).
  net::Ready readable() const noexcept { return {handle_, volt::detail::Interest::kRead}; }
  // One read(2), no waiting: resource_unavailable_try_again if empty.
  Expected<std::size_t> try_read(MutableBuffer buf) const noexcept;

  int native_handle() const noexcept { return handle_.native_handle(); }
  explicit operator bool() const noexcept { return static_cast<bool>(handle_); }
  // Closes now (any task; see the contract above).
  void close() noexcept { handle_.close(); }

 private:
  friend class volt::process::Command;
  friend class volt::process::Stdio;
  friend Expected<std::pair<PipeReader, PipeWriter>> pipe() noexcept;
  explicit PipeReader(volt::detail::IoHandle h) noexcept : handle_(std::move(h)) {}
  volt::detail::IoHandle handle_;
};

class PipeWriter {
 public:
  PipeWriter() noexcept = default;
  PipeWriter(PipeWriter&&) noexcept = default;
  PipeWriter& operator=(PipeWriter&&) noexcept = default;

  // Adopts `fd`, the writing end of a pipe (see PipeReader::from_fd).
  static Expected<PipeWriter> from_fd(int fd) noexcept;

  // co_await: Expected<std::size_t> (>= 1 byte), broken_pipe once the
  // reading end is gone.
  detail::PipeWrite write(ConstBuffer buf) const noexcept { return {handle_, buf}; }
  // co_await: Expected<void>.
  detail::PipeWriteAll write_all(ConstBuffer buf) const noexcept { return {handle_, buf}; }
  // Nothing to flush: ready at once (for io::AsyncWrite).
  io::Ready<Expected<void>> flush() const noexcept { return io::Ready<Expected<void>>({}); }
  // Closes this end (the reader sees end of stream once every writer is
  // closed). Awaitable for io::AsyncWrite; never waits.
  io::Ready<Expected<void>> shutdown() noexcept {
    handle_.close();
    return io::Ready<Expected<void>>({});
  }
  net::Ready writable() const noexcept { return {handle_, volt::detail::Interest::kWrite}; }
  Expected<std::size_t> try_write(ConstBuffer buf) const noexcept;

  int native_handle() const noexcept { return handle_.native_handle(); }
  explicit operator bool() const noexcept { return static_cast<bool>(handle_); }
  void close() noexcept { handle_.close(); }

 private:
  friend class volt::process::Command;
  friend class volt::process::Stdio;
  friend Expected<std::pair<PipeReader, PipeWriter>> pipe() noexcept;
  explicit PipeWriter(volt::detail::IoHandle h) noexcept : handle_(std::move(h)) {}
  volt::detail::IoHandle handle_;
};

// A new pipe: {reading end, writing end}, both registered with the current
// runtime. Errors: EMFILE / ENFILE, errc::no_runtime.
Expected<std::pair<PipeReader, PipeWriter>> pipe() noexcept;

static_assert(AsyncRead<PipeReader>);
static_assert(AsyncWrite<PipeWriter>);

}  // namespace volt::io
