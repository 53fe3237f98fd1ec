// Stress test of the blocking pool (label "stress"; CI runs it under
// ThreadSanitizer and AddressSanitizer, where the job count drops 10x).
//
// Four tasks and two plain threads each spawn kJobsPerSpawner short blocking
// functions, in batches, and await or join every one, on a pool limited to
// three threads with a 1 ms keep-alive: work queues behind the limit, and the
// threads leave during the spawners' pauses and are started again, so the
// claim / keep-alive / exit paths race with spawns throughout. Checked:
//  - every handle gives its own function's result, or the exception it
//    threw (nothing lost, duplicated or crossed between handles);
//  - never more than three functions run at once, and the pool never reports
//    more than three threads;
//  - every function object is destroyed exactly once;
//  - the runtime then shuts down cleanly: every thread that started (workers
//    and blocking threads) ran its stop hook.
// Waits are bounded: work that is never started shows up as a failure with
// the pool's stats, then shutdown cancels it so that the test can end.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "blocking_support.hpp"
#include "runtime_support.hpp"

namespace volt::test {
namespace {

using namespace std::chrono_literals;

constexpr std::size_t kJobsPerSpawner = scale(2000);
constexpr std::size_t kBatch = 8;
// Jobs between pauses longer than the keep-alive (more often under a
// sanitizer, where there are fewer jobs).
constexpr std::size_t kPauseEvery = kSanitized ? 16 : 128;
constexpr int kMaxThreads = 3;
constexpr int kTaskSpawners = 4;
constexpr int kThreadSpawners = 2;

struct StressState {
  ConcurrencyMeter meter;
  LifeCounters functions;
  std::atomic<std::uint64_t> good{0};
  std::atomic<std::uint64_t> bad{0};
  std::atomic<int> spawners_done{0};
};

std::uint64_t expected_value(std::uint64_t spawner, std::uint64_t i) {
  return spawner * 1'000'003u + i * 7u + 1u;
}
bool throws(std::uint64_t i) {
  return i % 97 == 13;
}

auto job(StressState* s, std::uint64_t spawner, std::uint64_t i) {
  return [s, spawner, i, probe = Tracked(s->functions, static_cast<int>(i))]() -> std::uint64_t {
    s->meter.enter();
    if (i % 32 == 0) std::this_thread::sleep_for(50us);
    s->meter.exit();
    if (probe.value() != static_cast<int>(i)) return 0;  // a corrupted capture
    if (throws(i)) throw std::runtime_error(std::to_string(spawner) + ":" + std::to_string(i));
    return expected_value(spawner, i);
  };
}

// Checks one outcome; `value` is set if the function returned, `what` if it
// threw std::runtime_error.
void record(StressState* s, std::uint64_t spawner, std::uint64_t i,
            std::optional<std::uint64_t> value, const std::string* what) {
  bool ok;
  if (throws(i)) {
    ok = what && *what == std::to_string(spawner) + ":" + std::to_string(i);
  } else {
    ok = value && *value == expected_value(spawner, i);
  }
  (ok ? s->good : s->bad).fetch_add(1);
}

Task<void> task_spawner(StressState* s, std::uint64_t spawner) {
  std::vector<JoinHandle<std::uint64_t>> batch;
  for (std::size_t begin = 0; begin < kJobsPerSpawner; begin += kBatch) {
    const std::size_t end = std::min(kJobsPerSpawner, begin + kBatch);
    batch.clear();
    for (std::size_t i = begin; i < end; ++i)
      batch.push_back(volt::spawn_blocking(job(s, spawner, i)));
    for (std::size_t i = begin; i < end; ++i) {
      std::optional<std::uint64_t> value;
      std::optional<std::string> what;
      try {
        std::uint64_t v = co_await batch[i - begin];
        value = v;
      } catch (const Error&) {
        // cancelled / runtime_shutdown (an Error is a runtime_error too): bad
      } catch (const std::runtime_error& e) {
        what = e.what();
      }
      record(s, spawner, i, value, what ? &*what : nullptr);
    }
    if (end % kPauseEvery == 0) co_await volt::sleep(3ms);  // let the pool's threads leave
  }
  s->spawners_done.fetch_add(1);
}

Task<void> run_task_spawners(StressState* s) {
  std::vector<JoinHandle<void>> spawners;
  for (int t = 0; t < kTaskSpawners; ++t)
    spawners.push_back(volt::spawn(task_spawner(s, static_cast<std::uint64_t>(t))));
  for (auto& h : spawners)
    co_await h;
}

void thread_spawner(StressState* s, Handle handle, std::uint64_t spawner) {
  std::vector<JoinHandle<std::uint64_t>> batch;
  for (std::size_t begin = 0; begin < kJobsPerSpawner; begin += kBatch) {
    const std::size_t end = std::min(kJobsPerSpawner, begin + kBatch);
    batch.clear();
    for (std::size_t i = begin; i < end; ++i)
      batch.push_back(handle.spawn_blocking(job(s, spawner, i)));
    for (std::size_t i = begin; i < end; ++i) {
      std::optional<std::uint64_t> value;
      std::optional<std::string> what;
      try {
        value = batch[i - begin].join();
      } catch (const Error&) {
      } catch (const std::runtime_error& e) {
        what = e.what();
      }
      record(s, spawner, i, value, what ? &*what : nullptr);
    }
    if (end % kPauseEvery == 0) std::this_thread::sleep_for(3ms);
  }
  s->spawners_done.fetch_add(1);
}

class BlockingStressTest : public ::testing::TestWithParam<Flavour> {};

INSTANTIATE_TEST_SUITE_P(Flavours, BlockingStressTest,
                         ::testing::Values(kMultiThread2, kMultiThread4, kCurrentThread),
                         FlavourName());

TEST_P(BlockingStressTest, ManySpawnersOnASmallPoolWithShortKeepAlive) {
  StressState s;
  std::atomic<int> thread_starts{0};
  std::atomic<int> thread_stops{0};
  std::optional<Runtime> rt(make_builder(GetParam())
                                .max_blocking_threads(kMaxThreads)
                                .thread_keep_alive(1ms)
                                .on_thread_start([&] { thread_starts.fetch_add(1); })
                                .on_thread_stop([&] { thread_stops.fetch_add(1); })
                                .build());
  Handle handle = rt->handle();

  // Samples the pool while it works.
  std::atomic<bool> stop_sampling{false};
  std::uint64_t max_threads_seen = 0;
  std::uint64_t samples = 0;
  std::thread sampler([&] {
    while (!stop_sampling.load()) {
      RuntimeStats st = handle.stats();
      max_threads_seen = std::max(max_threads_seen, st.blocking_threads);
      ++samples;
      std::this_thread::sleep_for(200us);
    }
  });

  std::thread task_driver([&] {
    try {
      rt->block_on(run_task_spawners(&s));
    } catch (const Error&) {
      // shut down after a failure below
    }
  });
  std::vector<std::thread> plain;
  for (int t = 0; t < kThreadSpawners; ++t)
    plain.emplace_back(thread_spawner, &s, handle, static_cast<std::uint64_t>(kTaskSpawners + t));

  const int spawners = kTaskSpawners + kThreadSpawners;
  const bool finished =
      wait_until([&] { return s.spawners_done.load() == spawners; }, kSanitized ? 240s : 45s);
  if (!finished) {
    RuntimeStats st = handle.stats();
    ADD_FAILURE() << "spawners still waiting: " << spawners - s.spawners_done.load()
                  << "; pool threads " << st.blocking_threads << ", idle "
                  << st.idle_blocking_threads << ", queued " << st.blocking_queue_depth
                  << "; results so far " << s.good.load() << " good, " << s.bad.load() << " bad";
    rt->shutdown_timeout(5s);  // cancels what never started, so every wait ends
  }
  task_driver.join();
  for (auto& t : plain)
    t.join();
  stop_sampling = true;
  sampler.join();

  const std::uint64_t total = static_cast<std::uint64_t>(spawners) * kJobsPerSpawner;
  EXPECT_EQ(s.good.load(), total);
  EXPECT_EQ(s.bad.load(), 0u);
  EXPECT_LE(s.meter.max(), kMaxThreads);
  EXPECT_LE(max_threads_seen, static_cast<std::uint64_t>(kMaxThreads));

  rt.reset();
  EXPECT_EQ(thread_starts.load(), thread_stops.load());
  EXPECT_EQ(s.functions.live(), 0);
  EXPECT_EQ(s.functions.double_destroyed.load(), 0);
  const std::size_t workers = GetParam().current_thread ? 0 : GetParam().workers;
  std::printf(
      "  [%s] %llu jobs, %d threads started (%zu workers), most alive seen %llu over %llu "
      "samples\n",
      GetParam().name, static_cast<unsigned long long>(total), thread_starts.load(), workers,
      static_cast<unsigned long long>(max_threads_seen), static_cast<unsigned long long>(samples));
}

}  // namespace
}  // namespace volt::test
