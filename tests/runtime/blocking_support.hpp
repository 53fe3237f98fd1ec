// tests/runtime/blocking_support.hpp: helpers for the blocking-pool tests
// (blocking_pool_test.cpp, blocking_stress_test.cpp).
//
//  - Gate: a one-shot latch that blocking functions wait on until the test
//    opens it. A wait gives up after kNotHung, so that a bug makes the test
//    fail instead of hanging the binary.
//  - ConcurrencyMeter: counts functions running at once and the most seen.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>

#include "runtime_support.hpp"

namespace volt::test {

class Gate {
 public:
  void open() {
    {
      std::lock_guard lock(mutex_);
      open_ = true;
    }
    cv_.notify_all();
  }
  // Waits until opened. False if kNotHung passed first.
  bool wait() {
    std::unique_lock lock(mutex_);
    return cv_.wait_for(lock, kNotHung, [this] { return open_; });
  }
  bool is_open() {
    std::lock_guard lock(mutex_);
    return open_;
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool open_ = false;  // guarded by mutex_
};

class ConcurrencyMeter {
 public:
  void enter() noexcept {
    const int now = running_.fetch_add(1) + 1;
    int seen = max_.load();
    while (now > seen && !max_.compare_exchange_weak(seen, now)) {
    }
    entered_.fetch_add(1);
  }
  void exit() noexcept { running_.fetch_sub(1); }

  int running() const noexcept { return running_.load(); }
  int max() const noexcept { return max_.load(); }
  int entered() const noexcept { return entered_.load(); }

 private:
  std::atomic<int> running_{0};
  std::atomic<int> max_{0};
  std::atomic<int> entered_{0};
};

}  // namespace volt::test
