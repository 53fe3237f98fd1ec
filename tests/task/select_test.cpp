// Tests of volt::select / select_biased (include/volt/task/select.hpp), on
// the current-thread and the multi-thread runtime:
//
//  - a ready operand wins without waiting, the others are never started;
//    select_biased always picks the first ready operand in order; select's
//    random start lets each of two always-ready operands win;
//  - waiting: a notified() woken by another task beats a long sleep; a short
//    sleep beats a never-ready acquire, which is withdrawn (the permit that
//    comes later stays in the semaphore);
//  - losers give back what they had been handed: a granted Acquire its
//    permit; an lvalue oneshot receiver keeps its value; an lvalue Acquire
//    keeps its place in the queue and can be awaited again (also after
//    losing several selects);
//  - operand kinds: join handles, mutex lock, CancellationToken::cancelled(),
//    Tasks, void operands (std::monostate), duplicate result types, select in
//    select, select in timeout; an exception from the winner propagates;
//  - no heap allocation in steady state with 8 operands;
//  - two mpmc channels' recv() in one select: every value received once;
//  - stress: tasks selecting over a Notify pinged by other tasks against a
//    short sleep consume every notify_one exactly once (a Notified chosen by
//    notify_one that loses passes the notification on).
// Coroutines are free functions taking their state by pointer or value (see
// time/time_test_support.hpp); awaited values are bound to a local before
// they are tested (GCC 12).
#include "volt/task/select.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <coroutine>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "time/time_test_support.hpp"
#include "volt/volt.hpp"

