// Harness: the type-independent steps of polling, completing, cancelling and
// joining a spawned task (the state machine lives in task_state.hpp; this file
// is the code that acts on each transition's outcome).
//
// One poll:
//   1. transition_to_running. Cancelled (aborted while queued) -> step 5.
//   2. Install the task as this thread's current task, refill the cooperative
//      budget, and, if the suspended leaf's readiness test passes (or it has
//      none), resume the innermost suspended coroutine (ResumeSlot::poll).
//   3. Root frame done -> move the outcome into the output slot, destroy the
//      frame, complete (step 6).
//   4. Otherwise transition_to_idle: woken during the poll -> back to the queue
//      (behind the work there, as a yield); cancelled during the poll -> 5.
//   5. Cancel: destroy the frame where it is suspended, record the reason.
//   6. Complete: leave the owned list, publish kComplete, wake the join waiter
//      or drop the output if nobody will read it, drop the poll's references.
//
// An inline poll (join_inline, task_state.hpp "Inline polls") replaces step 1
// by transition_to_running_inline and step 2's budget refill by the awaiting
// task's remaining budget; steps 3 to 6 are the same.
#include <cassert>
#include <utility>

#include "runtime/blocking/blocking_pool.hpp"
#include "runtime/unhandled_exception.hpp"
#include "volt/detail/task_cell.hpp"
#include "volt/detail/task_header.hpp"
#include "volt/task/join_handle.hpp"

namespace volt::detail {

thread_local ThreadContext tls_context{};
thread_local std::coroutine_handle<> tls_resume_next{};

// Steps 3 to 6: everything after the resume, for a poll that holds kRunning
// and one reference (a queue entry's, or an inline poll's own).
void end_poll(TaskHeader* task) noexcept;

namespace {

void* task_waker_clone(void* data) noexcept {
  static_cast<TaskHeader*>(data)->state.ref_inc();
  return data;
}
void task_waker_wake(void* data) noexcept {
  static_cast<TaskHeader*>(data)->wake_by_val();
}
void task_waker_wake_by_ref(void* data) noexcept {
  static_cast<TaskHeader*>(data)->wake_by_ref();
}
void task_waker_drop(void* data) noexcept {
  static_cast<TaskHeader*>(data)->drop_reference();
}

// Step 6. The caller holds `refs` references that end with this poll: the
// poll's own, plus the owned list's when the caller took the task off the list.
void complete(TaskHeader* task, TaskState::Word refs) noexcept {
  // Leave the owned list first, so that whoever the completion wakes sees the
  // task gone from it (stats, shutdown). Shutdown cannot claim the task in
  // between: we hold kRunning.
  if (task->scheduler->release(task)) ++refs;
  TaskState::Snapshot snapshot = task->state.transition_to_complete();
  if (!snapshot.is_join_interested()) {
    // No JoinHandle will read the output; destroying it is our job.
    task->vtable->drop_output(task);
  } else {
    // On a blocking-pool thread, nothing of the job's is left to run here
    // but the wake-up below (the output waits for the JoinHandle).
    if (tls_context.entered != nullptr) [[unlikely]]
      blocking_job_completing(task);
    if (snapshot.is_join_waker_set()) {
      task->join_waker.wake_by_ref();
      // Hand the waker back to the JoinHandle side; if the handle was dropped
      // meanwhile, it left the waker to us (rule 3 in task_state.hpp).
      if (!task->state.unset_waker_after_complete().is_join_interested()) task->join_waker.reset();
    }
  }
  if (task->state.transition_to_terminal(refs)) task->vtable->dealloc(task);
}

errc cancel_reason(TaskHeader* task) noexcept {
  return task->scheduler->is_shutting_down() ? errc::runtime_shutdown : errc::cancelled;
}

class CurrentTaskScope {
 public:
  explicit CurrentTaskScope(TaskHeader* task) noexcept
      : saved_task_(tls_context.current_task),
        saved_slot_(tls_context.slot),
        saved_budget_(tls_context.budget) {
    tls_context.current_task = task;
    tls_context.slot = &task->resume;
    tls_context.budget = kCoopBudget;
  }
  ~CurrentTaskScope() {
    tls_context.current_task = saved_task_;
    tls_context.slot = saved_slot_;
    tls_context.budget = saved_budget_;
  }

