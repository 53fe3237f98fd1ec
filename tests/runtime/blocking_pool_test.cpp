// Integration tests of the blocking pool (volt::spawn_blocking,
// Handle/Runtime::spawn_blocking; src/runtime/blocking/blocking_pool.cpp).
//
// The contract under test (volt/task/spawn_blocking.hpp, runtime.hpp):
//  - the function's result, or its exception, comes back through the
//    JoinHandle, awaited from a task or joined from a plain thread;
//  - threads are made on demand up to Builder::max_blocking_threads, beyond
//    that work waits in FIFO order; idle threads leave after
//    Builder::thread_keep_alive and are reused before that;
//  - abort() cancels work that has not started and never interrupts work
//    that has;
//  - inside the function Handle::current(), volt::spawn() and blocking
//    (join, block_on) work;
//  - shutdown cancels queued work (errc::runtime_shutdown), waits for running
//    work within the shutdown bound, then leaves it to finish in the
//    background; spawning afterwards is refused;
//  - threads are named after the runtime and run its thread hooks;
//  - a paused clock does not auto-advance while blocking work is in flight.
//
// Blocking functions wait on Gates (blocking_support.hpp) that give up after
// kNotHung, and waits on the test side are bounded, so a bug shows up as a
// failed expectation rather than a hung binary.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "blocking_support.hpp"
#include "runtime_support.hpp"

namespace volt::test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

class BlockingPoolTest : public ::testing::TestWithParam<Flavour> {};

INSTANTIATE_TEST_SUITE_P(Flavours, BlockingPoolTest,
                         ::testing::Values(kMultiThread1, kMultiThread2, kCurrentThread),
                         FlavourName());

// ---- coroutines the tests run on the runtime ----

Task<int> await_blocking_int(int x) {
  JoinHandle<int> h = volt::spawn_blocking([x] { return x * 10; });
  int v = co_await h;
  co_return v;
}

Task<std::string> await_blocking_string(Handle handle) {
  JoinHandle<std::string> h = handle.spawn_blocking([] { return std::string(100, 'x') + "end"; });
  std::string s = co_await h;
  co_return s;
}

Task<int> await_void_blocking(int* written) {
  JoinHandle<void> h = volt::spawn_blocking([written] { *written = 77; });
  co_await h;
  int v = *written;  // the function's write happened before the await returned
  co_return v;
}

Task<int> await_move_only(LifeCounters* counters) {
  auto owned = std::make_unique<int>(5);
  Tracked probe(*counters, 3);
  JoinHandle<std::unique_ptr<int>> h =
      volt::spawn_blocking([owned = std::move(owned), probe = std::move(probe)]() mutable {
        *owned += probe.value();
        return std::move(owned);
      });
  std::unique_ptr<int> result = co_await h;
  int v = result ? *result : -1;
  co_return v;
}

// The message of the std::runtime_error the awaited function throws; "" if
// it returned.
Task<std::string> await_throwing() {
  JoinHandle<int> h = volt::spawn_blocking([]() -> int { throw std::runtime_error("boom-await"); });
  std::string what;
  try {
    int v = co_await h;
    (void)v;
  } catch (const std::runtime_error& e) {
    what = e.what();
  }
  co_return what;
}

// The error code awaiting `h` throws as volt::Error; empty if it returns.
template <class T>
Task<std::error_code> await_error(JoinHandle<T> h) {
  std::error_code ec;
  try {
    if constexpr (std::is_void_v<T>) {
      co_await h;
    } else {
      T v = co_await h;
      (void)v;
    }
  } catch (const Error& e) {
    ec = e.code();
  }
  co_return ec;
}

template <class T>
Task<T> await_value(JoinHandle<T> h) {
  T v = co_await h;
  co_return v;
}

Task<void> noop() {
  co_return;
}

// ---- 1. results ----

TEST_P(BlockingPoolTest, ValueIsDeliveredToAnAwaitingTask) {
  Runtime rt = make_runtime(GetParam());
  EXPECT_EQ(rt.block_on(await_blocking_int(4)), 40);
  EXPECT_EQ(rt.block_on(await_blocking_string(rt.handle())), std::string(100, 'x') + "end");
  // Awaiting a handle made outside the runtime, from a task.
  JoinHandle<int> outside = rt.spawn_blocking([] { return 123; });
  EXPECT_EQ(rt.block_on(await_value(std::move(outside))), 123);
}

TEST_P(BlockingPoolTest, ValueIsDeliveredToJoiningPlainThreads) {
  Runtime rt = make_runtime(GetParam());
  EXPECT_EQ(rt.spawn_blocking([] { return 6; }).join(), 6);

  // From other threads, through a Handle, each joining its own work.
  Handle handle = rt.handle();
  std::vector<int> results(4, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back(
        [&, t] { results[t] = handle.spawn_blocking([t] { return t + 100; }).join(); });
  }
  for (auto& t : threads)
    t.join();
  for (int t = 0; t < 4; ++t)
    EXPECT_EQ(results[t], t + 100);
}

