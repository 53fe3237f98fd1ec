// volt/io/copy.hpp: move every byte of one stream into another (Tokio's
// io::copy and io::copy_bidirectional).
//
//   // a file-like reader into a socket, then flushed
//   std::uint64_t n = (co_await volt::io::copy(reader, stream)).value();
//
//   // a proxy: client <-> upstream until both directions have ended
//   auto [up, down] = (co_await volt::io::copy_bidirectional(client, upstream)).value();
//
// copy(reader, writer): reads until the end of the stream, writing each chunk
// in full (write_all) and flushing the writer after it; returns the number of
// bytes copied. The writer is not shut down.
//
// copy_bidirectional(a, b): copies a -> b and b -> a at the same time, within
// the awaiting task (the two directions run as branches of it, as select's
// operands do: nothing is spawned, the streams are never used from two
// threads at once). When one direction reads the end of its stream it shuts
// down the other stream's write direction (so its peer reads end of stream)
// and the other direction carries on until it ends too (and shuts the first
// stream down in turn). Returns {bytes a -> b, bytes b -> a}.
//
// Guarantees:
//  - Order and integrity: bytes are written in the order read, each chunk in
//    full before the next read.
//  - The writer is flushed after every chunk, so data never sits in a
//    buffering writer (BufWriter) while copy waits for more input (an
//    interactive protocol through a BufWriter would otherwise stall). copy
//    is not where small writes get batched: its chunks are up to 8 KiB.
//  - Errors: the first error of a read, write (errc::write_zero for a write
//    that accepts nothing), flush or shutdown ends the copy and is returned.
//    For copy_bidirectional an error in either direction also ends the other
//    direction at once (cancelled where it waits: its pending read or write
//    is destroyed) and that error is returned; the byte counts are lost with
//    it. Bytes already written stay written.
//  - Cancellation: destroying the copy (select, timeout, abort) while it
//    waits destroys the pending read/write; a chunk read but not yet fully
//    written is lost (as with Tokio's copy, which is not cancel-safe).
//  - Allocation: one 8 KiB buffer per direction (one allocation per call),
//    one coroutine frame per direction (copy_bidirectional) from the
//    recycling frame pool; nothing per chunk beyond what the streams'
//    operations allocate.
//  - An exception thrown by a stream's operation propagates out of the
//    co_await (for copy_bidirectional, after the other direction was
//    cancelled).
// Preconditions: must be awaited inside a runtime task; the streams outlive
// the returned Task; `a` and `b` of copy_bidirectional are distinct objects
// that nothing else reads or writes meanwhile.
#pragma once

#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <optional>
#include <utility>

#include "volt/detail/branch.hpp"
#include "volt/detail/task_header.hpp"
#include "volt/error.hpp"
#include "volt/expected.hpp"
#include "volt/io/async_io.hpp"
#include "volt/io/buffer.hpp"
#include "volt/task/task.hpp"

namespace volt::io {

namespace detail {

inline constexpr std::size_t kCopyChunk = 8192;

// One direction: reader -> writer until the reader's end of stream, then
// shutdown() (copy_bidirectional) or flush() (copy) the writer.
template <class R, class W>
Task<Expected<std::uint64_t>> copy_one_way(R& reader, W& writer, std::byte* buf,
                                           bool shutdown_at_end) {
  std::uint64_t total = 0;
  for (;;) {
    Expected<std::size_t> got = co_await reader.read(MutableBuffer(buf, kCopyChunk));
    if (!got) co_return got.error();
    if (*got == 0) break;
    ConstBuffer rest(buf, *got);
    while (!rest.empty()) {
      Expected<std::size_t> put = co_await writer.write(rest);
      if (!put) co_return put.error();
      if (*put == 0) co_return errc::write_zero;
      rest = rest.after(*put);
    }
    total += *got;
    Expected<void> flushed = co_await writer.flush();
    if (!flushed) co_return flushed.error();
  }
  // shutdown() flushes first (AsyncWrite's contract). Two co_awaits: the
  // two operations may have different awaitable types.
  Expected<void> ended;
  if (shutdown_at_end) {
    ended = co_await writer.shutdown();
  } else {
    ended = co_await writer.flush();
  }
  if (!ended) co_return ended.error();
  co_return total;
}

// Runs two Tasks returning Expected as branches of the awaiting task (no
// spawn) and completes when both have succeeded, or as soon as one fails
// (with a value error or an exception): the other is then cancelled by
// destruction where it waits. Tokio's try_join!, for two.
//
// The state is touched only by the awaiting task (await_suspend, its slot
// check `poll`, await_resume, all under the task's kRunning), so no atomics:
// the branches' leaves do the cross-thread work.
template <class A, class B>
class [[nodiscard]] TryJoin2 {
 public:
  TryJoin2(Task<Expected<A>> a, Task<Expected<B>> b) noexcept
      : task_a_(std::move(a)), task_b_(std::move(b)) {}
  TryJoin2(const TryJoin2&) = delete;
  TryJoin2& operator=(const TryJoin2&) = delete;

