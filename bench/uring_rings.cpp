// bench/uring_rings.cpp: the choice behind src/fs/uring_engine.hpp, measured
// on its own: one io_uring ring shared by every worker thread, or one ring
// per worker thread (the alternative docs/design.md records as rejected).
//
// Plain C++20 and liburing, no volt. A 64 MiB file of pattern bytes under
// /tmp (removed at exit), read once to warm the page cache. For T = 1, 2, 4
// threads, each thread makes kReads positional 4 KiB reads at pseudo-random
// 4 KiB-aligned offsets, one at a time: submit it, then reap its completion
// (peek; if it is not there, wait). Designs:
//   shared      one ring of 256 entries, as the engine has it: a mutex around
//               get_sqe + prep + io_uring_submit, a try-lock around reaping;
//               a reaper that finds another thread's completion stores its
//               result in that op's slot and sets its flag, and the owner
//               spins (then yields) on its flag.
//   per-thread  one ring of 256 entries per thread, no locks.
//   pread       pread(2) on the calling thread: the floor.
// Both rings are set up with no flags (the engine's shared ring cannot use
// IORING_SETUP_SINGLE_ISSUER; per-thread rings could, not measured here).
// The page cache holds the file, so the kernel completes each read inline in
// io_uring_enter: what is measured is the ring and its locks. An inline read
// runs under the submission mutex, and in the kernel under the ring's own
// submission lock, so on a shared ring such reads run one at a time.
//
// Output: wall-clock ns per read (elapsed / (T * kReads)), median of 3 runs,
// with the runs' range, and process CPU ns per read ("cores", CPU / wall, is
// how many CPUs the threads had: below T when the machine is busy with
// something else, and then the row compares less); for the shared ring,
// the share of completions reaped by a thread other than their owner
// ("handed"); for both rings, the share of reads whose completion was not
// there after the submission and had to be waited for ("waited").
//
// Build: cmake --build <tree> --target volt_uring_rings (Release).
#include <liburing.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <sched.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

namespace {

constexpr std::size_t kFileSize = 64u << 20;
constexpr std::size_t kBlock = 4096;
constexpr std::size_t kBlocks = kFileSize / kBlock;
constexpr int kReads = 200'000;
constexpr unsigned kRingEntries = 256;
constexpr int kRuns = 3;

[[noreturn]] void die(const char* what, int err) {
  std::fprintf(stderr, "uring_rings: %s: %s\n", what, std::strerror(err));
  std::exit(1);
}

// The file's content: every 8-byte word holds its own offset, mixed, so a
// read that lands at the wrong offset (or a result given to the wrong op)
// fails the check.
std::uint64_t pattern(std::uint64_t offset) {
  return offset * 0x9E3779B97F4A7C15ull ^ 0x5A5A;
}

void check(const unsigned char* buf, std::uint64_t offset, long res) {
  std::uint64_t word;
  std::memcpy(&word, buf + 8 * (offset / kBlock % (kBlock / 8)), 8);
  const std::uint64_t at = offset + 8 * (offset / kBlock % (kBlock / 8));
  if (res != static_cast<long>(kBlock) || word != pattern(at)) {
    std::fprintf(stderr, "uring_rings: wrong read at %llu (res %ld)\n",
                 static_cast<unsigned long long>(offset), res);
    std::exit(1);
  }
}

struct Rng {  // xorshift64*
  std::uint64_t s;
  std::uint64_t offset() {
    s ^= s >> 12;
    s ^= s << 25;
    s ^= s >> 27;
    return (s * 0x2545F4914F6CDD1Dull >> 20) % kBlocks * kBlock;
  }
};

double cpu_seconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

void relax(int& spins) {
  if (++spins < 64) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    asm volatile("yield");
#endif
  } else {
    sched_yield();
  }
}

// One read in flight: its result slot and flag, written by whichever thread
// reaps its completion.
struct alignas(64) Op {
  std::atomic<bool> done{false};
  int res = 0;
};

// (a) The engine's design: one ring, submission under a mutex, reaping under
// a try-lock, completions handed over through each op's flag.
struct SharedRing {
  io_uring ring{};
  std::mutex submit_mutex;
  std::mutex reap_lock;
  std::atomic<long> handed_over{0};
  std::atomic<long> waited{0};

  // Drains the completion queue; the caller holds reap_lock.
  void drain_locked() {
    unsigned seen = 0;
    unsigned head;
    io_uring_cqe* cqe;
    io_uring_for_each_cqe(&ring, head, cqe) {
      auto* op = reinterpret_cast<Op*>(static_cast<std::uintptr_t>(cqe->user_data));
      op->res = cqe->res;
      op->done.store(true, std::memory_order_release);
      ++seen;
    }
    io_uring_cq_advance(&ring, seen);
  }

