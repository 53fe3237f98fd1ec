// Tests of volt::detail::IdleSet (src/runtime/scheduler/idle_set.hpp).
//
// Deterministic: the searcher limit, which transition reports "last
// searcher", which sleeper worker_to_notify picks and how it counts it, and
// unpark_self against a claim, including more than 64 workers (several bitmap
// words).
// Concurrent model: pushers make work available (a shared counter) and then
// call worker_to_notify; simulated workers follow the protocol of
// src/runtime/scheduler/worker.cpp (run / steal_work / run_task / park). All
// work must be consumed — a lost wake-up leaves it pending with everybody
// asleep, which the test reports after a generous deadline — and once the work
// is gone every worker must be asleep with the counters back at zero.
#include "runtime/scheduler/idle_set.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "test_support.hpp"

namespace volt::detail {
namespace {

TEST(IdleSetTest, StartsWithEveryWorkerUnparkedAndNobodySearching) {
  IdleSet idle(5);
  EXPECT_EQ(idle.num_workers(), 5u);
  EXPECT_EQ(idle.num_unparked(), 5u);
  EXPECT_EQ(idle.num_searching(), 0u);
  for (std::uint32_t w = 0; w < 5; ++w)
    EXPECT_FALSE(idle.is_parked(w));
  // Nobody sleeps: there is nobody to wake.
  EXPECT_EQ(idle.worker_to_notify(), std::nullopt);
}

TEST(IdleSetTest, AtMostHalfTheWorkersRoundedUpMaySearch) {
  for (std::uint32_t n = 1; n <= 9; ++n) {
    IdleSet idle(n);
    std::uint32_t admitted = 0;
    while (idle.try_become_searcher()) {
      ++admitted;
      ASSERT_LE(admitted, n) << "searcher limit never reached for " << n << " workers";
    }
    EXPECT_EQ(admitted, (n + 1) / 2) << n << " workers";
    EXPECT_EQ(idle.num_searching(), admitted);
    // One leaves: exactly one more may join.
    EXPECT_EQ(idle.transition_from_searching(), admitted == 1);
    EXPECT_TRUE(idle.try_become_searcher());
    EXPECT_FALSE(idle.try_become_searcher());
  }
}

TEST(IdleSetTest, OnlyTheLastSearcherToFindWorkIsTold) {
  IdleSet idle(4);
  ASSERT_TRUE(idle.try_become_searcher());
  ASSERT_TRUE(idle.try_become_searcher());
  EXPECT_FALSE(idle.transition_from_searching());
  EXPECT_EQ(idle.num_searching(), 1u);
  EXPECT_TRUE(idle.transition_from_searching());
  EXPECT_EQ(idle.num_searching(), 0u);
  EXPECT_EQ(idle.num_unparked(), 4u);  // searching is not parking
}

TEST(IdleSetTest, TransitionToParkedReportsWhetherItWasTheLastSearcher) {
  IdleSet idle(4);
  ASSERT_TRUE(idle.try_become_searcher());
  ASSERT_TRUE(idle.try_become_searcher());
  // A worker that was not searching is never the last searcher.
  EXPECT_FALSE(idle.transition_to_parked(3, false));
  EXPECT_EQ(idle.num_unparked(), 3u);
  EXPECT_EQ(idle.num_searching(), 2u);
  EXPECT_FALSE(idle.transition_to_parked(1, true));
  EXPECT_EQ(idle.num_searching(), 1u);
  EXPECT_TRUE(idle.transition_to_parked(2, true));
  EXPECT_EQ(idle.num_searching(), 0u);
  EXPECT_EQ(idle.num_unparked(), 1u);
  EXPECT_TRUE(idle.is_parked(1));
  EXPECT_TRUE(idle.is_parked(2));
  EXPECT_TRUE(idle.is_parked(3));
  EXPECT_FALSE(idle.is_parked(0));
}

TEST(IdleSetTest, WorkerToNotifyClaimsTheLowestParkedWorkerAsASearcher) {
  IdleSet idle(4);
  ASSERT_FALSE(idle.transition_to_parked(2, false));
  ASSERT_FALSE(idle.transition_to_parked(1, false));
  ASSERT_FALSE(idle.transition_to_parked(3, false));
  ASSERT_EQ(idle.num_unparked(), 1u);

  std::optional<std::uint32_t> woken = idle.worker_to_notify();
  ASSERT_TRUE(woken.has_value());
  EXPECT_EQ(*woken, 1u);
  EXPECT_FALSE(idle.is_parked(1));
  EXPECT_TRUE(idle.is_parked(2));
  // Counted before it even runs: one searcher, two unparked.
  EXPECT_EQ(idle.num_searching(), 1u);
  EXPECT_EQ(idle.num_unparked(), 2u);
  // Somebody searches now: a second push wakes nobody.
  EXPECT_EQ(idle.worker_to_notify(), std::nullopt);
  EXPECT_EQ(idle.num_unparked(), 2u);

  // The woken worker finds work and was the last searcher: the next push
  // may wake another sleeper, the lowest remaining.
  EXPECT_TRUE(idle.transition_from_searching());
  woken = idle.worker_to_notify();
  ASSERT_TRUE(woken.has_value());
  EXPECT_EQ(*woken, 2u);
  EXPECT_TRUE(idle.transition_from_searching());
  EXPECT_EQ(idle.worker_to_notify(), std::optional<std::uint32_t>(3u));
  EXPECT_EQ(idle.num_unparked(), 4u);
  EXPECT_TRUE(idle.transition_from_searching());
  // Nobody left asleep.
  EXPECT_EQ(idle.worker_to_notify(), std::nullopt);
  EXPECT_EQ(idle.num_searching(), 0u);
}

TEST(IdleSetTest, WorkerToNotifyWakesNobodyWhileSomeoneSearches) {
  IdleSet idle(3);
  ASSERT_FALSE(idle.transition_to_parked(0, false));
  ASSERT_TRUE(idle.try_become_searcher());
  EXPECT_EQ(idle.worker_to_notify(), std::nullopt);
  EXPECT_TRUE(idle.is_parked(0));
  EXPECT_EQ(idle.num_unparked(), 2u);
  EXPECT_EQ(idle.num_searching(), 1u);
}

TEST(IdleSetTest, UnparkSelfWithoutAClaimCountsTheWorkerUnparkedButNotSearching) {
  IdleSet idle(2);
  ASSERT_FALSE(idle.transition_to_parked(1, false));
  EXPECT_TRUE(idle.unpark_self(1));
  EXPECT_FALSE(idle.is_parked(1));
  EXPECT_EQ(idle.num_unparked(), 2u);
  EXPECT_EQ(idle.num_searching(), 0u);
}

TEST(IdleSetTest, UnparkSelfAfterAClaimReportsTheClaim) {
  IdleSet idle(2);
  ASSERT_FALSE(idle.transition_to_parked(1, false));
  ASSERT_EQ(idle.worker_to_notify(), std::optional<std::uint32_t>(1u));
  // The waker already counted it (searching + unparked); nothing more to do.
  EXPECT_FALSE(idle.unpark_self(1));
  EXPECT_EQ(idle.num_unparked(), 2u);
  EXPECT_EQ(idle.num_searching(), 1u);
}

TEST(IdleSetTest, MoreThan64WorkersUseSeveralBitmapWords) {
  constexpr std::uint32_t kWorkers = 130;
  IdleSet idle(kWorkers);
  for (std::uint32_t w : {129u, 70u, 64u, 63u})
    ASSERT_FALSE(idle.transition_to_parked(w, false));
  EXPECT_EQ(idle.num_unparked(), kWorkers - 4);
  for (std::uint32_t w = 0; w < kWorkers; ++w) {
    const bool expected = w == 63 || w == 64 || w == 70 || w == 129;
    EXPECT_EQ(idle.is_parked(w), expected) << w;
  }
  // Claimed lowest first, across word boundaries.
  for (std::uint32_t expected : {63u, 64u, 70u, 129u}) {
    EXPECT_EQ(idle.worker_to_notify(), std::optional<std::uint32_t>(expected));
    EXPECT_FALSE(idle.is_parked(expected));
    EXPECT_TRUE(idle.transition_from_searching());
  }
  EXPECT_EQ(idle.worker_to_notify(), std::nullopt);
  EXPECT_EQ(idle.num_unparked(), kWorkers);
  // A sleeper only in the last word is found too.
  ASSERT_FALSE(idle.transition_to_parked(128, false));
  EXPECT_TRUE(idle.unpark_self(128));
  ASSERT_FALSE(idle.transition_to_parked(128, false));
  EXPECT_EQ(idle.worker_to_notify(), std::optional<std::uint32_t>(128u));
}

TEST(IdleSetTest, SearcherLimitWithManyWorkers) {
  IdleSet idle(130);
  std::uint32_t admitted = 0;
  while (idle.try_become_searcher())
    ++admitted;
  EXPECT_EQ(admitted, 65u);
}

// ---- concurrent model of the parking protocol ----

// A worker's sleep: unpark() before park() makes park() return at once.
class ModelParker {
 public:
  void park() {
    std::unique_lock lock(mutex_);
    cv_.wait(lock, [&] { return notified_; });
    notified_ = false;
  }
  void unpark() {
    {
      std::lock_guard lock(mutex_);
      notified_ = true;
    }
    cv_.notify_one();
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool notified_ = false;  // guarded by mutex_
};

// Yield injection: widens the windows between the protocol's steps (a push
// and its notify, a failed search and the park) so that an interleaving that
// loses a wake-up is actually reached.
void maybe_yield() {
  thread_local std::uint64_t rng =
      0x9E3779B97F4A7C15ull ^ std::hash<std::thread::id>{}(std::this_thread::get_id());
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  if (rng % 4 == 0) std::this_thread::yield();
}

class ParkingModel {
 public:
  explicit ParkingModel(std::uint32_t workers) : idle_(workers), parkers_(workers) {
    for (auto& p : parkers_)
      p = std::make_unique<ModelParker>();
  }

