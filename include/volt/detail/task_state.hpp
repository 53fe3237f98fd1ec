// volt/detail/task_state.hpp: the packed atomic state word of a spawned task.
//
// One 64-bit word holds every flag a task's lifecycle needs plus its reference
// count, so that each transition is a single atomic read-modify-write and no
// interleaving of wake-ups, polls, aborts and join-handle operations can lose a
// wake-up or poll a task twice.
//
//   bit 0  kRunning       a thread is polling the task (owns the frame)
//   bit 1  kComplete      the task finished (value, exception or cancellation);
//                         its output slot is written. Never cleared.
//   bit 2  kNotified      the task has been handed to a scheduler queue, or, if
//                         kRunning, must be re-queued when the poll ends
//   bit 3  kJoinInterest  the JoinHandle is alive and may read the output
//   bit 4  kJoinWaker     the join_waker field holds a waker and belongs to the
//                         task side (see below)
//   bit 5  kCancelled     abort() or shutdown asked the task to stop
//   bit 6  kQueuedEntry   the task is being polled inline (by a thread awaiting
//                         its JoinHandle) while its queue entry is still queued
//                         (see "Inline polls" below)
//   bits 7..63            reference count (kRefOne = 1 << 7)
//
// Initial value: kNotified | kJoinInterest, 3 references: the scheduler queue
// entry (the "notified" reference), the JoinHandle, and the runtime's list of
// owned tasks (OwnedTasks), which shutdown walks to cancel idle tasks.
//
// Ownership rules:
//  1. The frame (root coroutine) is touched only by the thread that set
//     kRunning, or after kComplete by nobody but finish/cancel code that ran
//     under kRunning.
//  2. The output slot is written under kRunning before kComplete is published
//     (release) and read by the JoinHandle after it observes kComplete (acquire).
//  3. join_waker belongs to the JoinHandle side while kJoinWaker is clear and to
//     the task side while it is set. The JoinHandle writes it, then sets the bit;
//     the completing task wakes it, then clears the bit (and drops it itself if
//     the JoinHandle is gone by then).
//  4. A queue entry always owns one reference; polling consumes it unless the
//     task is notified again during the poll, in which case the same reference
//     goes back to a queue.
//  5. A task has at most one queue entry, and has one exactly while it is
//     kNotified and not kRunning, or kRunning with kQueuedEntry. (One entry
//     matters beyond counting: the inject queue links its entries through the
//     task's single queue_next field.)
//
// Inline polls. A task awaiting the JoinHandle of a task that is queued but
// not running polls it in place instead of suspending (a fork-join tree then
// runs depth first, at the cost of a call per join; harness.cpp,
// join_inline). It cannot take the queue entry out of whatever queue holds
// it, so the claim (transition_to_running_inline) leaves the entry and
// kNotified where they are, adds kRunning, kQueuedEntry and a reference of its
// own. From then on, as during any poll, a wake-up only (re)sets kNotified.
// If the entry is popped while the inline poll runs, the popper finds the
// task running, drops the entry's reference and clears kQueuedEntry: the
// notification is then the poll's to re-queue, as for a task woken during
// its poll. If the poll ends with kQueuedEntry still set, the entry is still
// queued: the task goes back to idle and notified, and the poll drops only
// its own reference; the entry polls the task once more later, which the
// leaf's readiness check (ResumeSlot) makes harmless if nothing changed. A
// task completed inline leaves its entry to be dropped when popped.
//
// Every change goes through one of the named transitions below, all of which
// are a single CAS loop (update_state) or a single fetch_* with a stated order.
// A CAS-loop transition recomputes its outcome on every attempt: an outcome
// left over from a failed attempt would report a change that never happened.
#pragma once

#include <atomic>
#include <cassert>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

namespace volt::detail {

class TaskState {
 public:
  using Word = std::uint64_t;
  static constexpr Word kRunning = 1u << 0;
  static constexpr Word kComplete = 1u << 1;
  static constexpr Word kNotified = 1u << 2;
  static constexpr Word kJoinInterest = 1u << 3;
  static constexpr Word kJoinWaker = 1u << 4;
  static constexpr Word kCancelled = 1u << 5;
  static constexpr Word kQueuedEntry = 1u << 6;
  static constexpr Word kLifecycleMask = kRunning | kComplete;
  static constexpr unsigned kRefShift = 7;
  static constexpr Word kRefOne = Word{1} << kRefShift;
  static constexpr Word kRefMask = ~(kRefOne - 1);
  static constexpr Word kInitial = 3 * kRefOne | kNotified | kJoinInterest;
  static_assert((kRefOne & (kRunning | kComplete | kNotified | kJoinInterest | kJoinWaker |
                            kCancelled | kQueuedEntry)) == 0,
                "flags and reference count overlap");

