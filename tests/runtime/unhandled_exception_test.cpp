// Integration tests of Runtime::Builder::on_unhandled_exception (the rule is
// in volt/runtime/runtime.hpp): an exception that escapes a spawned task or a
// spawn_blocking function whose JoinHandle was dropped reaches the hook once,
// with the task's id, whichever came first (the drop or the throw); one that
// a JoinHandle rethrows, and an aborted or shut-down task, never does. With
// no hook, one line goes to stderr; a hook that throws does not take the
// runtime down.
//
// Parameterised over the multi-thread (2 workers) and current-thread
// flavours. Coroutines are free functions taking their state by pointer or
// value; spawning inside them goes through out-of-line helpers (volt::spawn
// reads a thread_local, which a coroutine body must not do across a
// suspension with GCC 12). Waits inside the runtime yield (so that the
// current-thread flavour runs the other tasks) and give up after kNotHung.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "blocking_support.hpp"
#include "runtime_support.hpp"

namespace volt::test {
namespace {

using Clock = std::chrono::steady_clock;

// what() of the exception, "int" for an int, "?" for anything else.
std::string describe(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    return x.what();
  } catch (int) {
    return "int";
  } catch (...) {
    return "?";
  }
}

struct Report {
  std::uint64_t id;
  std::string what;
  bool blocking;
  std::thread::id thread;
  std::string thread_name;
};

// Collects what the hook receives; the hook may run on several threads at once.
class Recorder {
 public:
  std::function<void(const UnhandledException&)> hook() {
    return [this](const UnhandledException& u) { record(u); };
  }
  void record(const UnhandledException& u) {
    Report r{u.task_id, describe(u.exception), u.blocking, std::this_thread::get_id(),
             current_thread_name()};
    std::lock_guard lock(mutex_);
    reports_.push_back(std::move(r));
    count_.fetch_add(1);
  }
  std::size_t count() const { return count_.load(); }
  std::vector<Report> reports() const {
    std::lock_guard lock(mutex_);
    return reports_;
  }

