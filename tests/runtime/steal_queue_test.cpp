// Tests of volt::detail::BasicStealQueue (src/runtime/scheduler/steal_queue.hpp)
// with the InjectQueue it overflows into.
//
// The queued "tasks" are bare TaskHeaders whose id is their index; nothing
// polls them. Their vtable only counts deallocations (the one call the queues
// can make, when an overflow meets a closed inject queue) and aborts on
// anything else.
//
// Deterministic: FIFO order, overflow of half + 1 in order, steals of half
// rounded up, taking the newest task back (pop_back_if), the counters, and
// more than 2^16 positions so that the 16-bit positions wrap. Stress: an
// owner pushing (overflowing), popping and, in two of them, taking tasks back
// from the tail against thieves that steal into their own queues, with
// capacity 4 (wrap-around and overflow on almost every operation) and 256;
// every task must be consumed exactly once.
#include "runtime/scheduler/steal_queue.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <memory>
#include <thread>
#include <vector>

#include "runtime/scheduler/inject_queue.hpp"
#include "test_support.hpp"

namespace volt::detail {
namespace {

std::atomic<int> g_deallocs{0};

[[noreturn]] void unexpected_call(const char* what) {
  std::fprintf(stderr, "steal_queue_test: unexpected vtable call %s\n", what);
  std::abort();
}
const TaskVTable kCountingVTable{
    [](TaskHeader*) noexcept { unexpected_call("finish"); },
    [](TaskHeader*, errc) noexcept { unexpected_call("cancel"); },
    [](TaskHeader*) noexcept { unexpected_call("drop_output"); },
    [](TaskHeader*) noexcept { g_deallocs.fetch_add(1); },
};

class FakeTasks {
 public:
  explicit FakeTasks(std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) {
      TaskHeader& t = tasks_.emplace_back(&kCountingVTable, std::coroutine_handle<>{});
      t.id = i;
    }
  }
  TaskHeader* operator[](std::size_t i) { return &tasks_[i]; }
  std::size_t size() const { return tasks_.size(); }

