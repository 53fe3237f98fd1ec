// volt/detail/task_header.hpp: the type-independent part of a spawned task,
// the scheduler interface it is submitted to, and the per-thread context.
//
// A spawned task is one TaskCell<T> (task_cell.hpp): this header, followed by
// the output slot. The header is what queues, wakers and join handles point at;
// its fields and who may touch them:
//
//   state         atomic; see task_state.hpp
//   vtable        immutable after spawn
//   scheduler     immutable after spawn
//   queue_next    link in an InjectQueue; owned by whoever holds the queue
//                 entry's reference (the pusher, then the queue under its lock)
//   owned_prev/next, owned_linked
//                 links in OwnedTasks; guarded by that shard's lock
//   id            immutable after spawn
//   root          the spawned Task's coroutine frame; owner of kRunning only
//   resume        where the task continues (ResumeSlot below); written by
//                 the leaf awaiter that suspends (under kRunning), read by the
//                 next poll (under kRunning): the state word orders the two
//   join_waker    rule 3 of task_state.hpp
#pragma once

#include <atomic>
#include <coroutine>
#include <cstdint>
#include <exception>

#include "volt/detail/task_state.hpp"
#include "volt/detail/waker.hpp"
#include "volt/error.hpp"

namespace volt::detail {

struct TaskHeader;

// Where a suspended chain of coroutines continues, and the readiness test of
// the leaf awaiter it is suspended in. A task has one (TaskHeader::resume); a
// combinator that runs several chains inside one task (timeout, select) has
// one per chain (Branch, branch.hpp), and the leaf writes whichever slot is
// current on its thread (tls_context.slot).
//
// A poll resumes `point` only if `check` is null or passes, so a wake-up that
// finds the awaited condition false (a spurious or stale wake, a value taken
// by another receiver, another branch's wake) leaves the chain suspended
// instead of resuming an awaiter that is not ready. Every leaf that can be
// resumed only when ready must therefore supply a check; a null check means
// "resume on any wake" (yield_now). The check runs as part of the poll, with
// the task current, and may re-register wakers or drive nested chains.
struct ResumeSlot {
  std::coroutine_handle<> point;
  bool (*check)(void* context) noexcept = nullptr;
  void* context = nullptr;

  // Runs the check; if it passes, makes this the thread's current slot and
  // resumes `point`, following Task-to-Task transfers (the trampoline of
  // task.hpp) until the chain suspends again or ends. Returns whether it
  // resumed. Implemented in src/task/harness.cpp.
  bool poll() noexcept;
};

struct TaskVTable {
  // Moves the root frame's outcome into the output slot, destroys the frame.
  void (*finish)(TaskHeader*) noexcept;
  // Destroys the frame wherever it is suspended (running the destructors of
  // whatever it awaits) and records `reason` as the outcome.
  void (*cancel)(TaskHeader*, errc reason) noexcept;
  void (*drop_output)(TaskHeader*) noexcept;
  void (*dealloc)(TaskHeader*) noexcept;
};

// What a task is submitted to. Implemented by the multi-thread and the
// current-thread schedulers.
class Scheduler {
 public:
  // Takes the three initial references of a new task (whose `scheduler` the
  // caller set to this, with a lifetime reference: see spawn_on): binds it to
  // the owned list and queues it, or, if shut down, cancels it with
  // runtime_shutdown.
  virtual void spawn(TaskHeader* task) noexcept = 0;
  // Queues a woken task; the call owns the queue entry's reference.
  virtual void schedule(TaskHeader* task) noexcept = 0;
  // Queues a task that was woken during its own poll (a yield): it goes behind
  // the work already queued so that it cannot starve it.
  virtual void schedule_yield(TaskHeader* task) noexcept = 0;
  // Removes a completed task from the owned list. True if it was still there
  // (the caller then also drops the list's reference).
  virtual bool release(TaskHeader* task) noexcept = 0;
  // Takes `task`'s queue entry back from the calling thread's own queue if
  // it is where a removal is cheap (a worker's LIFO slot or the tail of its
  // local queue); the caller then holds the entry's reference. Used by a
  // join that polls the task in place (harness.cpp, join_inline). False
  // otherwise, changing nothing.
  virtual bool take_queued(TaskHeader* task) noexcept {
    (void)task;
    return false;
  }
  // Counts a poll that a join ran in place on the calling thread (which runs
  // this scheduler's tasks) in the statistics' polls.
  virtual void count_inline_poll() noexcept {}
  // Blocks a thread outside the runtime until `task` completes.
  virtual void block_until_complete(TaskHeader* task) = 0;
  virtual bool is_shutting_down() const noexcept = 0;
  // A task of this scheduler finished with exception `e` and no JoinHandle
  // can rethrow it any more (Runtime::Builder::on_unhandled_exception). Runs
  // on the thread that dropped the output: the completing poller, or the
  // thread that dropped the handle. Must not throw. The default prints the
  // line that a runtime without a hook prints (src/runtime/runtime.cpp).
  virtual void unhandled_exception(TaskHeader* task, std::exception_ptr e) noexcept;

