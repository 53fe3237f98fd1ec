// Integration tests of the Runtime API (src/runtime/): block_on, spawn from
// inside and outside, joining both ways, the blocking-in-runtime and
// no-runtime errors, Handle, the Builder settings (worker count, thread
// names, start/stop hooks), stats, abort at the deterministic points,
// fairness of yield_now, and an idle runtime's CPU use.
//
// Most tests are parameterised over the flavours: multi-thread with 1, 2 and
// 4 workers, and current-thread. Coroutines here are free functions taking
// their state by pointer or value (a capturing coroutine lambda would leave
// its captures in a lambda object that dies before the frame does).
//
// Where a test must know a task ran on a worker (not on the main thread
// helping inside join()/block_on), it waits with wait_until() instead.
#include <pthread.h>
#include <sys/resource.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "runtime_support.hpp"

namespace volt::test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// ---- coroutines used by several tests ----

Task<void> set_flag(std::atomic<bool>* flag) {
  flag->store(true);
  co_return;
}

Task<int> fail_with(std::string message) {
  throw std::runtime_error(message);
  co_return 0;
}

Task<std::unique_ptr<int>> boxed(int x) {
  co_return std::make_unique<int>(x);
}

Task<std::thread::id> thread_id_of_task() {
  co_return std::this_thread::get_id();
}

// Runs `task` on a runtime thread and returns its result. On the
// multi-thread flavour the main thread does not wait inside join() until the
// task finished, so it never runs the task itself (join() may help run
// queued tasks): the task and what it spawns run on workers. The
// current-thread flavour has only the block_on thread.
template <class T>
T run_in_runtime(Runtime& rt, const Flavour& flavour, Task<T> task) {
  if (flavour.current_thread) return rt.block_on(std::move(task));
  JoinHandle<T> handle = rt.spawn(std::move(task));
  if (!wait_until([&] { return handle.is_finished(); })) {
    std::fprintf(stderr, "run_in_runtime: task did not finish within %llds\n",
                 static_cast<long long>(kNotHung.count()));
    std::abort();
  }
  return handle.join();
}

class RuntimeFlavourTest : public ::testing::TestWithParam<Flavour> {};

INSTANTIATE_TEST_SUITE_P(Flavours, RuntimeFlavourTest,
                         ::testing::Values(kMultiThread1, kMultiThread2, kMultiThread4,
                                           kCurrentThread),
                         FlavourName());

// ---- block_on, spawn, join ----

TEST_P(RuntimeFlavourTest, BlockOnReturnsTheValueOrRethrows) {
  Runtime rt = make_runtime(GetParam());
  EXPECT_EQ(rt.block_on(square(7)), 49);

  std::atomic<bool> ran{false};
  rt.block_on(set_flag(&ran));
  EXPECT_TRUE(ran.load());

  std::unique_ptr<int> box = rt.block_on(boxed(5));
  ASSERT_NE(box, nullptr);
  EXPECT_EQ(*box, 5);

  try {
    rt.block_on(fail_with("boom"));
    ADD_FAILURE() << "block_on did not rethrow";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "boom");
  }
  // Through Handle too, repeatedly on the same runtime.
  Handle handle = rt.handle();
  for (int i = 0; i < 20; ++i)
    EXPECT_EQ(handle.block_on(square(i)), i * i);
}

Task<long> spawn_and_await_squares(int n) {
  std::vector<JoinHandle<int>> handles;
  for (int i = 0; i < n; ++i)
    handles.push_back(volt::spawn(square(i)));
  long sum = 0;
  for (auto& h : handles) {
    sum += co_await h;
    EXPECT_FALSE(h.valid());  // awaiting consumed it
  }
  co_return sum;
}

Task<int> spawn_chain(int depth) {
  if (depth == 0) co_return 0;
  co_return 1 + co_await volt::spawn(spawn_chain(depth - 1));
}

TEST_P(RuntimeFlavourTest, TasksSpawnedInsideAreAwaitedInside) {
  Runtime rt = make_runtime(GetParam());
  constexpr int kN = 500;
  EXPECT_EQ(rt.block_on(spawn_and_await_squares(kN)), long{kN - 1} * kN * (2 * kN - 1) / 6);
  EXPECT_EQ(rt.block_on(spawn_chain(200)), 200);
  EXPECT_EQ(run_in_runtime(rt, GetParam(), spawn_chain(100)), 100);
}

TEST_P(RuntimeFlavourTest, TasksSpawnedOutsideAreJoinedOutside) {
  Runtime rt = make_runtime(GetParam());
  constexpr int kN = 300;
  std::vector<JoinHandle<int>> handles;
  for (int i = 0; i < kN; ++i)
    handles.push_back(rt.spawn(square(i)));
  std::vector<std::atomic<bool>> flags(kN);
  std::vector<JoinHandle<void>> void_handles;
  for (int i = 0; i < kN; ++i)
    void_handles.push_back(rt.handle().spawn(set_flag(&flags[i])));
  for (int i = 0; i < kN; ++i) {
    EXPECT_EQ(handles[i].join(), i * i);
    EXPECT_FALSE(handles[i].valid());
    void_handles[i].join();
    EXPECT_TRUE(flags[i].load());
  }
  // A consumed handle reports invalid_handle instead of blocking.
  EXPECT_EQ(volt_error_of([&] { (void)handles[0].join(); }), code(errc::invalid_handle));
}