  // A pusher: make one unit of work available, then wake a sleeper if the
  // protocol says so.
  void push() {
    pending_.fetch_add(1, std::memory_order_seq_cst);
    maybe_yield();
    notify_parked();
  }

  // The body of a worker thread (worker.cpp: run, steal_work, run_task, park).
  void run_worker(std::uint32_t self) {
    bool searching = false;
    while (!stop_.load(std::memory_order_acquire)) {
      // next_task(): local work. The model has one shared pool of work, so
      // local and stolen work are both "take one unit".
      bool found = take();
      if (!found) {
        // steal_work(): only as a searcher; at most half may search.
        if (!searching && idle_.try_become_searcher()) searching = true;
        if (searching) found = take();
      }
      if (found) {
        // run_task(): the last searcher to find work wakes another.
        if (searching) {
          searching = false;
          if (idle_.transition_from_searching()) notify_parked();
        }
        consumed_.fetch_add(1, std::memory_order_relaxed);
        continue;
      }
      maybe_yield();
      searching = park(self, searching);
    }
  }

  void stop_all() {
    stop_.store(true, std::memory_order_release);
    for (auto& p : parkers_)
      p->unpark();
  }
  // Wakes a worker for no reason (a spurious wake-up).
  void poke(std::uint32_t worker) { parkers_[worker]->unpark(); }