namespace volt::test {
namespace {

using namespace std::chrono_literals;

class SelectTest : public ::testing::TestWithParam<Flavour> {};

INSTANTIATE_TEST_SUITE_P(Flavours, SelectTest, ::testing::Values(kMultiThread2, kCurrentThread),
                         FlavourName());

// ---- test awaitables ----

// Always ready with `value`; counts how often it was asked and resumed.
struct Ready {
  int value;
  int* asked = nullptr;
  bool await_ready() noexcept {
    if (asked) ++*asked;
    return true;
  }
  void await_suspend(std::coroutine_handle<>) noexcept {}
  int await_resume() noexcept { return value; }
};

// A leaf that never completes; says when it has been started and counts its
// destruction.
struct Marker {
  std::atomic<bool>* started;
  std::atomic<int>* destroyed = nullptr;
  Marker(std::atomic<bool>* s, std::atomic<int>* d = nullptr) noexcept : started(s), destroyed(d) {}
  Marker(Marker&& o) noexcept
      : started(o.started), destroyed(std::exchange(o.destroyed, nullptr)) {}
  ~Marker() {
    if (destroyed) destroyed->fetch_add(1);
  }
  bool await_ready() noexcept { return false; }
  bool await_suspend(std::coroutine_handle<> self) {
    detail::suspend_current(self, &never, nullptr);
    started->store(true, std::memory_order_release);
    return true;
  }
  void await_resume() noexcept {}
  static bool never(void*) noexcept { return false; }
};

// ---- ready operands ----

struct ReadyOutcome {
  std::size_t index = 99;
  int value = 0;
  int sleep_asked = -1;
  std::uint64_t timers = 99;
  std::size_t biased_index = 99;
  int biased_second_asked = -1;
  int biased_wrong = -1;
  std::size_t skip_index = 99;
};

Task<ReadyOutcome> ready_operands() {
  ReadyOutcome r;
  Notify n;
  n.notify_one();  // the permit: notified() is ready
  Sleep long_sleep = volt::sleep(1h);
  auto a = co_await volt::select(long_sleep, n.notified());
  r.index = a.index();
  r.timers = stats_here().active_timers;  // the sleep was never registered

  int second_asked = 0;
  int wrong = 0;
  for (int i = 0; i < 100; ++i) {
    auto b = co_await volt::select_biased(Ready{1}, Ready{2, &second_asked});
    if (b.index() != 0 || std::get<0>(b) != 1) ++wrong;
  }
  r.biased_second_asked = second_asked;
  r.biased_wrong = wrong;

  // Biased: a not-ready first operand is asked, then the ready second wins.
  auto c = co_await volt::select_biased(n.notified(), Ready{7});
  r.skip_index = c.index();
  r.value = std::get<1>(c);
  co_return r;
}

TEST_P(SelectTest, ReadyOperandWinsWithoutWaiting) {
  Runtime rt = make_runtime(GetParam());
  ReadyOutcome r = run_in_runtime(rt, GetParam(), ready_operands());
  EXPECT_EQ(r.index, 1u);
  EXPECT_EQ(r.timers, 0u) << "the losing sleep was started";
  EXPECT_EQ(r.biased_wrong, 0) << "select_biased did not pick the first ready operand";
  EXPECT_EQ(r.biased_second_asked, 0) << "an operand after the ready winner was asked";
  EXPECT_EQ(r.skip_index, 1u);
  EXPECT_EQ(r.value, 7);
  EXPECT_EQ(rt.stats().active_timers, 0u);
}

Task<std::vector<int>> random_start(int rounds) {
  std::vector<int> wins(2, 0);
  for (int i = 0; i < rounds; ++i) {
    auto r = co_await volt::select(Ready{0}, Ready{1});
    const int v = r.index() == 0 ? std::get<0>(r) : std::get<1>(r);
    if (v != static_cast<int>(r.index())) wins[0] = -1000;  // index and value disagree
    ++wins[r.index()];
  }
  co_return wins;
}

TEST_P(SelectTest, RandomStartLetsEachReadyOperandWin) {
  Runtime rt = make_runtime(GetParam());
  std::vector<int> wins = run_in_runtime(rt, GetParam(), random_start(200));
  EXPECT_GE(wins[0], 1);
  EXPECT_GE(wins[1], 1);
  EXPECT_EQ(wins[0] + wins[1], 200);
}

// ---- waiting ----

Task<void> notify_later(Notify* n, std::chrono::nanoseconds d) {
  co_await volt::sleep(d);
  n->notify_one();
}

struct WaitOutcome {
  std::size_t index = 99;
  std::uint64_t timers = 99;
  std::size_t sem_index = 99;
  std::uint64_t permits_after_release = 99;
  std::chrono::nanoseconds elapsed{};
};

Task<WaitOutcome> wait_for_notify_or_timer() {
  WaitOutcome r;
  Notify n;
  JoinHandle<void> notifier = volt::spawn(notify_later(&n, 2ms));
  auto a = co_await volt::select(volt::sleep(1h), n.notified());
  r.index = a.index();
  r.timers = stats_here().active_timers;  // the losing sleep's timer is gone
  co_await notifier;

  // A short sleep against an acquire that can never be granted.
  Semaphore sem(0);
  const auto start = SteadyClock::now();
  auto b = co_await volt::select(volt::sleep(2ms), sem.acquire());
  r.elapsed = SteadyClock::now() - start;
  r.sem_index = b.index();
  // The loser withdrew: a release now stays in the semaphore.
  sem.release(1);
  r.permits_after_release = sem.available_permits();
  co_return r;
}

TEST_P(SelectTest, NotifiedBeatsLongSleepShortSleepBeatsAcquire) {
  Runtime rt = make_runtime(GetParam());
  WaitOutcome r = run_in_runtime(rt, GetParam(), wait_for_notify_or_timer());
  EXPECT_EQ(r.index, 1u);
  EXPECT_EQ(r.timers, 0u) << "the losing sleep is still registered";
  EXPECT_EQ(r.sem_index, 0u);
  EXPECT_GE(r.elapsed, 2ms);
  EXPECT_LT(r.elapsed, kNotHung);
  EXPECT_EQ(r.permits_after_release, 1u) << "the losing acquire did not withdraw";
}

// ---- losers hand back what they were given ----

// Runs as the last operand of a biased select, inside the selecting task:
// when it starts, every other operand is waiting. It completes them both
// (the task is only marked notified: it is running), then waits for good, so
// at the next poll both are finished and the biased check picks the first.
Task<void> release_and_notify(Semaphore* sem, Notify* n) {
  sem->release(1);  // granted to the queued acquire
  n->notify_one();  // completes the waiting notified()
  co_await volt::sleep(1h);
}

struct GrantedOutcome {
  std::size_t index = 99;
  std::uint64_t permits = 99;
  int marker_destroyed = -1;
  std::uint64_t timers = 99;
};

Task<GrantedOutcome> granted_acquire_loses() {
  GrantedOutcome r;
  Semaphore sem(0);
  Notify n;
  std::atomic<bool> started{false};
  std::atomic<int> destroyed{0};
  auto a = co_await volt::select_biased(n.notified(), sem.acquire(), Marker(&started, &destroyed),
                                        release_and_notify(&sem, &n));
  r.index = a.index();
  // The acquire had been granted the permit: it gave it back.
  r.permits = sem.available_permits();
  r.marker_destroyed = destroyed.load();
  r.timers = stats_here().active_timers;
  co_return r;
}

TEST_P(SelectTest, LosingGrantedAcquireGivesThePermitBack) {
  Runtime rt = make_runtime(GetParam());
  GrantedOutcome r = run_in_runtime(rt, GetParam(), granted_acquire_loses());
  EXPECT_EQ(r.index, 0u);
  EXPECT_EQ(r.permits, 1u) << "the permit granted to the losing acquire was lost";
  EXPECT_EQ(r.marker_destroyed, 1) << "the losing operand was not destroyed once";
  EXPECT_EQ(r.timers, 0u) << "the losing Task operand's sleep is still registered";
}

// As release_and_notify, for a oneshot.
Task<void> send_and_notify(oneshot::Sender<int>* tx, Notify* n) {
  (void)tx->send(41);
  n->notify_one();
  co_await volt::sleep(1h);
}

struct OneshotOutcome {
  std::size_t index = 99;
  std::optional<int> later;
};

Task<OneshotOutcome> oneshot_receiver_loses() {
  OneshotOutcome r;
  auto [tx, rx] = oneshot::channel<int>();
  Notify n;
  auto a = co_await volt::select_biased(n.notified(), rx, send_and_notify(&tx, &n));
  r.index = a.index();
  // The receiver is the caller's (an lvalue): it still has the value.
  std::optional<int> v = co_await rx;
  r.later = v;
  co_return r;
}

TEST_P(SelectTest, LosingOneshotReceiverKeepsItsValue) {
  Runtime rt = make_runtime(GetParam());
  OneshotOutcome r = run_in_runtime(rt, GetParam(), oneshot_receiver_loses());
  EXPECT_EQ(r.index, 0u);
  EXPECT_EQ(r.later, std::optional<int>(41));
}

struct AcquireAgainOutcome {
  int sleep_wins = 0;
  std::uint64_t permits_after_release = 99;
  bool got_permit = false;
  std::uint64_t permits_at_end = 99;
};

Task<AcquireAgainOutcome> lvalue_acquire_awaited_again() {
  AcquireAgainOutcome r;
  Semaphore sem(0);
  Semaphore::Acquire acquire = sem.acquire();
  for (int i = 0; i < 3; ++i) {
    auto a = co_await volt::select(acquire, volt::sleep(1ms));
    if (a.index() == 1) ++r.sleep_wins;
  }
  // Still queued (once): the release goes to it, not to the count.
  sem.release(1);
  r.permits_after_release = sem.available_permits();
  {
    Expected<SemaphorePermit> p = co_await acquire;
    r.got_permit = p.has_value();
  }
  r.permits_at_end = sem.available_permits();
  co_return r;
}

TEST_P(SelectTest, LosingLvalueAcquireStaysQueuedAndCanBeAwaitedAgain) {
  Runtime rt = make_runtime(GetParam());
  AcquireAgainOutcome r = run_in_runtime(rt, GetParam(), lvalue_acquire_awaited_again());
  EXPECT_EQ(r.sleep_wins, 3);
  EXPECT_EQ(r.permits_after_release, 0u) << "the lvalue acquire left the queue when it lost";
  EXPECT_TRUE(r.got_permit);
  EXPECT_EQ(r.permits_at_end, 1u);
}

// ---- operand kinds ----

struct KindsOutcome {
  std::size_t join_index = 99;
  int join_value = 0;
  std::size_t lvalue_join_index = 99;
  int lvalue_join_later = 0;
  std::size_t lock_lost_index = 99;
  std::size_t lock_index = 99;
  int guarded = 0;
  bool try_lock_after = false;
  std::size_t cancelled_index = 99;
  std::size_t task_index = 99;
  int task_value = 0;
};

Task<void> cancel_later(CancellationToken token, std::chrono::nanoseconds d) {
  co_await volt::sleep(d);
  token.cancel();
}

Task<KindsOutcome> operand_kinds() {
  KindsOutcome r;
  // A spawned task's join handle (moved in).
  auto a = co_await volt::select(volt::spawn(delayed_value(2ms, 42)), volt::sleep(1h));
  r.join_index = a.index();
  if (a.index() == 0) r.join_value = std::get<0>(a);

  // An lvalue join handle that loses stays usable.
  JoinHandle<int> slow = volt::spawn(delayed_value(30ms, 43));
  auto b = co_await volt::select(slow, volt::sleep(1ms));
  r.lvalue_join_index = b.index();
  r.lvalue_join_later = co_await slow;

  // A mutex lock: loses while the mutex is held, wins once it is free.
  Mutex<int> m(5);
  {
    auto guard = m.try_lock();
    auto c = co_await volt::select(m.lock(), volt::sleep(2ms));
    r.lock_lost_index = c.index();
  }
  {
    auto d = co_await volt::select(volt::sleep(1h), m.lock());
    r.lock_index = d.index();
    if (d.index() == 1) {
      Mutex<int>::Guard& g = std::get<1>(d);
      *g += 1;
      r.guarded = *g;
    }
  }
  r.try_lock_after = m.try_lock().has_value();

  // CancellationToken::cancelled().
  CancellationToken token;
  JoinHandle<void> canceller = volt::spawn(cancel_later(token, 2ms));
  auto e = co_await volt::select(volt::sleep(1h), token.cancelled());
  r.cancelled_index = e.index();
  co_await canceller;

  // A Task operand runs inside this task.
  auto f = co_await volt::select(volt::sleep(1h), square(9));
  r.task_index = f.index();
  if (f.index() == 1) r.task_value = std::get<1>(f);
  co_return r;
}

TEST_P(SelectTest, JoinHandleMutexCancellationAndTaskOperands) {
  Runtime rt = make_runtime(GetParam());
  KindsOutcome r = run_in_runtime(rt, GetParam(), operand_kinds());
  EXPECT_EQ(r.join_index, 0u);
  EXPECT_EQ(r.join_value, 42);
  EXPECT_EQ(r.lvalue_join_index, 1u);
  EXPECT_EQ(r.lvalue_join_later, 43);
  EXPECT_EQ(r.lock_lost_index, 1u);
  EXPECT_EQ(r.lock_index, 1u);
  EXPECT_EQ(r.guarded, 6);
  EXPECT_TRUE(r.try_lock_after) << "a lock operand left the mutex locked";
  EXPECT_EQ(r.cancelled_index, 1u);
  EXPECT_EQ(r.task_index, 1u);
  EXPECT_EQ(r.task_value, 81);
  EXPECT_EQ(rt.stats().active_timers, 0u);
}

Task<void> void_task() {
  co_return;
}

Task<int&> ref_task(int* p) {
  co_return *p;
}

struct TypesOutcome {
  std::size_t void_index = 99;
  std::size_t void_branch_index = 99;
  std::size_t dup_index = 99;
  int dup_value = 0;
  bool ref_same_object = false;
};

Task<TypesOutcome> result_types() {
  TypesOutcome r;
  auto a = co_await volt::select_biased(void_task(), volt::sleep(0ms), Ready{3});
  static_assert(std::is_same_v<decltype(a), std::variant<std::monostate, std::monostate, int>>);
  r.void_index = a.index();
  // The void Task runs as a branch and finishes while being started.
  auto a2 = co_await volt::select_biased(volt::sleep(1h), void_task());
  r.void_branch_index = a2.index();
  static_assert(std::is_same_v<decltype(a2), std::variant<std::monostate, std::monostate>>);

  auto b = co_await volt::select_biased(Ready{4}, Ready{5});
  static_assert(std::is_same_v<decltype(b), std::variant<int, int>>);
  r.dup_index = b.index();
  r.dup_value = std::get<0>(b);

  int target = 0;
  auto c = co_await volt::select(ref_task(&target));
  static_assert(std::is_same_v<decltype(c), std::variant<std::reference_wrapper<int>>>);
  r.ref_same_object = &std::get<0>(c).get() == &target;
  co_return r;
}

TEST_P(SelectTest, VoidIsMonostateDuplicateTypesByIndexReferences) {
  Runtime rt = make_runtime(GetParam());
  TypesOutcome r = run_in_runtime(rt, GetParam(), result_types());
  // The void Task is not ready at await_ready (lazy), the sleep(0) is: it wins.
  EXPECT_EQ(r.void_index, 1u);
  EXPECT_EQ(r.void_branch_index, 1u);
  EXPECT_EQ(r.dup_index, 0u);
  EXPECT_EQ(r.dup_value, 4);
  EXPECT_TRUE(r.ref_same_object);
}

struct ThrowOutcome {
  std::string message;
  std::string at_start_message;
  std::uint64_t timers = 99;
};

Task<ThrowOutcome> winner_throws() {
  ThrowOutcome r;
  try {
    auto a = co_await volt::select(volt::sleep(1h), throw_after(1ms, "late"));
    (void)a;
  } catch (const std::runtime_error& e) {
    r.message = e.what();
  }
  r.timers = stats_here().active_timers;
  try {
    auto b = co_await volt::select(volt::sleep(1h), throw_after(0ms, "at once"));
    (void)b;
  } catch (const std::runtime_error& e) {
    r.at_start_message = e.what();
  }
  co_return r;
}

TEST_P(SelectTest, ExceptionFromTheWinnerPropagates) {
  Runtime rt = make_runtime(GetParam());
  ThrowOutcome r = run_in_runtime(rt, GetParam(), winner_throws());
  EXPECT_EQ(r.message, "late");
  EXPECT_EQ(r.at_start_message, "at once");
  EXPECT_EQ(r.timers, 0u);
  EXPECT_EQ(rt.stats().active_timers, 0u);
}

struct NestedOutcome {
  std::size_t outer = 99;
  std::size_t inner = 99;
  bool timed_out = false;
  bool notified_after_timeout = false;
  std::size_t in_time_index = 99;
  std::uint64_t timers = 99;
};

Task<NestedOutcome> nested() {
  NestedOutcome r;
  Notify n;
  JoinHandle<void> notifier = volt::spawn(notify_later(&n, 2ms));
  auto a = co_await volt::select(volt::select(volt::sleep(1h), n.notified()), volt::sleep(1h));
  r.outer = a.index();
  if (a.index() == 0) r.inner = std::get<0>(a).index();
  co_await notifier;

  // A select that times out: its branches are cancelled with it.
  Notify m;
  Expected<std::variant<std::monostate, std::monostate>> t =
      co_await volt::timeout(2ms, volt::select(volt::sleep(1h), m.notified()));
  r.timed_out = !t && t.error() == errc::timed_out;
  // Nobody waits on m any more: notify_one stores the permit.
  m.notify_one();
  auto b = co_await volt::select_biased(m.notified(), Ready{0});
  r.notified_after_timeout = b.index() == 0;

  JoinHandle<void> notifier2 = volt::spawn(notify_later(&m, 1ms));
  auto in_time = co_await volt::timeout(1h, volt::select(volt::sleep(1h), m.notified()));
  r.in_time_index = in_time ? (*in_time).index() : 99;
  co_await notifier2;
  r.timers = stats_here().active_timers;
  co_return r;
}

TEST_P(SelectTest, SelectInSelectAndInTimeout) {
  Runtime rt = make_runtime(GetParam());
  NestedOutcome r = run_in_runtime(rt, GetParam(), nested());
  EXPECT_EQ(r.outer, 0u);
  EXPECT_EQ(r.inner, 1u);
  EXPECT_TRUE(r.timed_out);
  EXPECT_TRUE(r.notified_after_timeout) << "the timed-out select's Notified stayed registered";
  EXPECT_EQ(r.in_time_index, 1u);
  EXPECT_EQ(r.timers, 0u);
}

// An lvalue Select interrupted by a timeout carries on when awaited again.
struct ResumedOutcome {
  bool timed_out = false;
  std::size_t index = 99;
};

Task<ResumedOutcome> interrupted_select() {
  ResumedOutcome r;
  Notify n;
  auto s = volt::select(volt::sleep(1h), n.notified());
  Expected<std::variant<std::monostate, std::monostate>> t = co_await volt::timeout(1ms, s);
  r.timed_out = !t;
  n.notify_one();  // reaches the Notified still registered in s
  auto a = co_await s;
  r.index = a.index();
  co_return r;
}

TEST_P(SelectTest, InterruptedSelectCarriesOnWhenAwaitedAgain) {
  Runtime rt = make_runtime(GetParam());
  ResumedOutcome r = run_in_runtime(rt, GetParam(), interrupted_select());
  EXPECT_TRUE(r.timed_out);
  EXPECT_EQ(r.index, 1u);
}

// ---- cooperative budget ----

// A loop of selects whose operands are always ready must still let other
// tasks run (select yields when the budget is spent, as its operands would).
Task<long> spin_on_ready(Notify* ready, std::atomic<bool>* stop) {
  long n = 0;
  while (!stop->load(std::memory_order_acquire)) {
    ready->notify_one();
    auto r = co_await volt::select(ready->notified(), volt::sleep(0ms));
    n += static_cast<long>(r.index()) + 1;
  }
  co_return n;
}

Task<void> set_flag(std::atomic<bool>* flag) {
  flag->store(true, std::memory_order_release);
  co_return;
}

Task<bool> budget_lets_others_run() {
  Notify ready;
  std::atomic<bool> stop{false};
  JoinHandle<long> spinner = volt::spawn(spin_on_ready(&ready, &stop));
  JoinHandle<void> other = volt::spawn(set_flag(&stop));
  // Let the spinner start first: joining `other` right away would poll it
  // in place (and stop the spinner before it spun).
  co_await volt::yield_now();
  co_await other;
  long n = co_await spinner;
  co_return n > 0;
}

TEST(SelectBudget, AlwaysReadySelectLoopYields) {
  // One thread: the spinner and the task that stops it share it.
  Runtime rt = make_runtime(kCurrentThread);
  EXPECT_TRUE(rt.block_on(budget_lets_others_run()));
}

// With the budget spent, a Notified takes the permit in await_ready and only
// then finds it may not complete; if another operand could then win, the
// permit would be cancelled with it. select does not ask any operand while
// the budget is spent, so after every round the permit is stored iff the
// Notified did not win. The loop crosses the budget limit many times.
Task<int> permits_across_budget(int rounds) {
  Notify n;
  int lost = 0;
  for (int i = 0; i < rounds; ++i) {
    n.notify_one();
    auto r = co_await volt::select(n.notified(), volt::sleep(0ms));
    Notify::Notified probe = n.notified();
    const bool stored = probe.enable();  // takes the permit if it is there
    if (r.index() == 1 && !stored) ++lost;
    if (r.index() == 0 && stored) ++lost;  // (a duplicate, the other way)
  }
  co_return lost;
}

TEST(SelectBudget, SpentBudgetLosesNoPermit) {
  Runtime rt = make_runtime(kCurrentThread);
  EXPECT_EQ(rt.block_on(permits_across_budget(5000)), 0);
}

// ---- allocation ----

struct AllocOutcome {
  std::uint64_t yield_allocs = 99;
  std::uint64_t sleep_allocs = 99;
  std::uint64_t ready_allocs = 99;
  int wrong = 0;
};

Task<void> eight_with_yield(std::vector<Notify>* n, int rounds, int* wrong) {
  auto& v = *n;
  for (int i = 0; i < rounds; ++i) {
    auto r =
        co_await volt::select(v[0].notified(), v[1].notified(), v[2].notified(), v[3].notified(),
                              v[4].notified(), v[5].notified(), v[6].notified(), volt::yield_now());
    if (r.index() != 7) ++*wrong;
  }
}

Task<void> eight_with_sleep(std::vector<Notify>* n, int rounds, int* wrong) {
  auto& v = *n;
  for (int i = 0; i < rounds; ++i) {
    auto r = co_await volt::select(v[0].notified(), v[1].notified(), v[2].notified(),
                                   v[3].notified(), v[4].notified(), v[5].notified(),
                                   v[6].notified(), volt::sleep(100us));
    if (r.index() != 7) ++*wrong;
  }
}

Task<void> eight_one_ready(std::vector<Notify>* n, int rounds, int* wrong) {
  auto& v = *n;
  for (int i = 0; i < rounds; ++i) {
    v[i % 7].notify_one();
    auto r =
        co_await volt::select(v[0].notified(), v[1].notified(), v[2].notified(), v[3].notified(),
                              v[4].notified(), v[5].notified(), v[6].notified(), volt::sleep(1h));
    if (r.index() != static_cast<std::size_t>(i % 7)) ++*wrong;
  }
}

Task<AllocOutcome> count_select_allocations() {
  AllocOutcome r;
  std::vector<Notify> n(7);
  int wrong = 0;
  // Warm-up: frame pools, thread-locals, the timer wheel.
  co_await eight_with_yield(&n, 200, &wrong);
  co_await eight_with_sleep(&n, 10, &wrong);
  co_await eight_one_ready(&n, 200, &wrong);

  std::uint64_t before = heap_allocations();
  co_await eight_with_yield(&n, 1000, &wrong);
  r.yield_allocs = heap_allocations() - before;
  before = heap_allocations();
  co_await eight_with_sleep(&n, 30, &wrong);
  r.sleep_allocs = heap_allocations() - before;
  before = heap_allocations();
  co_await eight_one_ready(&n, 1000, &wrong);
  r.ready_allocs = heap_allocations() - before;
  r.wrong = wrong;
  co_return r;
}

// One worker, or the current thread (as the timeout allocation test: a task
// migrating to a worker with a cold frame cache allocates once there).
class SelectAllocationTest : public ::testing::TestWithParam<Flavour> {};

INSTANTIATE_TEST_SUITE_P(Flavours, SelectAllocationTest,
                         ::testing::Values(kMultiThread1, kCurrentThread), FlavourName());

TEST_P(SelectAllocationTest, EightOperandsNoHeapAllocationAfterWarmUp) {
  if (kFramePoolDisabled)
    GTEST_SKIP() << "frame pool disabled: the counting operator new is not installed";
  Runtime rt = make_runtime(GetParam());
  AllocOutcome r = run_in_runtime(rt, GetParam(), count_select_allocations());
  EXPECT_EQ(r.wrong, 0);
  EXPECT_EQ(r.yield_allocs, 0u) << "8 branches started and 7 cancelled allocated";
  EXPECT_EQ(r.sleep_allocs, 0u) << "8 branches with a timer allocated";
  EXPECT_EQ(r.ready_allocs, 0u) << "a select won at await_ready allocated";
}

// ---- stress: no notification lost or duplicated ----
//
// One notification is in flight at a time (`in_flight`, claimed by a
// notifier before notify_one, released by the consumer that receives it), so
// notify_one never merges two into one permit: a lost notification leaves
// `in_flight` set for good (the test times out), a duplicated one is received
// while `in_flight` is clear. Consumers select over notified() against a
// short sleep or a yield; those often win while the Notified has been
// chosen, and its destruction must pass the notification on.

struct StressState {
  Notify notify;
  std::atomic<bool> in_flight{false};
  std::atomic<long> sent{0};
  std::atomic<long> received{0};
  std::atomic<long> duplicates{0};
  std::atomic<long> other_wins{0};
  std::atomic<bool> stop{false};
  long total = 0;
};

Task<void> stress_consumer(StressState* s, int id) {
  std::uint32_t rng = 0x9E3779B9u * static_cast<std::uint32_t>(id + 1);
  while (!s->stop.load(std::memory_order_acquire)) {
    rng ^= rng << 13;
    rng ^= rng >> 17;
    rng ^= rng << 5;
    std::size_t index = 0;
    // Vary the race. A yield_now operand is a loser that finishes at the
    // task's next poll: if notify_one chose the Notified in between (another
    // worker, or another task run before this one is polled again), the
    // biased check still picks the yield and the Notified must pass the
    // notification on. The sleep wins at a timer tick, sometimes together
    // with a notification.
    switch (rng % 3) {
      case 0: {
        auto r = co_await volt::select_biased(volt::yield_now(), s->notify.notified());
        index = r.index() == 1 ? 0 : 1;
        break;
      }
      case 1: {
        auto r = co_await volt::select(s->notify.notified(), volt::yield_now());
        index = r.index();
        break;
      }
      default: {
        auto r = co_await volt::select(s->notify.notified(), volt::sleep(50us));
        index = r.index();
        break;
      }
    }
    if (index == 0) {
      if (!s->in_flight.exchange(false, std::memory_order_acq_rel)) {
        s->duplicates.fetch_add(1, std::memory_order_relaxed);
      }
      if (s->received.fetch_add(1, std::memory_order_acq_rel) + 1 == s->total) {
        s->stop.store(true, std::memory_order_release);
      }
    } else {
      s->other_wins.fetch_add(1, std::memory_order_relaxed);
    }
  }
}

Task<void> stress_notifier(StressState* s) {
  while (!s->stop.load(std::memory_order_acquire)) {
    if (s->sent.load(std::memory_order_acquire) >= s->total) {
      co_await volt::yield_now();
      continue;
    }
    bool expected = false;
    if (s->in_flight.compare_exchange_strong(expected, true, std::memory_order_acq_rel)) {
      if (s->sent.fetch_add(1, std::memory_order_acq_rel) < s->total) {
        s->notify.notify_one();
      } else {
        s->in_flight.store(false, std::memory_order_release);
      }
    }
    co_await volt::yield_now();
  }
}

TEST_P(SelectTest, StressNotifyAgainstTimerEveryNotificationOnce) {
  Runtime rt = make_runtime(GetParam());
  StressState s;
  s.total = static_cast<long>(scale(100000));
  std::vector<JoinHandle<void>> handles;
  for (int i = 0; i < 4; ++i)
    handles.push_back(rt.spawn(stress_consumer(&s, i)));
  for (int i = 0; i < 2; ++i)
    handles.push_back(rt.spawn(stress_notifier(&s)));
  {
    DriveInBackground drive(rt, GetParam());
    const bool done = wait_until([&] { return s.stop.load(); });
    if (!done) s.stop.store(true);  // let the tasks end, then report
    for (auto& h : handles)
      h.join();
  }
  EXPECT_EQ(s.received.load(), s.total) << "notifications lost (in flight: " << s.in_flight.load()
                                        << ", sent: " << s.sent.load() << ")";
  EXPECT_EQ(s.duplicates.load(), 0);
  // Exactly consumed: no permit is left over.
  Notify::Notified w = s.notify.notified();
  EXPECT_FALSE(w.enable()) << "a notification was duplicated into a stored permit";
  std::printf("[ stress   ] %ld notifications, %ld yield or sleep wins\n", s.received.load(),
              s.other_wins.load());
}

// ---- two mpmc channels: every value received exactly once ----
//
// Producers send on two small channels (so sends wait for room); consumers
// (clones of both receivers) select over rx1.recv() and rx2.recv(), and in
// some rounds a yield_now() as well, which often wins while a Recv has been
// woken: its destruction must leave the value in the channel (or pass the
// wake-up on). Each value is marked when received; none may be missing or
// received twice.

struct ChannelState {
  std::vector<std::atomic<int>> seen;  // per value: times received
  std::atomic<long> duplicates{0};
  std::atomic<long> failed_sends{0};
  explicit ChannelState(std::size_t n) : seen(n) {}
};

Task<void> channel_producer(mpmc::Sender<int> tx, int first, int count, ChannelState* s) {
  for (int v = first; v < first + count; ++v) {
    SendResult<int> sent = co_await tx.send(int(v));
    if (!sent) s->failed_sends.fetch_add(1, std::memory_order_relaxed);
  }
}

void mark_received(ChannelState* s, int v) {
  if (s->seen[static_cast<std::size_t>(v)].fetch_add(1, std::memory_order_relaxed) != 0)
    s->duplicates.fetch_add(1, std::memory_order_relaxed);
}

Task<void> channel_consumer(mpmc::Receiver<int> rx1, mpmc::Receiver<int> rx2, int id,
                            ChannelState* s) {
  bool open1 = true;
  bool open2 = true;
  std::uint32_t round = static_cast<std::uint32_t>(id);
  while (open1 && open2) {
    ++round;
    std::optional<int> v;
    std::size_t from = 0;
    if (round % 2 == 0) {
      auto r = co_await volt::select(rx1.recv(), rx2.recv());
      from = r.index();
      v = r.index() == 0 ? std::move(std::get<0>(r)) : std::move(std::get<1>(r));
    } else {
      auto r = co_await volt::select(rx1.recv(), rx2.recv(), volt::yield_now());
      from = r.index();
      if (r.index() == 0) v = std::move(std::get<0>(r));
      if (r.index() == 1) v = std::move(std::get<1>(r));
      if (r.index() == 2) continue;
    }
    if (v) {
      mark_received(s, *v);
    } else if (from == 0) {
      open1 = false;  // closed and drained
    } else {
      open2 = false;
    }
  }
  // One channel is closed and drained: the other alone.
  mpmc::Receiver<int>& rest = open1 ? rx1 : rx2;
  for (;;) {
    std::optional<int> v = co_await rest.recv();
    if (!v) break;
    mark_received(s, *v);
  }
}

TEST_P(SelectTest, TwoChannelReceiversEveryValueOnce) {
  Runtime rt = make_runtime(GetParam());
  const int per_producer = static_cast<int>(scale(20000));
  const int producers_per_channel = 2;
  const int total = 2 * producers_per_channel * per_producer;
  ChannelState s(static_cast<std::size_t>(total));
  std::vector<JoinHandle<void>> handles;
  {
    auto [tx1, rx1] = mpmc::channel<int>(4);
    auto [tx2, rx2] = mpmc::channel<int>(4);
    for (int i = 0; i < 3; ++i)
      handles.push_back(rt.spawn(channel_consumer(rx1, rx2, i, &s)));
    int next = 0;
    for (int p = 0; p < producers_per_channel; ++p) {
      handles.push_back(rt.spawn(channel_producer(tx1, next, per_producer, &s)));
      next += per_producer;
      handles.push_back(rt.spawn(channel_producer(tx2, next, per_producer, &s)));
      next += per_producer;
    }
  }  // our handles go: the channels close when the producers finish
  {
    DriveInBackground drive(rt, GetParam());
    for (auto& h : handles)
      h.join();
  }
  EXPECT_EQ(s.failed_sends.load(), 0);
  EXPECT_EQ(s.duplicates.load(), 0);
  long missing = 0;
  for (auto& seen : s.seen)
    if (seen.load() == 0) ++missing;
  EXPECT_EQ(missing, 0) << "values sent but never received";
}

}  // namespace
}  // namespace volt::test