  // Lifetime. The scheduler is freed when the last of these references goes:
  // one for its owners together (the Runtime, Handles and worker threads share
  // it through a shared_ptr whose deleter drops it), plus one per task cell
  // that exists (taken at spawn, dropped at the cell's deallocation). So
  // whatever holds a task (a JoinHandle, a waker) may still reach its
  // scheduler, e.g. a thread blocked in join() while the runtime is being
  // destroyed.
  void retain() noexcept {
    // relaxed: the caller already holds a reference (the owners' or a task's).
    lifetime_refs_.fetch_add(1, std::memory_order_relaxed);
  }
  void release_reference() noexcept { release_references(1); }

  // A task cell's reference (spawn_on takes it, TaskCell::dealloc drops it).
  // On a thread that holds credit on this scheduler (a worker thread: see
  // adopt_task_credit) it comes out of, and goes back into, the thread's
  // credit: references the thread took in advance, 64 at a time. Otherwise
  // retain() / release_reference(). (One shared counter RMW per spawn and
  // per deallocation bounced its line between the workers: 11% of fork_fib
  // at 2 workers.) src/runtime/scheduler/task_credit.cpp.
  void retain_for_task() noexcept;
  void release_for_task() noexcept;
  // The calling thread keeps credit on `scheduler` from now on, until
  // return_task_credit() hands what it holds back (a worker thread, at its
  // start and end). Credit is references: a thread that never returned it
  // would keep the scheduler allocated, never freed early.
  static void adopt_task_credit(Scheduler* scheduler) noexcept;
  static void return_task_credit() noexcept;

 protected:
  virtual ~Scheduler() = default;

 private:
  void release_references(std::uint64_t n) noexcept {
    // acq_rel: the last holder must see every other holder's accesses before
    // deleting (the same argument as shared_ptr).
    if (lifetime_refs_.fetch_sub(n, std::memory_order_acq_rel) == n) delete this;
  }
  // = 1 (the owners') + a reference per existing task cell + the credit
  // every thread holds (task_credit.cpp): each term is >= 0, so the count
  // reaches 0 only when the owners, every cell and every credit are gone.
  std::atomic<std::uint64_t> lifetime_refs_{1};
};

struct TaskHeader {
  explicit TaskHeader(const TaskVTable* vt, std::coroutine_handle<> frame) noexcept
      : vtable(vt), root(frame), resume{frame} {}

  TaskState state;
  const TaskVTable* vtable;
  Scheduler* scheduler = nullptr;
  TaskHeader* queue_next = nullptr;
  TaskHeader* owned_prev = nullptr;
  TaskHeader* owned_next = nullptr;
  std::uint64_t id = 0;
  bool owned_linked = false;
  std::coroutine_handle<> root;
  ResumeSlot resume;
  Waker join_waker;