  std::int64_t pending() const { return pending_.load(std::memory_order_seq_cst); }
  std::uint64_t consumed() const { return consumed_.load(std::memory_order_relaxed); }
  IdleSet& idle() { return idle_; }

 private:
  bool take() {
    std::int64_t p = pending_.load(std::memory_order_seq_cst);
    while (p > 0) {
      if (pending_.compare_exchange_weak(p, p - 1, std::memory_order_seq_cst)) return true;
    }
    return false;
  }

  void notify_parked() {
    if (auto w = idle_.worker_to_notify()) parkers_[*w]->unpark();
  }

  // worker.cpp park(). Returns whether the worker searches when it wakes.
  bool park(std::uint32_t self, bool searching) {
    if (idle_.transition_to_parked(self, searching) && pending() > 0) notify_parked();
    for (;;) {
      if (stop_.load(std::memory_order_acquire)) return false;
      parkers_[self]->park();
      if (!idle_.is_parked(self)) return true;  // claimed: counted as a searcher
      if (pending() > 0) return !idle_.unpark_self(self);
    }
  }

  IdleSet idle_;
  std::vector<std::unique_ptr<ModelParker>> parkers_;
  std::atomic<std::int64_t> pending_{0};
  std::atomic<std::uint64_t> consumed_{0};
  std::atomic<bool> stop_{false};
};

void run_parking_model(std::uint32_t num_workers, int num_pushers, bool spurious_wakeups) {
  const std::size_t kPerPusher = test::scale(50'000);
  const std::uint64_t total = kPerPusher * static_cast<std::uint64_t>(num_pushers);
  ParkingModel model(num_workers);

  std::vector<std::thread> workers;
  for (std::uint32_t w = 0; w < num_workers; ++w)
    workers.emplace_back([&model, w] { model.run_worker(w); });

  std::atomic<bool> pushing{true};
  std::thread poker;
  if (spurious_wakeups) {
    poker = std::thread([&] {
      std::uint32_t w = 0;
      while (pushing.load(std::memory_order_acquire)) {
        model.poke(w);
        w = (w + 1) % num_workers;
        std::this_thread::sleep_for(std::chrono::microseconds(50));
      }
    });
  }

  std::vector<std::thread> pushers;
  for (int p = 0; p < num_pushers; ++p) {
    pushers.emplace_back([&, p] {
      std::uint64_t rng = 0x2545F4914F6CDD1Dull * static_cast<std::uint64_t>(p + 1);
      for (std::size_t i = 0; i < kPerPusher; ++i) {
        model.push();
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        // Bursts separated by pauses long enough for the workers to run dry
        // and go to sleep, so that most pushes meet parking workers.
        if (rng % 16 == 0) std::this_thread::sleep_for(std::chrono::microseconds(20));
      }
    });
  }
  for (auto& t : pushers)
    t.join();
  pushing.store(false, std::memory_order_release);
  if (poker.joinable()) poker.join();

  // Every unit of work gets consumed. If a wake-up were lost, work would stay
  // pending with every worker asleep: the deadline turns that hang into a
  // failure.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (model.consumed() < total && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(model.consumed(), total) << "work left pending with " << model.pending()
                                     << " units; searching=" << model.idle().num_searching()
                                     << " unparked=" << model.idle().num_unparked();
  EXPECT_EQ(model.pending(), 0);

  // With no work left, every worker ends up asleep and the counts return to
  // zero: no searcher or unparked count leaked.
  auto all_parked = [&] {
    for (std::uint32_t w = 0; w < num_workers; ++w)
      if (!model.idle().is_parked(w)) return false;
    return true;
  };
  while (!all_parked() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_TRUE(all_parked());
  EXPECT_EQ(model.idle().num_searching(), 0u);
  EXPECT_EQ(model.idle().num_unparked(), 0u);

  model.stop_all();
  for (auto& t : workers)
    t.join();
}

TEST(IdleSetStressTest, TwoWorkersNeverSleepWithWorkPending) {
  run_parking_model(2, 1, false);
}

TEST(IdleSetStressTest, FourWorkersTwoPushersNeverSleepWithWorkPending) {
  run_parking_model(4, 2, false);
}

TEST(IdleSetStressTest, SpuriousWakeupsNeverLeaveWorkPending) {
  run_parking_model(3, 2, true);
}

}  // namespace
}  // namespace volt::detail