 private:
  mutable std::mutex mutex_;
  std::vector<Report> reports_;  // guarded by mutex_
  std::atomic<std::size_t> count_{0};
};

Runtime make_runtime_with(const Flavour& f, Recorder& recorder) {
  return make_builder(f).on_unhandled_exception(recorder.hook()).build();
}

// ---- tasks ----

Task<void> fail_now(std::string message) {
  throw std::runtime_error(message);
  co_return;
}

Task<void> throw_int() {
  throw 7;
  co_return;
}

// Throws once `rx` delivers (or its sender is gone).
Task<void> fail_when_told(oneshot::Receiver<int> rx, std::string message) {
  std::optional<int> v = co_await rx;
  (void)v;
  throw std::runtime_error(message);
}

Task<void> flag_then_fail(std::atomic<bool>* ran, std::string message) {
  ran->store(true);
  throw std::runtime_error(message);
  co_return;
}

// Waits for a value that never comes while the test holds the sender.
Task<void> wait_forever(oneshot::Receiver<int> rx) {
  std::optional<int> v = co_await rx;
  (void)v;
}

// ---- helpers, out of line (see the file comment) ----

[[gnu::noinline]] JoinHandle<void> spawn_here(Task<void> task) {
  return volt::spawn(std::move(task));
}

// Spawns `task`, drops its handle at once, returns its id.
[[gnu::noinline]] std::uint64_t spawn_detached(Task<void> task) {
  JoinHandle<void> h = volt::spawn(std::move(task));
  return h.id();
}

// Destroys the handle here; returns the thread it was destroyed on.
[[gnu::noinline]] std::thread::id drop_here(JoinHandle<void>& h) {
  { JoinHandle<void> gone = std::move(h); }
  return std::this_thread::get_id();
}

// Yields until `*pred` holds; false if kNotHung passed first.
Task<bool> yield_until(const std::function<bool()>* pred) {
  const auto deadline = Clock::now() + kNotHung;
  for (;;) {
    if ((*pred)()) co_return true;
    if (Clock::now() >= deadline) co_return false;
    co_await volt::yield_now();
  }
}

// ---- 1. handle dropped, then the task throws ----

struct DropFirst {
  std::uint64_t id = 0;
  std::size_t reports_before_throw = 99;
  bool reported = false;
};

Task<void> drop_then_throw(Recorder* rec, DropFirst* out) {
  auto channel = oneshot::channel<int>();
  out->id = spawn_detached(fail_when_told(std::move(channel.second), "late boom"));
  co_await volt::yield_now();  // the task runs and waits on the channel
  out->reports_before_throw = rec->count();
  (void)channel.first.send(1);
  const std::function<bool()> reported = [rec] { return rec->count() >= 1; };
  out->reported = co_await yield_until(&reported);
}

class UnhandledExceptionTest : public ::testing::TestWithParam<Flavour> {};

INSTANTIATE_TEST_SUITE_P(Flavours, UnhandledExceptionTest,
                         ::testing::Values(kMultiThread2, kCurrentThread), FlavourName());

TEST_P(UnhandledExceptionTest, HookSeesATaskThatThrowsAfterItsHandleWasDropped) {
  Recorder rec;
  DropFirst out;
  {
    Runtime rt = make_runtime_with(GetParam(), rec);
    rt.block_on(drop_then_throw(&rec, &out));
  }
  EXPECT_EQ(out.reports_before_throw, 0u);
  ASSERT_TRUE(out.reported);
  std::vector<Report> reports = rec.reports();
  ASSERT_EQ(reports.size(), 1u);  // once, also after shutdown
  EXPECT_NE(out.id, 0u);
  EXPECT_EQ(reports[0].id, out.id);
  EXPECT_EQ(reports[0].what, "late boom");
  EXPECT_FALSE(reports[0].blocking);
  // On the thread that completed the task: the block_on thread of a
  // current-thread runtime; a worker (or the block_on thread, which may help
  // run queued tasks) of a multi-thread one.
  if (GetParam().current_thread) {
    EXPECT_EQ(reports[0].thread, std::this_thread::get_id());
  } else {
    EXPECT_TRUE(reports[0].thread == std::this_thread::get_id() ||
                reports[0].thread_name.rfind("volt-worker", 0) == 0)
        << reports[0].thread_name;
  }
}

// ---- 2. the task throws, then its handle is dropped ----

struct ThrowFirst {
  std::uint64_t id = 0;
  bool finished = false;
  std::size_t reports_before_drop = 99;
  std::size_t reports_after_drop = 0;
  std::thread::id dropped_on;
};

Task<void> throw_then_drop(Recorder* rec, ThrowFirst* out) {
  JoinHandle<void> h = spawn_here(fail_now("early boom"));
  out->id = h.id();
  const std::function<bool()> finished = [&h] { return h.is_finished(); };
  out->finished = co_await yield_until(&finished);
  // Finished, but the exception waits for the handle: nothing reported yet.
  out->reports_before_drop = rec->count();
  out->dropped_on = drop_here(h);
  out->reports_after_drop = rec->count();  // the drop reported it, synchronously
}

TEST_P(UnhandledExceptionTest, HookSeesATaskThatThrewBeforeItsHandleWasDropped) {
  Recorder rec;
  ThrowFirst out;
  {
    Runtime rt = make_runtime_with(GetParam(), rec);
    rt.block_on(throw_then_drop(&rec, &out));
  }
  ASSERT_TRUE(out.finished);
  EXPECT_EQ(out.reports_before_drop, 0u);
  EXPECT_EQ(out.reports_after_drop, 1u);
  std::vector<Report> reports = rec.reports();
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_EQ(reports[0].id, out.id);
  EXPECT_EQ(reports[0].what, "early boom");
  EXPECT_FALSE(reports[0].blocking);
  EXPECT_EQ(reports[0].thread, out.dropped_on);  // the dropping thread
}

// Spawns `task` and returns its handle once the task finished.
Task<JoinHandle<void>> run_until_finished(Task<void> task) {
  JoinHandle<void> h = spawn_here(std::move(task));
  const std::function<bool()> finished = [&h] { return h.is_finished(); };
  bool ok = co_await yield_until(&finished);
  EXPECT_TRUE(ok);
  co_return std::move(h);
}

TEST_P(UnhandledExceptionTest, HandleDroppedOutsideTheRuntimeAfterItIsGoneStillReports) {
  Recorder rec;
  JoinHandle<void> h;
  {
    Runtime rt = make_runtime_with(GetParam(), rec);
    h = rt.block_on(run_until_finished(fail_now("outlived")));
  }
  const std::uint64_t id = h.id();
  EXPECT_EQ(rec.count(), 0u);  // the live handle could still rethrow it
  h = JoinHandle<void>();      // assigning over a handle drops it
  std::vector<Report> reports = rec.reports();
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_EQ(reports[0].id, id);
  EXPECT_EQ(reports[0].what, "outlived");
  EXPECT_EQ(reports[0].thread, std::this_thread::get_id());
}

// ---- 3. what a JoinHandle rethrows is not reported ----

struct Awaited {
  int caught = 0;
};

Task<void> send_later(oneshot::Sender<int> tx) {
  co_await volt::yield_now();
  (void)tx.send(1);
}

Task<void> await_throwers(Awaited* out) {
  // Awaited while it runs: it throws when told, by a task that yields first.
  auto channel = oneshot::channel<int>();
  JoinHandle<void> running = spawn_here(fail_when_told(std::move(channel.second), "awaited"));
  JoinHandle<void> sender = spawn_here(send_later(std::move(channel.first)));
  try {
    co_await running;
  } catch (const std::runtime_error&) {
    ++out->caught;
  }
  co_await sender;
  // Awaited after it finished.
  JoinHandle<void> done = spawn_here(fail_now("awaited late"));
  const std::function<bool()> finished = [&done] { return done.is_finished(); };
  bool ok = co_await yield_until(&finished);
  EXPECT_TRUE(ok);
  try {
    co_await done;
  } catch (const std::runtime_error&) {
    ++out->caught;
  }
}

TEST_P(UnhandledExceptionTest, ExceptionsThatAJoinHandleRethrowsAreNotReported) {
  Recorder rec;
  Awaited out;
  {
    Runtime rt = make_runtime_with(GetParam(), rec);
    rt.block_on(await_throwers(&out));
    // block_on and join() rethrow, too.
    EXPECT_THROW(rt.block_on(fail_now("block_on")), std::runtime_error);
    JoinHandle<void> joined = rt.spawn(fail_now("joined"));
    EXPECT_THROW(joined.join(), std::runtime_error);
    EXPECT_FALSE(joined.valid());  // consumed: its destructor has nothing to report
  }
  EXPECT_EQ(out.caught, 2);
  EXPECT_EQ(rec.count(), 0u);
}

// ---- 4. aborted and shut-down tasks are not reported ----

struct Aborted {
  std::error_code awaited;
  bool dropped_finished = false;
};

Task<void> abort_waiters(Aborted* out, oneshot::Sender<int>* keep_a, oneshot::Sender<int>* keep_b) {
  auto a = oneshot::channel<int>();
  *keep_a = std::move(a.first);
  JoinHandle<void> awaited = spawn_here(wait_forever(std::move(a.second)));
  co_await volt::yield_now();
  awaited.abort();
  try {
    co_await awaited;
  } catch (const Error& e) {
    out->awaited = e.code();
  }
  auto b = oneshot::channel<int>();
  *keep_b = std::move(b.first);
  JoinHandle<void> dropped = spawn_here(wait_forever(std::move(b.second)));
  dropped.abort();
  const std::function<bool()> finished = [&dropped] { return dropped.is_finished(); };
  out->dropped_finished = co_await yield_until(&finished);
  drop_here(dropped);
}

TEST_P(UnhandledExceptionTest, AbortedAndShutDownTasksAreNotReported) {
  Recorder rec;
  Aborted out;
  oneshot::Sender<int> keep_a, keep_b, keep_c;
  {
    Runtime rt = make_runtime_with(GetParam(), rec);
    rt.block_on(abort_waiters(&out, &keep_a, &keep_b));
    // Detached and still waiting when the runtime shuts down.
    auto c = oneshot::channel<int>();
    keep_c = std::move(c.first);
    (void)rt.spawn(wait_forever(std::move(c.second)));
  }
  EXPECT_EQ(out.awaited, code(errc::cancelled));
  EXPECT_TRUE(out.dropped_finished);
  EXPECT_EQ(rec.count(), 0u);
}

TEST_P(UnhandledExceptionTest, AbortAfterTheTaskThrewStillReportsItAtTheDrop) {
  Recorder rec;
  Runtime rt = make_runtime_with(GetParam(), rec);
  JoinHandle<void> h = rt.block_on(run_until_finished(fail_now("too late to abort")));
  h.abort();  // finished: changes nothing
  EXPECT_EQ(rec.count(), 0u);
  const std::uint64_t id = h.id();
  h = JoinHandle<void>();
  std::vector<Report> reports = rec.reports();
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_EQ(reports[0].id, id);
  EXPECT_EQ(reports[0].what, "too late to abort");
}

// ---- 5. spawn_blocking ----

TEST_P(UnhandledExceptionTest, BlockingFunctionsAreReportedBothWays) {
  Recorder rec;
  Runtime rt = make_runtime_with(GetParam(), rec);
  // Dropped first: reported on the blocking thread when the function throws.
  Gate gate;
  JoinHandle<void> first = rt.spawn_blocking([&gate] {
    gate.wait();
    throw std::runtime_error("blocking late");
  });
  const std::uint64_t first_id = first.id();
  first = JoinHandle<void>();
  EXPECT_EQ(rec.count(), 0u);
  gate.open();
  ASSERT_TRUE(wait_until([&] { return rec.count() >= 1; }));
  // Threw first: reported by the drop, on this thread.
  JoinHandle<int> second =
      rt.spawn_blocking([]() -> int { throw std::runtime_error("blocking early"); });
  const std::uint64_t second_id = second.id();
  ASSERT_TRUE(wait_until([&] { return second.is_finished(); }));
  EXPECT_EQ(rec.count(), 1u);
  second = JoinHandle<int>();
  ASSERT_EQ(rec.count(), 2u);
  // Joined: rethrown, not reported.
  JoinHandle<void> joined = rt.spawn_blocking([] { throw std::runtime_error("blocking joined"); });
  EXPECT_THROW(joined.join(), std::runtime_error);

  std::vector<Report> reports = rec.reports();
  ASSERT_EQ(reports.size(), 2u);
  EXPECT_EQ(reports[0].id, first_id);
  EXPECT_EQ(reports[0].what, "blocking late");
  EXPECT_TRUE(reports[0].blocking);
  EXPECT_NE(reports[0].thread, std::this_thread::get_id());
  EXPECT_EQ(reports[1].id, second_id);
  EXPECT_EQ(reports[1].what, "blocking early");
  EXPECT_TRUE(reports[1].blocking);
  EXPECT_EQ(reports[1].thread, std::this_thread::get_id());
}

// ---- 6. many at once: each exactly once ----

struct Many {
  std::vector<std::uint64_t> ids;
  bool all_reported = false;
};

Task<void> spawn_many_detached(Recorder* rec, Many* out, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i)
    out->ids.push_back(spawn_detached(fail_now("many " + std::to_string(i))));
  const std::function<bool()> all = [rec, n] { return rec->count() >= n; };
  out->all_reported = co_await yield_until(&all);
}