  int read(int fd, unsigned char* buf, std::uint64_t offset) {
    Op op;
    {
      std::lock_guard guard(submit_mutex);
      io_uring_sqe* sqe = io_uring_get_sqe(&ring);
      if (!sqe) die("io_uring_get_sqe", EBUSY);
      io_uring_prep_read(sqe, fd, buf, kBlock, offset);
      io_uring_sqe_set_data64(sqe, reinterpret_cast<std::uintptr_t>(&op));
      int r = io_uring_submit(&ring);
      if (r != 1) die("io_uring_submit", r < 0 ? -r : EIO);
    }
    // Reap: as the engine's submitter does, then wait for the op's flag,
    // taking the reaper's role (and blocking in the ring) when it is free.
    int spins = 0;
    bool reaped_own = false;
    for (;;) {
      if (op.done.load(std::memory_order_acquire)) break;
      if (reap_lock.try_lock()) {
        drain_locked();
        if (!op.done.load(std::memory_order_acquire)) {
          // Nobody else can reap while the lock is held: our completion is
          // still to come. Wait for any completion, then drain again.
          waited.fetch_add(1, std::memory_order_relaxed);
          io_uring_cqe* cqe;
          int r = io_uring_wait_cqe(&ring, &cqe);
          if (r < 0 && r != -EINTR) die("io_uring_wait_cqe", -r);
          drain_locked();
        }
        reaped_own = op.done.load(std::memory_order_relaxed);
        reap_lock.unlock();
        continue;
      }
      relax(spins);
    }
    if (!reaped_own) handed_over.fetch_add(1, std::memory_order_relaxed);
    return op.res;
  }
};

// (b) One ring per thread, no locks.
struct OwnRing {
  io_uring ring{};
  long waited = 0;
  int read(int fd, unsigned char* buf, std::uint64_t offset) {
    io_uring_sqe* sqe = io_uring_get_sqe(&ring);
    io_uring_prep_read(sqe, fd, buf, kBlock, offset);
    int r = io_uring_submit(&ring);
    if (r != 1) die("io_uring_submit", r < 0 ? -r : EIO);
    io_uring_cqe* cqe;
    if (io_uring_peek_cqe(&ring, &cqe) != 0) {
      ++waited;
      r = io_uring_wait_cqe(&ring, &cqe);
      if (r < 0) die("io_uring_wait_cqe", -r);
    }
    int res = cqe->res;
    io_uring_cqe_seen(&ring, cqe);
    return res;
  }
};

enum class Design { kPread, kShared, kPerThread };

struct Result {
  double wall_ns;
  double cpu_ns;
  double handed_over;  // share of completions, shared ring only
  double waited;       // share of reads not complete after submit + peek
};

Result run(Design design, int threads, int fd, int run_index) {
  SharedRing shared;
  std::vector<OwnRing> own(threads);
  if (design == Design::kShared) {
    int r = io_uring_queue_init(kRingEntries, &shared.ring, 0);
    if (r < 0) die("io_uring_queue_init", -r);
  }
  if (design == Design::kPerThread) {
    for (auto& o : own) {
      int r = io_uring_queue_init(kRingEntries, &o.ring, 0);
      if (r < 0) die("io_uring_queue_init", -r);
    }
  }

  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      alignas(4096) static thread_local unsigned char buf[kBlock];
      Rng rng{0x1234567ull * static_cast<std::uint64_t>(t + 1) +
              0x9E37ull * static_cast<std::uint64_t>(run_index + 1)};
      ready.fetch_add(1);
      while (!go.load(std::memory_order_acquire))
        sched_yield();
      for (int i = 0; i < kReads; ++i) {
        const std::uint64_t offset = rng.offset();
        long res;
        switch (design) {
          case Design::kPread:
            res = ::pread(fd, buf, kBlock, static_cast<off_t>(offset));
            break;
          case Design::kShared:
            res = shared.read(fd, buf, offset);
            break;
          case Design::kPerThread:
            res = own[t].read(fd, buf, offset);
            break;
        }
        check(buf, offset, res);
      }
    });
  }
  while (ready.load() < threads)
    sched_yield();
  const double cpu0 = cpu_seconds();
  const auto t0 = std::chrono::steady_clock::now();
  go.store(true, std::memory_order_release);
  for (auto& th : pool)
    th.join();
  const auto t1 = std::chrono::steady_clock::now();
  const double cpu1 = cpu_seconds();

  if (design == Design::kShared) io_uring_queue_exit(&shared.ring);
  if (design == Design::kPerThread) {
    for (auto& o : own)
      io_uring_queue_exit(&o.ring);
  }
  long waited = shared.waited.load();
  for (const auto& o : own)
    waited += o.waited;
  const double reads = static_cast<double>(threads) * kReads;
  return {std::chrono::duration<double, std::nano>(t1 - t0).count() / reads,
          (cpu1 - cpu0) * 1e9 / reads, static_cast<double>(shared.handed_over.load()) / reads,
          static_cast<double>(waited) / reads};
}