TEST_P(RuntimeFlavourTest, TasksSpawnedOutsideAreAwaitedInside) {
  Runtime rt = make_runtime(GetParam());
  JoinHandle<int> outer = rt.spawn(square(12));
  auto await_it = [](JoinHandle<int> h) -> Task<int> { co_return co_await h; };
  EXPECT_EQ(rt.block_on(await_it(std::move(outer))), 144);
}

Task<std::string> await_failure() {
  try {
    co_await volt::spawn(fail_with("inside"));
  } catch (const std::runtime_error& e) {
    co_return e.what();
  }
  co_return "no exception";
}

TEST_P(RuntimeFlavourTest, TaskExceptionReachesBothKindsOfJoin) {
  Runtime rt = make_runtime(GetParam());
  EXPECT_EQ(rt.block_on(await_failure()), "inside");
  JoinHandle<int> h = rt.spawn(fail_with("outside"));
  try {
    (void)h.join();
    ADD_FAILURE() << "join did not rethrow";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "outside");
  }
}

// ---- blocking on a runtime thread ----

Task<int> join_on_runtime_thread() {
  JoinHandle<int> h = volt::spawn(square(3));
  EXPECT_EQ(volt_error_of([&] { (void)h.join(); }), code(errc::blocking_in_runtime));
  // The refused join left the handle usable.
  EXPECT_TRUE(h.valid());
  co_return co_await h;
}

TEST_P(RuntimeFlavourTest, JoinOnARuntimeThreadThrowsBlockingInRuntime) {
  Runtime rt = make_runtime(GetParam());
  EXPECT_EQ(rt.block_on(join_on_runtime_thread()), 9);
  EXPECT_EQ(run_in_runtime(rt, GetParam(), join_on_runtime_thread()), 9);
}

struct BlockOnInside {
  Runtime* own;
  Runtime* other;
  LifeCounters* frames;
  std::atomic<int>* ran;
};

Task<int> block_on_inside(BlockOnInside s) {
  int refused = 0;
  auto try_block = [&](auto&& block) {
    std::error_code ec = volt_error_of(block);
    EXPECT_EQ(ec, code(errc::blocking_in_runtime));
    if (ec == errc::blocking_in_runtime) ++refused;
  };
  try_block([&] { (void)s.own->block_on(probe_body(Tracked(*s.frames, 1), s.ran)); });
  try_block([&] { (void)s.own->handle().block_on(probe_body(Tracked(*s.frames, 2), s.ran)); });
  // Any runtime's thread refuses, not only the owner's.
  try_block([&] { (void)s.other->block_on(probe_body(Tracked(*s.frames, 3), s.ran)); });
  co_return refused;
}

TEST_P(RuntimeFlavourTest, BlockOnInsideATaskThrowsAndDestroysTheTaskUnrun) {
  Runtime rt = make_runtime(GetParam());
  Runtime other = make_runtime(kMultiThread1);
  LifeCounters frames;
  std::atomic<int> ran{0};
  BlockOnInside s{&rt, &other, &frames, &ran};
  EXPECT_EQ(rt.block_on(block_on_inside(s)), 3);
  EXPECT_EQ(run_in_runtime(rt, GetParam(), block_on_inside(s)), 3);
  EXPECT_EQ(ran.load(), 0);
  EXPECT_EQ(frames.live(), 0);
  EXPECT_EQ(frames.double_destroyed.load(), 0);
  // Neither runtime was harmed.
  EXPECT_EQ(rt.block_on(square(4)), 16);
  EXPECT_EQ(other.block_on(square(5)), 25);
}

// ---- Handle ----

Task<int> spawn_through_current_handle(int n) {
  Handle handle = Handle::current();
  std::vector<JoinHandle<int>> handles;
  for (int i = 0; i < n; ++i)
    handles.push_back(handle.spawn(square(i)));
  int sum = 0;
  for (auto& h : handles)
    sum += co_await h;
  co_return sum;
}

Task<Handle> current_handle() {
  co_return Handle::current();
}

TEST_P(RuntimeFlavourTest, HandleCurrentInsideATaskSpawnsOnThatRuntime) {
  Runtime rt = make_runtime(GetParam());
  const std::uint64_t spawned_before = rt.stats().total_spawned;
  EXPECT_EQ(rt.block_on(spawn_through_current_handle(10)), 285);
  // The root and its ten children, all on this runtime.
  EXPECT_EQ(rt.stats().total_spawned, spawned_before + 11);

  // The handle stays usable outside the runtime.
  Handle handle = rt.block_on(current_handle());
  EXPECT_EQ(handle.spawn(square(9)).join(), 81);
  EXPECT_EQ(handle.block_on(square(8)), 64);
  EXPECT_EQ(rt.stats().total_spawned, spawned_before + 14);
}

