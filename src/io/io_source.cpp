#include "io/io_source.hpp"

#include <unistd.h>

#include <cerrno>
#include <mutex>
#include <new>
#include <utility>

#include "io/driver.hpp"
#include "runtime/runtime_core.hpp"
#include "volt/detail/task_header.hpp"
#include "volt/detail/wake_list.hpp"
#include "volt/task/join_handle.hpp"

namespace volt::detail {

// ---- IoSource ----

void IoSource::publish() noexcept {
  // release: pairs with the acquire load at the top of set_readiness. The
  // driver first reaches this source through epoll_ctl and epoll_wait, which
  // order it in practice, but the sanitizers cannot see through the kernel;
  // this store makes the construction happen-before the driver's accesses
  // in the language's terms too.
  readiness_.store(kReadable | kWritable, std::memory_order_release);
}

bool IoSource::set_readiness(std::uint64_t bits, std::uint32_t tick) noexcept {
  // acquire: see publish(); the CAS below re-validates the value.
  std::uint64_t current = readiness_.load(std::memory_order_acquire);
  for (;;) {
    if (current & kShutdown) return false;
    const std::uint64_t next =
        (current & kReadinessMask) | bits | (static_cast<std::uint64_t>(tick) << kTickShift);
    // acq_rel: release pairs with the acquire load in readiness() of an
    // operation about to try its system call; acquire so that a concurrent
    // clear (an RMW) is ordered before our stamp, not lost under it.
    if (readiness_.compare_exchange_weak(current, next, std::memory_order_acq_rel,
                                         std::memory_order_relaxed))
      return true;
  }
}

void IoSource::clear_bits(std::uint64_t seen, std::uint64_t bits) noexcept {
  std::uint64_t current = readiness_.load(std::memory_order_relaxed);
  for (;;) {
    // The driver stamped a newer turn since `seen` was read: that edge may
    // be one the failed system call never saw. Keep it.
    if ((current & kTickMask) != (seen & kTickMask)) return;
    const std::uint64_t next = current & ~bits;
    if (next == current) return;
    // acq_rel: the partner of set_readiness's CAS; the two RMWs on one word
    // are totally ordered, so a stamp either precedes this clear (and the
    // tick check above fails) or follows it (and its bits survive).
    if (readiness_.compare_exchange_weak(current, next, std::memory_order_acq_rel,
                                         std::memory_order_relaxed))
      return;
  }
}

void IoSource::wake(std::uint64_t bits) noexcept {
  const bool all = (bits & kShutdown) != 0;
  WakeList wakers;
  lock_.lock();
  IoWaiter* waiter = waiters_.front();
  while (waiter) {
    IoWaiter* next = IntrusiveList<IoWaiter>::next(waiter);
    if (all || (bits & ready_mask(waiter->interest))) {
      waiters_.remove(waiter);
      // Moved out before the unlock: once unlinked and unlocked, the
      // operation may see itself woken and be destroyed.
      wakers.push(std::move(waiter->waker));
      if (wakers.full()) {
        // The list is consistent here (the walk restarts from the front).
        lock_.unlock();
        wakers.wake_all();
        lock_.lock();
        next = waiters_.front();
      }
    }
    waiter = next;
  }
  lock_.unlock();
  wakers.wake_all();
}

bool IoSource::register_waiter(IoWaiter& waiter, TaskHeader* task) noexcept {
  Waker replaced;  // dropped after the unlock: dropping a task waker may free the task
  std::lock_guard guard(lock_);
  // Re-checked under the lock: the driver sets readiness before it takes the
  // lock to wake, so either we see its bits here or it sees our waiter.
  // relaxed: the lock's acquire already orders the driver's RMW before us.
  const std::uint64_t state = readiness_.load(std::memory_order_relaxed);
  if (state & kShutdown) return false;
  if (state & ready_mask(waiter.interest)) return false;
  if (!waiter.linked) {
    waiter.waker = make_task_waker(task);
    waiter.task = task;
    waiters_.push_back(&waiter);
  } else if (waiter.task != task) {
    replaced = std::exchange(waiter.waker, make_task_waker(task));
    waiter.task = task;
  }
  return true;
}

void IoSource::withdraw(IoWaiter& waiter) noexcept {
  Waker dropped;
  {
    std::lock_guard guard(lock_);
    if (waiters_.remove(&waiter)) dropped = std::move(waiter.waker);
  }
  // Dropped outside the lock: dropping a task waker may free the task.
}

template <class Change>
void IoSource::transition(Change change) noexcept {
  // Read before the RMW: once it is done, another thread's transition may
  // free this source (retire, then the next driver turn).
  const int fd = fd_;
  Driver& driver = driver_;
  Scheduler& scheduler = scheduler_;
  const auto dead = [](std::uint64_t v) {
    return (v & kUseMask) == 0 && (v & kHandleRef) == 0 && (v & kFdClosed) != 0;
  };
  std::uint64_t current = life_.load(std::memory_order_relaxed);
  std::uint64_t next;
  do {
    next = change(current);
    if ((next & kUseMask) == 0 && (next & kDeregistered)) next |= kFdClosed;
    // acq_rel: release publishes this party's use of the descriptor and of
    // the source (its system calls, its waiter's withdrawal) to whoever
    // closes or frees next; acquire makes ours see all earlier parties'.
    // Every party's last access precedes its RMW, so the one that closes
    // or frees does so after every other use (a release sequence on life_).
  } while (!life_.compare_exchange_weak(current, next, std::memory_order_acq_rel,
                                        std::memory_order_relaxed));
  if ((next & kFdClosed) && !(current & kFdClosed)) ::close(fd);
  if (dead(next) && !dead(current)) {
    driver.retire(this);
    // Taken in open_with: the driver outlives the source.
    scheduler.release_reference();
  }
}

void IoSource::end_use() noexcept {
  transition([](std::uint64_t v) { return v - 1; });
}

void IoSource::close() noexcept {
  // Elects the closer. acq_rel: see begin_use (its partner); the total order
  // of RMWs on life_ is what decides, the orders make the sanitizers agree.
  if (life_.fetch_or(kClosing, std::memory_order_acq_rel) & kClosing) return;
  // The descriptor is still open: no transition closes it before
  // kDeregistered, which only we set, below.
  driver_.remove(fd_);
  // acq_rel: orders the DEL before the bit for any thread that sees the bit.
  readiness_.fetch_or(kShutdown, std::memory_order_acq_rel);
  wake(kShutdown);
  transition([](std::uint64_t v) { return v | kDeregistered; });
}

void IoSource::drop_handle() noexcept {
  close();
  transition([](std::uint64_t v) { return v & ~kHandleRef; });
}

// ---- IoHandle ----

namespace {

std::error_code open_with(int fd, Driver& driver, Scheduler& scheduler, IoSource*& out) noexcept {
  auto* source = new (std::nothrow) IoSource(driver, scheduler, fd);
  if (!source) {
    ::close(fd);
    return std::make_error_code(std::errc::not_enough_memory);
  }
  source->publish();
  if (std::error_code ec = driver.add(*source)) {
    delete source;
    ::close(fd);
    return ec;
  }
  // Released by the transition that frees the source: the driver outlives
  // every source.
  scheduler.retain();
  out = source;
  return {};
}

}  // namespace

std::error_code IoHandle::open(int fd, IoHandle& out) noexcept {
  RuntimeCore* core = RuntimeCore::current();
  if (!core) {
    ::close(fd);
    return make_error_code(errc::no_runtime);
  }
  IoSource* source = nullptr;
  if (std::error_code ec = open_with(fd, core->driver(), *core, source)) return ec;
  out.reset();
  out.source_ = source;
  out.fd_ = fd;
  out.reports_queue_ = false;
  return {};
}

std::error_code IoHandle::open_like(int fd, IoSource* sibling, IoHandle& out) noexcept {
  if (!sibling) return open(fd, out);
  IoSource* source = nullptr;
  if (std::error_code ec = open_with(fd, sibling->driver(), sibling->scheduler(), source))
    return ec;
  out.reset();
  out.source_ = source;
  out.fd_ = fd;
  out.reports_queue_ = false;
  return {};
}

IoHandle::IoHandle(IoHandle&& other) noexcept
    : source_(std::exchange(other.source_, nullptr)),
      fd_(std::exchange(other.fd_, -1)),
      reports_queue_(std::exchange(other.reports_queue_, false)) {}

IoHandle& IoHandle::operator=(IoHandle&& other) noexcept {
  if (this != &other) {
    reset();
    source_ = std::exchange(other.source_, nullptr);
    fd_ = std::exchange(other.fd_, -1);
    reports_queue_ = std::exchange(other.reports_queue_, false);
  }
  return *this;
}

void IoHandle::reset() noexcept {
  if (IoSource* source = std::exchange(source_, nullptr)) {
    fd_ = -1;
    reports_queue_ = false;
    source->drop_handle();
  }
}

void IoHandle::close() const noexcept {
  if (source_) source_->close();
}

bool IoHandle::is_open() const noexcept {
  return source_ && !source_->closing();
}

int IoHandle::native_handle() const noexcept {
  return is_open() ? fd_ : -1;
}

// ---- IoUse ----

IoUse::IoUse(const IoHandle& handle) noexcept : source_(handle.source()) {
  if (source_ && source_->begin_use()) fd_ = handle.fd();
}

IoUse::~IoUse() {
  if (source_) source_->end_use();
}

std::uint64_t IoUse::readiness() const noexcept {
  return fd_ >= 0 ? source_->readiness() : IoSource::kShutdown;
}

void IoUse::clear_readiness(std::uint64_t seen, Interest interest) const noexcept {
  if (fd_ >= 0) source_->clear_readiness(seen, interest);
}

// ---- IoOperation ----

IoOperation::IoOperation(const IoHandle& handle, Interest interest, StepFn step) noexcept
    : source_(handle.source()), step_(step), fd_(handle.fd()) {
  waiter_.interest = interest;
  // The use is held until the destructor: the descriptor number stays ours
  // (and the source alive) for as long as this operation can touch them.
  if (source_ && !source_->begin_use()) closed_ = true;
}

IoOperation::~IoOperation() {
  if (!source_) return;
  if (registered_) withdraw();
  source_->end_use();
}

bool IoOperation::start() noexcept {
  if (!source_ || closed_) {
    closed_ = true;
    return true;
  }
  // Re-awaited after an interrupted wait (a timeout's lvalue operand): the
  // budget unit was paid, and the waiter may still be queued.
  if (registered_) return attempt();
  // The budget before the system call (see the header).
  if (!coop_try_consume()) {
    yielding_ = true;
    return false;
  }
  return attempt();
}

bool IoOperation::attempt() noexcept {
  for (;;) {
    const std::uint64_t state = source_->readiness();
    if (state & IoSource::kShutdown) {
      closed_ = true;
      return true;
    }
    // A step waiting for its own wake-up is called whatever the readiness:
    // it decides (kRetryLater again if woken early).
    if (!retry_later_ && !(state & IoSource::ready_mask(waiter_.interest))) return false;
    retry_later_ = false;
    switch (step_(*this)) {
      case Step::kDone:
        return true;
      case Step::kDoneDrained:
        source_->clear_drained(state, waiter_.interest);
        return true;
      case Step::kRetryLater:
        retry_later_ = true;
        return false;
      case Step::kWouldBlock:
        break;
    }
    source_->clear_readiness(state, waiter_.interest);
  }
}

bool IoOperation::must_wait(TaskHeader* task) noexcept {
  // The step armed its own wake-up: wait for it, not for readiness.
  if (retry_later_) return true;
  registered_ = true;
  return source_->register_waiter(waiter_, task);
}

Waker IoOperation::current_task_waker() noexcept {
  return make_task_waker(tls_context.current_task);
}

bool IoOperation::await_suspend(std::coroutine_handle<> self) {
  if (yielding_) {
    yielding_ = false;
    yield_current(self, &ready_check, this);
    return true;
  }
  TaskHeader* task = suspend_current(self, &ready_check, this);
  for (;;) {
    if (must_wait(task)) return true;
    if (attempt()) return false;
  }
}

bool IoOperation::ready_check(void* context) noexcept {
  IoOperation& self = *static_cast<IoOperation*>(context);
  for (;;) {
    if (self.attempt()) return true;
    if (self.must_wait(tls_context.current_task)) return false;
  }
}

void IoOperation::withdraw() noexcept {
  registered_ = false;
  source_->withdraw(waiter_);
}

}  // namespace volt::detail
