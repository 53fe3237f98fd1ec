#include "fs/engine.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "fs/nowait.hpp"
#include "fs/uring_engine.hpp"
#include "runtime/blocking/blocking_pool.hpp"
#include "runtime/runtime_core.hpp"
#include "volt/task/spawn_blocking.hpp"

namespace volt::fs::detail {

FileOp::~FileOp() {
  // An open whose task went away before taking the descriptor.
  if (opened_fd >= 0) ::close(opened_fd);
}

void FileOp::finish() noexcept {
  // acq_rel: release publishes the outputs to the awaiter's acquire in
  // done(); acquire makes the waker the awaiter stored before its
  // kPending -> kWaiting CAS visible here.
  if (state.exchange(kDone, std::memory_order_acq_rel) == kWaiting) waker.wake();
}

namespace {

std::int64_t neg_errno() noexcept {
  return -static_cast<std::int64_t>(errno);
}

// Reads `fd` to its end into `out`, sized from fstat (one read for a file
// that does not grow meanwhile, then a read that finds the end).
std::int64_t read_whole(int fd, std::vector<std::byte>& out) noexcept {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return neg_errno();
  std::size_t size =
      S_ISREG(st.st_mode) && st.st_size > 0 ? static_cast<std::size_t>(st.st_size) : 0;
  try {
    out.reserve(size + 1);  // one byte more: the read that finds the end
  } catch (const std::length_error&) {
    return -EFBIG;  // larger than a vector can be (a sparse file of 2^63 bytes)
  } catch (const std::bad_alloc&) {
    return -ENOMEM;
  }
  std::size_t have = 0;
  for (;;) {
    if (have == out.size()) {
      try {
        out.resize(whole_file_next_size(have, out.capacity()));
      } catch (const std::bad_alloc&) {
        return -ENOMEM;
      }
    }
    ssize_t n = ::read(fd, out.data() + have, out.size() - have);
    if (n < 0) {
      if (errno == EINTR) continue;
      return neg_errno();
    }
    if (n == 0) break;
    have += static_cast<std::size_t>(n);
  }
  out.resize(have);
  return static_cast<std::int64_t>(have);
}

std::int64_t write_whole(int fd, const std::vector<std::byte>& data) noexcept {
  std::size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return neg_errno();
    }
    if (n == 0) return -EIO;  // no progress: never spin
    done += static_cast<std::size_t>(n);
  }
  return static_cast<std::int64_t>(done);
}

}  // namespace

void run_blocking(FileOp& op) noexcept {
  switch (op.kind) {
    case OpKind::kOpen: {
      int fd = ::open(op.path.c_str(), op.flags | O_CLOEXEC, op.mode);
      op.res = fd < 0 ? neg_errno() : 0;
      op.opened_fd = fd;
      break;
    }
    case OpKind::kRead: {
      ssize_t n;
      do {
        n = op.offset < 0 ? ::read(op.file.fd(), op.io_data(), op.len)
                          : ::pread(op.file.fd(), op.io_data(), op.len, op.offset);
      } while (n < 0 && errno == EINTR);
      op.res = n < 0 ? neg_errno() : n;
      break;
    }
    case OpKind::kWrite: {
      ssize_t n;
      do {
        n = op.offset < 0 ? ::write(op.file.fd(), op.io_data(), op.len)
                          : ::pwrite(op.file.fd(), op.io_data(), op.len, op.offset);
      } while (n < 0 && errno == EINTR);
      op.res = n < 0 ? neg_errno() : n;
      break;
    }
    case OpKind::kFsync:
      op.res =
          (op.datasync ? ::fdatasync(op.file.fd()) : ::fsync(op.file.fd())) != 0 ? neg_errno() : 0;
      break;
    case OpKind::kStatx: {
      const int dirfd = op.file ? op.file.fd() : AT_FDCWD;
      op.res =
          ::statx(dirfd, op.path.c_str(), op.flags, STATX_BASIC_STATS | STATX_BTIME, &op.stx) != 0
              ? neg_errno()
              : 0;
      break;
    }
    case OpKind::kReadFile: {
      if (op.opened_fd >= 0) {
        // Not a regular file, opened with O_NONBLOCK (whole_file.cpp); ~FileOp
        // closes it. Read as a blocking open and read(2) would: a FIFO opened
        // before any writer polls neither readable nor hung up until a writer
        // has come (and gone, for the end), the wait a blocking open makes;
        // after that, blocking reads to the end (read(2) before it would say
        // 0 at once).
        pollfd p{op.opened_fd, POLLIN, 0};
        while (::poll(&p, 1, -1) < 0 && errno == EINTR) {
        }
        const int fl = ::fcntl(op.opened_fd, F_GETFL);
        if (fl >= 0) ::fcntl(op.opened_fd, F_SETFL, fl & ~O_NONBLOCK);
        op.res = read_whole(op.opened_fd, op.buffer);
        break;
      }
      int fd = ::open(op.path.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0) {
        op.res = neg_errno();
        break;
      }
      op.res = read_whole(fd, op.buffer);
      ::close(fd);  // read-only: close cannot lose data
      break;
    }
    case OpKind::kWriteFile: {
      int fd = ::open(op.path.c_str(), op.flags | O_CLOEXEC, op.mode);
      if (fd < 0) {
        op.res = neg_errno();
        break;
      }
      op.res = write_whole(fd, op.buffer);
      op.close_res = ::close(fd) != 0 && errno != EINTR ? neg_errno() : 0;
      break;
    }
    case OpKind::kFtruncate:
      op.res = ::ftruncate(op.file.fd(), op.offset) != 0 ? neg_errno() : 0;
      break;
    case OpKind::kFchmod:
      op.res = ::fchmod(op.file.fd(), op.mode) != 0 ? neg_errno() : 0;
      break;
    case OpKind::kDup: {
      int fd = ::fcntl(op.file.fd(), F_DUPFD_CLOEXEC, 0);
      op.res = fd < 0 ? neg_errno() : 0;
      op.opened_fd = fd;
      break;
    }
  }
}

