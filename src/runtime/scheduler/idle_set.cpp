#include "runtime/scheduler/idle_set.hpp"

#include <bit>

#include "detail/store_load_barrier.hpp"

namespace volt::detail {

IdleSet::IdleSet(std::uint32_t num_workers)
    : num_workers_(num_workers),
      state_(std::uint64_t{num_workers} * kUnparkedOne),
      parked_((num_workers + 63) / 64) {}

std::optional<std::uint32_t> IdleSet::worker_to_notify() noexcept {
  // The pusher's side of the Dekker handshake described at the top of
  // idle_set.hpp. Either this load sees a parking searcher's decrement, or
  // that searcher's re-check (after its own barrier) sees our pushed work.
  store_load_barrier(state_);
  if (!should_notify(state_.load(std::memory_order_relaxed))) return std::nullopt;

  std::lock_guard lock(mutex_);
  // Re-check under the lock: another pusher may have woken someone already.
  if (!should_notify(state_.load(std::memory_order_seq_cst))) return std::nullopt;
  for (std::size_t w = 0; w < parked_.size(); ++w) {
    std::uint64_t bits = parked_[w].load(std::memory_order_relaxed);  // we hold the lock
    if (bits == 0) continue;
    unsigned bit = static_cast<unsigned>(std::countr_zero(bits));
    // Count it as searching + unparked before it wakes: the state must never
    // say nobody searches while this wake is in flight.
    state_.fetch_add(kSearchingOne + kUnparkedOne, std::memory_order_seq_cst);
    // release: pairs with the acquire in is_parked(): the woken worker sees
    // the counts we just added before it acts as a searcher.
    parked_[w].store(bits & ~(std::uint64_t{1} << bit), std::memory_order_release);
    return static_cast<std::uint32_t>(w * 64 + bit);
  }
  return std::nullopt;
}

bool IdleSet::try_become_searcher() noexcept {
  std::uint64_t s = state_.load(std::memory_order_seq_cst);
  for (;;) {
    // At most half of the workers search (rounded up, so one of one may).
    if (2 * searching_of(s) >= num_workers_) return false;
    if (state_.compare_exchange_weak(s, s + kSearchingOne, std::memory_order_seq_cst)) return true;
  }
}

bool IdleSet::transition_from_searching() noexcept {
  // seq_cst: this decrement is the searcher's side of the handshake.
  std::uint64_t prev = state_.fetch_sub(kSearchingOne, std::memory_order_seq_cst);
  return searching_of(prev) == 1;
}

bool IdleSet::transition_to_parked(std::uint32_t worker, bool is_searching) noexcept {
  std::lock_guard lock(mutex_);
  std::uint64_t dec = kUnparkedOne + (is_searching ? kSearchingOne : 0);
  std::uint64_t prev = state_.fetch_sub(dec, std::memory_order_seq_cst);
  auto& word = parked_[worker / 64];
  word.store(word.load(std::memory_order_relaxed) | (std::uint64_t{1} << (worker % 64)),
             std::memory_order_release);
  // The parker's re-check of the queues (done by the caller) must not be
  // ordered before the decrement; see the handshake at the top of the header.
  store_load_barrier(state_);
  return is_searching && searching_of(prev) == 1;
}

bool IdleSet::unpark_self(std::uint32_t worker) noexcept {
  std::lock_guard lock(mutex_);
  auto& word = parked_[worker / 64];
  std::uint64_t bits = word.load(std::memory_order_relaxed);
  std::uint64_t mask = std::uint64_t{1} << (worker % 64);
  if (!(bits & mask)) return false;  // claimed by a waker: counted as searching
  state_.fetch_add(kUnparkedOne, std::memory_order_seq_cst);
  word.store(bits & ~mask, std::memory_order_release);
  return true;
}

bool IdleSet::is_parked(std::uint32_t worker) const noexcept {
  // acquire: pairs with the release store that cleared the bit.
  return parked_[worker / 64].load(std::memory_order_acquire) & (std::uint64_t{1} << (worker % 64));
}

}  // namespace volt::detail