TEST(RuntimeApiTest, HandleCurrentOutsideARuntimeThrowsNoRuntime) {
  EXPECT_EQ(volt_error_of([] { (void)Handle::current(); }), code(errc::no_runtime));
  // A runtime existing somewhere does not make this thread part of it.
  Runtime rt = make_runtime(kMultiThread2);
  EXPECT_EQ(volt_error_of([] { (void)Handle::current(); }), code(errc::no_runtime));
  Runtime ct = make_runtime(kCurrentThread);
  EXPECT_EQ(volt_error_of([] { (void)Handle::current(); }), code(errc::no_runtime));
}

TEST(RuntimeApiTest, SpawnOutsideARuntimeThrowsNoRuntimeAndDestroysTheTask) {
  LifeCounters frames;
  std::atomic<int> ran{0};
  EXPECT_EQ(volt_error_of([&] { (void)volt::spawn(probe_body(Tracked(frames, 1), &ran)); }),
            code(errc::no_runtime));
  Runtime rt = make_runtime(kMultiThread1);
  EXPECT_EQ(volt_error_of([&] { (void)volt::spawn(probe_body(Tracked(frames, 2), &ran)); }),
            code(errc::no_runtime));
  EXPECT_EQ(ran.load(), 0);
  EXPECT_EQ(frames.live(), 0);
}

TEST(RuntimeApiTest, ZeroWorkerThreadsThrowsInvalidArgument) {
  EXPECT_EQ(volt_error_of([] { (void)Runtime::Builder().worker_threads(0).build(); }),
            code(errc::invalid_argument));
  EXPECT_EQ(volt_error_of([] { (void)Runtime::Builder::multi_thread().worker_threads(0).build(); }),
            code(errc::invalid_argument));
  // The exception is a volt::Error, catchable as std::system_error.
  EXPECT_THROW((void)Runtime::Builder().worker_threads(0).build(), std::system_error);
}

// ---- Builder: threads, names, hooks ----

std::map<std::string, int> thread_names_in_process() {
  std::map<std::string, int> names;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream comm(entry.path() / "comm");
    std::string name;
    if (std::getline(comm, name)) ++names[name];
  }
  return names;
}

Task<void> record_thread_name(std::mutex* m, std::vector<std::string>* names) {
  std::string name = current_thread_name();
  {
    std::lock_guard lock(*m);
    names->push_back(std::move(name));
  }
  co_return;
}

TEST(RuntimeBuilderTest, WorkerThreadsAreNamedAndHooksRunOncePerWorker) {
  constexpr std::size_t kWorkers = 3;
  std::mutex m;
  std::multiset<std::thread::id> started, stopped;
  std::vector<std::string> start_names;
  std::atomic<int> starts{0};
  {
    Runtime rt = Runtime::Builder()
                     .worker_threads(kWorkers)
                     .thread_name("vrtnm")
                     .on_thread_start([&] {
                       std::lock_guard lock(m);
                       started.insert(std::this_thread::get_id());
                       start_names.push_back(current_thread_name());
                       starts.fetch_add(1);
                     })
                     .on_thread_stop([&] {
                       std::lock_guard lock(m);
                       stopped.insert(std::this_thread::get_id());
                     })
                     .build();
    ASSERT_TRUE(wait_until([&] { return starts.load() == static_cast<int>(kWorkers); }));

    std::map<std::string, int> names = thread_names_in_process();
    for (std::size_t i = 0; i < kWorkers; ++i)
      EXPECT_EQ(names["vrtnm-" + std::to_string(i)], 1) << "worker " << i;
    int with_prefix = 0;
    for (const auto& [name, count] : names)
      if (name.rfind("vrtnm-", 0) == 0) with_prefix += count;
    EXPECT_EQ(with_prefix, static_cast<int>(kWorkers));

    // From inside tasks (run on workers: nobody joins until they finished).
    std::vector<std::string> task_names;
    std::vector<JoinHandle<void>> handles;
    for (int i = 0; i < 200; ++i)
      handles.push_back(rt.spawn(record_thread_name(&m, &task_names)));
    for (auto& h : handles)
      ASSERT_TRUE(wait_until([&] { return h.is_finished(); }));
    for (auto& h : handles)
      h.join();
    ASSERT_EQ(task_names.size(), 200u);
    for (const std::string& name : task_names) {
      EXPECT_TRUE(name == "vrtnm-0" || name == "vrtnm-1" || name == "vrtnm-2") << name;
    }
    std::lock_guard lock(m);
    EXPECT_TRUE(stopped.empty());
  }
  std::lock_guard lock(m);
  EXPECT_EQ(started.size(), kWorkers);
  EXPECT_EQ(std::set<std::thread::id>(started.begin(), started.end()).size(), kWorkers);
  EXPECT_EQ(stopped, started);  // the same threads, each once
  EXPECT_EQ(started.count(std::this_thread::get_id()), 0u);
  std::sort(start_names.begin(), start_names.end());
  EXPECT_EQ(start_names, (std::vector<std::string>{"vrtnm-0", "vrtnm-1", "vrtnm-2"}));
}

