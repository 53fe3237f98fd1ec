// Tests of block_in_place (volt/task/block_in_place.hpp), Runtime::enter /
// Handle::enter and Runtime::shutdown_background (volt/runtime/runtime.hpp).
//
// The property that matters for block_in_place: while fn blocks its thread,
// the tasks queued behind it still run. With one worker that is only possible
// if the worker's loop moved to another thread, so the one-worker tests below
// would hang (and fail at their bound) without the hand-off.
#include <dlfcn.h>
#include <pthread.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>

#include <gtest/gtest.h>

#include "runtime_support.hpp"
#include "volt/task/block_in_place.hpp"

namespace volt::test {
namespace {

using namespace std::chrono_literals;

// Spins (sleeping) until `flag` is set or `bound` passes: "not hung".
bool wait_for_flag(const std::atomic<bool>& flag, std::chrono::milliseconds bound = 10s) {
  const auto deadline = std::chrono::steady_clock::now() + bound;
  while (!flag.load(std::memory_order_acquire)) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

Task<void> set_flag(std::atomic<bool>* flag) {
  flag->store(true, std::memory_order_release);
  co_return;
}

// Spawns a task that sets a flag, then blocks in place until it is set.
Task<bool> block_until_sibling_ran() {
  std::atomic<bool> ran{false};
  JoinHandle<void> sibling = spawn(set_flag(&ran));
  const bool seen = block_in_place([&] { return wait_for_flag(ran); });
  co_await sibling;
  co_return seen;
}

class BlockInPlaceTest : public ::testing::TestWithParam<Flavour> {};
INSTANTIATE_TEST_SUITE_P(Flavours, BlockInPlaceTest,
                         ::testing::Values(kMultiThread1, kMultiThread2, kMultiThread4),
                         FlavourName());

TEST_P(BlockInPlaceTest, TasksQueuedBehindTheCallerRunWhileItBlocks) {
  Runtime rt = make_runtime(GetParam());
  EXPECT_TRUE(rt.block_on(block_until_sibling_ran()));
}

TEST_P(BlockInPlaceTest, ReturnsTheValueAndRethrowsTheException) {
  Runtime rt = make_runtime(GetParam());
  auto body = []() -> Task<int> {
    int v = block_in_place([] { return 41; }) + 1;
    bool thrown = false;
    try {
      block_in_place([]() -> int { throw std::runtime_error("in fn"); });
    } catch (const std::runtime_error&) {
      thrown = true;
    }
    co_return thrown ? v : -1;
  };
  EXPECT_EQ(rt.block_on(body()), 42);
}

Task<int> answer() {
  co_return 42;
}

TEST_P(BlockInPlaceTest, InsideFnTheRuntimeIsReachableAndBlockingIsAllowed) {
  Runtime rt = make_runtime(GetParam());
  auto body = []() -> Task<int> {
    int sum = block_in_place([] {
      Handle h = Handle::current();
      int a = h.block_on(answer());    // refused on a worker
      int b = spawn(answer()).join();  // likewise
      int c = spawn_blocking([] { return 42; }).join();
      return a + b + c;
    });
    // Back in the task: blocking is refused again.
    std::error_code refused = volt_error_of([] { (void)Handle::current().block_on(answer()); });
    co_return refused == code(errc::blocking_in_runtime) ? sum : -1;
  };
  EXPECT_EQ(rt.block_on(body()), 126);
}

TEST_P(BlockInPlaceTest, TheTaskGoesOnAwaitingAfterwards) {
  Runtime rt = make_runtime(GetParam());
  auto body = []() -> Task<int> {
    int total = 0;
    for (int i = 0; i < 20; ++i) {
      total += block_in_place([i] { return i; });
      co_await sleep(1ms);  // resumed by a worker, maybe another thread
      total += co_await spawn(answer());
    }
    co_return total;
  };
  EXPECT_EQ(rt.block_on(body()), 190 + 20 * 42);
}

TEST_P(BlockInPlaceTest, NestedCallsRunInPlace) {
  Runtime rt = make_runtime(GetParam());
  auto body = []() -> Task<int> {
    co_return block_in_place([] { return block_in_place([] { return 7; }) * 6; });
  };
  EXPECT_EQ(rt.block_on(body()), 42);
}

Task<int> hand_off_and_yield(int i) {
  int v = block_in_place([i] {
    std::this_thread::sleep_for(100us);
    return i;
  });
  co_await yield_now();
  co_return v;
}

TEST_P(BlockInPlaceTest, ManyTasksHandingOffAtOnceAllFinish) {
  std::atomic<int> started{0}, stopped{0};
  {
    Runtime rt = make_builder(GetParam())
                     .on_thread_start([&] { started.fetch_add(1); })
                     .on_thread_stop([&] { stopped.fetch_add(1); })
                     .build();
    auto body = []() -> Task<long> {
      std::vector<JoinHandle<int>> handles;
      for (int i = 0; i < 200; ++i)
        handles.push_back(spawn(hand_off_and_yield(i)));
      long sum = 0;
      for (auto& h : handles)
        sum += co_await h;
      co_return sum;
    };
    EXPECT_EQ(rt.block_on(body()), 199 * 200 / 2);
  }
  // Every thread the runtime started (workers, their replacements, blocking
  // threads) stopped before the runtime's destruction returned.
  EXPECT_GT(started.load(), static_cast<int>(GetParam().workers));
  EXPECT_EQ(started.load(), stopped.load());
}

TEST_P(BlockInPlaceTest, ShutdownDoesNotWaitForeverForAThreadInsideFn) {
  std::atomic<bool> inside{false}, release{false}, after{false};
  auto body = [](std::atomic<bool>* inside, std::atomic<bool>* release,
                 std::atomic<bool>* after) -> Task<void> {
    block_in_place([&] {
      inside->store(true, std::memory_order_release);
      (void)wait_for_flag(*release, 30s);
    });
    after->store(true, std::memory_order_release);
    co_return;
  };
  {
    Runtime rt = make_runtime(GetParam());
    JoinHandle<void> h = rt.spawn(body(&inside, &release, &after));
    ASSERT_TRUE(wait_for_flag(inside));
    // The other tasks still run: the worker was handed off.
    EXPECT_EQ(rt.block_on(answer()), 42);
    rt.shutdown_background();  // returns with fn still blocked
    EXPECT_FALSE(after.load());
  }
  release.store(true, std::memory_order_release);
  // The thread finishes fn and the rest of the poll in the background.
  EXPECT_TRUE(wait_for_flag(after));
}

long vm_size_kib() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmSize:", 0) == 0) return std::stol(line.substr(7));
  }
  return -1;
}

// One hand-off per poll: block_in_place, then a new poll (on the new thread).
Task<int> hand_off_many(int n) {
  int sum = 0;
  for (int i = 0; i < n; ++i) {
    sum += block_in_place([] { return 1; });
    co_await yield_now();
  }
  co_return sum;
}

// A thread that handed off leaves nothing behind once it has ended: kept for
// a join at shutdown, each kept its 8 MiB stack mapped (found in review: 500
// hand-offs grew the address space by 4 GiB; 32,000 exhausted the mappings).
TEST(BlockInPlace, EndedThreadsAreNotKeptUntilShutdown) {
  Runtime rt = make_runtime(kMultiThread1);
  const long before = vm_size_kib();
  // Spawned, not block_on: the joining thread would help and run it.
  JoinHandle<int> h = rt.spawn(hand_off_many(500));
  ASSERT_TRUE(wait_until([&] { return h.is_finished(); }, kNotHung));
  EXPECT_EQ(h.join(), 500);
  // The last retired threads may still be ending: allow a few stacks.
  const long growth_mib = (vm_size_kib() - before) / 1024;
  EXPECT_LT(growth_mib, 256) << "the address space grew by " << growth_mib << " MiB";
}

TEST(BlockInPlace, TheRuntimeDestroyedInsideFnOrLaterInThePollReturns) {
  for (int in_fn = 0; in_fn < 2; ++in_fn) {
    auto* rt = new std::optional<Runtime>(make_runtime(kMultiThread2));
    std::atomic<bool> done{false};
    auto body = [](std::optional<Runtime>* rt, std::atomic<bool>* done, bool in_fn) -> Task<void> {
      block_in_place([&] {
        if (in_fn) rt->reset();  // waits for every thread but this one
      });
      if (!in_fn) rt->reset();
      done->store(true);
      co_return;
    };
    (void)(*rt)->spawn(body(rt, &done, in_fn == 1));
    EXPECT_TRUE(wait_until([&] { return done.load(); }, kNotHung));
    delete rt;
  }
}

Task<int> in_place_five() {
  co_return block_in_place([] { return 5; });
}

TEST(BlockInPlace, InATaskPolledByAThreadHelpingInJoin) {
  Runtime rt = make_runtime(kMultiThread1);
  std::atomic<bool> started{false}, release{false};
  // The one worker is busy, so a join() on this thread helps run queued work.
  auto hog = [](std::atomic<bool>* started, std::atomic<bool>* release) -> Task<void> {
    started->store(true);
    while (!release->load())
      std::this_thread::sleep_for(1ms);
    co_return;
  };
  JoinHandle<void> h = rt.spawn(hog(&started, &release));
  // Spawn the tasks below only once the worker is inside hog's poll. After a
  // fixed sleep (20 ms) a late worker can take hog and the first task
  // together from the inject queue (pop_batch) into its own queue, where a
  // helper never looks (it runs only what the inject queue holds): the join
  // then waits for ever. Loaded, under TSan, the test hung with the sleep and
  // either fix alone; with both it passed 200 of 200 repeats.
  if (!wait_until([&] { return started.load(); }, kNotHung)) {
    release.store(true);
    FAIL() << "the worker never polled hog";
  }
  int total = 0;
  for (int i = 0; i < 20; ++i) {
    JoinHandle<int> j = rt.spawn(in_place_five());
    // A remote schedule after join() registered hands the queue to it. One
    // that lands before join() registers wakes nobody (a single push 5 ms
    // after the spawn left the join waiting for ever, loaded, under TSan), so
    // push every 5 ms until the join returns.
    std::atomic<bool> joined{false};
    std::thread nudge([&] {
      while (!joined.load()) {
        std::this_thread::sleep_for(5ms);
        (void)rt.spawn(answer());
      }
    });
    total += j.join();
    joined.store(true);
    nudge.join();
  }
  release.store(true);
  h.join();
  EXPECT_EQ(total, 100);
  EXPECT_GT(rt.stats().blocked_thread_polls, 0u);
}

Task<void> hand_off_and_yield_loop(int n) {
  for (int i = 0; i < n; ++i) {
    block_in_place([] { std::this_thread::sleep_for(50us); });
    co_await yield_now();
  }
}

TEST(BlockInPlace, HandOffsRacingShutdown) {
  for (int round = 0; round < 20; ++round) {
    // Owned by the hooks too: a replacement thread that shutdown_timeout left
    // starting may run its hooks after this round's equality check.
    struct Counts {
      std::atomic<int> started{0}, stopped{0};
    };
    auto counts = std::make_shared<Counts>();
    std::atomic<int>& started = counts->started;
    std::atomic<int>& stopped = counts->stopped;
    {
      Runtime rt = make_builder(round % 2 ? kMultiThread2 : kMultiThread4)
                       .on_thread_start([counts] { counts->started.fetch_add(1); })
                       .on_thread_stop([counts] { counts->stopped.fetch_add(1); })
                       .build();
      for (int i = 0; i < 16; ++i)
        (void)rt.spawn(hand_off_and_yield_loop(50));
      std::this_thread::sleep_for(std::chrono::microseconds(200 * (round % 5)));
      if (round % 3 == 0) rt.shutdown_timeout(1ms);
    }
    // shutdown_timeout may leave threads finishing in the background.
    ASSERT_TRUE(wait_until([&] { return started.load() == stopped.load(); }, kNotHung));
  }
}

TEST(BlockInPlace, OnTheCurrentThreadRuntimeIsAnErrorAndFnDoesNotRun) {
  Runtime rt = make_runtime(kCurrentThread);
  auto body = []() -> Task<bool> {
    bool ran = false;
    std::error_code e = volt_error_of([&] { block_in_place([&] { ran = true; }); });
    co_return e == code(errc::blocking_in_runtime) && !ran;
  };
  EXPECT_TRUE(rt.block_on(body()));
}

TEST(BlockInPlace, OutsideAWorkerFnJustRuns) {
  EXPECT_EQ(block_in_place([] { return 5; }), 5);  // a plain thread
  Runtime rt = make_runtime(kMultiThread2);
  // A blocking-pool thread.
  EXPECT_EQ(rt.spawn_blocking([] { return block_in_place([] { return 6; }); }).join(), 6);
  // The current-thread runtime's blocking pool too.
  Runtime single = make_runtime(kCurrentThread);
  EXPECT_EQ(single.spawn_blocking([] { return block_in_place([] { return 7; }); }).join(), 7);
}

#if !defined(__SANITIZE_THREAD__) && !defined(__SANITIZE_ADDRESS__)
// pthread_create failing on demand (the sanitizers intercept it themselves).
std::atomic<bool> fail_pthread_create{false};
}  // namespace
}  // namespace volt::test