TEST_P(BlockingPoolTest, VoidFunctionsFinishBeforeTheirHandleCompletes) {
  Runtime rt = make_runtime(GetParam());
  // Plain ints: the handle's completion must order the function's writes
  // before the reader (ThreadSanitizer checks it).
  int written_by_join = 0;
  JoinHandle<void> h = rt.spawn_blocking([&] { written_by_join = 55; });
  h.join();
  EXPECT_EQ(written_by_join, 55);
  EXPECT_FALSE(h.valid());

  int written_by_await = 0;
  EXPECT_EQ(rt.block_on(await_void_blocking(&written_by_await)), 77);
}

TEST_P(BlockingPoolTest, MoveOnlyFunctionsAndResults) {
  LifeCounters counters;
  {
    Runtime rt = make_runtime(GetParam());
    EXPECT_EQ(rt.block_on(await_move_only(&counters)), 8);

    auto owned = std::make_unique<std::string>("moved");
    JoinHandle<std::unique_ptr<std::string>> h =
        rt.spawn_blocking([owned = std::move(owned), probe = Tracked(counters, 1)]() mutable {
          *owned += "!";
          return std::move(owned);
        });
    std::unique_ptr<std::string> s = h.join();
    ASSERT_TRUE(s);
    EXPECT_EQ(*s, "moved!");
    // The function object (and what it captured) is destroyed once the work
    // completed, before the handle reports it.
    EXPECT_EQ(counters.live(), 0);
  }
  EXPECT_EQ(counters.live(), 0);
  EXPECT_EQ(counters.double_destroyed.load(), 0);
}

TEST_P(BlockingPoolTest, ExceptionIsRethrownFromAwaitAndJoin) {
  Runtime rt = make_runtime(GetParam());
  EXPECT_EQ(rt.block_on(await_throwing()), "boom-await");

  JoinHandle<int> h = rt.spawn_blocking([]() -> int { throw std::runtime_error("boom-join"); });
  try {
    (void)h.join();
    ADD_FAILURE() << "join() returned instead of rethrowing";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "boom-join");
  }
  // A volt::Error thrown by the function comes back unchanged too.
  JoinHandle<void> v = rt.spawn_blocking([] { throw Error(errc::invalid_argument, "mine"); });
  EXPECT_EQ(volt_error_of([&] { v.join(); }), code(errc::invalid_argument));
  // The pool survives throwing functions.
  EXPECT_EQ(rt.spawn_blocking([] { return 1; }).join(), 1);
}

// ---- 2. growth to the limit, FIFO beyond it ----

TEST_P(BlockingPoolTest, GrowsToMaxBlockingThreadsThenQueues) {
  constexpr int kMax = 4;
  constexpr int kJobs = 8;
  Gate gate;
  ConcurrencyMeter meter;
  Runtime rt = make_builder(GetParam()).max_blocking_threads(kMax).build();

  std::vector<JoinHandle<int>> handles;
  for (int i = 0; i < kJobs; ++i) {
    handles.push_back(rt.spawn_blocking([&, i] {
      meter.enter();
      const bool opened = gate.wait();
      meter.exit();
      return opened ? i : -1;
    }));
  }
  EXPECT_TRUE(wait_until([&] {
    RuntimeStats s = rt.stats();
    return meter.running() == kMax && s.blocking_threads == kMax &&
           s.blocking_queue_depth == kJobs - kMax;
  })) << "running "
      << meter.running() << ", threads " << rt.stats().blocking_threads << ", queued "
      << rt.stats().blocking_queue_depth;
  // Stays there: no fifth thread, nothing more starts.
  std::this_thread::sleep_for(50ms);
  RuntimeStats s = rt.stats();
  EXPECT_EQ(s.blocking_threads, static_cast<std::uint64_t>(kMax));
  EXPECT_EQ(s.idle_blocking_threads, 0u);
  EXPECT_EQ(s.blocking_queue_depth, static_cast<std::uint64_t>(kJobs - kMax));
  EXPECT_EQ(meter.entered(), kMax);

  gate.open();
  for (int i = 0; i < kJobs; ++i)
    EXPECT_EQ(handles[i].join(), i);
  EXPECT_EQ(meter.max(), kMax);
  EXPECT_EQ(meter.entered(), kJobs);
  s = rt.stats();
  EXPECT_LE(s.blocking_threads, static_cast<std::uint64_t>(kMax));
  EXPECT_EQ(s.blocking_queue_depth, 0u);
}

TEST_P(BlockingPoolTest, QueuedWorkStartsInFifoOrder) {
  constexpr int kQueued = 20;
  Gate gate;
  std::atomic<bool> first_running{false};
  std::mutex m;
  std::vector<int> order;  // guarded by m
  Runtime rt = make_builder(GetParam()).max_blocking_threads(1).build();

  JoinHandle<void> first = rt.spawn_blocking([&] {
    first_running = true;
    gate.wait();
  });
  ASSERT_TRUE(wait_until([&] { return first_running.load(); }));
  std::vector<JoinHandle<void>> queued;
  for (int i = 0; i < kQueued; ++i) {
    queued.push_back(rt.spawn_blocking([&, i] {
      std::lock_guard lock(m);
      order.push_back(i);
    }));
  }
  EXPECT_EQ(rt.stats().blocking_queue_depth, static_cast<std::uint64_t>(kQueued));
  gate.open();
  first.join();
  for (auto& h : queued)
    h.join();
  std::lock_guard lock(m);
  ASSERT_EQ(order.size(), static_cast<std::size_t>(kQueued));
  for (int i = 0; i < kQueued; ++i)
    EXPECT_EQ(order[i], i);
}