TEST(RuntimeBuilderTest, ThreadNamesDefaultAndTruncateTo15Bytes) {
  std::mutex m;
  std::vector<std::string> names;
  auto record = [&] {
    std::lock_guard lock(m);
    names.push_back(current_thread_name());
  };
  {
    Runtime rt = Runtime::Builder().worker_threads(2).on_thread_start(record).build();
    ASSERT_TRUE(wait_until([&] {
      std::lock_guard lock(m);
      return names.size() == 2;
    }));
  }
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"volt-worker-0", "volt-worker-1"}));

  names.clear();
  {
    // 16 bytes of name + "-0": the kernel keeps 15.
    Runtime rt = Runtime::Builder()
                     .worker_threads(1)
                     .thread_name("abcdefghijklmnop")
                     .on_thread_start(record)
                     .build();
    ASSERT_TRUE(wait_until([&] {
      std::lock_guard lock(m);
      return names.size() == 1;
    }));
  }
  EXPECT_EQ(names, (std::vector<std::string>{"abcdefghijklmno"}));
}

// ---- waking a sleeping worker for local work ----

// A task that fills its worker's LIFO slot twice pushes the first child into
// the local queue, which another worker may steal: a parked worker must be
// woken for it. Here the parent then blocks its worker's thread until the
// first child has run, so only the other worker can run it; without the
// wake-up it sleeps on and the parent waits out the bound. (Checks the
// one-worker shortcut of schedule_local's notification stays one-worker.)
Task<bool> spawn_two_then_block_until_first_ran(std::atomic<bool>* first_ran) {
  auto child = [](std::atomic<bool>* flag) -> Task<void> {
    flag->store(true, std::memory_order_release);
    co_return;
  };
  std::atomic<bool> second_ran{false};
  JoinHandle<void> first = volt::spawn(child(first_ran));
  JoinHandle<void> second = volt::spawn(child(&second_ran));  // displaces the first
  const auto give_up = Clock::now() + 10s;                    // "not hung" bound only
  while (!first_ran->load(std::memory_order_acquire)) {
    if (Clock::now() > give_up) co_return false;
    std::this_thread::yield();
  }
  co_await first;
  co_await second;
  co_return true;
}

TEST(MultiThreadWakeTest, LocalWorkPushedToTheQueueWakesASleepingWorker) {
  Runtime rt = make_runtime(kMultiThread2);
  for (int round = 0; round < 20; ++round) {
    std::this_thread::sleep_for(5ms);  // both workers go to sleep
    std::atomic<bool> first_ran{false};
    std::atomic<bool> done{false};
    JoinHandle<bool> parent =
        rt.spawn([](std::atomic<bool>* first_ran, std::atomic<bool>* done) -> Task<bool> {
          const bool ok = co_await spawn_two_then_block_until_first_ran(first_ran);
          done->store(true, std::memory_order_release);
          co_return ok;
        }(&first_ran, &done));
    // Not join(): a thread blocked in join may help run queued work.
    while (!done.load(std::memory_order_acquire))
      std::this_thread::sleep_for(1ms);
    ASSERT_TRUE(parent.join()) << "round " << round << ": the first child never ran";
  }
}

// ---- current-thread flavour ----

struct ThreadLog {
  std::mutex m;
  std::vector<std::thread::id> ids;
  void record() {
    std::lock_guard lock(m);
    ids.push_back(std::this_thread::get_id());
  }
};

Task<void> log_thread(ThreadLog* log) {
  log->record();
  co_await volt::yield_now();
  log->record();
}

Task<void> log_thread_and_spawn(ThreadLog* log) {
  log->record();
  co_await volt::spawn(log_thread(log));
  co_await Handle::current().spawn(log_thread(log));
  log->record();
}

TEST(CurrentThreadTest, EveryTaskRunsOnTheCallingThread) {
  Runtime rt = make_runtime(kCurrentThread);
  ThreadLog log;
  std::vector<JoinHandle<void>> outside;
  for (int i = 0; i < 10; ++i)
    outside.push_back(rt.spawn(log_thread_and_spawn(&log)));
  // Spawned from another thread, joined (and therefore driven) here.
  std::thread other([&] {
    for (int i = 0; i < 10; ++i)
      outside.push_back(rt.spawn(log_thread(&log)));
  });
  other.join();
  rt.block_on(log_thread_and_spawn(&log));
  EXPECT_EQ(rt.block_on(thread_id_of_task()), std::this_thread::get_id());
  for (auto& h : outside)
    h.join();

  std::lock_guard lock(log.m);
  // 11 x log_thread_and_spawn (2 + two children of 2) + 10 x log_thread (2).
  EXPECT_EQ(log.ids.size(), 11u * 6 + 10u * 2);
  for (std::thread::id id : log.ids)
    EXPECT_EQ(id, std::this_thread::get_id());
}

