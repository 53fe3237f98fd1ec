#include "io/driver.hpp"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <ctime>
#include <limits>
#include <mutex>
#include <system_error>

#include "detail/sanitizers.hpp"
#include "io/io_source.hpp"

namespace volt::detail {

Driver::Driver(bool start_paused) : time_(start_paused) {
  epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
  if (epoll_fd_ < 0) throw std::system_error(errno, std::system_category(), "epoll_create1");
  event_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (event_fd_ < 0) {
    int err = errno;
    ::close(epoll_fd_);
    throw std::system_error(err, std::system_category(), "eventfd");
  }
  epoll_event ev{};
  // Edge-triggered: every write to an eventfd is an edge, so park() need not
  // read the counter back (one system call fewer per wake-up; the counter
  // just grows, see unpark()).
  ev.events = EPOLLIN | EPOLLET;
  ev.data.ptr = nullptr;  // nullptr tags the wake-up eventfd
  if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, event_fd_, &ev) < 0) {
    int err = errno;
    ::close(event_fd_);
    ::close(epoll_fd_);
    throw std::system_error(err, std::system_category(), "epoll_ctl");
  }
}

Driver::~Driver() {
  free_retired();
  ::close(event_fd_);
  ::close(epoll_fd_);
}

namespace {

constexpr int kEventsPerTurn = 256;

// epoll_pwait2 (Linux 5.11) takes a nanosecond timeout; epoll_wait rounds a
// timer's deadline up to the next millisecond, which would add up to 1 ms to
// the wheel's own rounding. Falls back to epoll_wait on older kernels.
//
// Under ThreadSanitizer, epoll_wait always: TSan does not intercept
// epoll_pwait2, and it runs an asynchronous signal's handler only inside or on
// leaving a call it intercepts, so a signal that arrived on the thread parked
// here would wait for the park's timeout (60 s, once: a volt::signal test).
#ifdef VOLT_TSAN
std::atomic<bool> have_pwait2{false};
#else
std::atomic<bool> have_pwait2{true};
#endif

int wait_for_events(int epoll_fd, epoll_event* events, int max, std::int64_t timeout_ns) noexcept {
  // relaxed: a stale true costs one ENOSYS call more.
  if (timeout_ns > 0 && have_pwait2.load(std::memory_order_relaxed)) {
    timespec ts{static_cast<time_t>(timeout_ns / 1'000'000'000),
                static_cast<long>(timeout_ns % 1'000'000'000)};
    int n = ::epoll_pwait2(epoll_fd, events, max, &ts, nullptr);
    if (n >= 0 || errno == EINTR) return n;
    // ENOSYS (kernel < 5.11), or EPERM from a seccomp filter that predates
    // the call: use epoll_wait from now on (else every park would return at
    // once and the holder would spin until the deadline).
    have_pwait2.store(false, std::memory_order_relaxed);
  }
  int timeout_ms = -1;
  if (timeout_ns >= 0) {
    const std::int64_t ms = timeout_ns / 1'000'000 + (timeout_ns % 1'000'000 != 0 ? 1 : 0);
    timeout_ms = ms > std::numeric_limits<int>::max() ? std::numeric_limits<int>::max()
                                                      : static_cast<int>(ms);
  }
  return ::epoll_wait(epoll_fd, events, max, timeout_ms);
}

}  // namespace

void Driver::park(bool block) noexcept {
  // Before epoll_wait: every source retired so far was removed from the
  // epoll set before it was retired, so this wait cannot report it, and the
  // previous turn (ours or another holder's) finished dispatching.
  free_retired();
  const std::int64_t timeout_ns = block ? time_.park_timeout_ns() : 0;
  epoll_event events[kEventsPerTurn];
  int n = wait_for_events(epoll_fd_, events, kEventsPerTurn, timeout_ns);
  ++tick_;
  turns_.store(tick_, std::memory_order_relaxed);  // see turns()
  for (int i = 0; i < n; ++i) {
    void* tag = events[i].data.ptr;
    if (tag == nullptr) continue;  // an unpark(): its edge woke us
    // A completion source is tagged with its low bit (IoSources and
    // CompletionSources are both at least 2-aligned).
    if (reinterpret_cast<std::uintptr_t>(tag) & 1) {
      reinterpret_cast<CompletionSource*>(reinterpret_cast<std::uintptr_t>(tag) &
                                          ~std::uintptr_t{1})
          ->reap();
      continue;
    }
    auto* source = static_cast<IoSource*>(tag);
    const std::uint32_t e = events[i].events;
    std::uint64_t bits = 0;
    if (e & (EPOLLIN | EPOLLPRI)) bits |= IoSource::kReadable;
    if (e & EPOLLOUT) bits |= IoSource::kWritable;
    if (e & EPOLLRDHUP) bits |= IoSource::kReadable | IoSource::kReadClosed;
    // Both directions are done (or the socket never connected): every
    // operation must look, and its system call reports what happened.
    if (e & EPOLLHUP)
      bits |= IoSource::kReadable | IoSource::kWritable | IoSource::kReadClosed |
              IoSource::kWriteClosed;
    if (e & EPOLLERR) bits |= IoSource::kReadable | IoSource::kWritable | IoSource::kError;
    if (source->set_readiness(bits, tick_)) source->wake(bits);
  }
  time_.process(/*after_park=*/block);
}

std::error_code Driver::add(IoSource& source) noexcept {
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET;
  ev.data.ptr = &source;
  if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, source.fd(), &ev) < 0)
    return {errno, std::system_category()};
  // relaxed: a count for has_io_sources(), which synchronises nothing.
  sources_.fetch_add(1, std::memory_order_relaxed);
  return {};
}

std::error_code Driver::watch_completions(int fd, CompletionSource* source) noexcept {
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLET;
  ev.data.ptr = reinterpret_cast<void*>(reinterpret_cast<std::uintptr_t>(source) | 1);
  if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) < 0) return {errno, std::system_category()};
  return {};
}

void Driver::unwatch_completions(int fd) noexcept {
  epoll_event ev{};
  [[maybe_unused]] int r = ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, &ev);
}

void Driver::remove(int fd) noexcept {
  // Fails only for a descriptor that is not registered, which an IoSource's
  // always is until now.
  epoll_event ev{};
  [[maybe_unused]] int r = ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, &ev);
  sources_.fetch_sub(1, std::memory_order_relaxed);  // see add()
}

void Driver::retire(IoSource* source) noexcept {
  std::lock_guard guard(retired_lock_);
  source->retired_next = retired_;
  retired_ = source;
}

void Driver::free_retired() noexcept {
  IoSource* list;
  {
    // A source retired after this exchange is freed at the next turn.
    std::lock_guard guard(retired_lock_);
    list = std::exchange(retired_, nullptr);
  }
  while (list) {
    IoSource* next = list->retired_next;
    delete list;
    list = next;
  }
}

void Driver::unpark() noexcept {
  std::uint64_t one = 1;
  // Each write is an edge (the eventfd is edge-triggered), whether or not the
  // counter was already non-zero, so nobody reads it. It fails with EAGAIN
  // only after 2^64 - 2 unparks: then reset it and write again, so that the
  // write still makes an edge.
  if (::write(event_fd_, &one, sizeof one) < 0 && errno == EAGAIN) {
    std::uint64_t value;
    [[maybe_unused]] ssize_t r = ::read(event_fd_, &value, sizeof value);
    [[maybe_unused]] ssize_t w = ::write(event_fd_, &one, sizeof one);
  }
}

}  // namespace volt::detail