  // A read-only view of one value of the word.
  struct Snapshot {
    Word bits;
    bool is_running() const { return bits & kRunning; }
    bool is_complete() const { return bits & kComplete; }
    bool is_notified() const { return bits & kNotified; }
    bool is_join_interested() const { return bits & kJoinInterest; }
    bool is_join_waker_set() const { return bits & kJoinWaker; }
    bool is_cancelled() const { return bits & kCancelled; }
    bool has_queued_entry() const { return bits & kQueuedEntry; }
    bool is_idle() const { return (bits & kLifecycleMask) == 0; }
    Word ref_count() const { return bits >> kRefShift; }
  };

  enum class [[nodiscard]] ToRunning{kSuccess, kCancelled, kFailed, kDealloc};
  enum class [[nodiscard]] ToIdle{kOk, kOkNotified, kOkDealloc, kCancelled};
  enum class [[nodiscard]] ToNotified{kDoNothing, kSubmit, kDealloc};

  TaskState() noexcept : word_(kInitial) {}

  // acquire: pairs with the release of every transition, so a reader of the
  // snapshot also sees what the writer published before it.
  Snapshot load() const noexcept { return {word_.load(std::memory_order_acquire)}; }

  // Poller, holding the notified reference. On kFailed/kDealloc the reference
  // was consumed here; kCancelled leaves the task claimed (kRunning) so the
  // caller cancels and completes it.
  ToRunning transition_to_running() noexcept {
    ToRunning action = ToRunning::kSuccess;
    update_state([&](Word cur) -> Word {
      if (!(Snapshot{cur}.is_idle())) {
        // Claimed by shutdown, polled inline (rule 5: the entry is no longer
        // queued, so kQueuedEntry goes and the notification becomes the
        // poll's), or complete: drop the queue's reference.
        Word next = (cur - kRefOne) & ~kQueuedEntry;
        action = (next & kRefMask) == 0 ? ToRunning::kDealloc : ToRunning::kFailed;
        return next;
      }
      check(cur & kNotified, cur, "transition_to_running: not notified");
      action = (cur & kCancelled) ? ToRunning::kCancelled : ToRunning::kSuccess;
      return (cur | kRunning) & ~kNotified;
    });
    return action;
  }

  // Poller, after a poll that did not complete the task.
  ToIdle transition_to_idle() noexcept {
    ToIdle action = ToIdle::kOk;
    bool changed = update_state_if([&](Word cur, Word& next) {
      check(cur & kRunning, cur, "transition_to_idle: not running");
      if (cur & kCancelled) {
        action = ToIdle::kCancelled;
        return false;  // stay claimed; the caller cancels
      }
      next = cur & ~kRunning;
      if (cur & kQueuedEntry) {
        // An inline poll whose queue entry is still queued (rule 5): the task
        // stays notified for that entry; only the poll's reference goes (not
        // the last: the entry and the awaiting JoinHandle hold theirs).
        next = (next & ~kQueuedEntry) - kRefOne;
        action = (next & kRefMask) == 0 ? ToIdle::kOkDealloc : ToIdle::kOk;
      } else if (cur & kNotified) {
        // Woken during the poll: our reference becomes the new queue entry's.
        action = ToIdle::kOkNotified;
      } else {
        next -= kRefOne;
        action = (next & kRefMask) == 0 ? ToIdle::kOkDealloc : ToIdle::kOk;
      }
      return true;
    });
    (void)changed;
    return action;
  }

  // A thread awaiting this task's JoinHandle, to poll it inline (see "Inline
  // polls" above). Succeeds only on a task that is queued (kNotified) and
  // idle, and not cancelled (the queue's poller cancels it); adds kRunning,
  // kQueuedEntry and the poll's reference. kNotified stays: the entry is
  // still queued. The poll then ends through transition_to_idle or
  // transition_to_complete like any other.
  bool transition_to_running_inline() noexcept {
    return update_state_if([&](Word cur, Word& next) {
      if ((cur & (kLifecycleMask | kNotified | kCancelled | kQueuedEntry)) != kNotified)
        return false;
      next = (cur | kRunning | kQueuedEntry) + kRefOne;
      return true;
    });
  }

