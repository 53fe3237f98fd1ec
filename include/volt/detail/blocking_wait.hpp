// volt/detail/blocking_wait.hpp: what the *_blocking forms of the template
// primitives (channels) need to wait on a plain thread: the calling thread's
// parker, reachable from a header (the parker itself is private to src/).
#pragma once

#include "volt/detail/waker.hpp"

namespace volt::detail {

// Throws volt::Error(errc::blocking_in_runtime, what) on a runtime thread,
// where blocking would stall the worker that the awaited work may need.
void check_blocking_allowed(const char* what);
// A waker that unparks the calling thread.
Waker current_thread_waker();
// Sleeps until the calling thread's waker is woken; a wake-up that came
// first makes it return at once. Spurious returns are possible: re-check.
void park_current_thread() noexcept;
// Makes the calling thread's parker if it has none yet (its first use
// allocates it). Handle::block_on calls it before it spawns: made later, in
// join(), the allocation would fall inside the task's run, which may already
// be underway on a worker (and inside what an allocation count measures).
void make_current_thread_parker();

}  // namespace volt::detail