extern "C" int pthread_create(pthread_t* thread, const pthread_attr_t* attr, void* (*start)(void*),
                              void* arg) {
  using Create = int (*)(pthread_t*, const pthread_attr_t*, void* (*)(void*), void*);
  static const Create real = reinterpret_cast<Create>(::dlsym(RTLD_NEXT, "pthread_create"));
  if (volt::test::fail_pthread_create.load()) return EAGAIN;
  return real(thread, attr, start, arg);
}

namespace volt::test {
namespace {

// No thread to be had: an error before fn runs, and the worker goes on as
// before (found in review: fn used to run with blocking allowed on a worker
// nobody else ran, so a join inside it hung, and a shutdown inside it waited
// for its own thread).
TEST(BlockInPlace, NoThreadToBeHadIsAnErrorAndTheWorkerGoesOn) {
  Runtime rt = make_runtime(kMultiThread1);
  auto body = []() -> Task<int> {
    bool ran = false;
    fail_pthread_create.store(true);
    std::error_code e;
    try {
      block_in_place([&] { ran = true; });
    } catch (const std::system_error& error) {
      e = error.code();
    }
    fail_pthread_create.store(false);
    if (ran || e != std::errc::resource_unavailable_try_again) co_return -1;
    // Still this runtime's worker: tasks run, awaits resume.
    co_await yield_now();
    co_return co_await spawn(answer());
  };
  EXPECT_EQ(rt.block_on(body()), 42);
}
#endif

// ---- Runtime::enter ----

TEST(RuntimeEnter, APlainThreadReachesTheRuntimeOnlyWhileEntered) {
  Runtime rt = make_runtime(kMultiThread2);
  EXPECT_EQ(volt_error_of([] { (void)Handle::current(); }), code(errc::no_runtime));
  {
    auto guard = rt.enter();
    EXPECT_EQ(spawn(answer()).join(), 42);
    EXPECT_EQ(Handle::current().block_on(answer()), 42);
    EXPECT_EQ(spawn_blocking([] { return 3; }).join(), 3);
  }
  EXPECT_EQ(volt_error_of([] { (void)spawn(answer()); }), code(errc::no_runtime));
}

Task<int> worker_count() {
  co_return static_cast<int>(Handle::current().stats().num_workers);
}

TEST(RuntimeEnter, GuardsNestAndRestoreTheOuterRuntime) {
  Runtime two = make_runtime(kMultiThread2);
  Runtime four = make_runtime(kMultiThread4);
  auto outer = two.enter();
  EXPECT_EQ(spawn(worker_count()).join(), 2);
  {
    auto inner = four.handle().enter();
    EXPECT_EQ(spawn(worker_count()).join(), 4);
  }
  EXPECT_EQ(spawn(worker_count()).join(), 2);
}

TEST(RuntimeEnter, TheGuardKeepsTheRuntimeCoreAlive) {
  std::optional<Runtime> rt(make_runtime(kMultiThread1));
  auto guard = rt->enter();
  rt.reset();  // shut down and gone; the guard still holds its core
  EXPECT_EQ(volt_error_of([] { (void)Handle::current(); }), code(errc::runtime_shutdown));
  EXPECT_EQ(volt_error_of([] { (void)spawn(answer()).join(); }), code(errc::runtime_shutdown));
}

// ---- shutdown_background ----

TEST(ShutdownBackground, ReturnsWhileBlockingWorkAndALongPollStillRun) {
  std::atomic<bool> release{false}, poll_started{false}, blocking_started{false},
      blocking_done{false}, poll_done{false};
  auto long_poll = [](std::atomic<bool>* started, std::atomic<bool>* release,
                      std::atomic<bool>* done) -> Task<void> {
    started->store(true, std::memory_order_release);
    (void)wait_for_flag(*release, 30s);  // blocks its worker
    done->store(true, std::memory_order_release);
    co_return;
  };
  {
    Runtime rt = make_runtime(kMultiThread2);
    (void)rt.spawn_blocking([&] {
      blocking_started.store(true, std::memory_order_release);
      (void)wait_for_flag(release, 30s);
      blocking_done.store(true, std::memory_order_release);
    });
    (void)rt.spawn(long_poll(&poll_started, &release, &poll_done));
    // Both running (blocking work not yet started would be cancelled).
    ASSERT_TRUE(wait_for_flag(poll_started));
    ASSERT_TRUE(wait_for_flag(blocking_started));
    rt.shutdown_background();
    EXPECT_FALSE(blocking_done.load());
    EXPECT_FALSE(poll_done.load());
    // Nothing runs any more.
    EXPECT_EQ(volt_error_of([&] { (void)rt.block_on(answer()); }), code(errc::runtime_shutdown));
  }
  release.store(true, std::memory_order_release);
  EXPECT_TRUE(wait_for_flag(blocking_done));
  EXPECT_TRUE(wait_for_flag(poll_done));
}

}  // namespace
}  // namespace volt::test