  // Poller: kRunning -> kComplete in one step. acq_rel: release publishes the
  // output written under kRunning (rule 2); acquire orders the read of the
  // join-waker bit before touching join_waker.
  Snapshot transition_to_complete() noexcept {
    Word prev = word_.fetch_xor(kRunning | kComplete, std::memory_order_acq_rel);
    check((prev & kRunning) && !(prev & kComplete), prev, "transition_to_complete");
    return {prev ^ (kRunning | kComplete)};
  }

  // Drops `count` references at the end of a completed task's poll. Returns
  // true when this dropped the last one (the caller deallocates).
  bool transition_to_terminal(Word count) noexcept {
    // acq_rel: the release orders our last accesses to the cell before the
    // deallocation on whichever thread drops the final reference; the acquire
    // lets that thread see every other holder's accesses.
    Word prev = word_.fetch_sub(count * kRefOne, std::memory_order_acq_rel);
    check((prev >> kRefShift) >= count, prev, "transition_to_terminal: refcount underflow");
    return (prev >> kRefShift) == count;
  }

  // A waker that owns one reference wakes the task, consuming the reference.
  ToNotified transition_to_notified_by_val() noexcept {
    ToNotified action = ToNotified::kDoNothing;
    update_state([&](Word cur) -> Word {
      if (cur & kRunning) {
        // The poller re-queues it; our reference is not needed (the poll holds one).
        action = ToNotified::kDoNothing;
        return (cur | kNotified) - kRefOne;
      }
      if ((cur & kComplete) || (cur & kNotified)) {
        Word next = cur - kRefOne;
        action = (next & kRefMask) == 0 ? ToNotified::kDealloc : ToNotified::kDoNothing;
        return next;
      }
      action = ToNotified::kSubmit;  // our reference becomes the queue entry's
      return cur | kNotified;
    });
    return action;
  }

  // A waker wakes the task and keeps its own reference.
  ToNotified transition_to_notified_by_ref() noexcept {
    ToNotified action = ToNotified::kDoNothing;
    update_state_if([&](Word cur, Word& next) {
      action = ToNotified::kDoNothing;  // every attempt decides afresh
      if ((cur & kComplete) || (cur & kNotified)) return false;
      if (cur & kRunning) {
        action = ToNotified::kDoNothing;
        next = cur | kNotified;
      } else {
        action = ToNotified::kSubmit;
        next = (cur | kNotified) + kRefOne;  // a new reference for the queue entry
      }
      return true;
    });
    return action;
  }

  // JoinHandle::abort. Returns true when the caller must submit the task (it was
  // idle; a queue reference was added) so that a poller cancels it.
  bool transition_to_notified_and_cancel() noexcept {
    bool submit = false;
    update_state_if([&](Word cur, Word& next) {
      submit = false;  // every attempt decides afresh
      if ((cur & kCancelled) || (cur & kComplete)) return false;
      if (cur & kRunning) {
        next = cur | kNotified | kCancelled;  // the poller sees it when the poll ends
        submit = false;
      } else if (cur & kNotified) {
        next = cur | kCancelled;  // already queued; the poll cancels it
        submit = false;
      } else {
        next = (cur | kNotified | kCancelled) + kRefOne;
        submit = true;
      }
      return true;
    });
    return submit;
  }

  // Runtime shutdown. Marks the task cancelled; if it is idle, also claims it
  // (sets kRunning) and returns true so that the caller cancels and completes
  // it. A running task is cancelled by its poller when the poll ends.
  bool transition_to_shutdown() noexcept {
    bool claimed = false;
    update_state([&](Word cur) -> Word {
      claimed = Snapshot{cur}.is_idle();
      return claimed ? (cur | kCancelled | kRunning) : (cur | kCancelled);
    });
    return claimed;
  }

  // JoinHandle side, owning join_waker (kJoinWaker clear): publishes it.
  // Returns false, leaving the bit clear, if the task already completed.
  bool set_join_waker() noexcept {
    return update_state_if([&](Word cur, Word& next) {
      check((cur & kJoinInterest) && !(cur & kJoinWaker), cur, "set_join_waker");
      if (cur & kComplete) return false;
      next = cur | kJoinWaker;
      return true;
    });
  }

