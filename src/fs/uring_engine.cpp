#include "fs/uring_engine.hpp"

#if VOLT_HAVE_LIBURING

#include <fcntl.h>
#include <liburing.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <new>
#include <thread>
#include <vector>

#include "io/driver.hpp"
#include "volt/detail/spin_lock.hpp"

namespace volt::fs::detail {

namespace {

constexpr unsigned kRingEntries = 256;
constexpr unsigned kDirectSlots = 64;

// inject_submit_failures_for_testing: submissions still to refuse, and with
// which error.
std::atomic<int> g_submit_faults{0};
std::atomic<int> g_submit_fault_errno{EAGAIN};
// run_read_chains_out_of_order_for_testing: whole-file chains still to
// submit as a split chain can run.
std::atomic<int> g_reordered_chains{0};

// user_data: the op's address with the step of a chain in the low two bits
// (FileOp is at least 8-aligned).
std::uint64_t tag(FileOp* op, unsigned step) noexcept {
  return reinterpret_cast<std::uint64_t>(op) | step;
}
FileOp* untag(std::uint64_t data, unsigned& step) noexcept {
  step = static_cast<unsigned>(data & 3);
  return reinterpret_cast<FileOp*>(data & ~std::uint64_t{3});
}

// io_uring_queue_exit, with the descriptor closed by ::close: liburing closes
// it with a raw system call that ThreadSanitizer does not see, so TSan took
// the next descriptor given that number (a test listing /proc/self/fd) for
// the ring's and reported a race.
void close_ring(io_uring& ring) noexcept {
  const int fd = ring.ring_fd;
  ring.ring_fd = -1;  // io_uring_queue_exit's own close is then a harmless EBADF
  io_uring_queue_exit(&ring);
  ::close(fd);
}

class UringEngine final : public FileEngine, public volt::detail::CompletionSource {
 public:
  UringEngine(volt::detail::Driver& driver, volt::detail::BlockingPool& pool, io_uring& ring,
              bool direct_slots)
      : driver_(driver), pool_(pool), ring_(ring), direct_slots_(direct_slots) {
    if (direct_slots) {
      for (unsigned i = kDirectSlots; i-- > 0;)
        free_slots_.push_back(static_cast<int>(i));
    }
  }

  ~UringEngine() override {
    driver_.unwatch_completions(ring_.ring_fd);
    // After shutdown(): a request still in flight keeps its op (leaked on
    // purpose, see the header); closing the ring cancels it in the kernel.
    close_ring(ring_);
  }

  bool start() noexcept { return !driver_.watch_completions(ring_.ring_fd, this); }

  bool uses_io_uring() const noexcept override { return true; }

  // acquire: pairs with done_with()'s release decrement, made before the
  // op's finish() wakes its task (the current-thread scheduler then sees
  // the task runnable, or the count above 0).
  std::uint64_t in_flight() const noexcept override {
    return in_flight_.load(std::memory_order_acquire);
  }