TEST(CurrentThreadTest, TasksSpawnedOutsideWaitForADrivingThread) {
  Runtime rt = make_runtime(kCurrentThread);
  std::atomic<bool> ran{false};
  JoinHandle<void> h = rt.spawn(set_flag(&ran));
  std::this_thread::sleep_for(20ms);
  EXPECT_FALSE(ran.load());  // no thread of its own
  EXPECT_FALSE(h.is_finished());
  h.join();  // drives the runtime
  EXPECT_TRUE(ran.load());
}

Task<long> spawn_and_yield(int id, int n) {
  std::vector<JoinHandle<int>> handles;
  for (int i = 0; i < n; ++i) {
    handles.push_back(volt::spawn(square(id + i)));
    co_await volt::yield_now();
  }
  long sum = 0;
  for (auto& h : handles)
    sum += co_await h;
  co_return sum;
}

TEST(CurrentThreadTest, SeveralThreadsBlockOnAtOnce) {
  Runtime rt = make_runtime(kCurrentThread);
  constexpr int kThreads = 3;
  constexpr int kPerThread = 200;
  std::vector<long> results(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back(
        [&, t] { results[t] = rt.block_on(spawn_and_yield(t * 1000, kPerThread)); });
  }
  for (auto& th : threads)
    th.join();
  for (int t = 0; t < kThreads; ++t) {
    long expected = 0;
    for (int i = 0; i < kPerThread; ++i)
      expected += long{t * 1000 + i} * (t * 1000 + i);
    EXPECT_EQ(results[t], expected) << "thread " << t;
  }
}

// ---- run order (current_thread.hpp, "Run queue") ----

Task<void> record_start(int index, std::vector<int>* order) {
  order->push_back(index);  // one thread: no race
  co_return;
}

// More tasks than the run queue's ring holds, so that its older halves move
// to the overflow list; the newest is joined first (taken back from the
// ring's tail and polled in place), the rest start in spawn order.
Task<std::vector<int>> spawn_past_the_ring(int n) {
  std::vector<int> order;
  std::vector<JoinHandle<void>> handles;
  for (int i = 0; i < n; ++i)
    handles.push_back(volt::spawn(record_start(i, &order)));
  co_await handles.back();
  for (int i = 0; i < n - 1; ++i)
    co_await handles[i];
  co_return order;
}

TEST(CurrentThreadTest, SpawnedTasksStartInSpawnOrderPastTheRing) {
  Runtime rt = make_runtime(kCurrentThread);
  constexpr int kTasks = 1000;  // the ring holds 256
  std::vector<int> expected{kTasks - 1};
  for (int i = 0; i < kTasks - 1; ++i)
    expected.push_back(i);
  EXPECT_EQ(rt.block_on(spawn_past_the_ring(kTasks)), expected);
}

Task<void> ping_pong(Notify* mine, Notify* theirs, int rounds, std::atomic<int>* round,
                     bool serve) {
  for (int i = 0; i < rounds; ++i) {
    if (serve) theirs->notify_one();
    co_await mine->notified();
    if (!serve) theirs->notify_one();
    round->fetch_add(1, std::memory_order_relaxed);
  }
}

Task<void> note_round(std::atomic<int>* round, int* seen_at) {
  *seen_at = round->load(std::memory_order_relaxed);
  co_return;
}

// Two tasks that wake each other take the LIFO slot in turns; the slot's cap
// (three polls in a row) still lets a task queued behind them run.
Task<int> ping_pong_beside_a_queued_task() {
  Notify a, b;
  std::atomic<int> round{0};
  int seen_at = -1;
  constexpr int kRounds = 1000;
  JoinHandle<void> server = volt::spawn(ping_pong(&a, &b, kRounds, &round, true));
  JoinHandle<void> client = volt::spawn(ping_pong(&b, &a, kRounds, &round, false));
  co_await volt::yield_now();  // both start and begin to wake each other
  JoinHandle<void> queued = volt::spawn(note_round(&round, &seen_at));
  co_await server;
  co_await client;
  co_await queued;
  co_return seen_at;
}

TEST(CurrentThreadTest, TasksWakingEachOtherDoNotStarveAQueuedTask) {
  Runtime rt = make_runtime(kCurrentThread);
  const int seen_at = rt.block_on(ping_pong_beside_a_queued_task());
  EXPECT_GE(seen_at, 0);
  EXPECT_LT(seen_at, 100) << "the queued task ran only after the ping-pong";
}

// ---- stats ----