// ---- 3. keep-alive ----

TEST_P(BlockingPoolTest, IdleThreadsLeaveAfterTheKeepAlive) {
  constexpr int kThreads = 3;
  Gate gate;
  ConcurrencyMeter meter;
  Runtime rt = make_builder(GetParam()).thread_keep_alive(50ms).build();

  std::vector<JoinHandle<int>> handles;
  for (int i = 0; i < kThreads; ++i) {
    handles.push_back(rt.spawn_blocking([&, i] {
      meter.enter();
      gate.wait();
      meter.exit();
      return i;
    }));
  }
  ASSERT_TRUE(wait_until([&] { return meter.running() == kThreads; }));
  EXPECT_EQ(rt.stats().blocking_threads, static_cast<std::uint64_t>(kThreads));
  gate.open();
  for (int i = 0; i < kThreads; ++i)
    EXPECT_EQ(handles[i].join(), i);

  EXPECT_TRUE(wait_until([&] { return rt.stats().blocking_threads == 0; }, 5s))
      << "threads " << rt.stats().blocking_threads << ", idle " << rt.stats().idle_blocking_threads;
  EXPECT_EQ(rt.stats().idle_blocking_threads, 0u);

  // The pool starts threads again afterwards.
  EXPECT_EQ(rt.spawn_blocking([] { return 9; }).join(), 9);
  EXPECT_TRUE(wait_until([&] { return rt.stats().blocking_threads == 0; }, 5s));
}

TEST_P(BlockingPoolTest, IdleThreadStaysForTheDefaultKeepAlive) {
  Runtime rt = make_runtime(GetParam());
  EXPECT_EQ(rt.spawn_blocking([] { return 1; }).join(), 1);
  EXPECT_TRUE(wait_until([&] {
    RuntimeStats s = rt.stats();
    return s.blocking_threads == 1 && s.idle_blocking_threads == 1;
  }));
  // Far below the 10 s default: it must still be there, idle.
  std::this_thread::sleep_for(300ms);
  RuntimeStats s = rt.stats();
  EXPECT_EQ(s.blocking_threads, 1u);
  EXPECT_EQ(s.idle_blocking_threads, 1u);
  EXPECT_EQ(s.blocking_queue_depth, 0u);
}

TEST_P(BlockingPoolTest, ZeroKeepAliveStillRunsEveryJob) {
  Runtime rt = make_builder(GetParam()).thread_keep_alive(0ns).build();
  for (int i = 0; i < 50; ++i)
    ASSERT_EQ(rt.spawn_blocking([i] { return i; }).join(), i);
  EXPECT_TRUE(wait_until([&] { return rt.stats().blocking_threads == 0; }, 5s));
}

// ---- 4. reuse ----

TEST_P(BlockingPoolTest, SequentialJobsReuseTheIdleThread) {
  constexpr int kJobs = 100;
  Runtime rt = make_runtime(GetParam());
  std::set<std::thread::id> ran_on;
  for (int i = 0; i < kJobs; ++i) {
    // Once the previous job's thread is idle, the next job must claim it
    // rather than start another.
    if (i > 0) {
      ASSERT_TRUE(wait_until([&] { return rt.stats().idle_blocking_threads == 1; })) << "job " << i;
    }
    std::thread::id id = rt.spawn_blocking([] { return std::this_thread::get_id(); }).join();
    ran_on.insert(id);
    ASSERT_EQ(rt.stats().blocking_threads, 1u) << "job " << i;
  }
  EXPECT_EQ(ran_on.size(), 1u);
}

// A task that runs blocking jobs one after another, as fs::write in a loop
// does: each job is queued just after the previous one finished, while its
// thread spins for the next (blocking_pool.hpp). Returns how many ran off
// the task's own thread.
Task<int> back_to_back_jobs(int jobs) {
  int elsewhere = 0;
  const std::thread::id self = std::this_thread::get_id();
  for (int i = 0; i < jobs; ++i) {
    JoinHandle<std::thread::id> h = volt::spawn_blocking([] { return std::this_thread::get_id(); });
    const std::thread::id ran_on = co_await h;
    if (ran_on != self) ++elsewhere;
  }
  co_return elsewhere;
}

TEST_P(BlockingPoolTest, BackToBackJobsFromATaskRunOnOneThread) {
  // Each job is queued the moment the one before completes, so it meets its
  // thread spinning (spinning_), asleep (claimed), or still completing the
  // job before (finishing_): never busy, so the pool never needs a second
  // thread. Without finishing_ a loaded machine showed why it matters: the
  // completion's wake-up preempted the thread inside its poll, and a spawn
  // that found nobody idle started another each time (17 threads for these
  // 500 jobs under ctest -j2).
  Runtime rt = make_runtime(GetParam());
  EXPECT_EQ(rt.block_on(back_to_back_jobs(500)), 500);
  EXPECT_EQ(rt.stats().blocking_threads, 1u);
  EXPECT_TRUE(wait_until([&] {
    const RuntimeStats st = rt.stats();
    return st.blocking_threads >= 1 && st.idle_blocking_threads == st.blocking_threads &&
           st.blocking_queue_depth == 0;
  }));
}