  void submit(FileOp* op) noexcept override {
    switch (op->kind) {
      case OpKind::kFtruncate:  // opcodes only from Linux 6.9, or none
      case OpKind::kFchmod:
      case OpKind::kDup:
        run_on_pool(pool_, op);
        return;
      case OpKind::kWriteFile:  // always O_CREAT
        run_on_pool(pool_, op);
        return;
      case OpKind::kOpen:
        // io_uring never tries these inline (they would block on the
        // directory's lock and the inode allocation): it hands them to an
        // io-wq thread, a hop like the pool's. The pool's thread is the one
        // that stays awake for the next job (blocking_pool.hpp), so a task
        // creating files one after another does not wake an idle thread on
        // an idle CPU for each (fs_write_small, docs/design.md).
        if (op->flags & (O_CREAT | O_TRUNC | __O_TMPFILE)) {
          run_on_pool(pool_, op);
          return;
        }
        break;
      case OpKind::kReadFile:
        // A FIFO or device already open (whole_file.cpp): waiting for its
        // input is the pool's (run_blocking), not a ring's.
        // Without registered slots (a kernel before 5.19, or a descriptor
        // limit below kDirectSlots) there is no chain: the pool reads it.
        if (op->opened_fd >= 0 || !direct_slots_) {
          run_on_pool(pool_, op);
          return;
        }
        // The chain's read needs its buffer: sized here, outside the
        // submission mutex and its noexcept, with the pool (whose read
        // reports ENOMEM) as the way out when memory is short.
        try {
          op->buffer.resize(kChainReadSize);
        } catch (const std::bad_alloc&) {
          run_on_pool(pool_, op);
          return;
        }
        break;
      case OpKind::kRead:
      case OpKind::kWrite:
        // At the cursor (offset -1): the pool's read(2)/write(2). io_uring
        // does not move the cursor past a short write that ends in an error
        // (seen on Linux 6.18: a 100 KiB write under a 40 KiB RLIMIT_FSIZE
        // returns 40960 and leaves the offset at 0, so the next write lands
        // on the same bytes and a BufWriter's retry overwrites its own data;
        // FileFaultTest.FailedFlushKeepsExactlyTheUnwrittenBytes). Positional
        // calls carry their offset and are not affected.
        if (op->offset < 0) {
          run_on_pool(pool_, op);
          return;
        }
        break;
      default:
        break;
    }
    op->retain();  // the engine's, until the op's last completion
    // relaxed: a count (see in_flight_).
    in_flight_.fetch_add(1, std::memory_order_relaxed);
    driver_.add_pending(1);
    bool queued;
    bool left_queued = false;
    {
      std::lock_guard guard(submit_mutex_);
      queued = prepare(op);
      if (queued) left_queued = !enter();
    }
    if (!queued) {
      // No room in the submission queue or no free descriptor slot: the
      // blocking pool does it (rare: 256 entries, 64 slots).
      run_on_pool(pool_, op);  // first: it takes its reference before we drop ours
      done_with(op, /*finished=*/false);
      return;
    }
    reap();
    if (left_queued) submit_until_taken();
  }

  void reap() noexcept override {
    for (;;) {
      if (!reap_lock_.try_lock()) return;  // the holder loops until empty
      unsigned seen = 0;
      io_uring_cqe* cqe;
      unsigned head;
      io_uring_for_each_cqe(&ring_, head, cqe) {
        // On kernels without IORING_FEAT_EXT_ARG (before 5.11), shutdown()'s
        // io_uring_wait_cqe_timeout queues a timeout request whose
        // completion carries this tag; liburing skips it only in its own
        // peek, and it is no FileOp.
        if (cqe->user_data != LIBURING_UDATA_TIMEOUT) on_completion(cqe->user_data, cqe->res);
        ++seen;
      }
      io_uring_cq_advance(&ring_, seen);
      // Completions posted while the queue was full (more than its 512
      // entries at once) wait on the kernel's overflow list until an enter
      // with GETEVENTS moves them in. Nothing else would: the ring's
      // readiness is watched edge-triggered, and it fired when they were
      // posted. (Submitting flushes them too, but no submission may come.)
      const bool overflowed = io_uring_cq_has_overflow(&ring_);
      if (overflowed) (void)io_uring_get_events(&ring_);
      reap_lock_.unlock();
      // A completion posted after the loop ended and before the unlock may
      // have been skipped by a thread whose try_lock failed: look again.
      // seq_cst fence: the unlock (a store) must not be ordered after the
      // look at the tail (a load), as a store buffer would: then we could
      // miss the completion and that thread still see the lock held. Its
      // half of the pair is the kernel's: the tail is written before the
      // ring's descriptor is reported ready, and that report reaches the
      // other thread through a system call, before its try_lock.
      std::atomic_thread_fence(std::memory_order_seq_cst);
      if (!overflowed && completions_waiting() == 0) return;
    }
  }

  void shutdown(std::chrono::steady_clock::time_point deadline) noexcept override {
    for (;;) {
      reap();
      if (in_flight_.load(std::memory_order_acquire) == 0) return;
      const auto now = std::chrono::steady_clock::now();
      if (now >= deadline) return;  // the ops in flight are leaked (header)
      const auto wait =
          std::min<std::chrono::nanoseconds>(deadline - now, std::chrono::milliseconds(10));
      __kernel_timespec ts{0, static_cast<long long>(wait.count())};
      std::lock_guard guard(reap_lock_);
      io_uring_cqe* cqe = nullptr;
      (void)io_uring_wait_cqe_timeout(&ring_, &cqe, &ts);
    }
  }

