#include "detail/thread_parker.hpp"

#include <chrono>

#include "volt/detail/blocking_wait.hpp"
#include "volt/detail/futex.hpp"
#include "volt/detail/task_header.hpp"
#include "volt/error.hpp"

namespace volt::detail {
namespace {

void* parker_clone(void* data) noexcept {
  static_cast<ThreadParker*>(data)->retain();
  return data;
}
void parker_wake(void* data) noexcept {
  auto* parker = static_cast<ThreadParker*>(data);
  parker->unpark();
  parker->release();
}
void parker_wake_by_ref(void* data) noexcept {
  static_cast<ThreadParker*>(data)->unpark();
}
void parker_drop(void* data) noexcept {
  static_cast<ThreadParker*>(data)->release();
}

constexpr WakerVTable kParkerVTable{&parker_clone, &parker_wake, &parker_wake_by_ref, &parker_drop};

struct ThreadParkerOwner {
  ThreadParker* parker = new ThreadParker();
  ~ThreadParkerOwner() { parker->release(); }
};

}  // namespace

ThreadParker& ThreadParker::current() {
  thread_local ThreadParkerOwner owner;
  return *owner.parker;
}

Waker ThreadParker::waker() noexcept {
  retain();
  return Waker(&kParkerVTable, this);
}

bool ThreadParker::enter_parked() noexcept {
  // acquire: pairs with the release swap in unpark(): what the waker published
  // before waking us (a completed task's output) is visible after we return.
  std::uint32_t expected = kNotified;
  if (state_.compare_exchange_strong(expected, kEmpty, std::memory_order_acquire)) return false;
  expected = kEmpty;
  if (!state_.compare_exchange_strong(expected, kParked, std::memory_order_acq_rel)) {
    state_.exchange(kEmpty, std::memory_order_acquire);  // was kNotified
    return false;
  }
  return true;
}

void ThreadParker::park() noexcept {
  if (!enter_parked()) return;
  for (;;) {
    futex_wait(&state_, kParked);
    std::uint32_t expected = kNotified;
    if (state_.compare_exchange_strong(expected, kEmpty, std::memory_order_acquire)) return;
  }
}

bool ThreadParker::park_for(std::int64_t timeout_ns) noexcept {
  if (!enter_parked()) return true;
  std::uint32_t expected;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::nanoseconds(timeout_ns);
  for (;;) {
    const std::int64_t left = std::chrono::duration_cast<std::chrono::nanoseconds>(
                                  deadline - std::chrono::steady_clock::now())
                                  .count();
    if (left > 0) futex_wait_for(&state_, kParked, left);
    expected = kNotified;
    if (state_.compare_exchange_strong(expected, kEmpty, std::memory_order_acquire)) return true;
    if (left <= 0) {
      // Timed out: leave kParked, unless an unpark() swapped in kNotified
      // meanwhile (then consume it, as a wake-up).
      expected = kParked;
      if (state_.compare_exchange_strong(expected, kEmpty, std::memory_order_relaxed)) return false;
      state_.exchange(kEmpty, std::memory_order_acquire);
      return true;
    }
  }
}

void ThreadParker::unpark() noexcept {
  if (state_.exchange(kNotified, std::memory_order_release) == kParked) futex_wake(&state_, 1);
}

void ThreadParker::release() noexcept {
  // acq_rel: the last release must see every other holder's use before delete.
  if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
}

}  // namespace volt::detail

// ---- volt/detail/blocking_wait.hpp ----

namespace volt::detail {

void check_blocking_allowed(const char* what) {
  if (tls_context.scheduler) throw Error(errc::blocking_in_runtime, what);
}

Waker current_thread_waker() {
  return ThreadParker::current().waker();
}

void park_current_thread() noexcept {
  ThreadParker::current().park();
}

void make_current_thread_parker() {
  (void)ThreadParker::current();
}

}  // namespace volt::detail