Task<int> count_jobs(int jobs, std::atomic<int>* ran) {
  int done = 0;
  for (int i = 0; i < jobs; ++i) {
    co_await volt::spawn_blocking([ran] { ran->fetch_add(1); });
    ++done;
  }
  co_return done;
}

Task<int> spawners_on_one_thread(int spawners, int jobs, std::atomic<int>* ran) {
  std::vector<JoinHandle<int>> handles;
  for (int i = 0; i < spawners; ++i)
    handles.push_back(volt::spawn(count_jobs(jobs, ran)));
  int done = 0;
  for (JoinHandle<int>& h : handles)
    done += co_await h;
  co_return done;
}

Task<Expected<int>> within_not_hung(Task<int> task) {
  Expected<int> r = co_await volt::timeout(kNotHung, std::move(task));
  co_return r;
}

TEST_P(BlockingPoolTest, JobsQueuedWhileTheOnlyThreadSpinsAllRun) {
  // One thread at most: the first job queued while it spins counts on it,
  // the rest wait in the queue (no thread may start); it must run them all.
  constexpr int kSpawners = 8;
  constexpr int kJobs = 200;
  Runtime rt = make_builder(GetParam()).max_blocking_threads(1).build();
  std::atomic<int> ran{0};
  // Bounded: a job nobody runs would leave its spawner waiting.
  Expected<int> done = rt.block_on(within_not_hung(spawners_on_one_thread(kSpawners, kJobs, &ran)));
  ASSERT_TRUE(done) << "a job was not run: " << ran.load() << " of " << kSpawners * kJobs;
  EXPECT_EQ(*done, kSpawners * kJobs);
  EXPECT_EQ(ran.load(), kSpawners * kJobs);
  EXPECT_EQ(rt.stats().blocking_threads, 1u);
  EXPECT_EQ(rt.stats().blocking_queue_depth, 0u);
}

// ---- 5. shutdown with work in flight ----

TEST_P(BlockingPoolTest, RuntimeDestructorWaitsForRunningWork) {
  Gate gate;
  std::atomic<bool> started{false};
  std::atomic<bool> finished{false};
  std::optional<Runtime> rt(make_runtime(GetParam()));
  JoinHandle<int> h = rt->spawn_blocking([&] {
    started = true;
    gate.wait();
    std::this_thread::sleep_for(20ms);  // still running well after the release
    finished = true;
    return 31;
  });
  ASSERT_TRUE(wait_until([&] { return started.load(); }));
  std::thread releaser([&] {
    std::this_thread::sleep_for(100ms);
    gate.open();
  });
  rt.reset();
  EXPECT_TRUE(finished.load()) << "the runtime destructor returned while blocking work ran";
  releaser.join();
  // It finished normally, so its handle has the value.
  EXPECT_TRUE(h.is_finished());
  EXPECT_EQ(h.join(), 31);
}

TEST_P(BlockingPoolTest, QueuedWorkIsCancelledAtShutdown) {
  LifeCounters counters;
  Gate gate;
  std::atomic<bool> started{false};
  std::atomic<int> queued_ran{0};
  std::optional<Runtime> rt(make_builder(GetParam()).max_blocking_threads(1).build());
  JoinHandle<int> running = rt->spawn_blocking([&] {
    started = true;
    gate.wait();
    return 1;
  });
  ASSERT_TRUE(wait_until([&] { return started.load(); }));
  JoinHandle<int> queued = rt->spawn_blocking([&, probe = Tracked(counters, 2)] {
    queued_ran.fetch_add(1);
    return probe.value();
  });
  EXPECT_EQ(rt->stats().blocking_queue_depth, 1u);

  // Releases the running function only once shutdown cancelled the queued
  // one, so the pool's only thread never gets the chance to start it.
  JoinHandle<int>* queued_ptr = &queued;
  std::thread releaser([&] {
    wait_until([&] { return queued_ptr->is_finished(); });
    gate.open();
  });
  rt.reset();
  releaser.join();
  EXPECT_EQ(running.join(), 1);
  EXPECT_EQ(volt_error_of([&] { (void)queued.join(); }), code(errc::runtime_shutdown));
  EXPECT_EQ(queued_ran.load(), 0);
  EXPECT_EQ(counters.live(), 0);
  EXPECT_EQ(counters.double_destroyed.load(), 0);
}

// Set by blocking functions, read by on_thread_stop hooks: tells a blocking
// thread's hook from a worker's.
thread_local bool tl_on_blocking_thread = false;