  // --- wake-up entry points used by task wakers ---
  void wake_by_val() noexcept {
    switch (state.transition_to_notified_by_val()) {
      case TaskState::ToNotified::kSubmit:
        scheduler->schedule(this);
        break;
      case TaskState::ToNotified::kDealloc:
        vtable->dealloc(this);
        break;
      case TaskState::ToNotified::kDoNothing:
        break;
    }
  }
  void wake_by_ref() noexcept {
    if (state.transition_to_notified_by_ref() == TaskState::ToNotified::kSubmit)
      scheduler->schedule(this);
  }
  void drop_reference() noexcept {
    if (state.ref_dec()) vtable->dealloc(this);
  }
};

// Waker whose data is a TaskHeader holding one reference.
extern const WakerVTable kTaskWakerVTable;

inline Waker make_task_waker(TaskHeader* task) noexcept {
  task->state.ref_inc();
  return Waker(&kTaskWakerVTable, task);
}

// Per-thread runtime context. Trivially constructible: reading it costs one TLS
// access and no initialisation guard.
struct ThreadContext {
  Scheduler* scheduler;      // runtime this thread is running tasks for, if any
  void* worker;              // scheduler-private per-thread state (a Worker)
  TaskHeader* current_task;  // task being polled on this thread
  ResumeSlot* slot;          // where a suspending leaf records itself (see ResumeSlot)
  int budget;                // cooperative budget left in this poll
  // Runtime entered without running its tasks (a blocking-pool thread): what
  // Handle::current() and volt::spawn() use when `scheduler` is null.
  Scheduler* entered;
  // Set while a batch of wakes must run in the order it is made (due timers,
  // in deadline order, fired outside the driver: time::advance from a task
  // or the paused clock's auto-advance, both current-thread only): the
  // current-thread scheduler then queues them FIFO, not through its LIFO
  // slot, which would run the last one first. (A worker fires timers only
  // inside the driver, whose wakes it queues FIFO anyway.)
  bool in_order_wakes;
};
// The assembler name lets this_thread_context() below name it; initial-exec
// keeps it at a fixed offset from the thread pointer in every thread. (A
// libvolt loaded by dlopen() takes its 56 bytes from the static TLS that
// glibc keeps in reserve for such libraries.)
#if defined(__x86_64__) && defined(__ELF__) && defined(__GNUC__)
#define VOLT_DETAIL_FRESH_TLS 1
extern thread_local ThreadContext tls_context asm("volt_detail_tls_context")
    __attribute__((tls_model("initial-exec")));
#else
extern thread_local ThreadContext tls_context;
#endif

// This thread's ThreadContext, computed afresh on every call. Inlined into a
// coroutine body, a plain `&tls_context` may be computed once and reused
// after the coroutine resumed on another thread (GCC treats the thread
// pointer as constant within a function): the asm volatile re-reads the
// thread pointer (%fs:0) each time, and the variable's offset from it, the
// same in every thread, comes from the GOT. Where that is not available the
// access goes through a function call, which cannot be cached either.
#if VOLT_DETAIL_FRESH_TLS
inline ThreadContext* this_thread_context() noexcept {
  ThreadContext* ctx;
  asm volatile(
      "movq %%fs:0, %0\n\t"
      "addq volt_detail_tls_context@gottpoff(%%rip), %0"
      : "=r"(ctx));
  return ctx;
}
#else
ThreadContext* this_thread_context() noexcept;
#endif

inline constexpr int kCoopBudget = 128;

// Runs one poll of `task` (which the caller hands over with its queue
// reference). Implemented in src/task/harness.cpp.
void poll_task(TaskHeader* task) noexcept;
// Claims-and-cancels path of runtime shutdown for a task taken off the owned
// list (the caller hands over the list's reference).
void shutdown_task(TaskHeader* task) noexcept;

// Hands the exception of a task whose output nobody will read to its
// scheduler's unhandled_exception (or prints it when the task has no
// scheduler). Out of line and cold: only a dropped output holding an exception
// gets here. Implemented in src/task/harness.cpp.
[[gnu::cold]] void report_unhandled_exception(TaskHeader* task, std::exception_ptr e) noexcept;

// The task being polled on this thread; throws Error(no_runtime) outside one.
TaskHeader* current_task_or_throw();

// Records where the current chain is suspended and, optionally, the test that
// must pass before it is resumed (see ResumeSlot). Returns the current task,
// whose waker the caller registers with whatever it waits on.
inline TaskHeader* suspend_current(std::coroutine_handle<> suspended,
                                   bool (*check)(void*) noexcept = nullptr,
                                   void* context = nullptr) {
  TaskHeader* task = current_task_or_throw();
  ResumeSlot* slot = tls_context.slot;
  slot->point = suspended;
  slot->check = check;
  slot->context = context;
  return task;
}

}  // namespace volt::detail
