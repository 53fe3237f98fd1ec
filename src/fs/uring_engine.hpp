// UringEngine: file operations on one io_uring instance per runtime.
//
// Ring ownership: one ring, shared by every worker of the runtime, with a
// mutex around submission and a try-lock around reaping. Not one ring per
// worker: a task migrates between workers (work stealing), so a per-worker
// ring's completion could find its task on another worker anyway, and a
// parked worker's ring would need a watcher of its own; with one ring, its
// descriptor sits in the driver's epoll set like a socket, so whichever
// worker holds the driver sees every completion and an idle runtime with
// files open uses no CPU. Submissions are rare on the hot path: reads the
// page cache can serve never reach the ring (file.hpp, step 1).
// docs/design.md ("Files", "One io_uring ring per runtime") records the
// measurements behind this.
//
// Who reaps: the submitter right after io_uring_enter (a request the kernel
// completes inline (a page-cache read, an open of a cached path) finishes
// before its task suspends), and the driver's holder when epoll reports the
// ring readable. Reaping is a try-lock: a thread that finds it taken leaves
// the work to the holder, which loops until the completion queue is empty
// after releasing the lock, so no completion is left behind.
//
// Refused submissions: io_uring_enter may take none or only some of the
// queued requests (EAGAIN: no memory for a request; EBUSY: overflowed
// completions not yet reaped). A queued request cannot be taken back and
// given to the pool, so the submitter that saw the refusal retries, reaping
// between tries and backing off to 1 ms sleeps, until the kernel has taken
// the whole queue: its worker waits as on a full pipe for as long as the
// kernel refuses.
//
// Reads and writes at the cursor go to the blocking pool (see submit() for
// the kernel behaviour that rules io_uring out for them); positional ones,
// opens of existing files, statx, fsync and the whole-file read chain use
// the ring.
//
// Linked chains: a whole-file read is open -> read -> close on a registered
// ("direct") descriptor slot, submitted together: one io_uring_enter for all
// three. The read asks for kChainReadSize bytes; a larger file is then read
// by one blocking-pool job (open, fstat, read, close).
//
// Opens that create or truncate (and so whole-file writes, which always
// create) go to the blocking pool: io_uring never tries them inline but
// hands each to an io-wq thread, the same hop, and the pool's thread stays
// awake for the next job where io-wq's sleeps (fs_write_small at 1 worker:
// 1.42-1.50 times Tokio's time through the ring, 1.03-1.04 through the pool).
//
// Lifetime: each request's user_data is its FileOp (tagged with the step of
// a chain in its low bits); the engine holds a reference on the op from
// submission to its last completion, so the buffer, path and statx the
// kernel uses outlive the request even if the task was cancelled.
// shutdown() waits for every completion (until the runtime's deadline); if
// requests remain after it, their ops are deliberately leaked with the ring's
// memory, since the kernel may still write into them.
#pragma once

#include "fs/engine.hpp"

namespace volt::fs::detail {

// Probes io_uring (setup refused with ENOSYS/EPERM, e.g. the
// kernel.io_uring_disabled sysctl or a seccomp filter; a missing opcode) and
// returns nullptr when it is unavailable, never an error.
FileEngine* make_uring_engine(volt::detail::Driver& driver, volt::detail::BlockingPool& pool);

// Tests only: the next `count` submissions to any ring (io_uring_enter)
// are refused with `error` (EAGAIN, EBUSY, ...) without reaching the kernel,
// as the kernel refuses them under memory pressure or a completion-queue
// overflow; the requests stay queued in the ring.
void inject_submit_failures_for_testing(int count, int error) noexcept;

// Tests only: the next `count` whole-file reads' linked chains (open, read,
// close) run as a chain the kernel split can: the read and the close before
// the open (the read finds no file, and the open fills the slot last), their
// completions in that order. The kernel splits a chain when it cannot
// allocate a request part-way through a submission, which cannot be made
// to happen at will.
void run_read_chains_out_of_order_for_testing(int count) noexcept;

// Bytes the read of a linked whole-file chain asks for.
inline constexpr std::size_t kChainReadSize = 64 * 1024;

}  // namespace volt::fs::detail