 private:
  io_uring_sqe* sqe() noexcept {
    io_uring_sqe* s = io_uring_get_sqe(&ring_);
    if (!s) {
      io_uring_submit(&ring_);  // make room
      s = io_uring_get_sqe(&ring_);
    }
    return s;
  }

  // Under submit_mutex_. Hands the queued requests to the kernel: true
  // when it took them all. The kernel may refuse (EAGAIN: no memory for a
  // request; EBUSY: completions overflowed and not reaped) or take only
  // some; what it did not take stays queued, already past the point where
  // it could be handed to the pool instead, so the caller must see it taken
  // (submit_until_taken) or its task would wait forever.
  bool enter() noexcept {
    for (;;) {
      const int r = submit_ring();
      if (r == -EINTR) continue;
      if (r < 0) return false;
      if (io_uring_sq_ready(&ring_) == 0) return true;
      if (r == 0) return false;  // took nothing, said nothing: as a refusal
    }
  }

  // Not under either lock. Retries until the kernel has taken every queued
  // request, reaping between tries (an EBUSY lasts until the completions
  // are reaped, and on a current-thread runtime no one else would) and
  // backing off: the submitting worker waits as a write to a full pipe
  // would, for as long as the kernel refuses (the tokio-uring answer too).
  // Another thread's submission may take them first; that ends it as well.
  void submit_until_taken() noexcept {
    for (unsigned attempt = 1;; ++attempt) {
      {
        std::lock_guard guard(submit_mutex_);
        if (io_uring_sq_ready(&ring_) == 0 || enter()) break;
      }
      reap();
      if (attempt < 8) {
        std::this_thread::yield();
      } else {
        const unsigned shift = std::min(attempt - 8, 10u);
        std::this_thread::sleep_for(std::chrono::microseconds(1u << shift));  // up to ~1 ms
      }
    }
    reap();
  }

  // io_uring_submit, or an injected refusal (inject_submit_failures_for_testing).
  int submit_ring() noexcept {
    // relaxed: a test's counter; the refusal it injects needs no ordering.
    if (g_submit_faults.load(std::memory_order_relaxed) > 0 &&
        g_submit_faults.fetch_sub(1, std::memory_order_relaxed) > 0)
      return -g_submit_fault_errno.load(std::memory_order_relaxed);
    return io_uring_submit(&ring_);
  }

  // Under submit_mutex_. False if there is no room (nothing was queued).
  bool prepare(FileOp* op) noexcept {
    const bool chain = op->kind == OpKind::kReadFile;
    if (chain && (free_slots_.empty() || io_uring_sq_space_left(&ring_) < 3)) {
      io_uring_submit(&ring_);
      if (free_slots_.empty() || io_uring_sq_space_left(&ring_) < 3) return false;
    }
    io_uring_sqe* s = sqe();
    if (!s) return false;
    switch (op->kind) {
      case OpKind::kOpen:
        io_uring_prep_openat(s, AT_FDCWD, op->path.c_str(), op->flags | O_CLOEXEC, op->mode);
        break;
      case OpKind::kRead:
        io_uring_prep_read(s, op->file.fd(), op->io_data(), static_cast<unsigned>(op->len),
                           static_cast<std::uint64_t>(op->offset));
        break;
      case OpKind::kWrite:
        io_uring_prep_write(s, op->file.fd(), op->io_data(), static_cast<unsigned>(op->len),
                            static_cast<std::uint64_t>(op->offset));
        break;
      case OpKind::kFsync:
        io_uring_prep_fsync(s, op->file.fd(), op->datasync ? IORING_FSYNC_DATASYNC : 0);
        break;
      case OpKind::kStatx:
        io_uring_prep_statx(s, op->file ? op->file.fd() : AT_FDCWD, op->path.c_str(), op->flags,
                            STATX_BASIC_STATS | STATX_BTIME, &op->stx);
        break;
      case OpKind::kReadFile: {
        const int slot = free_slots_.back();
        free_slots_.pop_back();
        op->direct_slot = slot;
        op->cqes_left = 3;
        // relaxed: a test's counter, as g_submit_faults.
        if (g_reordered_chains.load(std::memory_order_relaxed) > 0 &&
            g_reordered_chains.fetch_sub(1, std::memory_order_relaxed) > 0) {
          prepare_chain_out_of_order(op, s, slot);
          return true;
        }
        prep_chain_open(op, s, slot);
        s->flags |= IOSQE_IO_LINK;
        prep_chain_read_and_close(op, io_uring_get_sqe(&ring_), slot);
        publish(op);
        return true;
      }
      default:
        return false;
    }
    op->cqes_left = 1;
    s->user_data = tag(op, 0);
    publish(op);
    return true;
  }

