// Integration tests of runtime shutdown (MultiThreadScheduler::shutdown,
// CurrentThreadScheduler::shutdown, OwnedTasks::close_and_shutdown_all).
//
// The contract under test (volt/runtime/runtime.hpp): destroying the runtime
// or calling shutdown_timeout() stops the workers after their current poll
// and cancels every task still alive, whether it is queued, waiting for
// something that will never happen, or was never run; their frames are
// destroyed and their join handles report errc::runtime_shutdown. Tasks
// spawned after shutdown began are not run. shutdown_timeout(d) gives up on a
// worker stuck in a poll after about d; that worker cleans up when its poll
// returns.
//
// Every frame holds a Tracked probe: after shutdown the live count must be
// 0 and nothing destroyed twice. Under AddressSanitizer (the frame pool is
// off there) a frame leaked by shutdown is also reported as a leak.
#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "runtime_support.hpp"

namespace volt::test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

class ShutdownTest : public ::testing::TestWithParam<Flavour> {};

INSTANTIATE_TEST_SUITE_P(Flavours, ShutdownTest,
                         ::testing::Values(kMultiThread1, kMultiThread2, kMultiThread4,
                                           kCurrentThread),
                         FlavourName());

// ---- spawn after shutdown ----

TEST_P(ShutdownTest, SpawnAfterShutdownIsRefusedWithoutRunningTheTask) {
  LifeCounters frames;
  std::atomic<int> ran{0};
  Runtime rt = make_runtime(GetParam());
  EXPECT_EQ(rt.block_on(square(2)), 4);
  Handle kept = rt.handle();
  rt.shutdown_timeout(1s);

  JoinHandle<int> from_runtime = rt.spawn(probe_body(Tracked(frames, 1), &ran));
  JoinHandle<int> from_handle = kept.spawn(probe_body(Tracked(frames, 2), &ran));
  // Refused synchronously: the frame is already gone and the task complete.
  EXPECT_EQ(frames.live(), 0);
  EXPECT_TRUE(from_runtime.is_finished());
  EXPECT_TRUE(from_handle.is_finished());
  EXPECT_EQ(volt_error_of([&] { (void)from_runtime.join(); }), code(errc::runtime_shutdown));
  EXPECT_EQ(volt_error_of([&] { (void)from_handle.join(); }), code(errc::runtime_shutdown));
  EXPECT_EQ(volt_error_of([&] { (void)rt.block_on(probe_body(Tracked(frames, 3), &ran)); }),
            code(errc::runtime_shutdown));

  rt.shutdown_timeout(1s);  // idempotent
  EXPECT_EQ(ran.load(), 0);
  EXPECT_EQ(frames.live(), 0);
  EXPECT_EQ(frames.double_destroyed.load(), 0);
}

TEST_P(ShutdownTest, HandleThatOutlivesTheRuntimeRefusesSpawns) {
  LifeCounters frames;
  std::atomic<int> ran{0};
  std::optional<Handle> kept;
  {
    Runtime rt = make_runtime(GetParam());
    kept = rt.handle();
  }
  JoinHandle<int> h = kept->spawn(probe_body(Tracked(frames, 1), &ran));
  EXPECT_EQ(frames.live(), 0);
  EXPECT_EQ(volt_error_of([&] { (void)h.join(); }), code(errc::runtime_shutdown));
  EXPECT_EQ(volt_error_of([&] { (void)kept->block_on(square(1)); }), code(errc::runtime_shutdown));
  EXPECT_EQ(ran.load(), 0);
}

// ---- destroying the runtime cancels everything that is left ----

// The state every task of one shutdown scene shares.
struct Scene {
  LifeCounters frames;
  std::atomic<int> blocked{0};    // reached an await that is never satisfied
  std::atomic<int> resumed{0};    // got past such an await (must stay 0)
  std::atomic<int> never_ran{0};  // bodies of tasks that must never run
  std::atomic<int> gates_in{0};
  std::atomic<int> gates_queued{0};
  std::atomic<bool> release{false};
  int gates = 0;
  Clock::time_point deadline;
  std::optional<Handle> handle;  // spawns from frame destructors go through it