TEST_P(BlockingPoolTest, ShutdownTimeoutLeavesStuckWorkToFinishInTheBackground) {
  std::atomic<bool> started{false};
  std::atomic<bool> finished{false};
  // Blocking threads' stop hooks run. The hooks may run after this test
  // returns (a worker that shutdown_timeout gave up on): they keep the
  // counter alive themselves.
  auto blocking_stops = std::make_shared<std::atomic<int>>(0);
  std::optional<Runtime> rt(make_builder(GetParam())
                                .on_thread_stop([blocking_stops] {
                                  if (tl_on_blocking_thread) blocking_stops->fetch_add(1);
                                })
                                .build());
  Handle kept = rt->handle();
  JoinHandle<int> h = rt->spawn_blocking([&] {
    tl_on_blocking_thread = true;
    started = true;
    std::this_thread::sleep_for(1s);
    finished = true;
    return 17;
  });
  ASSERT_TRUE(wait_until([&] { return started.load(); }));

  const auto t0 = Clock::now();
  rt->shutdown_timeout(50ms);
  const auto in_shutdown = Clock::now() - t0;
  rt.reset();  // already shut down: returns at once too
  const auto elapsed = Clock::now() - t0;
  EXPECT_LT(in_shutdown, 900ms);
  EXPECT_LT(elapsed, 900ms) << "the destructor waited for work shutdown_timeout gave up on";
  if (elapsed < 900ms) {
    EXPECT_FALSE(finished.load());
  }

  EXPECT_TRUE(wait_until([&] { return finished.load(); }));
  EXPECT_EQ(h.join(), 17);
  // The blocking thread exits on its own, running the stop hook, without
  // crashing. It leaves the pool's count (under the pool's lock, so a spawn
  // meanwhile starts a new thread) before it runs the hook: wait for both.
  // Workers' hooks (run at shutdown) are not counted.
  EXPECT_TRUE(wait_until([&] {
    return kept.stats().blocking_threads == 0 && blocking_stops->load() == 1;
  })) << "threads "
      << kept.stats().blocking_threads << ", blocking threads' stop hooks run "
      << blocking_stops->load();
}

// Work left running by shutdown_timeout, after its Runtime is gone: the
// runtime is no longer reachable, and nothing it spawns runs.
TEST_P(BlockingPoolTest, WorkThatOutlivesItsRuntimeSeesItShutDown) {
  Gate gate;
  std::atomic<bool> started{false};
  std::atomic<bool> done{false};
  std::atomic<int> spawned_ran{0};
  LifeCounters frames;
  std::error_code current_ec, spawn_ec, blocking_ec;
  std::optional<Runtime> rt(make_runtime(GetParam()));
  JoinHandle<void> h = rt->spawn_blocking([&] {
    started = true;
    gate.wait();
    current_ec = volt_error_of([] { (void)Handle::current(); });
    JoinHandle<int> t = volt::spawn(probe_body(Tracked(frames, 0), &spawned_ran));
    spawn_ec = volt_error_of([&] { (void)t.join(); });
    JoinHandle<int> b = volt::spawn_blocking([&] { return spawned_ran.fetch_add(1); });
    blocking_ec = volt_error_of([&] { (void)b.join(); });
    done = true;
  });
  ASSERT_TRUE(wait_until([&] { return started.load(); }));
  rt->shutdown_timeout(10ms);
  rt.reset();  // the last owner is gone; the thread keeps the core alive
  gate.open();
  ASSERT_TRUE(wait_until([&] { return done.load(); }));
  h.join();
  EXPECT_EQ(current_ec, code(errc::runtime_shutdown));
  EXPECT_EQ(spawn_ec, code(errc::runtime_shutdown));
  EXPECT_EQ(blocking_ec, code(errc::runtime_shutdown));
  EXPECT_EQ(spawned_ran.load(), 0);
  EXPECT_EQ(frames.live(), 0);
}

// ---- 6. refused spawns and configuration errors ----

TEST_P(BlockingPoolTest, SpawnBlockingAfterShutdownIsRefused) {
  LifeCounters counters;
  std::atomic<int> ran{0};
  std::optional<Handle> kept;
  {
    Runtime rt = make_runtime(GetParam());
    EXPECT_EQ(rt.spawn_blocking([] { return 1; }).join(), 1);
    kept = rt.handle();
    rt.shutdown_timeout(1s);
    JoinHandle<int> h = rt.spawn_blocking([&, probe = Tracked(counters, 1)] {
      ran.fetch_add(1);
      return probe.value();
    });
    // Refused synchronously: complete, the function already destroyed.
    EXPECT_TRUE(h.is_finished());
    EXPECT_EQ(counters.live(), 0);
    EXPECT_EQ(volt_error_of([&] { (void)h.join(); }), code(errc::runtime_shutdown));
  }
  // Through a Handle that outlived the runtime.
  JoinHandle<int> h = kept->spawn_blocking([&, probe = Tracked(counters, 2)] {
    ran.fetch_add(1);
    return probe.value();
  });
  EXPECT_TRUE(h.is_finished());
  EXPECT_EQ(volt_error_of([&] { (void)h.join(); }), code(errc::runtime_shutdown));
  std::this_thread::sleep_for(20ms);
  EXPECT_EQ(ran.load(), 0);
  EXPECT_EQ(counters.live(), 0);
  EXPECT_EQ(counters.double_destroyed.load(), 0);
}