  // The whole-file chain's requests: the open into the direct slot (direct
  // descriptors take no O_CLOEXEC: EINVAL; they are not in the process's
  // table at all) and, on `rw`, the read hard-linked to the close (the close
  // runs even if the read "fails": a short read counts as a failure for a
  // plain link). There must be room for the close's SQE.
  void prep_chain_open(FileOp* op, io_uring_sqe* s, int slot) noexcept {
    io_uring_prep_openat_direct(s, AT_FDCWD, op->path.c_str(), O_RDONLY, 0,
                                static_cast<unsigned>(slot));
    s->user_data = tag(op, 0);
  }
  void prep_chain_read_and_close(FileOp* op, io_uring_sqe* rw, int slot) noexcept {
    io_uring_prep_read(rw, slot, op->buffer.data(), kChainReadSize, 0);  // sized by submit()
    rw->flags |= IOSQE_FIXED_FILE | IOSQE_IO_HARDLINK;
    rw->user_data = tag(op, 1);
    io_uring_sqe* close = io_uring_get_sqe(&ring_);
    io_uring_prep_close_direct(close, static_cast<unsigned>(slot));
    close->user_data = tag(op, 2);
  }

  // Tests only (run_read_chains_out_of_order_for_testing): the chain's read
  // and close, linked, submitted ahead of its open, which follows unlinked:
  // the read finds the slot empty, and the open fills it after the close.
  // The state a split chain leaves when its open is still running when its
  // read and close, submitted later, have run. `s` is a free SQE; there is
  // room for two more (prepare() checked).
  void prepare_chain_out_of_order(FileOp* op, io_uring_sqe* s, int slot) noexcept {
    prep_chain_read_and_close(op, s, slot);
    publish(op);
    io_uring_submit(&ring_);
    prep_chain_open(op, io_uring_get_sqe(&ring_), slot);
  }

  // release: pairs with on_completion's acquire (see FileOp::published).
  static void publish(FileOp* op) noexcept { op->published.store(true, std::memory_order_release); }

  // Completions posted and not yet consumed. Both indices atomically
  // (liburing's io_uring_cq_ready reads the head plainly, which races with a
  // reaper's io_uring_cq_advance when called without the reap lock).
  unsigned completions_waiting() const noexcept {
    const unsigned tail = __atomic_load_n(ring_.cq.ktail, __ATOMIC_ACQUIRE);
    const unsigned head = __atomic_load_n(ring_.cq.khead, __ATOMIC_ACQUIRE);
    return tail - head;
  }