namespace {

// The engine's reference to an operation running on the blocking pool. If
// the pool drops the job without running it (runtime shutdown), the
// operation still finishes, with ECANCELED, so its awaiter is never left
// waiting.
class PoolJob {
 public:
  explicit PoolJob(FileOp* op) noexcept : op_(op) {}
  PoolJob(PoolJob&& other) noexcept : op_(std::exchange(other.op_, nullptr)) {}
  PoolJob(const PoolJob&) = delete;
  PoolJob& operator=(const PoolJob&) = delete;
  PoolJob& operator=(PoolJob&&) = delete;
  ~PoolJob() {
    if (!op_) return;
    op_->res = -ECANCELED;
    op_->finish();
    op_->release();
  }
  void operator()() noexcept {
    FileOp* op = std::exchange(op_, nullptr);
    run_blocking(*op);
    // Before the awaiter is woken (it may queue the next operation at once).
    volt::detail::blocking_job_finishing();
    op->finish();
    op->release();
  }

 private:
  FileOp* op_;
};

class BlockingEngine final : public FileEngine {
 public:
  explicit BlockingEngine(volt::detail::BlockingPool& pool) noexcept : pool_(pool) {}
  void submit(FileOp* op) noexcept override { run_on_pool(pool_, op); }
  bool uses_io_uring() const noexcept override { return false; }
  // The blocking pool's own shutdown (after this) waits for its jobs.
  void shutdown(std::chrono::steady_clock::time_point) noexcept override {}

 private:
  volt::detail::BlockingPool& pool_;
};

}  // namespace

void run_on_pool(volt::detail::BlockingPool& pool, FileOp* op) noexcept {
  op->retain();  // the job's
  try {
    // The JoinHandle is dropped at once: the job's outcome is the op's.
    (void)volt::detail::spawn_on(&pool, volt::detail::blocking_task(PoolJob(op)));
  } catch (...) {
    // No runtime, or the pool refused the job: PoolJob's destructor already
    // finished the op with ECANCELED when the argument was destroyed.
  }
}

FileEngine* current_engine() noexcept {
  volt::detail::RuntimeCore* core = volt::detail::RuntimeCore::current();
  return core ? core->files() : nullptr;
}

FileEngine* make_engine(volt::detail::Driver& driver, volt::detail::BlockingPool& pool,
                        bool allow_uring) {
  const char* env = std::getenv("VOLT_IO_URING");
  if (allow_uring && !(env && std::strcmp(env, "0") == 0)) {
    if (FileEngine* uring = make_uring_engine(driver, pool)) return uring;
  }
  return new BlockingEngine(pool);
}

bool OpAwaiter::await_ready() noexcept {
  FileEngine* engine = current_engine();
  if (!engine) {
    op_->res = -ECANCELED;
    op_->state.store(FileOp::kDone, std::memory_order_relaxed);  // never shared
    return true;
  }
  submitted_ = true;
  engine->submit(op_);
  return op_->done();
}

bool OpAwaiter::await_suspend(std::coroutine_handle<> self) {
  volt::detail::TaskHeader* task = volt::detail::suspend_current(self, &is_done, op_);
  op_->waker = volt::detail::make_task_waker(task);
  std::uint32_t expected = FileOp::kPending;
  // release: publishes the waker to finish()'s acquire. acquire on failure:
  // the outputs of a finish() that came first.
  if (op_->state.compare_exchange_strong(expected, FileOp::kWaiting, std::memory_order_acq_rel,
                                         std::memory_order_acquire))
    return true;
  op_->waker.reset();  // done meanwhile: nobody will wake it
  return false;
}

}  // namespace volt::fs::detail
