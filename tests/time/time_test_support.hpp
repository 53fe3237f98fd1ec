// tests/time/time_test_support.hpp: helpers shared by the time API's
// integration tests (volt_time_runtime_tests) and the timer stress test.
//
//  - kTimeFlavours: the runtime flavours the time tests run on (multi-thread
//    with two workers, current-thread).
//  - paused_runtime(): a current-thread runtime whose clock starts paused.
//  - stats_here(): the stats of the runtime the calling task runs on.
//  - run_in_runtime(): runs a task to completion on a runtime thread (on the
//    multi-thread flavour the main thread waits outside join(), so it never
//    runs the task itself).
//  - Small coroutines: delayed_value, sleep_then_set, sleep_forever_probe,
//    yield_forever, throw_after.
//
// Coroutines are free functions taking their state by pointer or value (a
// capturing coroutine lambda would leave its captures in a lambda object that
// dies before the frame does). GCC 12.2 miscompiles a coroutine with no local
// variables that co_awaits directly inside an if/while condition: awaited
// values are always bound to a local first.
#pragma once

#include <sys/resource.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>

#include "runtime/runtime_support.hpp"
#include "volt/volt.hpp"

namespace volt::test {

using SteadyClock = std::chrono::steady_clock;

inline constexpr Flavour kTimeFlavours[] = {kMultiThread2, kCurrentThread};

inline double to_ms(std::chrono::nanoseconds d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

// CPU time used by the whole process so far (user + system).
inline std::chrono::nanoseconds process_cpu_time() {
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  auto tv = [](const timeval& t) {
    return std::chrono::seconds(t.tv_sec) + std::chrono::microseconds(t.tv_usec);
  };
  return tv(usage.ru_utime) + tv(usage.ru_stime);
}

inline Runtime paused_runtime() {
  return Runtime::Builder::current_thread().start_paused(true).build();
}

// The stats of the runtime the calling task runs on.
inline RuntimeStats stats_here() {
  return Handle::current().stats();
}

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

// Keeps a thread inside block_on of a current-thread runtime (which runs
// tasks only there) until destroyed, so that tasks spawned from outside run
// while the test thread checks on them. Nothing for the multi-thread flavour.
class DriveInBackground {
 public:
  DriveInBackground(Runtime& rt, const Flavour& flavour) {
    if (!flavour.current_thread) return;
    auto [tx, rx] = oneshot::channel<int>();
    stop_ = std::move(tx);
    thread_ =
        std::thread([&rt, rx = std::move(rx)]() mutable { rt.block_on(wait_for(std::move(rx))); });
  }
  DriveInBackground(const DriveInBackground&) = delete;
  DriveInBackground& operator=(const DriveInBackground&) = delete;
  ~DriveInBackground() {
    if (!thread_.joinable()) return;
    (void)stop_.send(1);
    thread_.join();
  }

 private:
  static Task<void> wait_for(oneshot::Receiver<int> rx) {
    std::optional<int> v = co_await rx;
    (void)v;
  }
  oneshot::Sender<int> stop_;
  std::thread thread_;
};

// Sleeps `d`, then returns `value`.
inline Task<int> delayed_value(std::chrono::nanoseconds d, int value) {
  co_await volt::sleep(d);
  co_return value;
}

// Sleeps `d`, then sets `*flag`.
inline Task<void> sleep_then_set(std::chrono::nanoseconds d, std::atomic<bool>* flag) {
  co_await volt::sleep(d);
  flag->store(true);
}

// Holds `probe` in its frame, sleeps `d`, then counts `*finished` (the tests
// use it with a `d` long enough that only cancellation ends it).
inline Task<int> sleep_with_probe(Tracked probe, std::chrono::nanoseconds d,
                                  std::atomic<int>* finished) {
  co_await volt::sleep(d);
  finished->fetch_add(1);
  co_return probe.value();
}

// Loops on yield_now forever, counting its iterations.
inline Task<void> yield_forever(std::atomic<long>* iterations) {
  for (;;) {
    iterations->fetch_add(1, std::memory_order_relaxed);
    co_await volt::yield_now();
  }
}

// Sleeps `d` (if positive), then throws std::runtime_error(message).
inline Task<int> throw_after(std::chrono::nanoseconds d, std::string message) {
  if (d > std::chrono::nanoseconds::zero()) co_await volt::sleep(d);
  throw std::runtime_error(message);
  co_return 0;
}

}  // namespace volt::test
