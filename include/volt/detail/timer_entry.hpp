// volt/detail/timer_entry.hpp: the node a waiting timer operation (sleep,
// timeout, interval tick) embeds, so that registering a timer allocates
// nothing. Linked into a TimerWheel slot (src/time/timer_wheel.hpp); all
// fields are owned by the wheel's lock while `linked` is true.
#pragma once

#include <cstdint>

namespace volt::detail {

struct TimerEntry {
  TimerEntry* prev = nullptr;
  TimerEntry* next = nullptr;
  std::uint64_t deadline = 0;  // wheel ticks (ms since the wheel's origin)
  std::uint8_t level = 0;      // where it is linked
  std::uint8_t slot = 0;
  bool linked = false;
};

}  // namespace volt::detail