TEST_P(RuntimeFlavourTest, StatsCountSpawnedPolledAndLiveTasks) {
  const Flavour& f = GetParam();
  Runtime rt = make_runtime(f);
  RuntimeStats before = rt.stats();
  EXPECT_EQ(before.live_tasks, 0u);
  if (f.current_thread) {
    EXPECT_TRUE(before.workers.empty());
  } else {
    EXPECT_EQ(before.num_workers, f.workers);
    EXPECT_EQ(before.workers.size(), f.workers);
  }

  constexpr int kWaiting = 40;
  LifeCounters frames;
  std::atomic<int> waiting{0};
  std::vector<oneshot::Sender<int>> senders;
  std::vector<JoinHandle<int>> handles;
  for (int i = 0; i < kWaiting; ++i) {
    auto [tx, rx] = oneshot::channel<int>();
    senders.push_back(std::move(tx));
    handles.push_back(rt.spawn(wait_for_value(Tracked(frames, i), std::move(rx), &waiting)));
  }
  // Spawned and not completed: live whether or not they have run yet.
  RuntimeStats pending = rt.stats();
  EXPECT_EQ(pending.live_tasks, static_cast<std::uint64_t>(kWaiting));
  EXPECT_EQ(pending.total_spawned, before.total_spawned + kWaiting);

  EXPECT_EQ(rt.block_on(spawn_and_await_squares(10)), 285);
  for (int i = 0; i < kWaiting; ++i)
    EXPECT_FALSE(senders[i].send(100 * i).has_value());
  for (int i = 0; i < kWaiting; ++i)
    EXPECT_EQ(handles[i].join(), 101 * i);

  RuntimeStats after = rt.stats();
  EXPECT_GE(after.total_spawned, before.total_spawned + kWaiting + 11);
  EXPECT_GT(after.total_polled, 0u);
  if (f.current_thread) {
    // Every poll on this flavour runs in a counted drive loop: each task at
    // least once, the waiting ones twice.
    EXPECT_GE(after.total_polled, static_cast<std::uint64_t>(2 * kWaiting + 11));
    EXPECT_TRUE(after.workers.empty());
  } else {
    EXPECT_EQ(after.workers.size(), f.workers);
    // Workers' polls plus those of the blocked main thread when it helped.
    std::uint64_t sum = after.blocked_thread_polls;
    for (const WorkerStats& w : after.workers)
      sum += w.tasks_polled;
    EXPECT_EQ(sum, after.total_polled);
  }
  // Every task was joined, so none is "spawned and not yet completed".
  EXPECT_EQ(after.live_tasks, 0u) << "live_tasks lags behind completion seen by join()";
  // A lag would only be inexact; a task never leaving the count is a leak.
  EXPECT_TRUE(wait_until([&] { return rt.stats().live_tasks == 0; }))
      << "live_tasks stuck at " << rt.stats().live_tasks;
  EXPECT_EQ(frames.live(), 0);
}

// ---- abort at deterministic points ----

Task<std::error_code> abort_before_first_poll(LifeCounters* frames, std::atomic<int>* ran) {
  // Spawned from a runtime thread: it sits in this thread's queue (the LIFO
  // slot, which thieves cannot take) until this poll ends.
  JoinHandle<int> h = volt::spawn(probe_body(Tracked(*frames, 7), ran));
  h.abort();
  h.abort();  // idempotent
  std::error_code ec;
  try {
    (void)co_await h;
  } catch (const Error& e) {
    ec = e.code();
  }
  co_return ec;
}

TEST_P(RuntimeFlavourTest, AbortBeforeFirstPollCancelsWithoutRunning) {
  Runtime rt = make_runtime(GetParam());
  LifeCounters frames;
  std::atomic<int> ran{0};
  for (int i = 0; i < 20; ++i)
    EXPECT_EQ(run_in_runtime(rt, GetParam(), abort_before_first_poll(&frames, &ran)),
              code(errc::cancelled));
  EXPECT_EQ(ran.load(), 0);
  EXPECT_EQ(frames.live(), 0);
  EXPECT_EQ(frames.double_destroyed.load(), 0);
}

struct AbortWhileWaitingResult {
  std::error_code ec;
  bool sender_saw_receiver_gone = false;
  bool value_came_back = false;
};

Task<AbortWhileWaitingResult> abort_while_waiting(LifeCounters* frames) {
  auto [tx, rx] = oneshot::channel<int>();
  std::atomic<int> waiting{0};
  JoinHandle<int> h = volt::spawn(wait_for_value(Tracked(*frames, 0), std::move(rx), &waiting));
  while (waiting.load() == 0)
    co_await volt::yield_now();
  co_await volt::yield_now();
  h.abort();
  AbortWhileWaitingResult r;
  try {
    (void)co_await h;
  } catch (const Error& e) {
    r.ec = e.code();
  }
  // Cancelling destroyed the frame and the receiver in it.
  r.sender_saw_receiver_gone = tx.is_closed();
  r.value_came_back = tx.send(5) == std::optional<int>(5);
  co_return r;
}

