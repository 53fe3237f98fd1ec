// The task cells' lifetime references on their scheduler, taken in advance
// by worker threads (Scheduler::retain_for_task, volt/detail/task_header.hpp).
//
// Scheduler::lifetime_refs_ = 1 (the owners') + one per existing task cell
// + the credit each thread holds. A worker thread takes 64 references at
// once (one RMW), hands one to each cell spawned on it, and takes one back
// from each cell deallocated on it; past 128 it returns 64. A cell spawned
// on one thread and freed on another moves a reference from the first's
// credit to the second's, or to the shared count (a thread without credit
// releases with an RMW): every term stays >= 0, so the count cannot reach
// 0 while a cell exists, and a thread's credit never frees the scheduler
// while the thread runs on it (its worker's reference to the owners keeps
// the owners' term). What a thread holds goes back at return_task_credit(),
// which may free the scheduler (the owners may all be gone by then).
#include <cstdint>

#include "volt/detail/task_header.hpp"

namespace volt::detail {
namespace {

struct TaskCredit {
  Scheduler* owner = nullptr;  // the scheduler the credit is on, or none
  std::uint64_t held = 0;      // references held, not yet handed to a cell
};
thread_local TaskCredit tls_task_credit;

constexpr std::uint64_t kCreditBatch = 64;  // a guess: one shared RMW per 64 spawns

}  // namespace

void Scheduler::retain_for_task() noexcept {
  TaskCredit& credit = tls_task_credit;
  if (credit.owner != this) {
    retain();
    return;
  }
  if (credit.held == 0) {
    // relaxed: as retain(): this thread already holds a reference (its
    // worker's, through the owners').
    lifetime_refs_.fetch_add(kCreditBatch, std::memory_order_relaxed);
    credit.held = kCreditBatch;
  }
  --credit.held;
}

void Scheduler::release_for_task() noexcept {
  TaskCredit& credit = tls_task_credit;
  if (credit.owner != this) {
    release_reference();
    return;
  }
  if (++credit.held > 2 * kCreditBatch) {
    credit.held -= kCreditBatch;
    release_references(kCreditBatch);  // not the last: the credit left is > 0
  }
}

void Scheduler::adopt_task_credit(Scheduler* scheduler) noexcept {
  return_task_credit();
  tls_task_credit.owner = scheduler;
}

void Scheduler::return_task_credit() noexcept {
  TaskCredit& credit = tls_task_credit;
  Scheduler* owner = credit.owner;
  const std::uint64_t held = credit.held;
  credit = TaskCredit{};
  if (owner != nullptr && held != 0) owner->release_references(held);
}

}  // namespace volt::detail
