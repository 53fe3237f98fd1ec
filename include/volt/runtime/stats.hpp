// volt/runtime/stats.hpp: counters a running runtime exposes (Runtime::stats()).
//
// Each worker's counters are written only by that worker (relaxed stores) and
// read here without stopping it, so a snapshot taken while the runtime runs is
// not a consistent cut across workers; each counter on its own is exact.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace volt {

struct WorkerStats {
  std::uint64_t tasks_polled = 0;           // polls run on this worker (also in place)
  std::uint64_t lifo_hits = 0;              // polls taken from the LIFO slot
  std::uint64_t steal_operations = 0;       // successful steals from another worker
  std::uint64_t tasks_stolen = 0;           // tasks those steals moved here
  std::uint64_t times_parked = 0;           // times the worker went to sleep
  std::uint64_t global_batch_fetches = 0;   // batches taken from the inject queue
  std::uint64_t overflows = 0;              // times the local queue spilled half to inject
  std::uint64_t local_queue_depth = 0;      // tasks in the local queue at snapshot time
  std::uint32_t global_queue_interval = 0;  // current adaptive (EWMA) inject-check interval
};

struct RuntimeStats {
  std::size_t num_workers = 0;
  std::uint64_t total_spawned = 0;
  // Polls: by workers plus blocked_thread_polls, including those that a
  // JoinHandle's co_await runs in place (join_handle.hpp; counted for the
  // thread that ran them), and the popped queue entry of a task such a poll
  // already completed (a poll that finds nothing to do).
  std::uint64_t total_polled = 0;
  std::uint64_t blocked_thread_polls = 0;  // run by threads blocked in block_on/join, helping
  std::uint64_t total_stolen = 0;
  std::uint64_t total_parked = 0;
  std::uint64_t remote_schedules = 0;  // tasks pushed to the inject queue
  std::uint64_t inject_queue_depth = 0;
  std::uint64_t live_tasks = 0;  // spawned and not yet completed
  // Blocking-pool threads that take work. A thread that has decided to
  // leave (keep-alive out, or shutdown) is no longer counted, though it may
  // still be running the on_thread_stop hook.
  std::uint64_t blocking_threads = 0;
  std::uint64_t idle_blocking_threads = 0;  // of those, waiting for work
  std::uint64_t blocking_queue_depth = 0;   // spawn_blocking work not yet started
  std::uint64_t active_timers = 0;          // registered, not yet fired or cancelled
  std::uint64_t timers_fired = 0;
  std::vector<WorkerStats> workers;  // empty for the current-thread flavour
};

}  // namespace volt
