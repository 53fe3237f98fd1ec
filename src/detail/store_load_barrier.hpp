// store_load_barrier: the full barrier of a Dekker handshake ("I store my
// flag, then read yours; you store yours, then read mine: one of us sees the
// other").
//
// Normally a seq_cst fence. ThreadSanitizer does not model fences (GCC warns
// with -Wtsan and TSan may report the handshake as a race), so under TSan the
// barrier is a seq_cst read-modify-write of the handshake's shared atomic,
// which both sides pass: RMWs on one location are totally ordered, and the
// later one acquires the earlier one's release, so the same "one of us sees
// the other" argument holds and TSan can follow it. The RMW costs a contended
// cache line, which is why production builds keep the fence.
#pragma once

#include <atomic>

#include "detail/sanitizers.hpp"

namespace volt::detail {

template <class T>
inline void store_load_barrier([[maybe_unused]] std::atomic<T>& handshake) noexcept {
#ifdef VOLT_TSAN
  handshake.fetch_add(0, std::memory_order_seq_cst);
#else
  std::atomic_thread_fence(std::memory_order_seq_cst);
#endif
}

}  // namespace volt::detail
