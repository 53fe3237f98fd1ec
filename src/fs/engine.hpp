// The file engine: where a file operation runs when it cannot complete on the
// calling thread without blocking (see volt/fs/file.hpp, "How an operation
// runs").
//
// An operation is a FileOp: its inputs, its outputs and the memory the kernel
// or a pool thread uses (path, buffer, statx) all live in it. Two parties
// hold references: the awaiting task (OpAwaiter) and the engine while the
// operation runs. A task that is cancelled drops its reference and nothing
// else: the engine's keeps the memory alive until the kernel or the pool
// thread is done, and whoever drops the last reference frees the operation,
// closing a descriptor an open produced that nobody took.
//
// Engines (one per runtime, made when the runtime starts):
//  - UringEngine (uring_engine.hpp): one io_uring instance shared by the
//    runtime's threads; see there for why one and not one per worker.
//  - BlockingEngine (below): each operation is one job on the runtime's
//    blocking pool, whatever it does (a whole-file read is open, fstat,
//    read and close in one job).
// Both run every operation kind; the io_uring engine hands the kinds it has
// no opcode for to the blocking pool.
//
// Completion protocol (state): kPending -> kWaiting (the awaiter, after it
// stored its waker: release, so the completer's acquire sees the waker) or
// kPending/kWaiting -> kDone (the engine, after it wrote the outputs:
// acq_rel exchange, so the awaiter's acquire load sees the outputs, and the
// engine sees the waker if it read kWaiting). Exactly one side moves the
// state out of kPending, so a waker is either woken by the engine or
// dropped by the awaiter that found kDone, never both.
#pragma once

#include <sys/stat.h>

#include <atomic>
#include <chrono>
#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "fs/descriptor.hpp"
#include "volt/detail/waker.hpp"

namespace volt::detail {
class Driver;
class BlockingPool;
}  // namespace volt::detail

namespace volt::fs::detail {

enum class OpKind : std::uint8_t {
  kOpen,       // path, flags, mode -> opened_fd
  kRead,       // file, offset (-1: the cursor), len -> io_data()[0, res)
  kWrite,      // file, offset (-1: the cursor), io_data()[0, len) -> res bytes
  kFsync,      // file, datasync
  kStatx,      // path (or file with an empty path), flags -> stx
  kReadFile,   // path -> buffer (the whole file)
  kWriteFile,  // path, flags, mode, buffer -> res (bytes), close_res
  kFtruncate,  // file, offset = the length
  kFchmod,     // file, mode
  kDup,        // file -> opened_fd
};

struct FileOp {
  enum State : std::uint32_t { kPending, kWaiting, kDone };

  explicit FileOp(OpKind k) noexcept : kind(k) {}
  FileOp(const FileOp&) = delete;
  FileOp& operator=(const FileOp&) = delete;
  ~FileOp();

  // ---- inputs (written before submission, read-only afterwards) ----
  const OpKind kind;
  FdRef file;
  std::string path;
  int flags = 0;
  std::uint32_t mode = 0;
  std::int64_t offset = -1;
  std::size_t len = 0;
  bool datasync = false;
  // kRead: the destination (len bytes); kWrite/kWriteFile: the bytes to
  // write; kReadFile: the file's contents.
  std::vector<std::byte> buffer;
  // kRead/kWrite of an O_DIRECT file: the kernel refuses (EINVAL) a buffer
  // whose address is not a multiple of the device's DMA alignment
  // (statx's stx_dio_mem_align: 512 on many disks), which a vector's need
  // not be; the len bytes are then here instead, aligned to kDirectIoAlign.
  // io_data() is whichever of the two the op uses.
  struct FreeBytes {
    void operator()(std::byte* p) const noexcept { std::free(p); }
  };
  std::unique_ptr<std::byte, FreeBytes> aligned;
  // A multiple of every DMA alignment we know of (and of the usual logical
  // block sizes, which bound the offset and the length instead). Not read
  // from statx per file: one constant costs at most a few bytes of padding.
  static constexpr std::size_t kDirectIoAlign = 4096;
  // kRead/kWrite: makes room for len bytes, `aligned` for an O_DIRECT file,
  // else the vector (zero-filled). False if out of memory: errors are values
  // (volt/fs/file.hpp), so a bad_alloc is not let out.
  bool allocate(bool direct_io) noexcept {
    if (direct_io) return allocate_aligned();
    try {
      buffer.resize(len);
    } catch (const std::bad_alloc&) {
      return false;
    }
    return true;
  }
  // kWrite: the same, filled with the len bytes at `from` (the vector copied
  // straight from them, not zero-filled first).
  bool fill(const std::byte* from, bool direct_io) noexcept {
    if (direct_io) {
      if (!allocate_aligned()) return false;
      std::memcpy(aligned.get(), from, len);
      return true;
    }
    try {
      buffer.assign(from, from + len);
    } catch (const std::bad_alloc&) {
      return false;
    }
    return true;
  }
  bool allocate_aligned() noexcept {
    const std::size_t size = (len + kDirectIoAlign - 1) / kDirectIoAlign * kDirectIoAlign;
    aligned.reset(static_cast<std::byte*>(std::aligned_alloc(kDirectIoAlign, size)));
    return aligned != nullptr;
  }
  std::byte* io_data() noexcept { return aligned ? aligned.get() : buffer.data(); }