TEST_P(UnhandledExceptionTest, ConcurrentDetachedFailuresAreEachReportedOnce) {
  const std::size_t n = scale(500);
  Recorder rec;
  Many out;
  {
    Runtime rt = make_runtime_with(GetParam(), rec);
    rt.block_on(spawn_many_detached(&rec, &out, n));
  }
  ASSERT_TRUE(out.all_reported);
  std::vector<Report> reports = rec.reports();
  ASSERT_EQ(reports.size(), n);
  std::vector<std::uint64_t> reported;
  for (const Report& r : reports)
    reported.push_back(r.id);
  std::sort(reported.begin(), reported.end());
  std::sort(out.ids.begin(), out.ids.end());
  EXPECT_EQ(reported, out.ids);
}

// ---- 7. no hook: one line on stderr ----

Task<void> detach_and_wait_until_ran(std::atomic<bool>* ran, std::uint64_t* id) {
  *id = spawn_detached(flag_then_fail(ran, "printed late"));
  const std::function<bool()> has_run = [ran] { return ran->load(); };
  bool ok = co_await yield_until(&has_run);
  EXPECT_TRUE(ok);
}

std::string line_for(const char* kind, std::uint64_t id, const std::string& what) {
  return std::string("volt: unhandled exception in detached ") + kind + " " + std::to_string(id) +
         ": " + what + "\n";
}