  std::mutex m;
  std::vector<JoinHandle<int>> inner;  // guarded by m: handles of tasks spawned by tasks

  void keep(JoinHandle<int> h) {
    std::lock_guard lock(m);
    inner.push_back(std::move(h));
  }
  Task<int> never_runs() { return probe_body(Tracked(frames, 0), &never_ran); }
};

// Spawns a task when destroyed: when shutdown cancels the frame holding it,
// the spawn happens while the runtime is shutting down and must be refused.
class SpawnOnDestroy {
 public:
  explicit SpawnOnDestroy(Scene* s) noexcept : s_(s) {}
  SpawnOnDestroy(const SpawnOnDestroy&) = delete;
  SpawnOnDestroy& operator=(const SpawnOnDestroy&) = delete;
  ~SpawnOnDestroy() { s_->keep(s_->handle->spawn(s_->never_runs())); }

 private:
  Scene* s_;
};

// Waits on `rx` forever: its sender is held by another blocked task (or by
// nobody who will ever send). Holds `held`, the senders of other tasks.
Task<int> blocked_on_receiver(Tracked probe, oneshot::Receiver<int> rx,
                              std::vector<oneshot::Sender<int>> held, Scene* s) {
  SpawnOnDestroy guard(s);
  s->blocked.fetch_add(1);
  std::optional<int> v = co_await rx;
  s->resumed.fetch_add(1);
  co_return v.value_or(0) + probe.value() + static_cast<int>(held.size());
}

// Waits for a task that never completes.
Task<int> blocked_on_join(Tracked probe, JoinHandle<int> never, Scene* s) {
  SpawnOnDestroy guard(s);
  s->blocked.fetch_add(1);
  int v = co_await never;
  s->resumed.fetch_add(1);
  co_return v + probe.value();
}

// Spins (without suspending) until `pred` holds or the scene's deadline.
template <class Pred>
void spin_until(Scene* s, Pred pred) {
  while (!pred() && Clock::now() < s->deadline)
    std::this_thread::yield();
}

constexpr int kQueuedPerGate = 20;
constexpr int kSpawnedDuringShutdown = 10;

// Occupies one worker without ever suspending, so that nothing queued behind
// it can run: first waits until every worker holds a gate, then spawns
// kQueuedPerGate tasks (they stay queued), then spins until released, which
// the test does only after shutdown began. Then spawns more and waits for
// one of them.
Task<int> gate(Tracked probe, Scene* s) {
  s->gates_in.fetch_add(1);
  spin_until(s, [&] { return s->gates_in.load() == s->gates; });
  for (int i = 0; i < kQueuedPerGate; ++i)
    s->keep(volt::spawn(s->never_runs()));
  s->gates_queued.fetch_add(1);
  spin_until(s, [&] { return s->release.load(); });
  JoinHandle<int> last;
  for (int i = 0; i < kSpawnedDuringShutdown; ++i) {
    JoinHandle<int> h = volt::spawn(s->never_runs());
    if (i + 1 < kSpawnedDuringShutdown) {
      s->keep(std::move(h));
    } else {
      last = std::move(h);
    }
  }
  int v = co_await last;
  s->resumed.fetch_add(1);
  co_return v + probe.value();
}

// Opens the gates once the shutdown has begun, so that what the gates then
// spawn must never run. The first step of a shutdown closes the runtime's
// queue for work from outside (after raising the flag that stops its
// workers): a probe spawned from this thread then no longer lengthens it.
// Until then the probes wait there (the gates hold every worker, or the
// core) and are dropped with the rest. A fixed delay after the shutdown call,
// as before, could run out on a loaded machine before the shutdown started.
void release_once_shutdown_has_begun(Scene& s) {
  std::vector<JoinHandle<int>> probes;
  while (Clock::now() < s.deadline) {
    const std::uint64_t queued = s.handle->stats().inject_queue_depth;
    probes.push_back(s.handle->spawn(square(1)));
    if (s.handle->stats().inject_queue_depth <= queued) break;
    std::this_thread::sleep_for(1ms);
  }
  s.release.store(true);
}

