// TimerWheel: hierarchical timing wheel, 6 levels of 64 slots at 1 ms per
// tick (Tokio's shape): level L slot covers 64^L ms, so the wheel spans 64^6 ms
// (about 2.2 years); insert, remove and the search for the next expiration
// are O(1) (a 64-bit occupancy mask per level, count-trailing-zeros).
//
// Placement: an entry goes to the level of the highest bit in which its
// deadline differs from the wheel's current time (`elapsed`), 6 bits per
// level, in the slot given by the deadline's bits at that level. So a level-0
// entry fires within the current 64 ms block, a level-1 entry in a later one,
// and so on: the lowest non-empty level always holds the next expiration.
// When time reaches a slot of a level > 0, its entries cascade: each is
// re-inserted relative to the new time and lands in a lower level (or fires).
// Deadlines further than the wheel reaches are parked at the farthest slot
// (just behind the current top-level slot, one rotation ahead) and re-placed
// when it comes round; they keep their true deadline and never fire early.
//
// Guarantees: an entry fires at the first advance() to a time >= its
// deadline, never before; entries fire in order of their deadline tick
// (entries of the same 1 ms tick in no particular order). Not thread-safe:
// the time driver serialises access.
#pragma once

#include <array>
#include <cstdint>
#include <optional>

#include "volt/detail/timer_entry.hpp"

namespace volt::detail {

class TimerWheel {
 public:
  static constexpr unsigned kLevels = 6;
  static constexpr unsigned kSlotBits = 6;
  static constexpr unsigned kSlots = 1u << kSlotBits;
  // How far ahead a deadline is always placed exactly (63 top-level slots,
  // about 2.1 years); farther ones are re-placed as time comes closer.
  static constexpr std::uint64_t kSpan = std::uint64_t{63} << ((kLevels - 1) * kSlotBits);

  explicit TimerWheel(std::uint64_t origin = 0) noexcept : elapsed_(origin) {}

  std::uint64_t elapsed() const noexcept { return elapsed_; }
  bool empty() const noexcept { return count_ == 0; }
  std::uint64_t size() const noexcept { return count_; }

  // Links `entry` (with entry->deadline set). Returns false, linking nothing,
  // when the deadline is not in the future: the caller fires it at once.
  bool insert(TimerEntry* entry) noexcept;
  // Unlinks `entry` if it is linked (cancellation).
  void remove(TimerEntry* entry) noexcept;

  // The earliest tick at which advance() has work (a slot to fire or
  // cascade); nullopt when empty. Never later than the earliest deadline.
  std::optional<std::uint64_t> next_expiration() const noexcept;

  // Moves time to `now` (never backwards), calling fire(entry) for every
  // entry whose deadline is <= now, in deadline-tick order. An entry is
  // unlinked before fire() sees it; fire() may insert or remove entries.
  template <class Fire>
  void advance(std::uint64_t now, Fire&& fire) {
    while (auto slot = next_slot()) {
      if (slot->deadline > now) break;
      elapsed_ = std::max(elapsed_, slot->deadline);
      TimerEntry* list = take_slot(slot->level, slot->slot);
      while (list) {
        TimerEntry* entry = list;
        list = list->next;
        entry->prev = entry->next = nullptr;
        if (entry->deadline <= elapsed_) {
          fire(entry);
        } else {
          link(entry);  // cascade to a lower level
        }
      }
    }
    if (now > elapsed_) elapsed_ = now;
  }

 private:
  struct Expiration {
    unsigned level;
    unsigned slot;
    std::uint64_t deadline;  // when that slot comes due
  };
  std::optional<Expiration> next_slot() const noexcept;
  void link(TimerEntry* entry) noexcept;
  TimerEntry* take_slot(unsigned level, unsigned slot) noexcept;

  struct Level {
    std::uint64_t occupied = 0;  // bit s: slot s is non-empty
    std::array<TimerEntry*, kSlots> slots{};
  };
  std::array<Level, kLevels> levels_{};
  std::uint64_t elapsed_;
  std::uint64_t count_ = 0;
};

}  // namespace volt::detail
