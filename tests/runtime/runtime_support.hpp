// tests/runtime/runtime_support.hpp: helpers for the runtime integration and
// stress tests (volt_runtime_tests, volt_stress_tests).
//
//  - Flavour: which runtime a parameterised test builds (multi-thread with N
//    workers, or current-thread), and make_runtime() to build it.
//  - wait_until(): polls a condition with a deadline. The tests use it where
//    the runtime gives no completion signal to block on (a detached task, a
//    stuck worker finishing in the background), and so that a waiting main
//    thread never helps run tasks (JoinHandle::join may), which would hide
//    starvation or a lost wake-up.
//  - Watchdog: aborts the process with a message if a scope runs past a
//    limit, so that a hang shows up as a named failure rather than a ctest
//    timeout ten minutes later. Every test of a binary that includes this
//    header runs under one (kTestTimeLimit), installed as a gtest listener.
//  - kNotHung: the generous bound used for "did not hang" checks.
//  - Small coroutines and checks several test files use: square, probe_body
//    (a frame holding a Tracked probe, counting whether its body ran),
//    wait_for_value (suspends on a oneshot receiver), volt_error_of.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <ostream>
#include <string>
#include <system_error>
#include <thread>

#include <gtest/gtest.h>
#include <pthread.h>

#include "test_support.hpp"
#include "volt/volt.hpp"

namespace volt::test {

// "Did not hang" bound for a single wait; sanitizers slow everything ~10x.
inline constexpr std::chrono::seconds kNotHung{kSanitized ? 60 : 10};

struct Flavour {
  const char* name;
  bool current_thread;
  std::size_t workers;  // ignored for current_thread
};

inline constexpr Flavour kMultiThread1{"MultiThread1", false, 1};
inline constexpr Flavour kMultiThread2{"MultiThread2", false, 2};
inline constexpr Flavour kMultiThread4{"MultiThread4", false, 4};
inline constexpr Flavour kCurrentThread{"CurrentThread", true, 1};

inline void PrintTo(const Flavour& f, std::ostream* os) {
  *os << f.name;
}

inline Runtime::Builder make_builder(const Flavour& f) {
  if (f.current_thread) return Runtime::Builder::current_thread();
  Runtime::Builder b = Runtime::Builder::multi_thread();
  b.worker_threads(f.workers);
  return b;
}

inline Runtime make_runtime(const Flavour& f) {
  return make_builder(f).build();
}

// For INSTANTIATE_TEST_SUITE_P's name generator.
struct FlavourName {
  template <class ParamInfo>
  std::string operator()(const ParamInfo& info) const {
    return info.param.name;
  }
};

// Polls `pred` every 100 us until it holds or `timeout` passes. Returns the
// final value of `pred`.
template <class Pred>
bool wait_until(Pred&& pred, std::chrono::nanoseconds timeout = kNotHung) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (pred()) return true;
    if (std::chrono::steady_clock::now() >= deadline) return pred();
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

// Aborts the process if not destroyed within `limit`.
class Watchdog {
 public:
  Watchdog(std::chrono::seconds limit, std::string what)
      : what_(std::move(what)), thread_([this, limit] { watch(limit); }) {}
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;
  ~Watchdog() {
    {
      std::lock_guard lock(mutex_);
      done_ = true;
    }
    cv_.notify_one();
    thread_.join();
  }

 private:
  void watch(std::chrono::seconds limit) {
    std::unique_lock lock(mutex_);
    if (!cv_.wait_for(lock, limit, [this] { return done_; })) {
      std::fprintf(stderr, "\nvolt test watchdog: '%s' still running after %llds: hung\n",
                   what_.c_str(), static_cast<long long>(limit.count()));
      std::fflush(stderr);
      std::abort();
    }
  }

  std::string what_;
  std::mutex mutex_;
  std::condition_variable cv_;
  bool done_ = false;  // guarded by mutex_
  std::thread thread_;
};

// Per-test limit for the watchdog: far above any test's normal run time
// (seconds), well below ctest's 600 s timeout.
inline constexpr std::chrono::seconds kTestTimeLimit{kSanitized ? 300 : 60};

class WatchdogPerTest : public ::testing::EmptyTestEventListener {
 public:
  void OnTestStart(const ::testing::TestInfo& info) override {
    watchdog_.emplace(kTestTimeLimit, std::string(info.test_suite_name()) + "." + info.name());
  }
  void OnTestEnd(const ::testing::TestInfo&) override { watchdog_.reset(); }

 private:
  std::optional<Watchdog> watchdog_;
};

// Installed once per binary, before main() runs the tests.
inline const bool kWatchdogPerTestInstalled = [] {
  ::testing::UnitTest::GetInstance()->listeners().Append(new WatchdogPerTest);
  return true;
}();

inline std::string current_thread_name() {
  char buf[32] = {};
  ::pthread_getname_np(::pthread_self(), buf, sizeof buf);
  return buf;
}

// The volt::errc a call throws as volt::Error; an empty code if it returns.
template <class F>
std::error_code volt_error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.code();
  }
  return {};
}

inline std::error_code code(errc e) {
  return make_error_code(e);
}

inline Task<int> square(int x) {
  co_return x* x;
}

// A task whose frame holds `probe`; `ran` counts runs of its body.
inline Task<int> probe_body(Tracked probe, std::atomic<int>* ran) {
  ran->fetch_add(1);
  co_return probe.value();
}

// Suspends on `rx` (after counting itself in `waiting`); returns the value
// received plus the probe's, or -1000 plus the probe's if the sender is gone.
inline Task<int> wait_for_value(Tracked probe, oneshot::Receiver<int> rx,
                                std::atomic<int>* waiting) {
  waiting->fetch_add(1);
  std::optional<int> v = co_await rx;
  co_return v.value_or(-1000) + probe.value();
}

}  // namespace volt::test