TEST(BlockingPoolConfigTest, SpawnBlockingOutsideARuntimeThrowsNoRuntime) {
  LifeCounters counters;
  std::atomic<int> ran{0};
  EXPECT_EQ(volt_error_of([&] {
              (void)volt::spawn_blocking([&, probe = Tracked(counters, 1)] {
                ran.fetch_add(1);
                return probe.value();
              });
            }),
            code(errc::no_runtime));
  // Also from a thread that merely holds a runtime (it does not enter it).
  Runtime rt = Runtime::Builder().worker_threads(1).build();
  EXPECT_EQ(volt_error_of([&] { (void)volt::spawn_blocking([] { return 0; }); }),
            code(errc::no_runtime));
  EXPECT_EQ(ran.load(), 0);
  EXPECT_EQ(counters.live(), 0);
}

TEST(BlockingPoolConfigTest, BuilderRejectsZeroThreadsAndNegativeKeepAlive) {
  EXPECT_EQ(volt_error_of([] { (void)Runtime::Builder().max_blocking_threads(0).build(); }),
            code(errc::invalid_argument));
  EXPECT_EQ(volt_error_of(
                [] { (void)Runtime::Builder::current_thread().max_blocking_threads(0).build(); }),
            code(errc::invalid_argument));
  EXPECT_EQ(volt_error_of([] { (void)Runtime::Builder().thread_keep_alive(-1ns).build(); }),
            code(errc::invalid_argument));
  EXPECT_EQ(volt_error_of(
                [] { (void)Runtime::Builder::current_thread().thread_keep_alive(-5s).build(); }),
            code(errc::invalid_argument));
  // The edges that are allowed.
  EXPECT_EQ(volt_error_of([] {
              Runtime rt = Runtime::Builder()
                               .worker_threads(1)
                               .max_blocking_threads(1)
                               .thread_keep_alive(0ns)
                               .build();
              EXPECT_EQ(rt.spawn_blocking([] { return 2; }).join(), 2);
            }),
            std::error_code());
}

// ---- 7. abort ----

TEST_P(BlockingPoolTest, AbortOfQueuedWorkCancelsItWithoutRunningIt) {
  LifeCounters counters;
  Gate gate;
  std::atomic<bool> started{false};
  std::atomic<int> ran{0};
  Runtime rt = make_builder(GetParam()).max_blocking_threads(1).build();
  JoinHandle<int> running = rt.spawn_blocking([&] {
    started = true;
    gate.wait();
    return 1;
  });
  ASSERT_TRUE(wait_until([&] { return started.load(); }));
  auto queued_fn = [&](int v) {
    return [&ran, v, probe = Tracked(counters, v)] {
      ran.fetch_add(1);
      return v + probe.value();
    };
  };
  JoinHandle<int> joined = rt.spawn_blocking(queued_fn(2));
  JoinHandle<int> awaited = rt.spawn_blocking(queued_fn(3));
  JoinHandle<int> kept = rt.spawn_blocking(queued_fn(4));
  EXPECT_EQ(rt.stats().blocking_queue_depth, 3u);
  joined.abort();
  awaited.abort();
  gate.open();

  EXPECT_EQ(running.join(), 1);
  EXPECT_EQ(volt_error_of([&] { (void)joined.join(); }), code(errc::cancelled));
  EXPECT_EQ(rt.block_on(await_error(std::move(awaited))), code(errc::cancelled));
  EXPECT_EQ(kept.join(), 8);  // the one not aborted still runs
  EXPECT_EQ(ran.load(), 1);
  EXPECT_EQ(counters.live(), 0);
  EXPECT_EQ(counters.double_destroyed.load(), 0);
}

TEST_P(BlockingPoolTest, AbortOfRunningWorkDoesNotInterruptIt) {
  Runtime rt = make_runtime(GetParam());
  for (bool by_await : {false, true}) {
    SCOPED_TRACE(by_await ? "co_await" : "join");
    Gate gate;
    std::atomic<bool> started{false};
    std::atomic<bool> finished{false};
    JoinHandle<int> h = rt.spawn_blocking([&] {
      started = true;
      gate.wait();
      finished = true;
      return 99;
    });
    ASSERT_TRUE(wait_until([&] { return started.load(); }));
    h.abort();
    h.abort();  // idempotent
    std::this_thread::sleep_for(20ms);
    EXPECT_FALSE(h.is_finished());
    EXPECT_FALSE(finished.load());
    gate.open();
    const int v = by_await ? rt.block_on(await_value(std::move(h))) : h.join();
    EXPECT_EQ(v, 99);
    EXPECT_TRUE(finished.load());
  }
  // Aborting finished work does nothing either.
  JoinHandle<int> done = rt.spawn_blocking([] { return 5; });
  ASSERT_TRUE(wait_until([&] { return done.is_finished(); }));
  done.abort();
  EXPECT_EQ(done.join(), 5);
}

// ---- 8. inside the function ----

