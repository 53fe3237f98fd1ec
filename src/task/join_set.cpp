// JoinSet's shared state: the entries of its tasks, the list of those that
// finished, and the waker of the join_next() waiting for one.
//
// The set keeps each task's JoinHandle reference (TaskHeader*) in an entry
// and registers, as the task's join waker, a waker of its own whose data is
// the entry. The runtime calls that waker's wake_by_ref when the task
// completes (harness.cpp, complete()), on the completing thread, so nothing
// runs per task beyond what a JoinHandle's wait costs: no wrapper coroutine.
//
// Protocol:
//   1. spawn: new_entry() (refs 1: the set's), the task spawned, insert():
//      the entry joins all_ (owner only), takes a reference for its waker and
//      registers it (join_handle_register). If the task completed first, the
//      registration fails (the runtime drops the waker) and insert() puts the
//      entry in the ready list itself.
//   2. completion (any thread): wake_by_ref(entry) -> finish(): under lock_,
//      an entry still kRunning moves to the tail of the ready list (kReady)
//      and ready_count_ goes up; then the waiting join_next()'s waker, if
//      armed, is woken (outside the lock). An entry already kGone (detached)
//      is left alone. The runtime then drops the waker, now or when the set
//      drops the JoinHandle reference (task_state.hpp, rule 3): the entry's
//      waker reference goes.
//   3. join_next / try_join_next (owner): pop_ready() takes the oldest ready
//      entry (kGone), leaves all_, drops the set's entry reference and hands
//      back the task; the typed code takes the output and drops the
//      JoinHandle reference (join_handle_drop).
//   4. detach_all / destruction (owner): every entry marked kGone (out of
//      the ready list if it was there), its JoinHandle reference dropped (a
//      running task is detached; the runtime takes its waker back, or drops
//      it after a completion in progress), the set's entry reference dropped.
//
// Lifetimes (who keeps what alive):
//  - an entry: the set's reference (from spawn until its result is taken or
//    it is detached) and its waker's (from registration until the runtime or
//    the JoinHandle side drops the waker). A completing thread that is inside
//    wake_by_ref holds the waker, so the entry cannot go under it.
//  - the core: the JoinSet's reference (until it is destroyed) and one per
//    entry alive. So a task finishing on another worker while the set is
//    destroyed still finds the lock, the lists and the waker: the core goes
//    with the last entry, after the last wake.
//
// No lost wake-up: finish() publishes the entry (ready_count_, release)
// before AtomicWaker::wake(); join_next() arms the waker, then re-checks
// ready_count_ (AtomicWaker's Dekker pair), and its readiness check tests
// ready_count_, so a poll for any other reason does not resume it early.
//
// Order: the ready list is FIFO in the order finish() ran, i.e. the order the
// tasks completed (the lock orders two completions racing each other).
#include <mutex>
#include <new>

#include "volt/detail/frame_allocator.hpp"
#include "volt/task/join_set.hpp"

