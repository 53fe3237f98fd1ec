// Tests of volt::detail::InjectQueue (src/runtime/scheduler/inject_queue.hpp):
// FIFO order, batches in and out (counts, chain links, the terminating null),
// len(), close(), and conservation under concurrent producers and consumers.
// The queued "tasks" are bare TaskHeaders whose id is their index; the queue
// only touches their queue_next links.
#include "runtime/scheduler/inject_queue.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <deque>
#include <thread>
#include <vector>

#include "test_support.hpp"

namespace volt::detail {
namespace {

class InjectFakeTasks {
 public:
  explicit InjectFakeTasks(std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) {
      TaskHeader& t = tasks_.emplace_back(nullptr, std::coroutine_handle<>{});
      t.id = i;
    }
  }
  TaskHeader* operator[](std::size_t i) { return &tasks_[i]; }

 private:
  std::deque<TaskHeader> tasks_;  // stable addresses; TaskHeader does not move
};

// Links tasks[first..last] through queue_next (the last link is left as is).
void link(InjectFakeTasks& tasks, std::size_t first, std::size_t last) {
  for (std::size_t i = first; i < last; ++i)
    tasks[i]->queue_next = tasks[i + 1];
}

std::vector<std::uint64_t> chain_ids(TaskHeader* t) {
  std::vector<std::uint64_t> ids;
  for (; t; t = t->queue_next)
    ids.push_back(t->id);
  return ids;
}

TEST(InjectQueueTest, NewQueueIsEmpty) {
  InjectQueue q;
  EXPECT_EQ(q.len(), 0u);
  EXPECT_TRUE(q.is_empty());
  EXPECT_FALSE(q.is_closed());
  EXPECT_EQ(q.pop(), nullptr);
  std::size_t popped = 123;
  EXPECT_EQ(q.pop_batch(8, &popped), nullptr);
  EXPECT_EQ(popped, 0u);
}

TEST(InjectQueueTest, PushAndPopAreFifo) {
  InjectFakeTasks tasks(10);
  InjectQueue q;
  for (std::size_t i = 0; i < 10; ++i) {
    ASSERT_TRUE(q.push(tasks[i]));
    EXPECT_EQ(q.len(), i + 1);
  }
  for (std::size_t i = 0; i < 10; ++i) {
    TaskHeader* t = q.pop();
    ASSERT_NE(t, nullptr);
    EXPECT_EQ(t->id, i);
    EXPECT_EQ(t->queue_next, nullptr);  // handed out unlinked
    EXPECT_EQ(q.len(), 9 - i);
  }
  EXPECT_EQ(q.pop(), nullptr);
  EXPECT_TRUE(q.is_empty());
}

TEST(InjectQueueTest, QueueIsReusableAfterBeingDrained) {
  InjectFakeTasks tasks(4);
  InjectQueue q;
  ASSERT_TRUE(q.push(tasks[0]));
  ASSERT_EQ(q.pop(), tasks[0]);
  // The tail must have been reset: new pushes form a fresh list.
  ASSERT_TRUE(q.push(tasks[1]));
  ASSERT_TRUE(q.push(tasks[2]));
  EXPECT_EQ(q.pop(), tasks[1]);
  EXPECT_EQ(q.pop(), tasks[2]);
  EXPECT_EQ(q.pop(), nullptr);
}

TEST(InjectQueueTest, PushBatchAppendsTheWholeChainInOrder) {
  InjectFakeTasks tasks(8);
  InjectQueue q;
  ASSERT_TRUE(q.push(tasks[0]));
  link(tasks, 1, 5);
  tasks[5]->queue_next = tasks[7];  // stale link past the batch's end
  ASSERT_TRUE(q.push_batch(tasks[1], tasks[5], 5));
  EXPECT_EQ(q.len(), 6u);
  EXPECT_EQ(tasks[5]->queue_next, nullptr);  // the batch ends at `last`
  ASSERT_TRUE(q.push(tasks[6]));
  EXPECT_EQ(q.len(), 7u);
  std::vector<std::uint64_t> ids;
  while (TaskHeader* t = q.pop())
    ids.push_back(t->id);
  EXPECT_EQ(ids, (std::vector<std::uint64_t>{0, 1, 2, 3, 4, 5, 6}));
}

TEST(InjectQueueTest, PopBatchTakesUpToMaxAsANullTerminatedChain) {
  InjectFakeTasks tasks(10);
  InjectQueue q;
  link(tasks, 0, 9);
  ASSERT_TRUE(q.push_batch(tasks[0], tasks[9], 10));

  std::size_t popped = 0;
  TaskHeader* first = q.pop_batch(4, &popped);
  EXPECT_EQ(popped, 4u);
  EXPECT_EQ(chain_ids(first), (std::vector<std::uint64_t>{0, 1, 2, 3}));
  EXPECT_EQ(q.len(), 6u);

  first = q.pop_batch(1, &popped);
  EXPECT_EQ(popped, 1u);
  EXPECT_EQ(chain_ids(first), (std::vector<std::uint64_t>{4}));

  // More than there is: all of it.
  first = q.pop_batch(100, &popped);
  EXPECT_EQ(popped, 5u);
  EXPECT_EQ(chain_ids(first), (std::vector<std::uint64_t>{5, 6, 7, 8, 9}));
  EXPECT_EQ(q.len(), 0u);
  EXPECT_EQ(q.pop_batch(100, &popped), nullptr);
  EXPECT_EQ(popped, 0u);

  // The queue still works after a batch emptied it.
  ASSERT_TRUE(q.push(tasks[3]));
  EXPECT_EQ(q.pop(), tasks[3]);
}

// A batch of at least the queue's length takes the list whole (no walk):
// the chain it returns must end at the last task, and the queue, left with
// no head or tail, must link what is pushed next as its only content.
TEST(InjectQueueTest, PopBatchOfExactlyTheLengthTakesTheWholeChainAndEmptiesTheQueue) {
  InjectFakeTasks tasks(8);
  InjectQueue q;
  link(tasks, 0, 2);
  ASSERT_TRUE(q.push_batch(tasks[0], tasks[2], 3));
  ASSERT_TRUE(q.push(tasks[3]));

  std::size_t popped = 0;
  TaskHeader* first = q.pop_batch(4, &popped);
  EXPECT_EQ(popped, 4u);
  EXPECT_EQ(chain_ids(first), (std::vector<std::uint64_t>{0, 1, 2, 3}));
  EXPECT_TRUE(q.is_empty());
  EXPECT_EQ(q.pop(), nullptr);

  link(tasks, 4, 5);
  ASSERT_TRUE(q.push_batch(tasks[4], tasks[5], 2));
  ASSERT_TRUE(q.push(tasks[6]));
  EXPECT_EQ(q.len(), 3u);
  first = q.pop_batch(2, &popped);  // part of it: the walk
  EXPECT_EQ(popped, 2u);
  EXPECT_EQ(chain_ids(first), (std::vector<std::uint64_t>{4, 5}));
  first = q.pop_batch(64, &popped);  // the rest, whole
  EXPECT_EQ(popped, 1u);
  EXPECT_EQ(chain_ids(first), (std::vector<std::uint64_t>{6}));
  EXPECT_EQ(q.len(), 0u);
}

TEST(InjectQueueTest, PopBatchOfZeroTakesNothing) {
  InjectFakeTasks tasks(2);
  InjectQueue q;
  ASSERT_TRUE(q.push(tasks[0]));
  std::size_t popped = 9;
  EXPECT_EQ(q.pop_batch(0, &popped), nullptr);
  EXPECT_EQ(popped, 0u);
  EXPECT_EQ(q.len(), 1u);
  EXPECT_EQ(q.pop(), tasks[0]);
}

TEST(InjectQueueTest, CloseRefusesPushesButKeepsWhatIsQueued) {
  InjectFakeTasks tasks(5);
  InjectQueue q;
  ASSERT_TRUE(q.push(tasks[0]));
  ASSERT_TRUE(q.push(tasks[1]));
  q.close();
  EXPECT_TRUE(q.is_closed());
  EXPECT_FALSE(q.push(tasks[2]));
  link(tasks, 3, 4);
  EXPECT_FALSE(q.push_batch(tasks[3], tasks[4], 2));
  EXPECT_EQ(q.len(), 2u);
  // Shutdown drains what was queued before the close.
  EXPECT_EQ(q.pop(), tasks[0]);
  EXPECT_EQ(q.pop(), tasks[1]);
  EXPECT_EQ(q.pop(), nullptr);
  // Closing is idempotent and final.
  q.close();
  EXPECT_TRUE(q.is_closed());
  EXPECT_FALSE(q.push(tasks[2]));
  EXPECT_TRUE(q.is_empty());
}

// Producers push (single tasks and batches of 1..8) while consumers pop
// (single and in batches). Every task is consumed exactly once, and each
// consumer sees any one producer's tasks in the order they were pushed.
TEST(InjectQueueStressTest, ConcurrentProducersAndConsumersConserveTasks) {
  constexpr int kProducers = 3;
  constexpr int kConsumers = 2;
  const std::size_t kPerProducer = test::scale(200'000);
  const std::size_t total = kPerProducer * kProducers;
  InjectFakeTasks tasks(total);  // producer p owns ids [p * kPerProducer, (p + 1) * kPerProducer)
  InjectQueue q;
  std::vector<std::atomic<int>> consumed(total);
  std::atomic<std::size_t> consumed_total{0};
  std::atomic<int> order_violations{0};
  std::atomic<int> count_mismatches{0};
  std::atomic<int> producers_left{kProducers};

  auto producer = [&](int p) {
    const std::size_t base = static_cast<std::size_t>(p) * kPerProducer;
    std::size_t i = 0;
    std::size_t batch = 1;
    while (i < kPerProducer) {
      std::size_t n = std::min(batch, kPerProducer - i);
      if (n == 1) {
        if (!q.push(tasks[base + i])) count_mismatches.fetch_add(1);
      } else {
        link(tasks, base + i, base + i + n - 1);
        if (!q.push_batch(tasks[base + i], tasks[base + i + n - 1], n))
          count_mismatches.fetch_add(1);
      }
      i += n;
      batch = batch % 8 + 1;
    }
    producers_left.fetch_sub(1, std::memory_order_release);
  };

  auto consumer = [&](int c) {
    std::vector<std::int64_t> last_seen(kProducers, -1);
    auto take = [&](TaskHeader* t) {
      const auto id = static_cast<std::int64_t>(t->id);
      const auto p = static_cast<std::size_t>(id / static_cast<std::int64_t>(kPerProducer));
      if (id <= last_seen[p]) order_violations.fetch_add(1);
      last_seen[p] = id;
      consumed[t->id].fetch_add(1, std::memory_order_relaxed);
      consumed_total.fetch_add(1, std::memory_order_relaxed);
    };
    std::size_t round = static_cast<std::size_t>(c);
    for (;;) {
      const bool done = producers_left.load(std::memory_order_acquire) == 0;
      bool got = false;
      if (++round % 2 == 0) {
        if (TaskHeader* t = q.pop()) {
          take(t);
          got = true;
        }
      } else {
        std::size_t popped = 0;
        TaskHeader* t = q.pop_batch(1 + round % 16, &popped);
        std::size_t seen = 0;
        while (t) {
          TaskHeader* next = t->queue_next;
          take(t);
          ++seen;
          t = next;
        }
        if (seen != popped) count_mismatches.fetch_add(1);
        got = popped > 0;
      }
      if (!got && done && q.is_empty()) break;
    }
  };

  std::vector<std::thread> threads;
  for (int c = 0; c < kConsumers; ++c)
    threads.emplace_back(consumer, c);
  for (int p = 0; p < kProducers; ++p)
    threads.emplace_back(producer, p);
  for (auto& t : threads)
    t.join();

  EXPECT_EQ(count_mismatches.load(), 0);
  EXPECT_EQ(order_violations.load(), 0);
  EXPECT_EQ(consumed_total.load(), total);
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < total; ++i)
    wrong += consumed[i].load() != 1;
  EXPECT_EQ(wrong, 0u);
  EXPECT_EQ(q.len(), 0u);
  EXPECT_EQ(q.pop(), nullptr);
}

}  // namespace
}  // namespace volt::detail