 private:
  TaskHeader* saved_task_;
  ResumeSlot* saved_slot_;
  int saved_budget_;
};

}  // namespace

bool ResumeSlot::poll() noexcept {
  if (check && !check(context)) return false;
  check = nullptr;
  ResumeSlot* saved = std::exchange(tls_context.slot, this);
  // The trampoline of task.hpp: each transfer between awaiting tasks leaves
  // the next coroutine in tls_resume_next. A nested poll (a branch driven from
  // inside a check or an await_suspend) drains it completely before
  // returning, so the outer loop never sees the inner chain's transfers.
  std::coroutine_handle<> next = point;
  do {
    next.resume();
    next = std::exchange(tls_resume_next, {});
  } while (next);
  tls_context.slot = saved;
  return true;
}

const WakerVTable kTaskWakerVTable{&task_waker_clone, &task_waker_wake, &task_waker_wake_by_ref,
                                   &task_waker_drop};

// Step 1 for a caller holding the task's queue entry: true if the caller now
// holds kRunning and polls; false if there is nothing to poll (cancelled and
// completed here, claimed elsewhere, or complete; the entry's reference is
// consumed either way).
bool start_poll(TaskHeader* task) noexcept {
  switch (task->state.transition_to_running()) {
    case TaskState::ToRunning::kSuccess:
      return true;
    case TaskState::ToRunning::kCancelled:
      task->vtable->cancel(task, cancel_reason(task));
      complete(task, 1);
      return false;
    case TaskState::ToRunning::kFailed:
      return false;
    case TaskState::ToRunning::kDealloc:
      task->vtable->dealloc(task);
      return false;
  }
  return false;
}

void poll_task(TaskHeader* task) noexcept {
  if (!start_poll(task)) return;
  {
    CurrentTaskScope scope(task);
    task->resume.poll();
  }
  end_poll(task);
}

void end_poll(TaskHeader* task) noexcept {
  if (task->root.done()) {
    task->vtable->finish(task);
    complete(task, 1);
    return;
  }
  switch (task->state.transition_to_idle()) {
    case TaskState::ToIdle::kOk:
      return;
    case TaskState::ToIdle::kOkNotified:
      task->scheduler->schedule_yield(task);
      return;
    case TaskState::ToIdle::kOkDealloc:
      task->vtable->dealloc(task);
      return;
    case TaskState::ToIdle::kCancelled:
      task->vtable->cancel(task, cancel_reason(task));
      complete(task, 1);
      return;
  }
}

namespace {

// How many inline polls may nest on one thread (a child polled inline awaits
// its own children inline, and so on). Each level costs a few hundred bytes
// of the thread's stack (await_suspend, join_inline, the resume loop); 64
// levels cover a binary fork-join tree of 2^64 leaves at depth, and a deeper
// chain simply waits for its children the ordinary way below that.
constexpr int kMaxInlineDepth = 64;
thread_local int tls_inline_depth = 0;

// The awaiting task's context swapped for the child's during an inline poll.
// The cooperative budget is not refilled: the child spends what the awaiting
// poll has left, so that a loop of spawn-and-join still yields every
// kCoopBudget joins, as it does when each join waits.
class InlinePollScope {
 public:
  explicit InlinePollScope(TaskHeader* task) noexcept
      : saved_task_(tls_context.current_task), saved_slot_(tls_context.slot) {
    tls_context.current_task = task;
    tls_context.slot = &task->resume;
    ++tls_inline_depth;
  }
  ~InlinePollScope() {
    --tls_inline_depth;
    tls_context.current_task = saved_task_;
    tls_context.slot = saved_slot_;
  }

