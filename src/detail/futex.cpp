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

#ifdef VOLT_TSAN
namespace {
// ThreadSanitizer runs an asynchronous signal's handler only inside, or on
// leaving, a call it intercepts, and a raw futex syscall is not one. The
// kernel directs a process signal to the main thread first, and the main
// thread is often parked (in block_on, untimed, or a worker's timed park):
// the handler, and the volt::signal stream waiting for it, would wait until
// something woke the thread (seen: a user's SIGCHLD stream in block_on). So
// under TSan every wait, timed or not, is cut into slices of at most 100 ms
// (idle tests bound the wake-ups), and each slice ends in an intercepted
// call (nanosleep) that runs the deferred handlers. A slice's end is a
// spurious return, which every caller tolerates: each loops on its own
// condition and, if timed, its own deadline.
constexpr std::int64_t kTsanSliceNs = 100'000'000;
}  // namespace
#endif

void futex_wait(const std::atomic<std::uint32_t>* word, std::uint32_t expected) noexcept {
#ifdef VOLT_TSAN
  futex_wait_for(word, expected, kTsanSliceNs);
#else
  // FUTEX_PRIVATE_FLAG: the word is never shared across processes.
  ::syscall(SYS_futex, reinterpret_cast<const std::uint32_t*>(word), FUTEX_WAIT_PRIVATE, expected,
            nullptr, nullptr, 0);
#endif
}

void futex_wait_for(const std::atomic<std::uint32_t>* word, std::uint32_t expected,
                    std::int64_t timeout_ns) noexcept {
#ifdef VOLT_TSAN
  if (timeout_ns > kTsanSliceNs) {
    timeout_ns = kTsanSliceNs;
  }
#endif
  timespec ts{static_cast<time_t>(timeout_ns / 1'000'000'000),
              static_cast<long>(timeout_ns % 1'000'000'000)};
  ::syscall(SYS_futex, reinterpret_cast<const std::uint32_t*>(word), FUTEX_WAIT_PRIVATE, expected,
            &ts, nullptr, 0);
#ifdef VOLT_TSAN
  timespec none{0, 0};
  ::nanosleep(&none, nullptr);
#endif
}

void futex_wake(const std::atomic<std::uint32_t>* word, int count) noexcept {
  ::syscall(SYS_futex, reinterpret_cast<const std::uint32_t*>(word), FUTEX_WAKE_PRIVATE, count,
            nullptr, nullptr, 0);
}

}  // namespace volt::detail