Task<void> yield_until_blocked(Scene* s, int target) {
  while (s->blocked.load() < target && Clock::now() < s->deadline)
    co_await volt::yield_now();
}

void check_destroy_cancels_every_task(const Flavour& f) {
  constexpr int kCycles = 20;
  constexpr int kQueuedOutside = 50;
  // Each cycle is two tasks; then one waits on a third that waits forever.
  constexpr int kBlocked = 2 * kCycles + 2;

  Scene s;
  s.deadline = Clock::now() + kNotHung;
  s.gates = f.current_thread ? 0 : static_cast<int>(f.workers);
  std::optional<Runtime> rt(make_runtime(f));
  s.handle = rt->handle();
  std::vector<JoinHandle<int>> outside;

  // Two tasks each waiting for the other's sender.
  for (int i = 0; i < kCycles; ++i) {
    auto [tx_a, rx_a] = oneshot::channel<int>();
    auto [tx_b, rx_b] = oneshot::channel<int>();
    std::vector<oneshot::Sender<int>> held_by_a, held_by_b;
    held_by_a.push_back(std::move(tx_b));
    held_by_b.push_back(std::move(tx_a));
    outside.push_back(rt->spawn(
        blocked_on_receiver(Tracked(s.frames, 1), std::move(rx_a), std::move(held_by_a), &s)));
    outside.push_back(rt->spawn(
        blocked_on_receiver(Tracked(s.frames, 2), std::move(rx_b), std::move(held_by_b), &s)));
  }
  // A task awaiting a JoinHandle of a task that never completes: its
  // receiver's sender lives in that same never-completing task's frame.
  {
    auto [tx, rx] = oneshot::channel<int>();
    std::vector<oneshot::Sender<int>> held;
    held.push_back(std::move(tx));
    JoinHandle<int> never =
        rt->spawn(blocked_on_receiver(Tracked(s.frames, 3), std::move(rx), std::move(held), &s));
    outside.push_back(rt->spawn(blocked_on_join(Tracked(s.frames, 4), std::move(never), &s)));
  }
  if (f.current_thread) {
    rt->block_on(yield_until_blocked(&s, kBlocked));
  } else {
    ASSERT_TRUE(wait_until([&] { return s.blocked.load() == kBlocked; }));
  }
  ASSERT_EQ(s.blocked.load(), kBlocked);

  // Occupy every worker, and queue work behind the gates.
  for (int i = 0; i < s.gates; ++i)
    outside.push_back(rt->spawn(gate(Tracked(s.frames, 5), &s)));
  ASSERT_TRUE(wait_until([&] { return s.gates_queued.load() == s.gates; }))
      << s.gates_in.load() << " of " << s.gates << " gates running";
  for (int i = 0; i < kQueuedOutside; ++i)
    outside.push_back(rt->spawn(s.never_runs()));

  // The gates let go only once the destructor has started shutting down (it
  // does so before waiting for the workers).
  std::thread releaser([&] { release_once_shutdown_has_begun(s); });
  rt.reset();
  releaser.join();

  EXPECT_EQ(s.never_ran.load(), 0) << "a task ran after shutdown began or while queued";
  EXPECT_EQ(s.resumed.load(), 0) << "a blocked task was resumed";
  EXPECT_EQ(s.frames.live(), 0) << "frames left alive after the runtime was destroyed";
  EXPECT_EQ(s.frames.double_destroyed.load(), 0);

  const std::size_t expected_outside =
      static_cast<std::size_t>(2 * kCycles + 1 + s.gates + kQueuedOutside);
  ASSERT_EQ(outside.size(), expected_outside);
  for (auto& h : outside) {
    EXPECT_TRUE(h.is_finished());
    EXPECT_EQ(volt_error_of([&] { (void)h.join(); }), code(errc::runtime_shutdown));
  }
  std::lock_guard lock(s.m);
  // Every guard's destructor spawned one (so every guarded frame was
  // destroyed), plus what the gates spawned.
  const std::size_t expected_inner =
      static_cast<std::size_t>(kBlocked + s.gates * (kQueuedPerGate + kSpawnedDuringShutdown - 1));
  EXPECT_EQ(s.inner.size(), expected_inner);
  for (auto& h : s.inner) {
    EXPECT_TRUE(h.is_finished());
    EXPECT_EQ(volt_error_of([&] { (void)h.join(); }), code(errc::runtime_shutdown));
  }
  s.inner.clear();
  s.handle.reset();
  EXPECT_EQ(s.frames.live(), 0);
}