  // Under reap_lock_.
  void on_completion(std::uint64_t data, int res) noexcept {
    unsigned step;
    FileOp* op = untag(data, step);
    // acquire: pairs with prepare()'s release (see FileOp::published).
    (void)op->published.load(std::memory_order_acquire);
    switch (op->kind) {
      case OpKind::kOpen:
        if (res >= 0) {
          op->opened_fd = res;
          op->res = 0;
        } else {
          op->res = res;
        }
        break;
      case OpKind::kRead:
      case OpKind::kWrite:
      case OpKind::kFsync:
      case OpKind::kStatx:
        op->res = res;
        break;
      case OpKind::kReadFile:
        // The close's result: nothing to lose for a read-only file; an empty
        // slot (the open failed) gives EBADF, which is not news, except after
        // a successful open (below).
        if (step == 0)
          op->chain_open_res = res;
        else if (step == 1)
          op->chain_read_res = res;
        else
          op->chain_close_res = res;
        break;
      default:
        break;
    }
    if (--op->cqes_left > 0) return;
    if (op->kind == OpKind::kReadFile) {
      // The slot goes back only now: until all three completions are in,
      // a request of the chain may still be about to use it. An open that
      // succeeded where the close found the slot empty ran after the close
      // (a split chain, below) and left its file there: the next chain's
      // read, split the same way, would read this file. Emptied first.
      // If that fails (ENOMEM: the pressure that splits chains), the slot
      // is retired rather than reused with a file in it; with no slot left,
      // whole-file reads go to the pool (prepare()).
      bool reusable = true;
      if (op->chain_open_res >= 0 && op->chain_close_res < 0) {
        int none = -1;
        reusable = io_uring_register_files_update(&ring_, static_cast<unsigned>(op->direct_slot),
                                                  &none, 1) == 1;
      }
      {
        std::lock_guard guard(submit_mutex_);
        if (reusable) free_slots_.push_back(op->direct_slot);
        op->direct_slot = -1;
      }
      // A whole chain posts its completions in order, and its read cannot
      // fail for want of the file once the open succeeded. The kernel splits
      // a chain when it cannot allocate a request part-way through a
      // submission (it submits the link so far, and the rest with the next
      // submission), and then the read may run before the open has filled
      // the slot (EBADF), or after the close emptied it, and the
      // completions come in any order. So the open's error wins whatever
      // the order; a read that found no file after a successful open is
      // done again whole by the pool, as is a file longer than the read.
      const int open_res = op->chain_open_res, read_res = op->chain_read_res;
      op->res = open_res < 0 ? open_res : read_res;
      const bool split = open_res >= 0 && (read_res == -EBADF || read_res == -ECANCELED);
      if (split || (op->res >= 0 && static_cast<std::size_t>(op->res) == kChainReadSize)) {
        run_on_pool(pool_, op);  // first: it takes its reference before we drop ours
        done_with(op, false);
        return;
      }
    }
    if (op->kind == OpKind::kReadFile && op->res >= 0)
      op->buffer.resize(static_cast<std::size_t>(op->res));
    done_with(op, true);
  }

  // The engine is done with `op`: finish it (unless the pool takes over) and
  // drop the engine's reference.
  void done_with(FileOp* op, bool finished) noexcept {
    // release: pairs with shutdown()'s acquire load.
    in_flight_.fetch_sub(1, std::memory_order_release);
    driver_.add_pending(-1);
    if (finished) op->finish();
    op->release();
  }

  volt::detail::Driver& driver_;
  volt::detail::BlockingPool& pool_;
  io_uring ring_;
  std::mutex submit_mutex_;  // the submission queue and free_slots_
  volt::detail::SpinLock reap_lock_;
  std::vector<int> free_slots_;
  const bool direct_slots_;  // registered at start: whole-file chains possible
  // Requests whose ops the engine still holds.
  std::atomic<std::uint64_t> in_flight_{0};
};

bool has_opcodes(io_uring& ring) noexcept {
  io_uring_probe* probe = io_uring_get_probe_ring(&ring);
  if (!probe) return false;
  bool ok = true;
  for (int op : {IORING_OP_OPENAT, IORING_OP_READ, IORING_OP_WRITE, IORING_OP_CLOSE,
                 IORING_OP_FSYNC, IORING_OP_STATX})
    ok = ok && io_uring_opcode_supported(probe, op);
  io_uring_free_probe(probe);
  return ok;
}

}  // namespace

void inject_submit_failures_for_testing(int count, int error) noexcept {
  g_submit_fault_errno.store(error, std::memory_order_relaxed);
  g_submit_faults.store(count, std::memory_order_relaxed);
}

void run_read_chains_out_of_order_for_testing(int count) noexcept {
  g_reordered_chains.store(count, std::memory_order_relaxed);
}

FileEngine* make_uring_engine(volt::detail::Driver& driver, volt::detail::BlockingPool& pool) {
  io_uring ring;
  io_uring_params params{};
  if (io_uring_queue_init_params(kRingEntries, &ring, &params) != 0) return nullptr;
  if (!has_opcodes(ring)) {
    close_ring(ring);
    return nullptr;
  }
  const bool direct = io_uring_register_files_sparse(&ring, kDirectSlots) == 0;
  auto* engine = new UringEngine(driver, pool, ring, direct);
  if (!engine->start()) {
    delete engine;
    return nullptr;
  }
  return engine;
}

}  // namespace volt::fs::detail

#else  // no liburing

namespace volt::fs::detail {
FileEngine* make_uring_engine(volt::detail::Driver&, volt::detail::BlockingPool&) {
  return nullptr;
}
void inject_submit_failures_for_testing(int, int) noexcept {}
void run_read_chains_out_of_order_for_testing(int) noexcept {}
}  // namespace volt::fs::detail

#endif