TEST_P(UnhandledExceptionTest, WithoutAHookEachExceptionIsPrintedToStderr) {
  std::uint64_t late_id = 0, early_id = 0, int_id = 0, blocking_id = 0;
  ::testing::internal::CaptureStderr();
  {
    Runtime rt = make_runtime(GetParam());
    // Dropped first. Once it ran, the poll that threw ends before the
    // runtime's destructor returns (workers finish their poll; the
    // current-thread flavour finished it before block_on's task resumed).
    std::atomic<bool> ran{false};
    rt.block_on(detach_and_wait_until_ran(&ran, &late_id));
    // Threw first.
    JoinHandle<void> early = rt.block_on(run_until_finished(fail_now("printed early")));
    early_id = early.id();
    early = JoinHandle<void>();
    // Not a std::exception.
    JoinHandle<void> odd = rt.block_on(run_until_finished(throw_int()));
    int_id = odd.id();
    odd = JoinHandle<void>();
    // A blocking function.
    JoinHandle<void> blocking =
        rt.spawn_blocking([] { throw std::runtime_error("printed blocking"); });
    blocking_id = blocking.id();
    EXPECT_TRUE(wait_until([&] { return blocking.is_finished(); }));
    blocking = JoinHandle<void>();
  }
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find(line_for("task", late_id, "printed late")), std::string::npos) << err;
  EXPECT_NE(err.find(line_for("task", early_id, "printed early")), std::string::npos) << err;
  EXPECT_NE(err.find(line_for("task", int_id, "unknown exception")), std::string::npos) << err;
  EXPECT_NE(err.find(line_for("spawn_blocking task", blocking_id, "printed blocking")),
            std::string::npos)
      << err;
}

