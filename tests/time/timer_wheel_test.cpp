// TimerWheel: entries fire at the first advance to a time >= their deadline,
// never before, in deadline order, across every level and beyond the span.
#include "time/timer_wheel.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

namespace volt::detail {
namespace {

constexpr std::uint64_t kMs = 1;
constexpr std::uint64_t kSecond = 1000 * kMs;
constexpr std::uint64_t kDay = 86'400 * kSecond;
constexpr std::uint64_t kYear = 365 * kDay;

struct Fired {
  std::vector<TimerEntry*> entries;
  void operator()(TimerEntry* e) { entries.push_back(e); }
};

TEST(TimerWheelTest, FiresAtItsDeadlineAndNotBefore) {
  TimerWheel wheel;
  TimerEntry e;
  e.deadline = 10;
  ASSERT_TRUE(wheel.insert(&e));
  Fired fired;
  wheel.advance(9, fired);
  EXPECT_TRUE(fired.entries.empty());
  EXPECT_TRUE(e.linked);
  wheel.advance(10, fired);
  ASSERT_EQ(fired.entries.size(), 1u);
  EXPECT_EQ(fired.entries[0], &e);
  EXPECT_FALSE(e.linked);
  EXPECT_TRUE(wheel.empty());
}

TEST(TimerWheelTest, DeadlineNotInTheFutureIsRefused) {
  TimerWheel wheel(100);
  TimerEntry now, past;
  now.deadline = 100;
  past.deadline = 5;
  EXPECT_FALSE(wheel.insert(&now));
  EXPECT_FALSE(wheel.insert(&past));
  EXPECT_TRUE(wheel.empty());
}

TEST(TimerWheelTest, RemovedEntryNeverFires) {
  TimerWheel wheel;
  TimerEntry a, b;
  a.deadline = 70;        // level 1
  b.deadline = 5 * kDay;  // a high level
  ASSERT_TRUE(wheel.insert(&a));
  ASSERT_TRUE(wheel.insert(&b));
  wheel.remove(&a);
  wheel.remove(&b);
  wheel.remove(&b);  // removing twice is harmless
  Fired fired;
  wheel.advance(10 * kDay, fired);
  EXPECT_TRUE(fired.entries.empty());
  EXPECT_FALSE(wheel.next_expiration());
}

TEST(TimerWheelTest, NextExpirationNeverLaterThanTheEarliestDeadline) {
  TimerWheel wheel(12345);
  std::vector<TimerEntry> entries(5);
  const std::uint64_t offsets[] = {3, 200, 70 * kSecond, 3 * kDay, 3 * kYear};
  for (std::size_t i = 0; i < entries.size(); ++i) {
    entries[i].deadline = 12345 + offsets[i];
    ASSERT_TRUE(wheel.insert(&entries[i]));
  }
  ASSERT_TRUE(wheel.next_expiration());
  EXPECT_EQ(*wheel.next_expiration(), 12345u + 3);  // level 0: exact
  Fired fired;
  wheel.advance(12345 + 3, fired);
  ASSERT_EQ(fired.entries.size(), 1u);
  auto next = wheel.next_expiration();
  ASSERT_TRUE(next);
  EXPECT_LE(*next, 12345u + 200);
  EXPECT_GT(*next, 12345u + 3);
}

TEST(TimerWheelTest, DeadlinesBeyondTheSpanFireOnTimeNotEarly) {
  TimerWheel wheel;
  ASSERT_LT(TimerWheel::kSpan, 5 * kYear);
  TimerEntry far;
  far.deadline = 5 * kYear + 17;
  ASSERT_TRUE(wheel.insert(&far));
  Fired fired;
  for (std::uint64_t t = kYear / 2; t < far.deadline; t += kYear / 2) {
    wheel.advance(t, fired);
    ASSERT_TRUE(fired.entries.empty()) << "fired early at " << t;
  }
  wheel.advance(far.deadline - 1, fired);
  EXPECT_TRUE(fired.entries.empty());
  wheel.advance(far.deadline, fired);
  ASSERT_EQ(fired.entries.size(), 1u);
}

TEST(TimerWheelTest, FireCallbackMayInsertEntries) {
  TimerWheel wheel;
  TimerEntry first, second;
  first.deadline = 5;
  second.deadline = 0;
  ASSERT_TRUE(wheel.insert(&first));
  std::vector<std::uint64_t> fired_at;
  auto fire = [&](TimerEntry* e) {
    fired_at.push_back(e->deadline);
    if (e == &first) {
      second.deadline = wheel.elapsed() + 100;
      ASSERT_TRUE(wheel.insert(&second));
    }
  };
  wheel.advance(1000, fire);
  EXPECT_EQ(fired_at, (std::vector<std::uint64_t>{5, 105}));
}

// Random deadlines over every level (1 ms .. years, some beyond the span),
// random cancellations, random time steps (small and huge): compared with a
// plain list of what must have fired.
TEST(TimerWheelTest, RandomScheduleMatchesReference) {
  std::mt19937_64 rng(20261122);
  for (int round = 0; round < 20; ++round) {
    const std::uint64_t origin = rng() % (std::uint64_t{1} << 40);
    TimerWheel wheel(origin);
    std::vector<TimerEntry> entries(2000);
    std::vector<bool> cancelled(entries.size(), false);
    std::vector<bool> fired(entries.size(), false);
    for (auto& e : entries) {
      const int scale = static_cast<int>(rng() % 6);
      const std::uint64_t ranges[] = {64, 4096, 262'144, kDay, kYear, 6 * kYear};
      e.deadline = origin + 1 + rng() % ranges[scale];
      ASSERT_TRUE(wheel.insert(&e));
    }
    std::uint64_t now = origin;
    std::uint64_t last_fired_deadline = 0;
    while (!wheel.empty()) {
      // Cancel a few at random.
      for (int k = 0; k < 3; ++k) {
        std::size_t i = rng() % entries.size();
        if (entries[i].linked) {
          wheel.remove(&entries[i]);
          cancelled[i] = true;
        }
      }
      const int kind = static_cast<int>(rng() % 4);
      const std::uint64_t steps[] = {1 + rng() % 3, 1 + rng() % 5000, 1 + rng() % kDay,
                                     1 + rng() % kYear};
      now += steps[kind];
      wheel.advance(now, [&](TimerEntry* e) {
        const std::size_t i = static_cast<std::size_t>(e - entries.data());
        ASSERT_FALSE(cancelled[i]) << "cancelled entry fired";
        ASSERT_FALSE(fired[i]) << "fired twice";
        ASSERT_LE(e->deadline, now) << "fired early";
        ASSERT_GE(e->deadline, last_fired_deadline) << "out of deadline order";
        last_fired_deadline = e->deadline;
        fired[i] = true;
      });
      // Everything due by now has fired; nothing later has.
      for (std::size_t i = 0; i < entries.size(); ++i) {
        if (cancelled[i]) continue;
        ASSERT_EQ(fired[i], entries[i].deadline <= now) << "entry " << i << " round " << round;
      }
      if (auto next = wheel.next_expiration()) {
        std::uint64_t earliest = ~std::uint64_t{0};
        for (std::size_t i = 0; i < entries.size(); ++i)
          if (entries[i].linked) earliest = std::min(earliest, entries[i].deadline);
        ASSERT_LE(*next, earliest);
        ASSERT_GT(*next, now);
      }
    }
  }
}

}  // namespace
}  // namespace volt::detail
