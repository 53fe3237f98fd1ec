#include "time/time_driver.hpp"

#include "volt/detail/task_header.hpp"
#include "volt/detail/wake_list.hpp"

#include <limits>
#include <mutex>
#include <utility>

namespace volt::detail {

namespace {
constexpr std::int64_t kTickNs = 1'000'000;  // 1 ms, Tokio's resolution
}

TimeDriver::TimeDriver(bool start_paused) noexcept : origin_(std::chrono::steady_clock::now()) {
  base_ = origin_;
  unfrozen_ = origin_;
  if (start_paused) {
    virtual_.store(true, std::memory_order_relaxed);
    paused_.store(true, std::memory_order_seq_cst);
  }
}

TimeDriver::~TimeDriver() = default;

Instant TimeDriver::now_locked() const noexcept {
  if (paused_.load(std::memory_order_relaxed)) return base_;
  const auto running = std::chrono::steady_clock::now() - unfrozen_;
  if (Instant::max() - base_ < running) return Instant::max();  // advanced to the end of time
  return base_ + running;
}

Instant TimeDriver::now() const noexcept {
  // relaxed: a thread racing a pause() may read the real clock once more;
  // nothing orders the two anyway.
  if (!virtual_.load(std::memory_order_relaxed)) return std::chrono::steady_clock::now();
  std::lock_guard guard(lock_);
  return now_locked();
}

std::uint64_t TimeDriver::deadline_tick(Instant deadline) const noexcept {
  // Rounded up: the timer fires at a tick boundary at or after its deadline.
  if (deadline <= origin_) return 0;
  const std::int64_t ns = (deadline - origin_).count();
  return static_cast<std::uint64_t>(ns / kTickNs) + (ns % kTickNs != 0 ? 1 : 0);
}

std::optional<Instant> TimeDriver::tick_start(std::uint64_t tick) const noexcept {
  const std::uint64_t room = static_cast<std::uint64_t>((Instant::max() - origin_).count());
  if (tick > room / kTickNs) return std::nullopt;
  return origin_ + std::chrono::nanoseconds(static_cast<std::int64_t>(tick) * kTickNs);
}

std::uint64_t TimeDriver::now_tick(Instant now) const noexcept {
  if (now <= origin_) return 0;
  // At the end of time every deadline is due, including those within the
  // last millisecond (whose tick, rounded up, starts past Instant::max()).
  if (now == Instant::max()) return deadline_tick(now);
  return static_cast<std::uint64_t>((now - origin_).count() / kTickNs);
}

TimeDriver::Registered TimeDriver::insert(TimerNode& node, Instant deadline,
                                          Waker& waker) noexcept {
  const std::uint64_t tick = deadline_tick(deadline);
  Waker previous;  // a replaced waker, dropped after the lock (declared first)
  std::lock_guard guard(lock_);
  if (node.state.load(std::memory_order_relaxed) == TimerNode::kRegistered) {
    // Re-armed while linked (awaited again, by a later poll or another task).
    // Pending entries stay pending; wheel entries move if the deadline moved.
    if (node.entry.level == kPendingLevel || node.entry.deadline == tick) {
      previous = std::exchange(node.waker, std::move(waker));
      return Registered::kQueued;
    }
    if (node.entry.level == kNeverLevel) {
      --never_count_;
    } else {
      wheel_.remove(&node.entry);
    }
    previous = std::move(node.waker);
    // relaxed: we hold the lock; the owner is the caller.
    node.state.store(TimerNode::kIdle, std::memory_order_relaxed);
  }
  node.entry.deadline = tick;
  if (deadline == Instant::max()) {
    node.entry.level = kNeverLevel;
    ++never_count_;
    node.waker = std::move(waker);
    node.state.store(TimerNode::kRegistered, std::memory_order_relaxed);
    return Registered::kQueued;
  }
  if (!wheel_.insert(&node.entry)) {
    // Already due by the wheel's time (which never runs ahead of the clock).
    // relaxed: the owner is the only other party, on this thread.
    node.state.store(TimerNode::kFired, std::memory_order_relaxed);
    return Registered::kDue;
  }
  node.waker = std::move(waker);
  node.state.store(TimerNode::kRegistered, std::memory_order_relaxed);
  // relaxed: see unattended_ in the header.
  if (unattended_.load(std::memory_order_relaxed)) {
    // Nobody holds the driver and nobody was asked to: the caller asks.
    unattended_.store(false, std::memory_order_relaxed);
    return Registered::kUnattended;
  }
  if (sleeping_until_ != 0 && tick < sleeping_until_) {
    // The holder sleeps past this deadline: it must wake and re-arm. Record
    // the new deadline so a burst of earlier timers writes the eventfd once.
    sleeping_until_ = tick;
    return Registered::kEarliest;
  }
  return Registered::kQueued;
}

void TimeDriver::remove(TimerNode& node) noexcept {
  Waker dropped;  // dropped after the lock: it may release a task reference
  {
    std::lock_guard guard(lock_);
    if (node.state.load(std::memory_order_relaxed) != TimerNode::kRegistered) return;
    if (node.entry.level == kPendingLevel) {
      unlink_pending(&node.entry);
    } else if (node.entry.level == kNeverLevel) {
      --never_count_;
    } else {
      wheel_.remove(&node.entry);
    }
    dropped = std::move(node.waker);
    // relaxed: we hold the lock, and the owner is the caller.
    node.state.store(TimerNode::kIdle, std::memory_order_relaxed);
  }
}

std::int64_t TimeDriver::park_timeout_ns() noexcept {
  std::lock_guard guard(lock_);
  std::optional<std::uint64_t> next;
  if (pending_) {
    next = wheel_.elapsed();
  } else {
    next = wheel_.next_expiration();
  }
  if (!next || paused_.load(std::memory_order_relaxed)) {
    sleeping_until_ = std::numeric_limits<std::uint64_t>::max();
    return -1;
  }
  const Instant now = now_locked();
  const std::uint64_t current = now_tick(now);
  if (*next <= current) {
    sleeping_until_ = 0;  // not going to sleep
    return 0;
  }
  sleeping_until_ = *next;
  // Until the start of tick *next (a tick the clock cannot reach: no timeout).
  const std::optional<Instant> wake = tick_start(*next);
  if (!wake) return -1;
  return (*wake - now).count();
}

void TimeDriver::on_acquire() noexcept {
  // relaxed, no lock: see unattended_ in the header.
  unattended_.store(false, std::memory_order_relaxed);
}

bool TimeDriver::on_release(std::atomic<bool>& held) noexcept {
  std::lock_guard guard(lock_);
  sleeping_until_ = 0;
  const bool pending = !wheel_.empty() || pending_ != nullptr;
  // With timers pending the caller hands the driver off now; without, the
  // next registration must.
  unattended_.store(!pending, std::memory_order_relaxed);
  // Under the lock (see the header): a registration that finds unattended_
  // set locks after this store, so a worker it wakes (wake-ups are
  // release/acquire) sees the driver free. seq_cst: Driver::release's Dekker
  // pair with the standby.
  held.store(false, std::memory_order_seq_cst);
  return pending;
}

std::size_t TimeDriver::process(bool after_park) noexcept {
  Instant now;
  {
    std::lock_guard guard(lock_);
    if (after_park) sleeping_until_ = 0;  // the holder is awake
    // Cheap exit when nothing is due: the common case of a maintenance poll.
    std::optional<std::uint64_t> next = wheel_.next_expiration();
    now = now_locked();
    if (!pending_ && (!next || *next > now_tick(now))) {
      return 0;
    }
  }
  return fire_until(now_tick(now));
}

void TimeDriver::link_pending(TimerEntry* entry) noexcept {
  // Appended: the wheel hands entries over in deadline order, and the next
  // batch fires them from the head in that order.
  entry->level = kPendingLevel;
  entry->next = nullptr;
  entry->prev = pending_tail_;
  if (pending_tail_) {
    pending_tail_->next = entry;
  } else {
    pending_ = entry;
  }
  pending_tail_ = entry;
  entry->linked = true;
  ++pending_count_;
}

void TimeDriver::unlink_pending(TimerEntry* entry) noexcept {
  if (entry->prev) {
    entry->prev->next = entry->next;
  } else {
    pending_ = entry->next;
  }
  if (entry->next) {
    entry->next->prev = entry->prev;
  } else {
    pending_tail_ = entry->prev;
  }
  entry->prev = entry->next = nullptr;
  entry->linked = false;
  --pending_count_;
}

std::size_t TimeDriver::fire_until(std::uint64_t tick) noexcept {
  std::size_t total = 0;
  std::size_t counted = 0;  // of total, already added to fired_
  WakeList batch;           // invoked after the lock is released
  bool more = true;
  while (more) {
    {
      std::lock_guard guard(lock_);
      auto fire = [&](TimerNode& node) {
        batch.push(std::move(node.waker));
        ++total;
        // release: pairs with TimerNode::fired(); the node is the owner's
        // from here on (it may be freed as soon as this store is seen).
        node.state.store(TimerNode::kFired, std::memory_order_release);
      };
      // Due entries left over from the previous batch first (earlier ticks).
      while (pending_ && !batch.full()) {
        TimerEntry* entry = pending_;
        unlink_pending(entry);
        fire(*reinterpret_cast<TimerNode*>(entry));
      }
      if (!batch.full()) {
        wheel_.advance(tick, [&](TimerEntry* entry) {
          if (!batch.full()) {
            fire(*reinterpret_cast<TimerNode*>(entry));
          } else {
            link_pending(entry);
          }
        });
      }
      more = pending_ != nullptr;
    }
    // Counted before the wakes: a woken task (on another worker) that reads
    // the statistic sees its own timer in it. relaxed: the wake's hand-off
    // of the task (release, acquire) orders this add before its reads.
    fired_.fetch_add(total - counted, std::memory_order_relaxed);
    counted = total;
    // Deadline order: a task (time::advance) may be firing them, whose
    // scheduler would otherwise put each wake in its LIFO slot
    // (ThreadContext::in_order_wakes).
    const bool outer = tls_context.in_order_wakes;
    tls_context.in_order_wakes = true;
    batch.wake_all();
    tls_context.in_order_wakes = outer;
  }
  return total;
}

void TimeDriver::pause() noexcept {
  std::lock_guard guard(lock_);
  if (paused_.load(std::memory_order_relaxed)) return;
  base_ = now_locked();
  virtual_.store(true, std::memory_order_relaxed);
  // seq_cst: pairs with BlockingPool::job_done (see is_paused_seq_cst).
  paused_.store(true, std::memory_order_seq_cst);
}

void TimeDriver::resume() noexcept {
  std::lock_guard guard(lock_);
  if (!paused_.load(std::memory_order_relaxed)) return;
  unfrozen_ = std::chrono::steady_clock::now();
  paused_.store(false, std::memory_order_relaxed);
}

void TimeDriver::advance(Duration d) noexcept {
  if (d <= Duration::zero()) {
    process();
    return;
  }
  std::uint64_t target;
  {
    std::lock_guard guard(lock_);
    const Instant now = now_locked();
    base_ = (Instant::max() - now < d) ? Instant::max() : now + d;
    if (!paused_.load(std::memory_order_relaxed)) unfrozen_ = std::chrono::steady_clock::now();
    target = now_tick(now_locked());
  }
  fire_until(target);
}

bool TimeDriver::advance_to_next_deadline() noexcept {
  std::uint64_t target;
  {
    std::lock_guard guard(lock_);
    if (!paused_.load(std::memory_order_relaxed)) return false;
    std::optional<std::uint64_t> next =
        pending_ ? std::optional<std::uint64_t>(wheel_.elapsed()) : wheel_.next_expiration();
    if (!next) return false;
    // A tick starting past Instant::max() (a deadline in the last millisecond
    // of the clock's range): jump to the end of time, where it is due.
    const std::optional<Instant> at = tick_start(*next);
    const Instant to = at ? *at : Instant::max();
    if (to > base_) base_ = to;
    target = now_tick(base_);
  }
  fire_until(target);
  return true;
}

std::uint64_t TimeDriver::active_timers() const noexcept {
  std::lock_guard guard(lock_);
  return wheel_.size() + pending_count_ + never_count_;
}

}  // namespace volt::detail
