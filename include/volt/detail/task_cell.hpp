// volt/detail/task_cell.hpp: the allocation behind a spawned task.
//
// TaskCell<T> = TaskHeader + the output slot. The spawned Task<T>'s frame is a
// separate block from the same frame allocator; keeping the header outside the
// frame is what lets abort() and shutdown destroy the frame (running the
// destructors of whatever it awaits) while join handles and wakers still hold
// the header. Both blocks are recycled, so spawning does not reach malloc in
// steady state.
#pragma once

#include <new>

#include "volt/detail/frame_allocator.hpp"
#include "volt/detail/result.hpp"
#include "volt/detail/task_header.hpp"
#include "volt/task/task.hpp"

namespace volt::detail {

// The header is the base, so queues and wakers hold a TaskHeader* and the
// typed code gets back to the cell with a static_cast (no layout assumption).
template <class T>
struct TaskCell final : TaskHeader {
  Result<T> output;

  explicit TaskCell(typename Task<T>::Handle frame) noexcept : TaskHeader(&kVTable, frame) {}

  static TaskCell* from(TaskHeader* h) noexcept { return static_cast<TaskCell*>(h); }
  static typename Task<T>::Handle frame_of(TaskHeader* h) noexcept {
    return Task<T>::Handle::from_address(h->root.address());
  }

  static TaskHeader* create(Task<T>&& task) {
    void* block = frame_allocate(sizeof(TaskCell));
    return ::new (block) TaskCell(task.release());
  }

  static void finish(TaskHeader* h) noexcept {
    TaskCell* cell = from(h);
    auto frame = frame_of(h);
    try {
      cell->output.take_from(frame.promise().result());
    } catch (...) {
      // Only a throwing move constructor of T gets here.
      cell->output.set_exception(std::current_exception());
    }
    frame.destroy();
    h->root = {};
  }
  static void cancel(TaskHeader* h, errc reason) noexcept {
    if (h->root) {
      h->root.destroy();
      h->root = {};
    }
    from(h)->output.set_error(make_error_code(reason));
  }
  // Called when no JoinHandle will read the output (detached before or after
  // completion). An exception there is one nobody can observe: report it.
  static void drop_output(TaskHeader* h) noexcept {
    Result<T>& output = from(h)->output;
    if (output.kind() == Result<T>::Kind::kException) [[unlikely]] {
      report_unhandled_exception(h, output.take_exception());
      return;
    }
    output.reset();
  }
  static void dealloc(TaskHeader* h) noexcept {
    TaskCell* cell = from(h);
    if (h->root) h->root.destroy();  // a task that never ran (shutdown before poll)
    Scheduler* scheduler = h->scheduler;
    cell->~TaskCell();
    frame_deallocate(cell, sizeof(TaskCell));
    // The cell's reference on its scheduler (taken in spawn); may free it.
    if (scheduler) scheduler->release_for_task();
  }

  static constexpr TaskVTable kVTable{&finish, &cancel, &drop_output, &dealloc};
};

}  // namespace volt::detail