TEST_P(RuntimeFlavourTest, AbortWhileSuspendedOnAOneshotDestroysTheFrame) {
  Runtime rt = make_runtime(GetParam());
  LifeCounters frames;
  for (int i = 0; i < 20; ++i) {
    AbortWhileWaitingResult r = run_in_runtime(rt, GetParam(), abort_while_waiting(&frames));
    EXPECT_EQ(r.ec, code(errc::cancelled));
    EXPECT_TRUE(r.sender_saw_receiver_gone);
    EXPECT_TRUE(r.value_came_back);
  }
  EXPECT_EQ(frames.live(), 0);
  EXPECT_EQ(frames.double_destroyed.load(), 0);
}

Task<int> abort_after_completion() {
  JoinHandle<int> h = volt::spawn(square(6));
  while (!h.is_finished())
    co_await volt::yield_now();
  h.abort();
  co_return co_await h;
}

Task<void> yield_until_finished(const JoinHandle<int>* h) {
  while (!h->is_finished())
    co_await volt::yield_now();
}

TEST_P(RuntimeFlavourTest, AbortAfterCompletionKeepsTheValue) {
  Runtime rt = make_runtime(GetParam());
  EXPECT_EQ(run_in_runtime(rt, GetParam(), abort_after_completion()), 36);
  // From outside: the task finished (on a worker, or driven by block_on on
  // the current-thread flavour), then is aborted; join still sees the value.
  JoinHandle<int> h = rt.spawn(square(5));
  if (GetParam().current_thread) {
    rt.block_on(yield_until_finished(&h));
  } else {
    ASSERT_TRUE(wait_until([&] { return h.is_finished(); }));
  }
  ASSERT_TRUE(h.is_finished());
  h.abort();
  EXPECT_EQ(h.join(), 25);
}

TEST_P(RuntimeFlavourTest, AbortFromOutsideWhileWaitingReportsCancelled) {
  Runtime rt = make_runtime(GetParam());
  LifeCounters frames;
  auto [tx, rx] = oneshot::channel<int>();
  std::atomic<int> waiting{0};
  JoinHandle<int> h = rt.spawn(wait_for_value(Tracked(frames, 0), std::move(rx), &waiting));
  if (!GetParam().current_thread) {
    // Multi-thread: it runs and suspends on the receiver. Current-thread:
    // nobody drives, so this aborts before its first poll.
    ASSERT_TRUE(wait_until([&] { return waiting.load() == 1; }));
  }
  h.abort();
  EXPECT_EQ(volt_error_of([&] { (void)h.join(); }), code(errc::cancelled));
  EXPECT_EQ(waiting.load(), GetParam().current_thread ? 0 : 1);
  EXPECT_TRUE(tx.is_closed());
  EXPECT_EQ(frames.live(), 0);
}

// ---- fairness ----

struct Spin {
  std::atomic<bool> stop{false};
  std::atomic<int> spinning{0};
  std::atomic<int> timed_out{0};
  std::atomic<int> later_ran{0};
  int later_needed = 1;
  Clock::time_point deadline;
};

Task<void> later_task(Spin* s) {
  if (s->later_ran.fetch_add(1) + 1 == s->later_needed) s->stop.store(true);
  co_return;
}

// Loops on yield_now until stopped; gives up at the deadline (counted as a
// failure) so that starvation fails the test instead of hanging it.
Task<void> yield_spinner(Spin* s, bool spawn_later_inside) {
  s->spinning.fetch_add(1);
  for (int i = 0; !s->stop.load(); ++i) {
    if (Clock::now() > s->deadline) {
      s->timed_out.fetch_add(1);
      co_return;
    }
    if (spawn_later_inside && i == 10) (void)volt::spawn(later_task(s));
    co_await volt::yield_now();
  }
}

void check_yield_loop_does_not_starve(const Flavour& f, bool spawn_later_inside) {
  Runtime rt = make_runtime(f);
  Spin s;
  s.deadline = Clock::now() + kNotHung;
  if (f.current_thread) {
    // The spinner is the block_on task itself; the later task comes from
    // another thread or from the spinner.
    s.later_needed = 1;
    std::thread spawner;
    if (!spawn_later_inside) {
      spawner = std::thread([&] {
        wait_until([&] { return s.spinning.load() == 1; });
        (void)rt.spawn(later_task(&s));  // detached
      });
    }
    rt.block_on(yield_spinner(&s, spawn_later_inside));
    if (spawner.joinable()) spawner.join();
  } else {
    // One spinner per worker, so every worker is busy yielding.
    const int spinners = static_cast<int>(f.workers);
    s.later_needed = spawn_later_inside ? spinners : 1;
    std::vector<JoinHandle<void>> handles;
    for (int i = 0; i < spinners; ++i)
      handles.push_back(rt.spawn(yield_spinner(&s, spawn_later_inside)));
    ASSERT_TRUE(wait_until([&] { return s.spinning.load() == spinners; }));
    if (!spawn_later_inside) (void)rt.spawn(later_task(&s));
    ASSERT_TRUE(wait_until([&] { return s.stop.load() || s.timed_out.load() > 0; }));
    for (auto& h : handles)
      h.join();
  }
  EXPECT_EQ(s.timed_out.load(), 0) << "a task looping on yield_now starved the later task";
  EXPECT_EQ(s.later_ran.load(), s.later_needed);
}

