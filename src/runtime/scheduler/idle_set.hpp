// IdleSet: which workers sleep, and how many are searching for work.
//
// State (one atomic word, so both counts change together):
//   low 32 bits   num_searching: workers looking for work to steal
//   high 32 bits  num_unparked:  workers not asleep
// plus a bitmap with one bit per parked worker, so a waker finds a sleeper with
// one count-trailing-zeros (O(1); Tokio scans a vector under its lock).
//
// Protocol ("the last searcher must notify"):
//   - Whoever makes work available (push to a local or the inject queue) calls
//     worker_to_notify(): after a seq_cst fence it reads the state, and wakes a
//     sleeper only if nobody is searching and somebody sleeps. The woken worker
//     is counted as searching and unparked *by the waker*, before it wakes, so
//     concurrent pushers do not wake a second one for the same work.
//   - A worker that finds no local work may become a searcher (at most half of
//     the workers search at once, to avoid a thundering herd).
//   - A searcher that finds work calls transition_from_searching(); if it was
//     the last searcher it must wake another sleeper (there may be more work
//     that nobody is looking for).
//   - A worker going to sleep calls transition_to_parked(); if it was the last
//     searcher it must re-check every queue after that call and wake someone if
//     work is there.
// Why no wake-up is lost: a pusher's "fence, then read state" and a parking
// searcher's "seq_cst decrement, fence, then read the queues" are the two
// sides of a Dekker handshake. Either the pusher sees num_searching == 0 after
// the decrement and wakes a sleeper, or the searcher's re-check sees the work.
// A worker that parks without having been the last searcher leaves another
// searcher behind, which will do the re-check.
//
// Sleeper bookkeeping (the bitmap and the counts on park/claim) changes under
// mutex_; it is taken only when a worker parks or is woken, never per task.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <optional>
#include <vector>

namespace volt::detail {

class IdleSet {
 public:
  explicit IdleSet(std::uint32_t num_workers);

  // Any thread, after making work available. Returns the index of a sleeper
  // that the caller must unpark, already counted as unparked and searching.
  std::optional<std::uint32_t> worker_to_notify() noexcept;

  // Worker. True if it may search (steal); false when half already do.
  bool try_become_searcher() noexcept;
  // Worker that was searching and found work. True if it was the last
  // searcher: the caller must then notify another worker.
  [[nodiscard]] bool transition_from_searching() noexcept;
  // Worker about to sleep. True if it was the last searcher: the caller must
  // re-check all queues (after this returns) and notify if any has work.
  [[nodiscard]] bool transition_to_parked(std::uint32_t worker, bool is_searching) noexcept;
  // Worker woken without being claimed (spurious, or woken by the driver with
  // work of its own). True if it was still marked parked and is now unparked
  // (not searching); false if a waker claimed it first (then it is searching).
  bool unpark_self(std::uint32_t worker) noexcept;
  // True while the worker's bit is set (it has not been claimed).
  bool is_parked(std::uint32_t worker) const noexcept;

  std::uint32_t num_searching() const noexcept {
    return searching_of(state_.load(std::memory_order_seq_cst));
  }
  std::uint32_t num_unparked() const noexcept {
    return unparked_of(state_.load(std::memory_order_seq_cst));
  }
  std::uint32_t num_workers() const noexcept { return num_workers_; }

 private:
  static constexpr std::uint64_t kSearchingOne = 1;
  static constexpr std::uint64_t kUnparkedOne = std::uint64_t{1} << 32;
  static std::uint32_t searching_of(std::uint64_t s) noexcept {
    return static_cast<std::uint32_t>(s);
  }
  static std::uint32_t unparked_of(std::uint64_t s) noexcept {
    return static_cast<std::uint32_t>(s >> 32);
  }
  bool should_notify(std::uint64_t s) const noexcept {
    return searching_of(s) == 0 && unparked_of(s) < num_workers_;
  }

  const std::uint32_t num_workers_;
  alignas(64) std::atomic<std::uint64_t> state_;
  alignas(64) std::mutex mutex_;
  // Bit i of word i/64: worker i is parked. Written under mutex_, read
  // lock-free by is_parked (acquire; pairs with the release in the writers).
  std::vector<std::atomic<std::uint64_t>> parked_;
};

}  // namespace volt::detail