TEST_P(ShutdownTest, DestroyingTheRuntimeCancelsEveryRemainingTask) {
  check_destroy_cancels_every_task(GetParam());
}

// Current-thread: a thread inside block_on holds the core while another
// shuts the runtime down. The block_on task spawns during shutdown; the
// block_on reports runtime_shutdown.
TEST(CurrentThreadShutdownTest, ShutdownWhileAnotherThreadIsInBlockOn) {
  Scene s;
  s.deadline = Clock::now() + kNotHung;
  s.gates = 1;
  Runtime rt = make_runtime(kCurrentThread);
  s.handle = rt.handle();

  std::error_code block_on_error;
  std::thread driver([&] {
    block_on_error = volt_error_of([&] { (void)rt.block_on(gate(Tracked(s.frames, 5), &s)); });
  });
  ASSERT_TRUE(wait_until([&] { return s.gates_queued.load() == 1; }));
  std::vector<JoinHandle<int>> outside;
  for (int i = 0; i < 30; ++i)
    outside.push_back(rt.spawn(s.never_runs()));

  std::thread releaser([&] { release_once_shutdown_has_begun(s); });
  rt.shutdown_timeout(std::chrono::nanoseconds::max());
  releaser.join();
  driver.join();

  EXPECT_EQ(block_on_error, code(errc::runtime_shutdown));
  EXPECT_EQ(s.never_ran.load(), 0);
  EXPECT_EQ(s.resumed.load(), 0);
  EXPECT_EQ(s.frames.live(), 0);
  for (auto& h : outside)
    EXPECT_EQ(volt_error_of([&] { (void)h.join(); }), code(errc::runtime_shutdown));
  std::lock_guard lock(s.m);
  EXPECT_EQ(s.inner.size(), static_cast<std::size_t>(kQueuedPerGate + kSpawnedDuringShutdown - 1));
  for (auto& h : s.inner)
    EXPECT_EQ(volt_error_of([&] { (void)h.join(); }), code(errc::runtime_shutdown));
  s.inner.clear();
  s.handle.reset();
}

// ---- a thread blocked in join() when the runtime goes away ----

TEST_P(ShutdownTest, DestroyingTheRuntimeWakesAnOutsideJoinWithRuntimeShutdown) {
  for (int round = 0; round < 10; ++round) {
    LifeCounters frames;
    std::atomic<int> waiting{0};
    std::optional<Runtime> rt(make_runtime(GetParam()));
    auto [tx, rx] = oneshot::channel<int>();
    JoinHandle<int> h = rt->spawn(wait_for_value(Tracked(frames, 0), std::move(rx), &waiting));
    std::atomic<bool> joining{false};
    std::error_code join_error;
    std::thread joiner([&] {
      joining.store(true);
      join_error = volt_error_of([&] { (void)h.join(); });
    });
    // Current-thread: the joiner drives the runtime, so the task runs there.
    ASSERT_TRUE(wait_until([&] { return joining.load() && waiting.load() == 1; }));
    std::this_thread::sleep_for(2ms);  // most likely asleep in join() by now
    rt.reset();
    joiner.join();
    EXPECT_EQ(join_error, code(errc::runtime_shutdown)) << "round " << round;
    EXPECT_EQ(frames.live(), 0);
    EXPECT_TRUE(tx.is_closed());  // the receiver died with the frame
  }
}