TEST_P(BlockingPoolTest, InsideTheFunctionTheRuntimeIsReachableAndBlockingIsAllowed) {
  Runtime rt = make_runtime(GetParam());
  const std::uint64_t spawned_before = rt.stats().total_spawned;
  struct Seen {
    int via_current_handle = 0;
    int via_spawn = 0;
    int via_block_on = 0;
    int via_nested_blocking = 0;
    std::error_code error;
  };
  auto body = [] {
    Seen seen;
    seen.error = volt_error_of([&] {
      Handle handle = Handle::current();
      seen.via_current_handle = handle.spawn(square(6)).join();
      JoinHandle<int> spawned = volt::spawn(square(5));
      seen.via_spawn = spawned.join();
      seen.via_block_on = handle.block_on(square(4));
      seen.via_nested_blocking = volt::spawn_blocking([] { return 3; }).join();
    });
    return seen;
  };
  auto check = [&](const Seen& seen) {
    EXPECT_EQ(seen.error, std::error_code()) << seen.error.message();
    EXPECT_EQ(seen.via_current_handle, 36);
    EXPECT_EQ(seen.via_spawn, 25);
    EXPECT_EQ(seen.via_block_on, 16);
    EXPECT_EQ(seen.via_nested_blocking, 3);
  };
  {
    SCOPED_TRACE("joined from the test thread");
    check(rt.spawn_blocking(body).join());
  }
  {
    // While a task awaits it (on the current-thread flavour the test thread
    // holds the runtime's core in block_on meanwhile).
    SCOPED_TRACE("awaited from a task");
    check(rt.block_on(await_value(rt.spawn_blocking(body))));
  }
  // Every spawn went to this runtime: 3 per run, plus the awaiting task.
  EXPECT_EQ(rt.stats().total_spawned - spawned_before, 7u);
}

// ---- 9. thread names and hooks ----

TEST_P(BlockingPoolTest, ThreadsAreNamedAfterTheRuntime) {
  for (std::string name : {std::string("blkpool"), std::string("a-much-too-long-runtime-name")}) {
    Runtime rt = make_builder(GetParam()).thread_name(name).build();
    const std::string seen = rt.spawn_blocking([] { return current_thread_name(); }).join();
    const std::string prefix = name.substr(0, std::min<std::size_t>(name.size(), 15));
    EXPECT_EQ(seen.rfind(prefix, 0), 0u) << "thread '" << seen << "' for runtime '" << name << "'";
    EXPECT_LE(seen.size(), 15u);
  }
}

TEST_P(BlockingPoolTest, ThreadHooksRunOnBlockingThreads) {
  constexpr int kBlocking = 3;
  std::mutex m;
  std::multiset<std::thread::id> starts, stops;  // guarded by m
  Gate gate;
  ConcurrencyMeter meter;
  std::optional<Runtime> rt(make_builder(GetParam())
                                .on_thread_start([&] {
                                  std::lock_guard lock(m);
                                  starts.insert(std::this_thread::get_id());
                                })
                                .on_thread_stop([&] {
                                  std::lock_guard lock(m);
                                  stops.insert(std::this_thread::get_id());
                                })
                                .build());
  std::vector<JoinHandle<std::pair<std::thread::id, bool>>> handles;
  for (int i = 0; i < kBlocking; ++i) {
    handles.push_back(rt->spawn_blocking([&] {
      meter.enter();
      bool started_here;
      {
        std::lock_guard lock(m);
        started_here = starts.count(std::this_thread::get_id()) == 1;
      }
      gate.wait();
      meter.exit();
      return std::pair(std::this_thread::get_id(), started_here);
    }));
  }
  // All at once: three distinct threads.
  ASSERT_TRUE(wait_until([&] { return meter.running() == kBlocking; }));
  gate.open();
  std::set<std::thread::id> blocking_ids;
  for (auto& h : handles) {
    auto [id, started_here] = h.join();
    EXPECT_TRUE(started_here) << "on_thread_start had not run on the thread before the function";
    blocking_ids.insert(id);
  }
  ASSERT_EQ(blocking_ids.size(), static_cast<std::size_t>(kBlocking));
  rt.reset();  // waits for the (idle) blocking threads to exit

  std::lock_guard lock(m);
  for (std::thread::id id : blocking_ids) {
    EXPECT_EQ(starts.count(id), 1u);
    EXPECT_EQ(stops.count(id), 1u) << "on_thread_stop had not run when the destructor returned";
  }
  const std::size_t workers = GetParam().current_thread ? 0 : GetParam().workers;
  EXPECT_EQ(starts.size(), workers + kBlocking);
  EXPECT_EQ(stops.size(), workers + kBlocking);
}

// ---- a thread leaving on keep-alive while work arrives ----

// The only thread (max_blocking_threads(1)) has timed out and is on its way
// out (in its stop hook) when new work is spawned. The work must still run:
// either the leaving thread takes it, or the pool no longer counts it and
// starts another.
TEST_P(BlockingPoolTest, WorkSpawnedWhileTheOnlyThreadLeavesIsNotStranded) {
  Gate hook_release;
  std::atomic<int> blocking_stops{0};
  std::optional<Runtime> rt(make_builder(GetParam())
                                .max_blocking_threads(1)
                                .thread_keep_alive(20ms)
                                .on_thread_stop([&] {
                                  if (!tl_on_blocking_thread) return;
                                  blocking_stops.fetch_add(1);
                                  hook_release.wait();
                                })
                                .build());
  auto mark = [](int v) {
    return [v] {
      tl_on_blocking_thread = true;
      return v;
    };
  };
  EXPECT_EQ(rt->spawn_blocking(mark(1)).join(), 1);
  ASSERT_TRUE(wait_until([&] { return blocking_stops.load() == 1; }));  // timed out, leaving

  JoinHandle<int> h = rt->spawn_blocking(mark(2));
  hook_release.open();
  const bool ran = wait_until([&] { return h.is_finished(); }, 5s);
  EXPECT_TRUE(ran) << "work spawned while the pool's last thread was leaving never started: "
                   << "threads " << rt->stats().blocking_threads << ", queued "
                   << rt->stats().blocking_queue_depth;
  rt.reset();  // if stranded, shutdown cancels it
  if (ran) {
    EXPECT_EQ(h.join(), 2);
  } else {
    EXPECT_EQ(volt_error_of([&] { (void)h.join(); }), code(errc::runtime_shutdown));
  }
}

