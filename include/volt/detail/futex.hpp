// volt/detail/futex.hpp: the thinnest wrapper over Linux futex(2).
//
// Used by the worker parker and the thread parker. Both wait for a value
// change announced by a paired wake; the timed variant serves park_for and the
// worker's standby checks.
#pragma once

#include <atomic>
#include <cstdint>

namespace volt::detail {

// Blocks while `*word == expected`. May return spuriously; callers re-check.
void futex_wait(const std::atomic<std::uint32_t>* word, std::uint32_t expected) noexcept;

// The same, giving up after `timeout_ns` nanoseconds (a relative timeout).
void futex_wait_for(const std::atomic<std::uint32_t>* word, std::uint32_t expected,
                    std::int64_t timeout_ns) noexcept;

// Wakes up to `count` threads blocked in futex_wait on `word`.
void futex_wake(const std::atomic<std::uint32_t>* word, int count) noexcept;

}  // namespace volt::detail
