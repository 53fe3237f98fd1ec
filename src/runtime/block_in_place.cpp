// block_in_place (include/volt/task/block_in_place.hpp): the context switch
// around fn. The hand-off of the worker itself is the scheduler's
// (MultiThreadScheduler::hand_off_worker).
#include "volt/task/block_in_place.hpp"

#include "runtime/runtime_core.hpp"

namespace volt::detail {

BlockInPlaceScope::BlockInPlaceScope() : saved_(tls_context), kept_worker_(tls_context.worker) {
  ThreadContext& ctx = tls_context;
  if (!ctx.scheduler) return;  // a plain or blocking-pool thread: fn just runs
  // A runtime thread: a worker (hand it off), the current-thread flavour's
  // thread (throws), or a thread in block_on helping (nothing to hand off).
  static_cast<RuntimeCore*>(ctx.scheduler)->hand_off_worker();
  // nullptr if the worker went to another thread (or there was none, on a
  // helper); still ours if the scheduler kept it here (shutting down).
  kept_worker_ = ctx.worker;
  // Kept: fn is an ordinary long poll of this worker, in its context
  // (blocking inside it is refused, as it must be: no other thread runs this
  // worker's queue, and a shutdown from inside it must see its own worker).
  if (kept_worker_) return;
  // Otherwise the thread is a blocking one while fn runs (blocking-pool
  // threads have the same context): spawn and Handle::current() see
  // `entered`, and join/block_on, which refuse threads with a scheduler, are
  // allowed.
  ctx.entered = ctx.scheduler;
  ctx.scheduler = nullptr;
  ctx.worker = nullptr;
}

BlockInPlaceScope::~BlockInPlaceScope() {
  // Back to the task's poll: its scheduler (spawn goes there, blocking is
  // refused again) and the poll's own state, which a block_on inside fn may
  // have used for the tasks it helped with. The worker only if it stayed
  // here: once it went to another thread, the rest of this poll schedules
  // wake-ups through the inject queue, and Worker::run sees it gone.
  ThreadContext restored = saved_;
  restored.worker = kept_worker_;
  tls_context = restored;
}

}  // namespace volt::detail