// ---- paused clock: auto-advance and blocking work ----

Task<bool> sleep_then_read(std::atomic<bool>* flag) {
  co_await volt::sleep(1h);
  bool v = flag->load();
  co_return v;
}

// Awaits blocking work while another task sleeps for an hour of paused time:
// the clock must not jump (firing the sleep) before the work finished.
Task<bool> await_blocking_while_another_sleeps(std::atomic<bool>* done) {
  JoinHandle<bool> sleeper = volt::spawn(sleep_then_read(done));
  JoinHandle<void> work = volt::spawn_blocking([done] {
    std::this_thread::sleep_for(20ms);
    done->store(true);
  });
  co_await work;
  bool v = co_await sleeper;
  co_return v;
}

// Detaches blocking work, then sleeps for an hour of paused time: the clock
// must not jump before the work finished, and must jump once it has.
Task<bool> detach_blocking_then_sleep(std::atomic<bool>* done) {
  {
    JoinHandle<void> detached = volt::spawn_blocking([done] {
      std::this_thread::sleep_for(100ms);
      done->store(true);
    });
  }
  co_await volt::sleep(1h);
  bool v = done->load();
  co_return v;
}

// Runs `task` with block_on on a paused current-thread runtime from another
// thread. If it has not finished after `limit`, records a failure, then
// spawns no-op tasks until it does (each spawn wakes a parked runtime), so
// that a lost wake-up fails the test instead of hanging it.
bool run_paused(Runtime& rt, Task<bool> task, std::chrono::nanoseconds limit) {
  std::atomic<bool> finished{false};
  bool result = false;
  std::thread driver([&] {
    result = rt.block_on(std::move(task));
    finished = true;
  });
  if (!wait_until([&] { return finished.load(); }, limit)) {
    ADD_FAILURE() << "the paused runtime went to sleep for good after blocking work finished "
                     "(a spawn from outside had to wake it)";
    Handle h = rt.handle();
    wait_until([&] {
      (void)h.spawn(noop());
      return finished.load();
    });
  }
  driver.join();
  return result;
}

// Bound for a paused test whose blocking work takes 20-100 ms of real time.
constexpr std::chrono::seconds kPausedNotHung{kSanitized ? 10 : 3};

// The runtime is woken by the work's completion (the awaiting task), but the
// pool counts the work as in flight until just after that wake-up, so the
// runtime may look for a timer to jump to while the count is still 1, and
// then sleep with nothing left to wake it. A race: several rounds.
// A blocking function that drops the last reference to its Runtime shuts it
// down from one of the pool's own threads: shutdown must not wait for that
// thread (it would wait for itself forever).
TEST_P(BlockingPoolTest, BlockingFunctionMayDestroyItsRuntime) {
  auto holder = std::make_shared<std::optional<Runtime>>(make_runtime(GetParam()));
  std::atomic<bool> destroyed{false};
  JoinHandle<int> h = (*holder)->spawn_blocking([holder, &destroyed]() mutable {
    holder->reset();  // the Runtime's destructor runs here, on a pool thread
    destroyed.store(true);
    return 5;
  });
  holder.reset();  // the function's copy is now the only one
  ASSERT_TRUE(wait_until([&] { return destroyed.load(); }, kNotHung))
      << "shutdown from a blocking thread waited for itself";
  EXPECT_EQ(h.join(), 5);
}

TEST(BlockingPoolPausedClockTest, AutoAdvanceWaitsForAwaitedBlockingWork) {
  for (int round = 0; round < 20; ++round) {
    SCOPED_TRACE(round);
    std::atomic<bool> done{false};
    Runtime rt = Runtime::Builder::current_thread().start_paused(true).build();
    EXPECT_TRUE(run_paused(rt, await_blocking_while_another_sleeps(&done), kPausedNotHung))
        << "the clock jumped an hour while blocking work was in flight";
    if (HasFailure()) break;  // one lost wake-up is enough (each costs kPausedNotHung)
  }
}

// Nothing awaits the work: its end is the only event that lets the clock
// jump, so the runtime must notice it.
TEST(BlockingPoolPausedClockTest, AutoAdvanceResumesAfterDetachedBlockingWorkFinishes) {
  std::atomic<bool> done{false};
  Runtime rt = Runtime::Builder::current_thread().start_paused(true).build();
  EXPECT_TRUE(run_paused(rt, detach_blocking_then_sleep(&done), kPausedNotHung))
      << "the clock jumped an hour while blocking work was in flight";
}

}  // namespace
}  // namespace volt::test
