#include "time/timer_wheel.hpp"

#include <algorithm>
#include <bit>

namespace volt::detail {

bool TimerWheel::insert(TimerEntry* entry) noexcept {
  if (entry->deadline <= elapsed_) return false;
  link(entry);
  return true;
}

void TimerWheel::link(TimerEntry* entry) noexcept {
  // Far deadlines are placed at the last tick of the top level's window that
  // starts at the current top slot (the slot just behind it, one rotation
  // ahead); the entry keeps its true deadline and is re-placed when that slot
  // is due. Clamping to elapsed + 2^36 - 1 instead would land in the current
  // top slot whenever elapsed is not slot-aligned, and cascade forever.
  constexpr unsigned kTopShift = (kLevels - 1) * kSlotBits;
  const std::uint64_t window_end = (((elapsed_ >> kTopShift) + kSlots) << kTopShift) - 1;
  const std::uint64_t placed = std::min(entry->deadline, window_end);
  // Highest differing bit (bits below one slot ignored), 6 bits per level.
  const std::uint64_t differs = (elapsed_ ^ placed) | (kSlots - 1);
  unsigned level = static_cast<unsigned>(63 - std::countl_zero(differs)) / kSlotBits;
  // Crossing a 2^36 boundary can set a bit above the top level: the top level
  // then holds it, and its slot (by position) still lies ahead.
  if (level >= kLevels) level = kLevels - 1;
  const unsigned slot = static_cast<unsigned>(placed >> (level * kSlotBits)) & (kSlots - 1);
  Level& l = levels_[level];
  entry->level = static_cast<std::uint8_t>(level);
  entry->slot = static_cast<std::uint8_t>(slot);
  entry->prev = nullptr;
  entry->next = l.slots[slot];
  if (entry->next) entry->next->prev = entry;
  l.slots[slot] = entry;
  l.occupied |= std::uint64_t{1} << slot;
  entry->linked = true;
  ++count_;
}

void TimerWheel::remove(TimerEntry* entry) noexcept {
  if (!entry->linked) return;
  Level& l = levels_[entry->level];
  if (entry->prev) {
    entry->prev->next = entry->next;
  } else {
    l.slots[entry->slot] = entry->next;
  }
  if (entry->next) entry->next->prev = entry->prev;
  if (!l.slots[entry->slot]) l.occupied &= ~(std::uint64_t{1} << entry->slot);
  entry->prev = entry->next = nullptr;
  entry->linked = false;
  --count_;
}

TimerEntry* TimerWheel::take_slot(unsigned level, unsigned slot) noexcept {
  Level& l = levels_[level];
  TimerEntry* list = l.slots[slot];
  l.slots[slot] = nullptr;
  l.occupied &= ~(std::uint64_t{1} << slot);
  for (TimerEntry* e = list; e; e = e->next) {
    e->linked = false;
    --count_;
  }
  return list;
}

std::optional<TimerWheel::Expiration> TimerWheel::next_slot() const noexcept {
  for (unsigned level = 0; level < kLevels; ++level) {
    const std::uint64_t occupied = levels_[level].occupied;
    if (!occupied) continue;
    const unsigned shift = level * kSlotBits;
    const unsigned now_slot = static_cast<unsigned>(elapsed_ >> shift) & (kSlots - 1);
    // Distance (in slots) to the next occupied slot at or after now_slot.
    const unsigned ahead = static_cast<unsigned>(std::countr_zero(std::rotr(occupied, now_slot)));
    const std::uint64_t slot_range = std::uint64_t{1} << shift;
    const std::uint64_t level_range = slot_range << kSlotBits;
    const std::uint64_t level_start = elapsed_ & ~(level_range - 1);
    // now_slot + ahead may pass 63: that slot is due in the next rotation.
    const std::uint64_t deadline = level_start + (std::uint64_t{now_slot} + ahead) * slot_range;
    return Expiration{level, (now_slot + ahead) & (kSlots - 1), std::max(deadline, elapsed_)};
  }
  return std::nullopt;
}

std::optional<std::uint64_t> TimerWheel::next_expiration() const noexcept {
  if (auto slot = next_slot()) return slot->deadline;
  return std::nullopt;
}

}  // namespace volt::detail