  // JoinHandle side: takes join_waker back. Returns false if the task completed
  // first (then the task side owns the waker until it clears the bit).
  bool unset_join_waker() noexcept {
    return update_state_if([&](Word cur, Word& next) {
      check(cur & kJoinInterest, cur, "unset_join_waker");
      if (cur & kComplete) return false;
      if (!(cur & kJoinWaker)) return false;
      next = cur & ~kJoinWaker;
      return true;
    });
  }

  // Task side, after waking the join waker at completion: hands join_waker back.
  // acq_rel: release orders our wake before the JoinHandle may drop the waker;
  // acquire lets us see the JoinHandle's drop of interest.
  Snapshot unset_waker_after_complete() noexcept {
    Word prev = word_.fetch_and(~kJoinWaker, std::memory_order_acq_rel);
    check((prev & kComplete) && (prev & kJoinWaker), prev, "unset_waker_after_complete");
    return {prev & ~kJoinWaker};
  }

  struct JoinHandleDropped {
    bool drop_output;  // the output was written and nobody else will drop it
    bool drop_waker;   // join_waker belongs to the JoinHandle side
  };
  // JoinHandle destroyed (or its result taken). Clears kJoinInterest, and
  // kJoinWaker when the task has not completed, taking the waker back.
  JoinHandleDropped transition_to_join_handle_dropped() noexcept {
    JoinHandleDropped result{};
    update_state([&](Word cur) -> Word {
      check(cur & kJoinInterest, cur, "transition_to_join_handle_dropped");
      Word next = cur & ~kJoinInterest;
      if (!(cur & kComplete)) {
        next &= ~kJoinWaker;
        result = {false, true};
      } else {
        // The completing side is still waking the waker while kJoinWaker is set;
        // it sees our cleared interest and drops the waker itself.
        result = {true, !(cur & kJoinWaker)};
      }
      return next;
    });
    return result;
  }

  // JoinHandle dropped before the task completed and with no waker published:
  // clears kJoinInterest and drops the handle's reference in one step (there
  // is no output or waker to release). Returns false, changing nothing, in
  // every other state; the caller then takes the general path. Cannot drop
  // the last reference: an incomplete task is still held by the owned list.
  bool drop_join_handle_fast() noexcept {
    return update_state_if([&](Word cur, Word& next) {
      check(cur & kJoinInterest, cur, "drop_join_handle_fast");
      if (cur & (kComplete | kJoinWaker)) return false;
      next = (cur & ~kJoinInterest) - kRefOne;
      check((next & kRefMask) != 0, cur, "drop_join_handle_fast: last reference");
      return true;
    });
  }

  // relaxed: the caller already holds a reference, so the object is alive and
  // no data is published by taking another (the same argument as shared_ptr).
  void ref_inc() noexcept {
    Word prev = word_.fetch_add(kRefOne, std::memory_order_relaxed);
    check((prev & kRefMask) != 0 && prev < (~Word{0} - kRefOne), prev, "ref_inc");
  }

  // Returns true when the last reference was dropped. acq_rel as in
  // transition_to_terminal.
  [[nodiscard]] bool ref_dec() noexcept {
    Word prev = word_.fetch_sub(kRefOne, std::memory_order_acq_rel);
    check((prev & kRefMask) != 0, prev, "ref_dec: refcount underflow");
    return (prev & kRefMask) == kRefOne;
  }

 private:
  // The only CAS loops on the word. acq_rel on success (each transition both
  // publishes and consumes), acquire on failure (the retry reads fresh state).
  template <class F>
  void update_state(F&& f) noexcept {
    Word cur = word_.load(std::memory_order_acquire);
    while (!word_.compare_exchange_weak(cur, f(cur), std::memory_order_acq_rel,
                                        std::memory_order_acquire)) {
    }
  }
  template <class F>
  bool update_state_if(F&& f) noexcept {
    Word cur = word_.load(std::memory_order_acquire);
    for (;;) {
      Word next = cur;
      if (!f(cur, next)) return false;
      if (word_.compare_exchange_weak(cur, next, std::memory_order_acq_rel,
                                      std::memory_order_acquire))
        return true;
    }
  }

  static void check(bool ok, Word found, const char* what) noexcept {
    if (!ok) [[unlikely]] {
      std::fprintf(stderr, "volt: inconsistent task state in %s: 0x%llx\n", what,
                   static_cast<unsigned long long>(found));
      std::abort();
    }
  }

  std::atomic<Word> word_;
};

}  // namespace volt::detail