  // ---- outputs (written by the engine before kDone) ----
  std::int64_t res = 0;        // >= 0: the value; < 0: -errno
  std::int64_t close_res = 0;  // kWriteFile: close's result
  int opened_fd = -1;          // kOpen/kDup: owned by the op until taken
  struct statx stx {};

  // ---- engine bookkeeping (io_uring) ----
  int cqes_left = 0;     // completions still to come for this op
  int direct_slot = -1;  // registered-file slot of a linked chain
  // kReadFile's chain: the open's, the read's and the close's results,
  // merged once all three completions are in (their order is not relied
  // on: a split chain posts them in any order).
  int chain_open_res = 0, chain_read_res = 0, chain_close_res = 0;
  FileOp* next_in_flight = nullptr;

  // The submitter stores true (release) when the op is filled in, before
  // io_uring_enter; a reaper loads it (acquire) before reading the op. The
  // kernel orders the submission before the completion it posts, but
  // through a system call that neither the C++ memory model nor TSan sees:
  // this pair states that order where both can.
  std::atomic<bool> published{false};

  // ---- completion ----
  std::atomic<std::uint32_t> state{kPending};
  volt::detail::Waker waker;  // the awaiter's (see the protocol above)
  std::atomic<std::uint32_t> refs{1};

  void retain() noexcept { refs.fetch_add(1, std::memory_order_relaxed); }
  // acq_rel: the last release must see every holder's writes before it frees.
  void release() noexcept {
    if (refs.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }
  bool done() const noexcept { return state.load(std::memory_order_acquire) == kDone; }
  // Engine side: the outputs are written; wake the awaiter if it waits.
  void finish() noexcept;
  // Takes the descriptor an open produced (-1 if none).
  int take_fd() noexcept {
    int fd = opened_fd;
    opened_fd = -1;
    return fd;
  }
};

// Runs `op` to completion on the calling thread with blocking system calls
// and writes its outputs (does not call finish()). The blocking engine's job,
// and the io_uring engine's for the kinds it has no opcode for.
void run_blocking(FileOp& op) noexcept;

// Runs `op` as one job on `pool` (taking a reference for the job); the job
// finishes it, or finishes it with ECANCELED if the pool drops it unrun.
void run_on_pool(volt::detail::BlockingPool& pool, FileOp* op) noexcept;

class FileEngine {
 public:
  virtual ~FileEngine() = default;
  // Starts `op` (the engine takes its own reference) and, when it is done,
  // writes its outputs and calls finish(), on whichever thread. May finish
  // before returning (io_uring completes page-cache hits inline).
  virtual void submit(FileOp* op) noexcept = 0;
  virtual bool uses_io_uring() const noexcept = 0;
  // Operations in the engine's own hands (not the blocking pool's, which
  // counts its jobs itself): a paused clock must not auto-advance past a
  // timer while one of them may still complete and wake a task, as it does
  // not while blocking work is in flight (Tokio runs files on the pool).
  virtual std::uint64_t in_flight() const noexcept { return 0; }
  // Runtime shutdown, after the workers stopped: waits (at most until
  // `deadline`) for the operations in flight to complete.
  virtual void shutdown(std::chrono::steady_clock::time_point deadline) noexcept = 0;
};

// The engine of the runtime the calling thread belongs to, or nullptr.
FileEngine* current_engine() noexcept;

// Makes the engine a runtime starts with: io_uring unless `allow_uring` is
// false, VOLT_IO_URING=0 is set, or the kernel refuses it (probed here).
FileEngine* make_engine(volt::detail::Driver& driver, volt::detail::BlockingPool& pool,
                        bool allow_uring);

// co_await OpAwaiter(op): submits `op` to the current engine and waits for
// it. Owns one reference to `op` (adopted from the creator). errc::no_runtime
// (as res = -ENXIO... see await_resume) if there is no engine.
class OpAwaiter {
 public:
  explicit OpAwaiter(FileOp* op) noexcept : op_(op) {}
  OpAwaiter(const OpAwaiter&) = delete;
  OpAwaiter& operator=(const OpAwaiter&) = delete;
  ~OpAwaiter() { op_->release(); }

  bool await_ready() noexcept;
  bool await_suspend(std::coroutine_handle<> self);
  // false if there was no runtime to run the operation.
  bool await_resume() const noexcept { return submitted_; }

 private:
  static bool is_done(void* op) noexcept { return static_cast<FileOp*>(op)->done(); }
  FileOp* op_;
  bool submitted_ = false;
};

}  // namespace volt::fs::detail