 private:
  std::deque<TaskHeader> tasks_;  // stable addresses; TaskHeader does not move
};

std::vector<std::uint64_t> drain_ids(InjectQueue& inject) {
  std::vector<std::uint64_t> ids;
  while (TaskHeader* t = inject.pop())
    ids.push_back(t->id);
  return ids;
}

template <class Q>
std::vector<std::uint64_t> drain_ids(Q& q) {
  std::vector<std::uint64_t> ids;
  while (TaskHeader* t = q.pop())
    ids.push_back(t->id);
  return ids;
}

using SmallQueue = BasicStealQueue<4>;
using LargeQueue = BasicStealQueue<256>;

TEST(StealQueueTest, NewQueueIsEmpty) {
  SmallQueue q;
  EXPECT_EQ(q.pop(), nullptr);
  EXPECT_EQ(q.len(), 0u);
  EXPECT_FALSE(q.has_stealable());
  EXPECT_EQ(q.remaining_slots(), 4u);
  SmallQueue dst;
  EXPECT_EQ(q.steal_into(dst), nullptr);
  EXPECT_EQ(dst.len(), 0u);
}

TEST(StealQueueTest, PopReturnsTasksInPushOrder) {
  FakeTasks tasks(256);
  InjectQueue inject;
  LargeQueue q;
  for (std::size_t i = 0; i < 256; ++i) {
    EXPECT_FALSE(q.push_back_or_overflow(tasks[i], inject));
    EXPECT_EQ(q.len(), i + 1);
    EXPECT_EQ(q.remaining_slots(), 256 - (i + 1));
    EXPECT_TRUE(q.has_stealable());
  }
  EXPECT_EQ(inject.len(), 0u);
  std::vector<std::uint64_t> ids = drain_ids(q);
  ASSERT_EQ(ids.size(), 256u);
  for (std::size_t i = 0; i < ids.size(); ++i)
    EXPECT_EQ(ids[i], i);
  EXPECT_EQ(q.len(), 0u);
  EXPECT_FALSE(q.has_stealable());
}

TEST(StealQueueTest, InterleavedPushAndPopStayFifo) {
  FakeTasks tasks(100);
  InjectQueue inject;
  SmallQueue q;
  std::size_t next_push = 0, next_pop = 0;
  // Alternate two pushes and one pop, then drain: order never changes.
  while (next_push < tasks.size()) {
    if (q.len() < 4) {
      ASSERT_FALSE(q.push_back_or_overflow(tasks[next_push++], inject));
    }
    if (next_push % 2 == 0 || q.len() == 4) {
      TaskHeader* t = q.pop();
      ASSERT_NE(t, nullptr);
      EXPECT_EQ(t->id, next_pop++);
    }
  }
  while (TaskHeader* t = q.pop())
    EXPECT_EQ(t->id, next_pop++);
  EXPECT_EQ(next_pop, tasks.size());
  EXPECT_EQ(inject.len(), 0u);
}

TEST(StealQueueTest, PushIntoAFullQueueMovesHalfPlusOneToInjectInOrder) {
  FakeTasks tasks(5);
  InjectQueue inject;
  SmallQueue q;
  for (std::size_t i = 0; i < 4; ++i)
    ASSERT_FALSE(q.push_back_or_overflow(tasks[i], inject));
  EXPECT_EQ(q.remaining_slots(), 0u);
  EXPECT_TRUE(q.push_back_or_overflow(tasks[4], inject));
  // The oldest half, then the new task, went to the inject queue as one batch.
  EXPECT_EQ(inject.len(), 3u);
  EXPECT_EQ(q.len(), 2u);
  EXPECT_EQ(drain_ids(inject), (std::vector<std::uint64_t>{0, 1, 4}));
  EXPECT_EQ(drain_ids(q), (std::vector<std::uint64_t>{2, 3}));
}

TEST(StealQueueTest, OverflowOfAFullQueueOfCapacity256MovesTheOldest128AndTheNewTask) {
  FakeTasks tasks(257);
  InjectQueue inject;
  LargeQueue q;
  for (std::size_t i = 0; i < 256; ++i)
    ASSERT_FALSE(q.push_back_or_overflow(tasks[i], inject));
  EXPECT_TRUE(q.push_back_or_overflow(tasks[256], inject));
  EXPECT_EQ(inject.len(), 129u);
  EXPECT_EQ(q.len(), 128u);
  std::vector<std::uint64_t> expected_inject;
  for (std::uint64_t i = 0; i < 128; ++i)
    expected_inject.push_back(i);
  expected_inject.push_back(256);
  EXPECT_EQ(drain_ids(inject), expected_inject);
  std::vector<std::uint64_t> expected_local;
  for (std::uint64_t i = 128; i < 256; ++i)
    expected_local.push_back(i);
  EXPECT_EQ(drain_ids(q), expected_local);
}

TEST(StealQueueTest, OverflowAfterPopsTakesTheOldestRemainingTasks) {
  FakeTasks tasks(7);
  InjectQueue inject;
  SmallQueue q;
  for (std::size_t i = 0; i < 4; ++i)
    ASSERT_FALSE(q.push_back_or_overflow(tasks[i], inject));
  ASSERT_EQ(q.pop()->id, 0u);
  ASSERT_EQ(q.pop()->id, 1u);
  // Slots wrap: 4 and 5 land where 0 and 1 were.
  ASSERT_FALSE(q.push_back_or_overflow(tasks[4], inject));
  ASSERT_FALSE(q.push_back_or_overflow(tasks[5], inject));
  EXPECT_TRUE(q.push_back_or_overflow(tasks[6], inject));
  EXPECT_EQ(drain_ids(inject), (std::vector<std::uint64_t>{2, 3, 6}));
  EXPECT_EQ(drain_ids(q), (std::vector<std::uint64_t>{4, 5}));
}

TEST(StealQueueTest, OverflowIntoAClosedInjectQueueDropsTheEntriesReferences) {
  FakeTasks tasks(5);
  for (std::size_t i = 0; i < 5; ++i) {
    // Leave one reference (the queue entry's), so that dropping it deallocates.
    ASSERT_FALSE(tasks[i]->state.ref_dec());
    ASSERT_FALSE(tasks[i]->state.ref_dec());
  }
  InjectQueue inject;
  SmallQueue q;
  for (std::size_t i = 0; i < 4; ++i)
    ASSERT_FALSE(q.push_back_or_overflow(tasks[i], inject));
  inject.close();
  const int before = g_deallocs.load();
  EXPECT_TRUE(q.push_back_or_overflow(tasks[4], inject));
  EXPECT_EQ(g_deallocs.load() - before, 3);
  for (std::size_t i : {0, 1, 4})
    EXPECT_EQ(tasks[i]->state.load().ref_count(), 0u) << i;
  for (std::size_t i : {2, 3})
    EXPECT_EQ(tasks[i]->state.load().ref_count(), 1u) << i;
  EXPECT_EQ(inject.len(), 0u);
  EXPECT_EQ(drain_ids(q), (std::vector<std::uint64_t>{2, 3}));
}

TEST(StealQueueTest, StealIntoMovesHalfRoundedUpAndReturnsTheLastStolen) {
  for (std::size_t n = 1; n <= 20; ++n) {
    FakeTasks tasks(n);
    InjectQueue inject;
    LargeQueue src, dst;
    for (std::size_t i = 0; i < n; ++i)
      ASSERT_FALSE(src.push_back_or_overflow(tasks[i], inject));
    const std::size_t expect_stolen = n - n / 2;
    std::uint32_t stolen = 0;
    TaskHeader* t = src.steal_into(dst, &stolen);
    ASSERT_NE(t, nullptr) << n;
    EXPECT_EQ(stolen, expect_stolen) << n;
    // The stolen tasks are the oldest; the last of them is returned to run,
    // the others wait in dst in order.
    EXPECT_EQ(t->id, expect_stolen - 1) << n;
    EXPECT_EQ(dst.len(), expect_stolen - 1) << n;
    EXPECT_EQ(src.len(), n - expect_stolen) << n;
    std::vector<std::uint64_t> in_dst = drain_ids(dst), in_src = drain_ids(src);
    for (std::size_t i = 0; i < in_dst.size(); ++i)
      EXPECT_EQ(in_dst[i], i) << n;
    for (std::size_t i = 0; i < in_src.size(); ++i)
      EXPECT_EQ(in_src[i], expect_stolen + i) << n;
  }
}

TEST(StealQueueTest, StealIntoARatherFullQueueStealsNothing) {
  FakeTasks tasks(8);
  InjectQueue inject;
  SmallQueue src, dst;
  for (std::size_t i = 0; i < 4; ++i)
    ASSERT_FALSE(src.push_back_or_overflow(tasks[i], inject));
  for (std::size_t i = 4; i < 7; ++i)
    ASSERT_FALSE(dst.push_back_or_overflow(tasks[i], inject));
  // dst holds 3 of 4: more than half full, the stolen half might not fit.
  EXPECT_EQ(src.steal_into(dst), nullptr);
  EXPECT_EQ(src.len(), 4u);
  EXPECT_EQ(dst.len(), 3u);
  // With two (half) it may steal: two more fit.
  ASSERT_EQ(dst.pop()->id, 4u);
  std::uint32_t stolen = 0;
  TaskHeader* t = src.steal_into(dst, &stolen);
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(stolen, 2u);
  EXPECT_EQ(t->id, 1u);
  EXPECT_EQ(drain_ids(dst), (std::vector<std::uint64_t>{5, 6, 0}));
  EXPECT_EQ(drain_ids(src), (std::vector<std::uint64_t>{2, 3}));
}

TEST(StealQueueTest, StealOfASingleTaskReturnsItAndLeavesBothEmpty) {
  FakeTasks tasks(1);
  InjectQueue inject;
  SmallQueue src, dst;
  ASSERT_FALSE(src.push_back_or_overflow(tasks[0], inject));
  std::uint32_t stolen = 0;
  EXPECT_EQ(src.steal_into(dst, &stolen), tasks[0]);
  EXPECT_EQ(stolen, 1u);
  EXPECT_EQ(src.len(), 0u);
  EXPECT_EQ(dst.len(), 0u);
  EXPECT_FALSE(src.has_stealable());
  EXPECT_EQ(src.pop(), nullptr);
  EXPECT_EQ(dst.pop(), nullptr);
}

// Positions are 16-bit and wrap; run well past 2^16 of them, in pushes, pops,
// overflows and steals, with the order checked throughout.
TEST(StealQueueTest, PopBackIfTakesOnlyTheTaskPushedLast) {
  FakeTasks tasks(3);
  InjectQueue inject;
  SmallQueue q;
  EXPECT_FALSE(q.pop_back_if(tasks[0]));  // empty
  for (std::size_t i = 0; i < 3; ++i)
    ASSERT_FALSE(q.push_back_or_overflow(tasks[i], inject));
  EXPECT_FALSE(q.pop_back_if(tasks[1]));  // queued, but not last
  EXPECT_TRUE(q.pop_back_if(tasks[2]));
  EXPECT_FALSE(q.pop_back_if(tasks[2]));  // gone
  EXPECT_EQ(q.len(), 2u);
  EXPECT_TRUE(q.pop_back_if(tasks[1]));  // now last
  ASSERT_FALSE(q.push_back_or_overflow(tasks[2], inject));
  EXPECT_EQ(drain_ids(q), (std::vector<std::uint64_t>{0, 2}));
}

TEST(StealQueueTest, PopBackIfAfterAStealTakesTheLastOfWhatIsLeft) {
  FakeTasks tasks(4);
  InjectQueue inject;
  SmallQueue q, thief;
  for (std::size_t i = 0; i < 4; ++i)
    ASSERT_FALSE(q.push_back_or_overflow(tasks[i], inject));
  std::uint32_t stolen = 0;
  ASSERT_NE(q.steal_into(thief, &stolen), nullptr);
  ASSERT_EQ(stolen, 2u);
  EXPECT_TRUE(q.pop_back_if(tasks[3]));
  EXPECT_EQ(drain_ids(q), (std::vector<std::uint64_t>{2}));
  EXPECT_EQ(q.remaining_slots(), 4u);
}

TEST(StealQueueTest, PopBackIfOfATaskAThiefTookFails) {
  FakeTasks tasks(1);
  InjectQueue inject;
  SmallQueue q, thief;
  ASSERT_FALSE(q.push_back_or_overflow(tasks[0], inject));
  ASSERT_EQ(q.steal_into(thief), tasks[0]);
  EXPECT_FALSE(q.pop_back_if(tasks[0]));
  EXPECT_EQ(q.len(), 0u);
  EXPECT_EQ(q.pop(), nullptr);
}

TEST(StealQueueTest, PositionsWrapAroundPast65536) {
  constexpr std::size_t kOps = 70'000;
  FakeTasks tasks(8);
  InjectQueue inject;
  SmallQueue q, thief;
  std::uint64_t pushed = 0;
  std::size_t overflows = 0, steals = 0;
  for (std::size_t round = 0; round < kOps; ++round) {
    // Push 3, pop 3, in order.
    for (std::size_t i = 0; i < 3; ++i) {
      ASSERT_FALSE(q.push_back_or_overflow(tasks[i], inject)) << round;
      ++pushed;
    }
    ASSERT_EQ(q.len(), 3u);
    for (std::size_t i = 0; i < 3; ++i) {
      TaskHeader* t = q.pop();
      ASSERT_NE(t, nullptr) << round;
      ASSERT_EQ(t->id, i) << round;
    }
    ASSERT_EQ(q.pop(), nullptr);
    if (round % 16 == 0) {
      // An overflow at a wrapped position.
      for (std::size_t i = 0; i < 5; ++i)
        (void)q.push_back_or_overflow(tasks[i], inject);
      ++overflows;
      ASSERT_EQ(drain_ids(inject), (std::vector<std::uint64_t>{0, 1, 4})) << round;
      ASSERT_EQ(drain_ids(q), (std::vector<std::uint64_t>{2, 3})) << round;
    }
    if (round % 16 == 8) {
      // A steal at wrapped positions on both queues.
      for (std::size_t i = 0; i < 3; ++i)
        ASSERT_FALSE(q.push_back_or_overflow(tasks[i], inject));
      std::uint32_t stolen = 0;
      TaskHeader* t = q.steal_into(thief, &stolen);
      ASSERT_NE(t, nullptr);
      ASSERT_EQ(stolen, 2u);
      ASSERT_EQ(t->id, 1u);
      ASSERT_EQ(drain_ids(thief), (std::vector<std::uint64_t>{0})) << round;
      ASSERT_EQ(drain_ids(q), (std::vector<std::uint64_t>{2})) << round;
      ++steals;
    }
  }
  EXPECT_GT(pushed, std::uint64_t{1} << 17);
  EXPECT_GT(overflows, 0u);
  EXPECT_GT(steals, 0u);
  EXPECT_EQ(q.len(), 0u);
  EXPECT_EQ(q.remaining_slots(), 4u);
}

// ---- concurrency ----
//
// One owner pushes ids 0..N-1 (overflowing into the inject queue when full)
// and pops some as it goes; thieves steal from the owner and from each other
// into their own queues, and every thread also takes from the inject queue.
// Whatever is left when everybody stops is drained by the test thread. Each id
// must be consumed exactly once.
template <std::uint32_t Capacity>
void run_owner_and_thieves(std::size_t num_tasks, int num_thieves, bool take_back = false) {
  using Queue = BasicStealQueue<Capacity>;
  FakeTasks tasks(num_tasks);
  InjectQueue inject;
  Queue owner_queue;
  std::vector<std::unique_ptr<Queue>> thief_queues;
  for (int i = 0; i < num_thieves; ++i)
    thief_queues.push_back(std::make_unique<Queue>());
  std::vector<std::atomic<int>> consumed(num_tasks);
  std::atomic<bool> owner_done{false};
  std::atomic<int> bad_steals{0};
  std::size_t taken_back = 0;  // owner thread only, read after join

  auto consume = [&](TaskHeader* t) { consumed[t->id].fetch_add(1, std::memory_order_relaxed); };
  auto consume_from_inject = [&] {
    std::size_t popped = 0;
    TaskHeader* t = inject.pop_batch(4, &popped);
    std::size_t seen = 0;
    while (t) {
      TaskHeader* next = t->queue_next;
      consume(t);
      ++seen;
      t = next;
    }
    if (seen != popped) bad_steals.fetch_add(1);
    return popped;
  };

  std::atomic<int> started{0};
  auto start_together = [&] {
    started.fetch_add(1);
    while (started.load() < num_thieves + 1)
      std::this_thread::yield();
  };

  std::thread owner([&] {
    start_together();
    std::uint64_t rng = 42;
    for (std::size_t i = 0; i < num_tasks; ++i) {
      (void)owner_queue.push_back_or_overflow(tasks[i], inject);
      rng ^= rng << 13;
      rng ^= rng >> 7;
      rng ^= rng << 17;
      // Pop after three pushes of four: the queue fills and overflows, while
      // thieves keep taking.
      if (take_back && rng % 4 == 1) {
        // The join of a task just spawned: take it back from the tail (it
        // may have overflowed to the inject queue or been stolen already).
        if (owner_queue.pop_back_if(tasks[i])) {
          consume(tasks[i]);
          ++taken_back;
        }
      } else if (take_back && rng % 4 == 2 && i > 0) {
        // The one before it, last only if the newest one is gone.
        if (owner_queue.pop_back_if(tasks[i - 1])) {
          consume(tasks[i - 1]);
          ++taken_back;
        }
      } else if (rng % 4 != 0) {
        if (TaskHeader* t = owner_queue.pop()) consume(t);
      }
      if (i % 64 == 0) consume_from_inject();
    }
    while (TaskHeader* t = owner_queue.pop())
      consume(t);
    owner_done.store(true, std::memory_order_release);
  });

  auto thief = [&](int self) {
    Queue& mine = *thief_queues[self];
    start_together();
    for (;;) {
      const bool done = owner_done.load(std::memory_order_acquire);
      bool found = false;
      std::uint32_t stolen = 0;
      if (TaskHeader* t = owner_queue.steal_into(mine, &stolen)) {
        // Half of at most Capacity, rounded up.
        if (stolen == 0 || stolen > Capacity / 2) bad_steals.fetch_add(1);
        consume(t);
        found = true;
      }
      // Steal from another thief too (its owner pops concurrently).
      Queue& other = *thief_queues[(self + 1) % num_thieves];
      if (&other != &mine) {
        if (TaskHeader* t = other.steal_into(mine)) {
          consume(t);
          found = true;
        }
      }
      // Run one of ours; the rest stays stealable by the other thieves.
      if (TaskHeader* t = mine.pop()) {
        consume(t);
        found = true;
      }
      if (consume_from_inject() > 0) found = true;
      if (!found && done) break;
    }
    while (TaskHeader* t = mine.pop())
      consume(t);
  };
  std::vector<std::thread> thieves;
  for (int i = 0; i < num_thieves; ++i)
    thieves.emplace_back(thief, i);
  owner.join();
  for (auto& t : thieves)
    t.join();

  // Anything still queued (a thief may have stolen from another one after
  // that one's last pop) is drained here.
  while (TaskHeader* t = owner_queue.pop())
    consume(t);
  for (auto& q : thief_queues) {
    while (TaskHeader* t = q->pop())
      consume(t);
  }
  while (consume_from_inject() > 0) {
  }

  EXPECT_EQ(bad_steals.load(), 0);
  std::size_t lost = 0, duplicated = 0;
  for (std::size_t i = 0; i < num_tasks; ++i) {
    int n = consumed[i].load();
    if (n == 0) ++lost;
    if (n > 1) ++duplicated;
  }
  EXPECT_EQ(lost, 0u);
  EXPECT_EQ(duplicated, 0u);
  EXPECT_EQ(owner_queue.len(), 0u);
  EXPECT_EQ(inject.len(), 0u);
  if (take_back) {
    EXPECT_GT(taken_back, 0u);
  }
}

TEST(StealQueueStressTest, OwnerAndTwoThievesCapacity4ConsumeEachTaskOnce) {
  run_owner_and_thieves<4>(test::scale(1'000'000), 2);
}

TEST(StealQueueStressTest, OwnerAndThreeThievesCapacity4ConsumeEachTaskOnce) {
  run_owner_and_thieves<4>(test::scale(1'000'000), 3);
}

TEST(StealQueueStressTest, OwnerAndThreeThievesCapacity256ConsumeEachTaskOnce) {
  run_owner_and_thieves<256>(test::scale(1'000'000), 3);
}

// The owner also takes its newest tasks back from the tail (pop_back_if)
// while thieves claim from the head: with capacity 4 the two ends meet on
// almost every operation, the race "Taking back the last slot" is about.
TEST(StealQueueStressTest, OwnerTakingBackFromTheTailAgainstTwoThievesCapacity4) {
  run_owner_and_thieves<4>(test::scale(1'000'000), 2, true);
}

TEST(StealQueueStressTest, OwnerTakingBackFromTheTailAgainstThreeThievesCapacity256) {
  run_owner_and_thieves<256>(test::scale(1'000'000), 3, true);
}

}  // namespace
}  // namespace volt::detail