  bool await_ready() const noexcept { return false; }

  // Out of line: it reads the thread's current slot (suspend_current), which
  // must not be computed in a coroutine body that may move between threads.
  [[gnu::noinline]] bool await_suspend(std::coroutine_handle<> self) {
    if (branch_a_.start(std::move(task_a_))) settle(branch_a_, result_a_);
    if (!failed_ && branch_b_.start(std::move(task_b_))) settle(branch_b_, result_b_);
    if (decided()) return false;
    volt::detail::suspend_current(self, &poll, this);
    return true;
  }

  // {a's value, b's value}, or the first failure's error (or exception).
  Expected<std::pair<A, B>> await_resume() {
    // The survivor of a failure is cancelled here, before the co_await
    // completes (nothing it registered outlives it).
    branch_a_.reset();
    branch_b_.reset();
    if (exception_) std::rethrow_exception(exception_);
    if (result_a_ && !*result_a_) return result_a_->error();
    if (result_b_ && !*result_b_) return result_b_->error();
    return std::pair<A, B>(std::move(**result_a_), std::move(**result_b_));
  }

 private:
  bool decided() const noexcept { return failed_ || (result_a_ && result_b_); }

  // The task's readiness check: step the branches whose leaf is ready;
  // resume once the outcome is decided.
  static bool poll(void* context) noexcept {
    auto* j = static_cast<TryJoin2*>(context);
    if (!j->result_a_ && j->branch_a_.step()) j->settle(j->branch_a_, j->result_a_);
    if (!j->failed_ && !j->result_b_ && j->branch_b_.step()) j->settle(j->branch_b_, j->result_b_);
    return j->decided();
  }

  // Takes a finished branch's outcome and frees its frame.
  template <class T>
  void settle(volt::detail::Branch<Expected<T>>& branch,
              std::optional<Expected<T>>& result) noexcept {
    try {
      result.emplace(branch.result());
      if (!*result) failed_ = true;
    } catch (...) {
      if (!exception_) exception_ = std::current_exception();
      failed_ = true;
    }
    branch.reset();
  }

  Task<Expected<A>> task_a_;  // until started
  Task<Expected<B>> task_b_;
  std::optional<Expected<A>> result_a_;
  std::optional<Expected<B>> result_b_;
  std::exception_ptr exception_;
  bool failed_ = false;
  // Last, so destroyed first: a branch still running when the TryJoin2 goes
  // (the awaiting task destroyed) is cancelled before anything else here.
  volt::detail::Branch<Expected<A>> branch_a_;
  volt::detail::Branch<Expected<B>> branch_b_;
};

}  // namespace detail

template <AsyncRead R, AsyncWrite W>
Task<Expected<std::uint64_t>> copy(R& reader, W& writer) {
  auto buf = std::make_unique_for_overwrite<std::byte[]>(detail::kCopyChunk);
  Expected<std::uint64_t> n =
      co_await detail::copy_one_way(reader, writer, buf.get(), /*shutdown_at_end=*/false);
  co_return n;
}

template <class A, class B>
requires AsyncRead<A> && AsyncWrite<A> && AsyncRead<B> && AsyncWrite<B>
    Task<Expected<std::pair<std::uint64_t, std::uint64_t>>> copy_bidirectional(A& a, B& b) {
  auto bufs = std::make_unique_for_overwrite<std::byte[]>(2 * detail::kCopyChunk);
  detail::TryJoin2<std::uint64_t, std::uint64_t> both(
      detail::copy_one_way(a, b, bufs.get(), /*shutdown_at_end=*/true),
      detail::copy_one_way(b, a, bufs.get() + detail::kCopyChunk, /*shutdown_at_end=*/true));
  Expected<std::pair<std::uint64_t, std::uint64_t>> counts = co_await both;
  co_return counts;
}

}  // namespace volt::io
