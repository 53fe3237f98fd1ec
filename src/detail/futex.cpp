#include "volt/detail/futex.hpp"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <ctime>

#include "detail/sanitizers.hpp"

namespace volt::detail {

// std::atomic<uint32_t> is layout-compatible with uint32_t on every target we
// build for; the kernel only ever sees the address.
static_assert(sizeof(std::atomic<std::uint32_t>) == sizeof(std::uint32_t));

void futex_wait(const std::atomic<std::uint32_t>* word, std::uint32_t expected) noexcept {
#ifdef VOLT_TSAN
  // ThreadSanitizer runs an asynchronous signal's handler only inside, or on
  // leaving, a call it intercepts, and a raw futex syscall is not one. The
  // kernel directs a process signal to the main thread first, and the main
  // thread is often parked here (in block_on): the handler, and the
  // volt::signal stream waiting for it, would wait until something woke the
  // thread (seen: a user's SIGCHLD stream in block_on). So under TSan the
  // wait is sliced (100 ms: idle tests bound the wake-ups), and each slice
  // ends in an intercepted call (nanosleep) that runs the deferred handlers.
  // A slice's end is a spurious return, which every caller tolerates.
  timespec slice{0, 100'000'000};
  ::syscall(SYS_futex, reinterpret_cast<const std::uint32_t*>(word), FUTEX_WAIT_PRIVATE, expected,
            &slice, nullptr, 0);
  timespec none{0, 0};
  ::nanosleep(&none, nullptr);
#else
  // FUTEX_PRIVATE_FLAG: the word is never shared across processes.
  ::syscall(SYS_futex, reinterpret_cast<const std::uint32_t*>(word), FUTEX_WAIT_PRIVATE, expected,
            nullptr, nullptr, 0);
#endif
}

void futex_wait_for(const std::atomic<std::uint32_t>* word, std::uint32_t expected,
                    std::int64_t timeout_ns) noexcept {
  timespec ts{static_cast<time_t>(timeout_ns / 1'000'000'000),
              static_cast<long>(timeout_ns % 1'000'000'000)};
  ::syscall(SYS_futex, reinterpret_cast<const std::uint32_t*>(word), FUTEX_WAIT_PRIVATE, expected,
            &ts, nullptr, 0);
}

void futex_wake(const std::atomic<std::uint32_t>* word, int count) noexcept {
  ::syscall(SYS_futex, reinterpret_cast<const std::uint32_t*>(word), FUTEX_WAKE_PRIVATE, count,
            nullptr, nullptr, 0);
}

}  // namespace volt::detail
