// The io_uring file engine (src/fs/uring_engine.cpp) under more completions
// at once than its completion queue holds.
//
// Completion-queue overflow: the ring has 256 SQ entries and so 512 CQ
// entries. When more completions than that are posted before anyone reaps,
// the kernel keeps the rest on its overflow list (IORING_FEAT_NODROP) and
// copies them into the CQ only inside io_uring_enter with GETEVENTS (liburing
// adds it to a submit when it sees IORING_SQ_CQ_OVERFLOW). reap() only walks
// the CQ (io_uring_for_each_cqe) and the driver's epoll watch is
// edge-triggered: before reap() asked for them (io_uring_get_events), the
// overflowed operations stayed pending until some later submission happened
// to flush them, and their tasks waited forever on an otherwise idle
// runtime (512 of 2000 reads completed).
//
// Many positional reads parked on one pipe complete together when it is
// written to: each is a 1-byte read_at on the pipe's read end (preadv2 with
// an offset gives ESPIPE, so the call goes to the engine, and the ring's read
// ignores the offset of a stream), all in flight at once.
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <optional>
#include <thread>
#include <vector>

#include "fs/fs_support.hpp"
#include "volt/time/sleep.hpp"

namespace volt::test {
namespace {

using namespace std::chrono_literals;

constexpr int kReads = 2000;  // well over the 512 CQ entries

struct UringMode {
  const char* name;
  Flavour flavour;
};

inline void PrintTo(const UringMode& m, std::ostream* os) {
  *os << m.name;
}

class UringOverflowTest : public ::testing::TestWithParam<UringMode> {};

INSTANTIATE_TEST_SUITE_P(Modes, UringOverflowTest,
                         ::testing::Values(UringMode{"MT2", kMultiThread2},
                                           UringMode{"CT", kCurrentThread}),
                         [](const auto& info) { return std::string(info.param.name); });

Task<void> read_one_byte(const fs::File* f, std::atomic<int>* done, std::atomic<int>* ok) {
  std::vector<std::byte> b(1);
  Expected<std::size_t> r = co_await f->read_at(b, 0);
  if (r && *r == 1) ok->fetch_add(1);
  done->fetch_add(1);
}

TEST_P(UringOverflowTest, MoreCompletionsAtOnceThanTheCompletionQueueHoldsAllArrive) {
  std::optional<Runtime> rt;
  {
    Runtime::Builder b = make_builder(GetParam().flavour);
    b.io_uring(true);
    rt.emplace(b.build());
  }
  if (!rt->uses_io_uring()) GTEST_SKIP() << "io_uring refused by this kernel";
  int fds[2];
  ASSERT_EQ(::pipe2(fds, O_CLOEXEC), 0);
  std::optional<fs::File> reader(fs::File::from_fd(fds[0]).value());
  std::atomic<int> done{0};
  std::atomic<int> ok{0};
  // All on the runtime (a current-thread runtime runs tasks only in block_on).
  const int finished = rt->block_on(
      [](const fs::File* f, int wfd, std::atomic<int>* done, std::atomic<int>* ok) -> Task<int> {
        for (int i = 0; i < kReads; ++i)
          (void)volt::spawn(read_one_byte(f, done, ok));
        // Let every read reach the ring (nothing completes them before the write).
        co_await volt::sleep(500ms);
        EXPECT_EQ(done->load(), 0);
        std::vector<char> bytes(kReads, 'x');
        EXPECT_EQ(::write(wfd, bytes.data(), bytes.size()), static_cast<ssize_t>(kReads));
        const auto deadline = std::chrono::steady_clock::now() + kNotHung;
        while (done->load() < kReads && std::chrono::steady_clock::now() < deadline)
          co_await volt::sleep(10ms);
        co_return done->load();
      }(&*reader, fds[1], &done, &ok));
  EXPECT_EQ(finished, kReads) << finished << " of " << kReads
                              << " reads completed; the rest are stuck past the CQ";
  EXPECT_EQ(ok.load(), done.load());
  ::close(fds[1]);
  rt.reset();  // cancels stuck readers; the ring's shutdown wait flushes the overflow
  reader.reset();
}

}  // namespace
}  // namespace volt::test