// ---- shutdown_timeout with a worker stuck in a poll ----

// Spins (never suspending) until released, then suspends once: the runtime
// has been shut down by then, so it must be cancelled at that suspension.
Task<int> stuck_in_poll(Tracked probe, std::atomic<bool>* entered, std::atomic<bool>* release,
                        std::atomic<int>* resumed, Clock::time_point deadline) {
  entered->store(true);
  while (!release->load() && Clock::now() < deadline)
    std::this_thread::yield();
  co_await volt::yield_now();
  resumed->fetch_add(1);
  co_return probe.value();
}

TEST_P(ShutdownTest, ShutdownTimeoutReturnsWhileATaskIsStuckInAPoll) {
  const Flavour& f = GetParam();
  constexpr auto kTimeout = 50ms;
  constexpr int kWaiters = 10;
  const Clock::time_point deadline = Clock::now() + kNotHung;

  std::atomic<int> stops{0};
  Runtime::Builder builder = make_builder(f);
  builder.on_thread_stop([&] { stops.fetch_add(1); });
  std::optional<Runtime> rt(builder.build());

  LifeCounters stuck_frame, waiter_frames;
  std::atomic<int> waiting{0}, resumed{0};
  std::atomic<bool> entered{false}, release{false};
  std::vector<oneshot::Sender<int>> senders;
  std::vector<JoinHandle<int>> waiters;
  for (int i = 0; i < kWaiters; ++i) {
    auto [tx, rx] = oneshot::channel<int>();
    senders.push_back(std::move(tx));
    waiters.push_back(
        rt->spawn(wait_for_value(Tracked(waiter_frames, i), std::move(rx), &waiting)));
  }
  JoinHandle<int> stuck;
  std::error_code block_on_error;
  std::thread driver;
  if (f.current_thread) {
    rt->block_on(square(0));  // runs the waiters up to their await
    // Created here so that the probe's temporary is gone before block_on.
    Task<int> task = stuck_in_poll(Tracked(stuck_frame, 0), &entered, &release, &resumed, deadline);
    driver = std::thread([&, task = std::move(task)]() mutable {
      block_on_error = volt_error_of([&] { (void)rt->block_on(std::move(task)); });
    });
  } else {
    stuck =
        rt->spawn(stuck_in_poll(Tracked(stuck_frame, 0), &entered, &release, &resumed, deadline));
  }
  ASSERT_TRUE(wait_until([&] { return entered.load() && waiting.load() == kWaiters; }));

  const auto start = Clock::now();
  rt->shutdown_timeout(kTimeout);
  const auto elapsed = Clock::now() - start;
  EXPECT_GE(elapsed, kTimeout);
  EXPECT_LT(elapsed, 5 * kTimeout + 1s);

  // Idle tasks were cancelled before shutdown_timeout returned; the stuck
  // one is still inside its poll.
  EXPECT_EQ(waiter_frames.live(), 0);
  for (auto& w : waiters) {
    EXPECT_TRUE(w.is_finished());
    EXPECT_EQ(volt_error_of([&] { (void)w.join(); }), code(errc::runtime_shutdown));
  }
  for (auto& tx : senders)
    EXPECT_TRUE(tx.is_closed());
  EXPECT_EQ(stuck_frame.live(), 1);
  if (!f.current_thread) {
    EXPECT_FALSE(stuck.is_finished());
    // The workers that were not stuck have left.
    EXPECT_TRUE(wait_until([&] { return stops.load() == static_cast<int>(f.workers) - 1; }));
  }

  // The runtime object may go before the stuck worker does.
  if (!f.current_thread) rt.reset();
  release.store(true);

  // The stuck worker finishes its poll, cancels the task at its suspension
  // and cleans up.
  EXPECT_TRUE(wait_until([&] { return stuck_frame.live() == 0; }));
  if (f.current_thread) {
    driver.join();
    EXPECT_EQ(block_on_error, code(errc::runtime_shutdown));
  } else {
    ASSERT_TRUE(wait_until([&] { return stuck.is_finished(); }));
    EXPECT_EQ(volt_error_of([&] { (void)stuck.join(); }), code(errc::runtime_shutdown));
    EXPECT_TRUE(wait_until([&] { return stops.load() == static_cast<int>(f.workers); }));
  }
  EXPECT_EQ(resumed.load(), 0);
  EXPECT_EQ(stuck_frame.double_destroyed.load(), 0);
  EXPECT_EQ(waiter_frames.double_destroyed.load(), 0);
}