std::string path;
void remove_file() {
  if (!path.empty()) ::unlink(path.c_str());
}

int make_file() {
  path = "/tmp/volt-uring-rings-" + std::to_string(::getpid());
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) die("open", errno);
  std::atexit(remove_file);
  std::vector<std::uint64_t> chunk((1u << 20) / 8);
  for (std::size_t base = 0; base < kFileSize; base += 1u << 20) {
    for (std::size_t i = 0; i < chunk.size(); ++i)
      chunk[i] = pattern(base + 8 * i);
    const auto* p = reinterpret_cast<const char*>(chunk.data());
    std::size_t left = 1u << 20;
    while (left > 0) {
      ssize_t n = ::pwrite(fd, p, left, static_cast<off_t>(base + (1u << 20) - left));
      if (n < 0) die("pwrite", errno);
      left -= static_cast<std::size_t>(n);
      p += n;
    }
  }
  // Warm the page cache.
  std::vector<char> sink(1u << 20);
  for (std::size_t off = 0; off < kFileSize; off += sink.size()) {
    if (::pread(fd, sink.data(), sink.size(), static_cast<off_t>(off)) < 0) die("pread", errno);
  }
  return fd;
}

}  // namespace

int main() {
  const int fd = make_file();
  constexpr std::array<int, 3> kThreads{1, 2, 4};
  constexpr std::array<Design, 3> kDesigns{Design::kPread, Design::kShared, Design::kPerThread};
  constexpr std::array<const char*, 3> kNames{"pread", "shared", "per-thread"};

  std::printf("uring_rings: %d x 4 KiB random reads per thread, page cache warm, %u CPUs\n", kReads,
              std::thread::hardware_concurrency());
  std::printf(
      "wall ns/read = elapsed / (T * reads), median of %d [min-max]; cpu ns = process CPU\n"
      "time / reads; cores = cpu / wall (below T on a machine busy elsewhere)\n",
      kRuns);
  std::printf("%-3s %-12s %20s %8s %6s %8s %8s\n", "T", "design", "wall ns/read", "cpu ns", "cores",
              "handed", "waited");
  // Runs interleaved (every row once, then again), so that a burst of load
  // from elsewhere on the machine spreads over the rows, not over one row.
  std::array<std::array<std::array<Result, kRuns>, kDesigns.size()>, kThreads.size()> all;
  for (int r = 0; r < kRuns; ++r) {
    for (std::size_t t = 0; t < kThreads.size(); ++t) {
      for (std::size_t d = 0; d < kDesigns.size(); ++d) {
        all[t][d][r] = run(kDesigns[d], kThreads[t], fd, r);
      }
    }
  }
  // Each column's median on its own.
  auto median = [](std::array<Result, kRuns> results, double Result::*field) {
    std::sort(results.begin(), results.end(),
              [field](const Result& a, const Result& b) { return a.*field < b.*field; });
    return std::array<double, 3>{results[0].*field, results[kRuns / 2].*field,
                                 results[kRuns - 1].*field};
  };
  for (std::size_t t = 0; t < kThreads.size(); ++t) {
    for (std::size_t d = 0; d < kDesigns.size(); ++d) {
      const auto wall = median(all[t][d], &Result::wall_ns);
      char range[48];
      std::snprintf(range, sizeof range, "%.0f [%.0f-%.0f]", wall[1], wall[0], wall[2]);
      char handed[16] = "-";
      char waited[16] = "-";
      if (kDesigns[d] == Design::kShared) {
        std::snprintf(handed, sizeof handed, "%.2f%%",
                      median(all[t][d], &Result::handed_over)[1] * 100);
      }
      if (kDesigns[d] != Design::kPread) {
        std::snprintf(waited, sizeof waited, "%.2f%%", median(all[t][d], &Result::waited)[1] * 100);
      }
      const double cpu = median(all[t][d], &Result::cpu_ns)[1];
      std::printf("%-3d %-12s %20s %8.0f %6.2f %8s %8s\n", kThreads[t], kNames[d], range, cpu,
                  cpu / wall[1], handed, waited);
    }
  }
  ::close(fd);
  return 0;
}