// ---- 8. a hook that throws ----

TEST_P(UnhandledExceptionTest, AHookThatThrowsIsCaughtAndPrinted) {
  std::atomic<int> calls{0};
  std::uint64_t late_id = 0, early_id = 0;
  ::testing::internal::CaptureStderr();
  {
    Runtime rt = make_builder(GetParam())
                     .on_unhandled_exception([&calls](const UnhandledException&) {
                       calls.fetch_add(1);
                       throw std::logic_error("hook failed");
                     })
                     .build();
    // On a worker (or the block_on thread) ...
    std::atomic<bool> ran{false};
    rt.block_on(detach_and_wait_until_ran(&ran, &late_id));
    // ... and in a JoinHandle's destructor.
    JoinHandle<void> early = rt.block_on(run_until_finished(fail_now("hook early")));
    early_id = early.id();
    early = JoinHandle<void>();
    // The runtime carries on.
    EXPECT_EQ(rt.block_on(square(6)), 36);
  }
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(calls.load(), 2);
  const std::string prefix =
      "volt: the on_unhandled_exception hook threw (hook failed) while reporting detached task ";
  EXPECT_NE(err.find(prefix + std::to_string(late_id) + ": printed late\n"), std::string::npos)
      << err;
  EXPECT_NE(err.find(prefix + std::to_string(early_id) + ": hook early\n"), std::string::npos)
      << err;
}

}  // namespace
}  // namespace volt::test
