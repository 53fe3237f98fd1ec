// Edge cases of the time API found by a second review, judged against what
// tokio::time promises.
//
//  - A paused clock must not auto-advance while a file operation is in
//    flight: Tokio's fs runs on the blocking pool, whose work inhibits
//    auto-advance, so `timeout(1h, file.read())` on a paused runtime waits for
//    the read. volt's io_uring engine keeps the operation in the kernel, not
//    on the pool, and the runtime took the idle wait for "only timers can make
//    progress": the 1 h timeout fired at once.
//  - Regression checks that passed on the current code: an operation ready
//    at the same tick as its deadline wins, timers around the wheel's level
//    boundaries fire exactly on time, Instant::min/max deadlines, and
//    Sleep::reset while registered and after firing (paused clock, so
//    virtual time is exact).
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <optional>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "time/time_test_support.hpp"
#include "volt/fs/file.hpp"

namespace volt::test {
namespace {

using namespace std::chrono_literals;

// ---- paused clock and file operations in flight ----

Task<Expected<Expected<std::size_t>>> read_with_timeout(const fs::File* f) {
  std::vector<std::byte> b(1);
  Expected<Expected<std::size_t>> r = co_await volt::timeout(1h, f->read_at(b, 0));
  co_return r;
}

// The current-thread drive loop's auto-advance waited for blocking-pool
// work only; a read on the ring (no pool job) let the paused clock jump to
// the timeout's deadline at once (r was timed_out). Tokio runs files on its
// blocking pool, which holds auto-advance back.
TEST(TimerEdgeTest, PausedClockDoesNotAutoAdvanceWhileAFileOperationIsInFlight) {
  std::optional<Runtime> rt;
  {
    Runtime::Builder b = Runtime::Builder::current_thread();
    b.start_paused(true).io_uring(true);
    rt.emplace(b.build());
  }
  if (!rt->uses_io_uring()) GTEST_SKIP() << "io_uring refused by this kernel";
  int fds[2];
  ASSERT_EQ(::pipe2(fds, O_CLOEXEC), 0);
  // A pipe read with an offset goes to the ring (preadv2 says ESPIPE inline),
  // where it waits for a byte that a plain thread writes 100 ms later.
  std::optional<fs::File> reader(fs::File::from_fd(fds[0]).value());
  std::thread writer([wfd = fds[1]] {
    std::this_thread::sleep_for(100ms);
    EXPECT_EQ(::write(wfd, "x", 1), 1);
  });
  const Instant start = rt->block_on([]() -> Task<Instant> { co_return volt::time::now(); }());
  Expected<Expected<std::size_t>> r = rt->block_on(read_with_timeout(&*reader));
  const Instant end = rt->block_on([]() -> Task<Instant> { co_return volt::time::now(); }());
  writer.join();
  ASSERT_TRUE(r.has_value()) << "the paused clock jumped 1 h while the read was in flight";
  ASSERT_TRUE(r->has_value()) << r->error().message();
  EXPECT_EQ(**r, 1u);
  EXPECT_LT(end - start, 1h);
  ::close(fds[1]);
  reader.reset();
}

// ---- deadlines at the edges, on a paused clock (exact virtual time) ----

Task<int> sleep_then_value(Instant deadline, int value) {
  co_await volt::sleep_until(deadline);
  co_return value;
}

// The operation and the deadline come due at the same tick (one batch of the
// driver): the operation's value is returned, not dropped for timed_out.
Task<void> tie_goes_to_the_operation() {
  const Instant deadline = volt::time::now() + 10ms;
  Expected<int> r = co_await volt::timeout_at(deadline, sleep_then_value(deadline, 7));
  EXPECT_TRUE(r.has_value());
  if (r) {
    EXPECT_EQ(*r, 7);
  }
}

TEST(TimerEdgeTest, OperationReadyAtTheSameTickAsTheDeadlineWins) {
  Runtime rt = paused_runtime();
  rt.block_on(tie_goes_to_the_operation());
}

// Timers registered on both sides of the wheel's level boundaries (64 ms,
// 4096 ms, 262144 ms from the wheel's origin), from a clock standing one tick
// before the boundary, fire at their deadline and never before.
Task<void> across_level_boundaries() {
  const Instant origin = volt::time::now();
  for (std::int64_t boundary : {64, 4096, 262'144, 16'777'216}) {
    const Instant at = origin + std::chrono::milliseconds(boundary);
    const Instant before = volt::time::now();
    if (before < at - 1ms) co_await volt::time::advance((at - 1ms) - before);
    for (auto offset : {0ms, 1ms, 2ms, 63ms, 64ms, 65ms}) {
      const Instant deadline = at + offset;
      volt::Sleep s = volt::sleep_until(deadline);
      co_await s;
      EXPECT_GE(volt::time::now(), deadline) << "early at boundary " << boundary;
      EXPECT_LT(volt::time::now(), deadline + 1ms) << "late at boundary " << boundary;
      if (volt::time::now() < at - 1ms) break;  // (never: time only moves on)
    }
  }
}

TEST(TimerEdgeTest, TimersAcrossLevelBoundariesFireOnTime) {
  Runtime rt = paused_runtime();
  rt.block_on(across_level_boundaries());
}

// The clock's extremes: Instant::min() is already due, Instant::max() never
// comes (and does not make auto-advance run to the end of time).
Task<void> extreme_deadlines() {
  co_await volt::sleep_until(Instant::min());
  volt::Sleep never(Instant::max());
  Expected<void> r = co_await volt::timeout(1s, never);
  EXPECT_FALSE(r.has_value());
  EXPECT_FALSE(never.is_elapsed());
  Expected<void> past = co_await volt::timeout_at(Instant::min(), volt::sleep(1ms));
  EXPECT_FALSE(past.has_value());
}

TEST(TimerEdgeTest, InstantMinIsDueAndInstantMaxNeverComes) {
  Runtime rt = paused_runtime();
  rt.block_on(extreme_deadlines());
}

// Sleep::reset while registered (after losing a timeout) and after firing.
Task<void> reset_registered_and_fired() {
  const Instant start = volt::time::now();
  volt::Sleep s = volt::sleep(100ms);
  Expected<void> r = co_await volt::timeout(10ms, s);  // s stays registered
  EXPECT_FALSE(r.has_value());
  s.reset(start + 20ms);  // earlier than its first deadline
  co_await s;
  EXPECT_EQ(volt::time::now(), start + 20ms);
  EXPECT_TRUE(s.is_elapsed());
  s.reset(volt::time::now() + 5ms);  // after firing: pending again
  EXPECT_FALSE(s.is_elapsed());
  co_await s;
  EXPECT_EQ(volt::time::now(), start + 25ms);
  // The first deadline (100 ms) was withdrawn: nothing is left registered.
  EXPECT_EQ(stats_here().active_timers, 0u);
}

TEST(TimerEdgeTest, SleepResetWhileRegisteredAndAfterFiring) {
  Runtime rt = paused_runtime();
  rt.block_on(reset_registered_and_fired());
}

}  // namespace
}  // namespace volt::test