TEST_P(RuntimeFlavourTest, YieldLoopDoesNotStarveATaskSpawnedFromOutside) {
  check_yield_loop_does_not_starve(GetParam(), false);
}

TEST_P(RuntimeFlavourTest, YieldLoopDoesNotStarveATaskSpawnedFromInside) {
  check_yield_loop_does_not_starve(GetParam(), true);
}

// ---- idle CPU ----

std::chrono::nanoseconds process_cpu_time() {
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  auto tv = [](const timeval& t) {
    return std::chrono::seconds(t.tv_sec) + std::chrono::microseconds(t.tv_usec);
  };
  return tv(usage.ru_utime) + tv(usage.ru_stime);
}

std::chrono::nanoseconds thread_cpu_time(clockid_t clock) {
  timespec ts{};
  ::clock_gettime(clock, &ts);
  return std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec);
}

TEST(RuntimeIdleTest, IdleRuntimeBurnsNoCpuWithFilesOpen) {
  std::mutex m;
  std::vector<clockid_t> worker_clocks;
  Runtime rt = Runtime::Builder()
                   .worker_threads(2)
                   .on_thread_start([&] {
                     clockid_t clock;
                     ASSERT_EQ(::pthread_getcpuclockid(::pthread_self(), &clock), 0);
                     std::lock_guard lock(m);
                     worker_clocks.push_back(clock);
                   })
                   .build();
  EXPECT_EQ(rt.block_on(square(3)), 9);
  std::vector<JoinHandle<int>> handles;
  for (int i = 0; i < 8; ++i)
    handles.push_back(rt.spawn(square(i)));
  for (auto& h : handles)
    (void)h.join();
  // Files open, and operations done on the file engine (io_uring's ring sits
  // in the driver's epoll set): idle still means no CPU.
  const std::filesystem::path file_path =
      std::filesystem::temp_directory_path() / ("volt-idle-test-" + std::to_string(::getpid()));
  std::optional<fs::File> open_file =
      rt.block_on([](std::filesystem::path p) -> Task<std::optional<fs::File>> {
        auto written = co_await fs::write(p, std::string_view("idle"));
        EXPECT_TRUE(written);
        auto f = co_await fs::OpenOptions().read(true).write(true).open(p);
        EXPECT_TRUE(f);
        if (!f) co_return std::nullopt;
        auto back = co_await fs::read_to_string(p);
        EXPECT_TRUE(back && *back == "idle");
        EXPECT_TRUE(co_await f->sync_data());
        co_return std::move(*f);
      }(file_path));
  ASSERT_TRUE(open_file);
  // Both workers up and asleep (on_thread_start also counts blocking-pool
  // threads, which the blocking file engine starts: they must idle too).
  ASSERT_TRUE(wait_until([&] {
    std::lock_guard lock(m);
    return worker_clocks.size() >= 2;
  }));
  ASSERT_TRUE(wait_until([&] {
    RuntimeStats s = rt.stats();
    return s.workers[0].times_parked > 0 && s.workers[1].times_parked > 0;
  }));
  std::this_thread::sleep_for(50ms);

  auto workers_cpu = [&] {
    std::lock_guard lock(m);
    std::chrono::nanoseconds sum{0};
    for (clockid_t c : worker_clocks)
      sum += thread_cpu_time(c);
    return sum;
  };
  const std::uint64_t parks_before = rt.stats().total_parked;
  const auto process_before = process_cpu_time();
  const auto workers_before = workers_cpu();
  std::this_thread::sleep_for(2s);
  const auto workers_used = workers_cpu() - workers_before;
  const auto process_used = process_cpu_time() - process_before;

  EXPECT_LT(workers_used, 20ms) << "workers used "
                                << std::chrono::duration<double, std::milli>(workers_used).count()
                                << " ms while idle";
  // A sanitizer's own background thread wakes up now and then; a spinning
  // thread of ours would use about 2,000 ms here.
  EXPECT_LT(process_used, kSanitized ? 100ms : 20ms)
      << "process used " << std::chrono::duration<double, std::milli>(process_used).count()
      << " ms while idle";
  // Asleep means asleep: no wake-park cycles either.
  EXPECT_LE(rt.stats().total_parked - parks_before, 2u);
  EXPECT_EQ(rt.block_on(square(4)), 16);  // and still responsive
  open_file.reset();
  std::filesystem::remove(file_path);
}

}  // namespace
}  // namespace volt::test