 private:
  TaskHeader* saved_task_;
  ResumeSlot* saved_slot_;
};

}  // namespace

bool join_inline(TaskHeader* task) noexcept {
  ThreadContext& ctx = tls_context;
  // Only inside a task, on a thread that runs this task's scheduler (its
  // worker or its current-thread loop, or a helping block_on): the child
  // must run where its runtime runs it.
  if (!ctx.current_task || ctx.scheduler != task->scheduler) return false;
  if (tls_inline_depth >= kMaxInlineDepth || ctx.budget <= 0) return false;
  // Once shutdown began, queued tasks are the shutdown's to cancel, and no
  // worker polls them any more: neither do we.
  if (task->scheduler->is_shutting_down()) return false;
  if (task->scheduler->take_queued(task)) {
    // Its queue entry is ours now: an ordinary poll (step 1 as from a queue),
    // only here. Step 1 cannot free the cell: the JoinHandle holds a reference.
    if (!start_poll(task)) {
      return task->state.load().is_complete();
    }
  } else if (!task->state.transition_to_running_inline()) {
    return false;
  }
  --ctx.budget;  // the join's own unit, as a join that finds the task done
  task->scheduler->count_inline_poll();
  {
    InlinePollScope scope(task);
    task->resume.poll();
  }
  // The JoinHandle's reference keeps the cell alive past end_poll.
  end_poll(task);
  return task->state.load().is_complete();
}

void shutdown_task(TaskHeader* task) noexcept {
  // The caller took the task off the owned list and hands us that reference.
  if (task->state.transition_to_shutdown()) {
    task->vtable->cancel(task, errc::runtime_shutdown);
    complete(task, 1);
  } else {
    // Running (its poller cancels it when the poll ends) or already complete.
    task->drop_reference();
  }
}

TaskHeader* current_task_or_throw() {
  TaskHeader* task = tls_context.current_task;
  if (!task) throw Error(errc::no_runtime, "awaiting a runtime operation outside a runtime task");
  return task;
}

bool coop_try_consume_slow() noexcept {
  // Reached with no budget left (coop_try_consume spends a positive one).
  // Outside a task (no budget installed) there is nothing to be fair to.
  return tls_context.current_task == nullptr;
}

#if !VOLT_DETAIL_FRESH_TLS
ThreadContext* this_thread_context() noexcept {
  return &tls_context;
}
#endif

bool coop_budget_spent() noexcept {
  return tls_context.current_task != nullptr && tls_context.budget <= 0;
}

void yield_current(std::coroutine_handle<> suspended) {
  yield_current(suspended, nullptr, nullptr);
}

void yield_current(std::coroutine_handle<> suspended, bool (*check)(void*) noexcept,
                   void* context) {
  TaskHeader* task = suspend_current(suspended, check, context);
  // We hold kRunning: this only sets kNotified, and the end of the poll
  // re-queues the task through schedule_yield (behind queued work).
  task->wake_by_ref();
}

// ---- JoinHandle operations ----

void join_handle_drop(TaskHeader* task) noexcept {
  // Detached while still running (the common case of a dropped handle).
  if (task->state.drop_join_handle_fast()) return;
  TaskState::JoinHandleDropped dropped = task->state.transition_to_join_handle_dropped();
  if (dropped.drop_output) task->vtable->drop_output(task);
  if (dropped.drop_waker) task->join_waker.reset();
  task->drop_reference();
}

bool join_handle_register(TaskHeader* task, Waker waker) {
  TaskState::Snapshot snapshot = task->state.load();
  if (snapshot.is_join_waker_set()) {
    // A wait withdrawn by an aborted awaiter left a waker; take it back first.
    if (!task->state.unset_join_waker()) return false;  // completed meanwhile
  }
  task->join_waker = std::move(waker);  // drops any waker left from before
  if (task->state.set_join_waker()) return true;
  task->join_waker.reset();  // completed before we published: still ours
  return false;
}

void join_handle_withdraw(TaskHeader* task) noexcept {
  if (task->state.unset_join_waker()) {
    task->join_waker.reset();
    return;
  }
  // Completed. While kJoinWaker is still set the completing thread owns the
  // waker; it hands it back (bit cleared) and the JoinHandle's destructor or
  // its next wait releases it.
  if (!task->state.load().is_join_waker_set()) task->join_waker.reset();
}

void join_handle_abort(TaskHeader* task) noexcept {
  if (task->state.transition_to_notified_and_cancel()) task->scheduler->schedule(task);
}

void join_handle_block(TaskHeader* task) {
  if (tls_context.scheduler)
    throw Error(errc::blocking_in_runtime, "JoinHandle::join called on a runtime thread");
  if (!task->state.load().is_complete()) task->scheduler->block_until_complete(task);
}

// ---- Unhandled exceptions ----

void report_unhandled_exception(TaskHeader* task, std::exception_ptr e) noexcept {
  // Every spawned cell has a scheduler (spawn_on); without one, print.
  if (task->scheduler) {
    task->scheduler->unhandled_exception(task, std::move(e));
  } else {
    deliver_unhandled_exception(nullptr, task->id, false, std::move(e));
  }
}

}  // namespace volt::detail