// ---- replacing a runtime ----

TEST_P(ShutdownTest, MoveAssigningARuntimeShutsDownTheOldOne) {
  LifeCounters frames;
  std::atomic<int> waiting{0};
  Runtime rt = make_runtime(GetParam());
  auto [tx, rx] = oneshot::channel<int>();
  JoinHandle<int> h = rt.spawn(wait_for_value(Tracked(frames, 0), std::move(rx), &waiting));
  if (!GetParam().current_thread) {
    ASSERT_TRUE(wait_until([&] { return waiting.load() == 1; }));
  }
  rt = make_runtime(GetParam());
  EXPECT_EQ(frames.live(), 0);
  EXPECT_EQ(volt_error_of([&] { (void)h.join(); }), code(errc::runtime_shutdown));
  EXPECT_EQ(rt.block_on(square(11)), 121);  // the new one works
}

// ---- task cells keep the scheduler alive, wherever they are freed ----

// A worker thread takes the task cells' references on the scheduler 64 at a
// time and keeps them as credit (src/runtime/scheduler/task_credit.cpp). A
// cell spawned on a worker and freed outside the runtime after it is gone
// must free the scheduler with the last handle, no sooner (a use after free
// under ASan) and not never (LeakSanitizer reports the scheduler). 300
// children: the credit is refilled several times and, as cells spawned
// outside are freed on the workers, goes past the batch it hands back.
Task<std::vector<JoinHandle<int>>> spawn_children_and_keep_handles(int n) {
  std::vector<JoinHandle<int>> handles;
  handles.reserve(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i)
    handles.push_back(spawn(square(i)));
  co_return handles;
}

Task<void> yield_until_finished(const std::vector<JoinHandle<int>>* handles) {
  const auto deadline = Clock::now() + 10s;  // "not hung"
  for (const auto& h : *handles) {
    while (!h.is_finished() && Clock::now() < deadline)
      co_await yield_now();
  }
}

TEST_P(ShutdownTest, CellsSpawnedOnWorkersAndFreedAfterTheRuntimeFreeTheSchedulerLast) {
  constexpr int kChildren = 300;
  std::vector<JoinHandle<int>> kept;
  {
    Runtime rt = make_runtime(GetParam());
    // Spawned from outside and left to finish (and be freed) on the workers.
    for (int i = 0; i < kChildren; ++i)
      (void)rt.spawn(square(i));
    kept = rt.block_on(spawn_children_and_keep_handles(kChildren));
    ASSERT_EQ(kept.size(), static_cast<std::size_t>(kChildren));
    // Finished before the runtime goes (not cancelled by its shutdown).
    rt.block_on(yield_until_finished(&kept));
  }
  // The runtime is gone; these cells still hold their scheduler references.
  for (int i = 0; i < kChildren; ++i) {
    ASSERT_TRUE(kept[static_cast<std::size_t>(i)].is_finished());
    EXPECT_EQ(kept[static_cast<std::size_t>(i)].join(), i * i);
  }
  kept.clear();  // the last cells, and with them the scheduler
}

}  // namespace
}  // namespace volt::test