namespace volt::detail {

namespace {

// The join waker of a JoinSet task: data is its entry; a copy is a reference.
void* entry_waker_clone(void* data) noexcept {
  // relaxed: the caller already holds a reference (as shared_ptr's copy).
  static_cast<JoinSetEntry*>(data)->refs.fetch_add(1, std::memory_order_relaxed);
  return data;
}
void entry_waker_wake_by_ref(void* data) noexcept {
  auto* entry = static_cast<JoinSetEntry*>(data);
  entry->core->finish(entry);
}
void entry_waker_drop(void* data) noexcept {
  JoinSetCore::release_entry(static_cast<JoinSetEntry*>(data));
}
void entry_waker_wake(void* data) noexcept {
  entry_waker_wake_by_ref(data);
  entry_waker_drop(data);
}

constexpr WakerVTable kEntryWakerVTable{&entry_waker_clone, &entry_waker_wake,
                                        &entry_waker_wake_by_ref, &entry_waker_drop};

}  // namespace

JoinSetCore* JoinSetCore::create() {
  return new JoinSetCore();
}

void JoinSetCore::release() noexcept {
  // acq_rel: the last holder sees every other holder's accesses before it
  // deletes (the same argument as shared_ptr).
  if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
}

JoinSetEntry* JoinSetCore::new_entry() {
  void* block = frame_allocate(sizeof(JoinSetEntry));
  // relaxed: the owner holds the set's reference.
  refs_.fetch_add(1, std::memory_order_relaxed);
  return ::new (block) JoinSetEntry(this);
}

void JoinSetCore::discard(JoinSetEntry* entry) noexcept {
  release_entry(entry);
}

void JoinSetCore::release_entry(JoinSetEntry* entry) noexcept {
  // acq_rel: as in release().
  if (entry->refs.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  JoinSetCore* core = entry->core;
  entry->~JoinSetEntry();
  frame_deallocate(entry, sizeof(JoinSetEntry));
  core->release();
}

void JoinSetCore::insert(JoinSetEntry* entry, TaskHeader* task) noexcept {
  entry->task = task;
  all_.push_back(entry);
  // The waker's reference. relaxed: we hold the set's.
  entry->refs.fetch_add(1, std::memory_order_relaxed);
  if (join_handle_register(task, Waker(&kEntryWakerVTable, entry))) return;
  // Completed before the registration (the waker was dropped): ready now,
  // exactly as if its waker had run (the set's reference keeps entry and
  // core alive). finish() also wakes: a join_next() of this same task may be
  // armed in a sibling branch of a select or join whose other branch is
  // spawning (the branches are polled once per wake-up).
  finish(entry);
}

void JoinSetCore::finish(JoinSetEntry* entry) noexcept {
  {
    std::lock_guard guard(lock_);
    if (entry->place != JoinSetEntry::Place::kRunning) return;  // detached
    entry->place = JoinSetEntry::Place::kReady;
    entry->ready_prev = ready_tail_;
    entry->ready_next = nullptr;
    (ready_tail_ ? ready_tail_->ready_next : ready_head_) = entry;
    ready_tail_ = entry;
    // release: pairs with has_ready()'s acquire, so a join_next() that sees
    // the count sees the entry linked (it takes the lock to pop it anyway).
    ready_count_.fetch_add(1, std::memory_order_release);
  }
  // Outside the lock (a waker never runs under one). Our entry reference
  // (the waker's) keeps the core alive through this call.
  waker_.wake();
}

void JoinSetCore::remove_locked(JoinSetEntry* entry) noexcept {
  if (entry->place == JoinSetEntry::Place::kReady) {
    (entry->ready_prev ? entry->ready_prev->ready_next : ready_head_) = entry->ready_next;
    (entry->ready_next ? entry->ready_next->ready_prev : ready_tail_) = entry->ready_prev;
    entry->ready_prev = entry->ready_next = nullptr;
    // relaxed: only the owner decrements, under the lock; a stale higher
    // count seen by the readiness check is re-checked under the lock by
    // pop_ready (the owner's own thread: program order).
    ready_count_.fetch_sub(1, std::memory_order_relaxed);
  }
  entry->place = JoinSetEntry::Place::kGone;
}

TaskHeader* JoinSetCore::pop_ready() noexcept {
  JoinSetEntry* entry = nullptr;
  {
    std::lock_guard guard(lock_);
    entry = ready_head_;
    if (!entry) return nullptr;
    remove_locked(entry);
  }
  all_.remove(entry);
  TaskHeader* task = entry->task;
  release_entry(entry);  // the set's reference
  return task;
}

void JoinSetCore::abort_all() noexcept {
  for (JoinSetEntry* e = all_.front(); e; e = IntrusiveList<JoinSetEntry>::next(e))
    join_handle_abort(e->task);
}

void JoinSetCore::detach_all() noexcept {
  while (JoinSetEntry* entry = all_.pop_front()) {
    {
      std::lock_guard guard(lock_);
      remove_locked(entry);
    }
    // Detaches the task (or drops a finished one's output, reporting an
    // exception nobody took); the runtime takes back or drops the waker.
    join_handle_drop(entry->task);
    release_entry(entry);  // the set's reference
  }
}

}  // namespace volt::detail
