// Edge cases of the task-level APIs (a second review): JoinHandle::abort of a
// task running on another worker right now (and of one being polled inline
// by its awaiter, and of one inside block_in_place), abort of a finished
// task, a handle awaited from two tasks one after the other, JoinSet dropped
// while its tasks finish on other workers, join_next on empty sets, a
// throwing task in a JoinSet, spawn_blocking's handle (abort before it
// starts, an exception), detached tasks and JoinSets at runtime shutdown.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <optional>
#include <stdexcept>
#include <thread>
#include <utility>
#include <vector>

#include "runtime/runtime_support.hpp"
#include "test_support.hpp"
#include "volt/volt.hpp"

namespace volt::test {
namespace {

using namespace std::chrono_literals;

// Phases of a task that spins inside a poll until the test has aborted it.
struct Spinner {
  std::atomic<int> phase{0};  // 0 not started, 1 spinning in its poll, 2 released
  std::atomic<int> resumed_after_abort{0};
  LifeCounters life;
};

// Holds a Tracked local, spins in its first poll until released, then
// suspends (yield_now): an abort made while it spun must end it there.
Task<int> spin_then_yield(Spinner* s) {
  Tracked local(s->life, 5);
  s->phase.store(1);
  while (s->phase.load() != 2)
    std::this_thread::yield();
  co_await yield_now();
  s->resumed_after_abort.fetch_add(1);  // never: it was aborted before this
  co_return local.value();
}

// The same, but it waits on a oneshot instead of yielding.
Task<int> spin_then_wait(Spinner* s, oneshot::Receiver<int> rx) {
  Tracked local(s->life, 5);
  s->phase.store(1);
  while (s->phase.load() != 2)
    std::this_thread::yield();
  std::optional<int> v = co_await rx;
  s->resumed_after_abort.fetch_add(1);
  co_return v.value_or(0) + local.value();
}

// Spins, then returns without suspending: the abort came too late.
Task<int> spin_then_return(Spinner* s) {
  Tracked local(s->life, 5);
  s->phase.store(1);
  while (s->phase.load() != 2)
    std::this_thread::yield();
  co_return local.value();
}

TEST(TaskEdgeAbort, AbortOfATaskRunningOnAWorkerCancelsItAtItsNextSuspension) {
  for (int round = 0; round < 20; ++round) {
    Runtime rt = make_runtime(kMultiThread2);
    Spinner s;
    JoinHandle<int> h = rt.spawn(spin_then_yield(&s));
    ASSERT_TRUE(wait_until([&] { return s.phase.load() == 1; }));
    h.abort();
    h.abort();  // twice: harmless
    s.phase.store(2);
    EXPECT_EQ(volt_error_of([&] { (void)h.join(); }), code(errc::cancelled));
    EXPECT_EQ(s.resumed_after_abort.load(), 0);
    EXPECT_EQ(s.life.live(), 0);
    EXPECT_EQ(s.life.double_destroyed.load(), 0);
  }
}

TEST(TaskEdgeAbort, AbortOfARunningTaskThatThenWaitsOnAChannelCancelsIt) {
  Runtime rt = make_runtime(kMultiThread2);
  Spinner s;
  auto [tx, rx] = oneshot::channel<int>();
  JoinHandle<int> h = rt.spawn(spin_then_wait(&s, std::move(rx)));
  ASSERT_TRUE(wait_until([&] { return s.phase.load() == 1; }));
  h.abort();
  s.phase.store(2);
  EXPECT_EQ(volt_error_of([&] { (void)h.join(); }), code(errc::cancelled));
  (void)tx.send(1);  // the receiver is gone with the frame
  EXPECT_EQ(s.resumed_after_abort.load(), 0);
  EXPECT_EQ(s.life.live(), 0);
  EXPECT_EQ(s.life.double_destroyed.load(), 0);
}

TEST(TaskEdgeAbort, AbortOfARunningTaskThatCompletesInThatPollReturnsTheValue) {
  Runtime rt = make_runtime(kMultiThread2);
  Spinner s;
  JoinHandle<int> h = rt.spawn(spin_then_return(&s));
  ASSERT_TRUE(wait_until([&] { return s.phase.load() == 1; }));
  h.abort();
  s.phase.store(2);
  EXPECT_EQ(h.join(), 5);
  EXPECT_EQ(s.life.live(), 0);
}

TEST(TaskEdgeAbort, AbortOfAFinishedTaskLeavesItsValue) {
  Runtime rt = make_runtime(kMultiThread2);
  JoinHandle<int> h = rt.spawn(square(6));
  ASSERT_TRUE(wait_until([&] { return h.is_finished(); }));
  h.abort();
  EXPECT_TRUE(h.is_finished());
  EXPECT_EQ(h.join(), 36);
}

// The awaiting task polls the child inline (it is queued on the awaiting
// worker); the main thread aborts the child while that inline poll spins.
Task<int> await_child_inline(Spinner* s, JoinHandle<int>* out) {
  *out = volt::spawn(spin_then_yield(s));
  try {
    co_return co_await *out;
  } catch (const Error& e) {
    co_return e.code() == code(errc::cancelled) ? -1 : -2;
  }
}

TEST(TaskEdgeAbort, AbortOfAChildPolledInlineByItsAwaiter) {
  Runtime rt = make_runtime(kMultiThread1);
  Spinner s;
  JoinHandle<int> child;
  JoinHandle<int> parent = rt.spawn(await_child_inline(&s, &child));
  ASSERT_TRUE(wait_until([&] { return s.phase.load() == 1; }));
  // `child` was assigned before the co_await started the inline poll.
  ASSERT_TRUE(child.valid());
  child.abort();
  s.phase.store(2);
  EXPECT_EQ(parent.join(), -1);
  EXPECT_EQ(s.resumed_after_abort.load(), 0);
  EXPECT_EQ(s.life.live(), 0);
  EXPECT_EQ(s.life.double_destroyed.load(), 0);
}

// Inside block_in_place the task's poll continues on the old thread after
// the function; an abort made meanwhile ends it at the next suspension.
Task<int> block_then_yield(Spinner* s) {
  Tracked local(s->life, 5);
  volt::block_in_place([s] {
    s->phase.store(1);
    while (s->phase.load() != 2)
      std::this_thread::yield();
  });
  co_await yield_now();
  s->resumed_after_abort.fetch_add(1);
  co_return local.value();
}

TEST(TaskEdgeAbort, AbortDuringBlockInPlaceCancelsAtTheNextSuspension) {
  Runtime rt = make_runtime(kMultiThread2);
  Spinner s;
  JoinHandle<int> h = rt.spawn(block_then_yield(&s));
  ASSERT_TRUE(wait_until([&] { return s.phase.load() == 1; }));
  h.abort();
  s.phase.store(2);
  EXPECT_EQ(volt_error_of([&] { (void)h.join(); }), code(errc::cancelled));
  EXPECT_EQ(s.resumed_after_abort.load(), 0);
  EXPECT_EQ(s.life.live(), 0);
}

// ---- a handle awaited from two places, one after the other ----

Task<int> value_after(oneshot::Receiver<int> rx) {
  std::optional<int> v = co_await rx;
  co_return v.value_or(-1);
}

Task<bool> await_with_short_timeout(JoinHandle<int>* h) {
  Expected<int> r = co_await volt::timeout(1ms, *h);
  co_return r.has_value();
}

Task<int> await_handle(JoinHandle<int>* h) {
  co_return co_await *h;
}

TEST(TaskEdgeJoinHandle, AwaitedByOneTaskThatGaveUpThenByAnother) {
  for (const Flavour& f : {kMultiThread2, kCurrentThread}) {
    Runtime rt = make_runtime(f);
    auto [tx, rx] = oneshot::channel<int>();
    JoinHandle<int> h = rt.spawn(value_after(std::move(rx)));
    // First awaiter: times out, withdrawing its waker; the handle stays usable.
    EXPECT_FALSE(rt.block_on(await_with_short_timeout(&h)));
    ASSERT_TRUE(h.valid());
    // Second awaiter, in another task (its waker replaces nothing stale).
    JoinHandle<int> second = rt.spawn(await_handle(&h));
    std::this_thread::sleep_for(5ms);
    (void)tx.send(42);
    EXPECT_EQ(second.join(), 42);
    EXPECT_FALSE(h.valid());
    // A third await finds the handle consumed.
    EXPECT_EQ(volt_error_of([&] { (void)rt.block_on(await_handle(&h)); }),
              code(errc::invalid_handle));
  }
}

// ---- JoinSet ----

std::atomic<int>& dummy_waiting() {
  static std::atomic<int> n{0};
  return n;
}

Task<int> yield_n_then(int n, int value, Tracked probe) {
  for (int i = 0; i < n; ++i)
    co_await yield_now();
  co_return value + probe.value() * 0;
}

TEST(TaskEdgeJoinSet, DroppedWhileItsTasksFinishOnOtherWorkers) {
  Runtime rt = make_runtime(kMultiThread4);
  LifeCounters life;
  for (int round = 0; round < 200; ++round) {
    rt.block_on([](LifeCounters* life, int round) -> Task<void> {
      JoinSet<int> set;
      for (int i = 0; i < 16; ++i)
        set.spawn(yield_n_then((i + round) % 4, i, Tracked(*life, i)));
      // Let some of them finish, some be mid-poll, some not started.
      for (int i = 0; i < round % 3; ++i)
        co_await yield_now();
      if (round % 2) (void)co_await set.join_next();
      // Dropped here, with tasks finishing concurrently on other workers.
    }(&life, round));
  }
  EXPECT_TRUE(wait_until([&] { return life.live() == 0; }));
  EXPECT_EQ(life.double_destroyed.load(), 0);
}

TEST(TaskEdgeJoinSet, JoinNextOnAnEmptySetIsNullopt) {
  for (const Flavour& f : {kMultiThread2, kCurrentThread}) {
    Runtime rt = make_runtime(f);
    rt.block_on([]() -> Task<void> {
      JoinSet<int> never_used;
      EXPECT_FALSE((co_await never_used.join_next()).has_value());
      EXPECT_FALSE(never_used.try_join_next().has_value());
      JoinSet<int> drained;
      drained.spawn(square(3));
      std::optional<Expected<int>> r = co_await drained.join_next();
      EXPECT_TRUE(r.has_value() && r->has_value() && **r == 9);
      EXPECT_FALSE((co_await drained.join_next()).has_value());
      EXPECT_TRUE(drained.is_empty());
      drained.spawn(square(4));  // usable again
      r = co_await drained.join_next();
      EXPECT_TRUE(r.has_value() && r->has_value() && **r == 16);
      JoinSet<int> moved_from;
      moved_from.spawn(square(5));
      JoinSet<int> target = std::move(moved_from);
      EXPECT_FALSE(
          (co_await moved_from.join_next()).has_value());  // NOLINT(bugprone-use-after-move)
      r = co_await target.join_next();
      EXPECT_TRUE(r.has_value() && r->has_value() && **r == 25);
    }());
  }
}

Task<int> edge_throws_after_yield() {
  co_await yield_now();
  throw std::runtime_error("boom");
}

TEST(TaskEdgeJoinSet, AThrowingTaskReachesTheJoinerAndTheRestCarryOn) {
  Runtime rt = make_runtime(kMultiThread2);
  rt.block_on([]() -> Task<void> {
    JoinSet<int> set;
    set.spawn(edge_throws_after_yield());
    set.spawn(square(2));
    int values = 0, thrown = 0;
    for (;;) {
      try {
        std::optional<Expected<int>> r = co_await set.join_next();
        if (!r) break;
        EXPECT_TRUE(r->has_value());
        ++values;
      } catch (const std::runtime_error&) {
        ++thrown;
      }
    }
    EXPECT_EQ(values, 1);
    EXPECT_EQ(thrown, 1);
  }());
}

TEST(TaskEdgeJoinSet, DetachAllThenShutdownDestroysTheFrames) {
  LifeCounters life;
  std::vector<oneshot::Sender<int>> senders;
  {
    Runtime rt = make_runtime(kMultiThread2);
    rt.block_on([](LifeCounters* life, std::vector<oneshot::Sender<int>>* senders) -> Task<void> {
      JoinSet<int> set;
      for (int i = 0; i < 8; ++i) {
        auto [tx, rx] = oneshot::channel<int>();
        senders->push_back(std::move(tx));
        set.spawn(wait_for_value(Tracked(*life, i), std::move(rx), &dummy_waiting()));
      }
      set.detach_all();
      EXPECT_TRUE(set.is_empty());
      co_return;
    }(&life, &senders));
    EXPECT_EQ(life.live(), 8);
  }
  EXPECT_EQ(life.live(), 0);
}

TEST(TaskEdgeJoinSet, SetOutlivingItsRuntimeReportsShutdown) {
  LifeCounters life;
  std::optional<JoinSet<int>> kept;
  std::vector<oneshot::Sender<int>> senders;
  {
    Runtime rt = make_runtime(kMultiThread2);
    kept = rt.block_on(
        [](LifeCounters* life, std::vector<oneshot::Sender<int>>* senders) -> Task<JoinSet<int>> {
          JoinSet<int> set;
          for (int i = 0; i < 4; ++i) {
            auto [tx, rx] = oneshot::channel<int>();
            senders->push_back(std::move(tx));
            set.spawn(wait_for_value(Tracked(*life, i), std::move(rx), &dummy_waiting()));
          }
          co_return set;
        }(&life, &senders));
  }
  EXPECT_EQ(life.live(), 0);
  ASSERT_EQ(kept->len(), 4u);
  int shutdown = 0;
  while (std::optional<Expected<int>> r = kept->try_join_next()) {
    EXPECT_FALSE(r->has_value());
    if (!r->has_value() && r->error() == code(errc::runtime_shutdown)) ++shutdown;
  }
  EXPECT_EQ(shutdown, 4);
  kept.reset();
}

TEST(TaskEdgeJoinSet, AFailedSpawnLeavesTheSetAsItWas) {
  JoinSet<int> set;
  // Outside a runtime: volt::spawn throws, after the set made its entry.
  EXPECT_EQ(volt_error_of([&] { set.spawn(square(2)); }), code(errc::no_runtime));
  EXPECT_TRUE(set.is_empty());
  EXPECT_FALSE(set.try_join_next().has_value());
  Runtime rt = make_runtime(kMultiThread2);
  // An empty Task: refused by the spawn.
  EXPECT_EQ(volt_error_of([&] { set.spawn_on(Task<int>(), rt.handle()); }),
            code(errc::invalid_handle));
  set.spawn_on(square(3), rt.handle());
  EXPECT_EQ(set.len(), 1u);
  EXPECT_TRUE(wait_until([&] {
    std::optional<Expected<int>> r = set.try_join_next();
    return r.has_value() && r->has_value() && **r == 9;
  }));
}

Task<void> wait_forever_tracked(oneshot::Receiver<int> rx, Tracked probe) {
  (void)co_await rx;
  (void)probe;
}

TEST(TaskEdgeTracker, AbortedTrackedTasksEndTheWait) {
  Runtime rt = make_runtime(kMultiThread2);
  LifeCounters life;
  std::vector<oneshot::Sender<int>> senders;
  bool waited =
      rt.block_on([](LifeCounters* life, std::vector<oneshot::Sender<int>>* senders) -> Task<bool> {
        TaskTracker tracker;
        std::vector<JoinHandle<void>> handles;
        for (int i = 0; i < 8; ++i) {
          auto [tx, rx] = oneshot::channel<int>();
          senders->push_back(std::move(tx));
          handles.push_back(tracker.spawn(wait_forever_tracked(std::move(rx), Tracked(*life, i))));
        }
        tracker.close();
        EXPECT_EQ(tracker.len(), 8u);
        for (auto& h : handles)
          h.abort();
        co_return (co_await timeout(kNotHung, tracker.wait())).has_value();
      }(&life, &senders));
  EXPECT_TRUE(waited);
  EXPECT_EQ(life.live(), 0);
}

// ---- detached tasks and shutdown ----

TEST(TaskEdgeDetach, DetachedTasksAreDestroyedAtShutdown) {
  LifeCounters life;
  std::vector<oneshot::Sender<int>> senders;
  std::atomic<int> waiting{0};
  {
    Runtime rt = make_runtime(kMultiThread2);
    for (int i = 0; i < 8; ++i) {
      auto [tx, rx] = oneshot::channel<int>();
      senders.push_back(std::move(tx));
      (void)rt.spawn(wait_for_value(Tracked(life, i), std::move(rx), &waiting));
    }
    ASSERT_TRUE(wait_until([&] { return waiting.load() == 8; }));
  }
  EXPECT_EQ(life.live(), 0);
  EXPECT_EQ(life.double_destroyed.load(), 0);
}

// ---- spawn_blocking's handle ----

TEST(TaskEdgeBlocking, AbortBeforeTheFunctionStartsCancelsIt) {
  Runtime rt = Runtime::Builder::multi_thread().worker_threads(1).max_blocking_threads(1).build();
  std::atomic<bool> release{false}, first_started{false}, second_ran{false};
  JoinHandle<int> first = rt.spawn_blocking([&] {
    first_started.store(true);
    while (!release.load())
      std::this_thread::yield();
    return 1;
  });
  ASSERT_TRUE(wait_until([&] { return first_started.load(); }));
  JoinHandle<int> second = rt.spawn_blocking([&] {
    second_ran.store(true);
    return 2;
  });
  second.abort();
  first.abort();  // already running: not interrupted
  release.store(true);
  EXPECT_EQ(first.join(), 1);
  EXPECT_EQ(volt_error_of([&] { (void)second.join(); }), code(errc::cancelled));
  EXPECT_FALSE(second_ran.load());
}

TEST(TaskEdgeBlocking, AnExceptionReachesTheAwaiter) {
  Runtime rt = make_runtime(kMultiThread2);
  bool caught = rt.block_on([]() -> Task<bool> {
    auto h = volt::spawn_blocking([]() -> int { throw std::runtime_error("blocking boom"); });
    try {
      (void)co_await h;
    } catch (const std::runtime_error&) {
      co_return true;
    }
    co_return false;
  }());
  EXPECT_TRUE(caught);
}

}  // namespace
}  // namespace volt::test
