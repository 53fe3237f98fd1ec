// volt::fs: whole-file calls, File, OpenOptions, metadata by path; each test
// under every FsMode (both engines, inline attempts on and off).
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include <pthread.h>
#include <atomic>
#include <csignal>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <random>
#include <thread>

#include "fs/fs_support.hpp"

namespace volt::test {
namespace {

namespace fs = volt::fs;
using namespace std::chrono_literals;
using Path = std::filesystem::path;

class FileTest : public ::testing::TestWithParam<FsMode> {
 protected:
  void SetUp() override {
    fds_at_start_ = open_fds();
    if (!make_fs_runtime(GetParam(), rt_)) GTEST_SKIP() << "io_uring refused by this kernel";
    scope_.emplace(GetParam());
  }
  void TearDown() override {
    rt_.reset();  // before the scope: the runtime's shutdown may still run ops
    scope_.reset();
  }
  Runtime& rt() { return *rt_; }
  const Path& dir() const { return dir_.path(); }

  std::optional<Runtime> rt_;
  std::optional<FsModeScope> scope_;
  TempDir dir_;
  int fds_at_start_ = 0;  // before the runtime (its epoll, eventfd, ring)
};

bool is_errno(const std::error_code& ec, int err) {
  return ec.value() == err && &ec.category() == &std::system_category();
}

// ---- whole files ----

TEST_P(FileTest, ReadGivesTheWholeFileAtEverySize) {
  // Around the inline chunk, the engine's linked read (64 KiB), the part
  // zero-filled ahead of each read (256 KiB) and the 1 MiB chunk limit.
  const std::size_t sizes[] = {0,      1,      4096,   65535,  65536,         65537,
                               262143, 262144, 262145, 655361, (1 << 20) + 3, 3 << 20};
  for (std::size_t size : sizes) {
    std::string name = "f";
    name += std::to_string(size);  // not "f" + ...: GCC 12 warns (-Wstringop-overflow)
    const Path p = dir() / name;
    write_fixture(p, pattern_bytes(size));
    auto got = rt().block_on([](Path p) -> Task<Expected<std::vector<std::byte>>> {
      auto r = co_await fs::read(p);
      co_return r;
    }(p));
    ASSERT_TRUE(got) << size << ": " << got.error().message();
    EXPECT_EQ(got->size(), size);
    EXPECT_TRUE(*got == pattern_bytes(size)) << "content differs at size " << size;
  }
}

TEST_P(FileTest, ReadOfAFileWhoseSizeIsUnknownGrowsTheResult) {
  // procfs reports size 0 for a file with content: the result outgrows what
  // fstat promised, and every byte read must be kept.
  std::ifstream in("/proc/self/mountinfo");
  const std::string expected{std::istreambuf_iterator<char>(in), {}};
  ASSERT_GT(expected.size(), 64u);
  auto got = rt().block_on([]() -> Task<Expected<std::string>> {
    auto r = co_await fs::read_to_string("/proc/self/mountinfo");
    co_return r;
  }());
  ASSERT_TRUE(got) << got.error().message();
  EXPECT_EQ(*got, expected);
}

// A FIFO's open waits for its other end. Made on a worker (the inline open),
// it would hold that worker until a writer came; on a current-thread runtime
// the writer, a task of the same runtime, could then never run. The open
// must wait off the workers, so a timer of the same runtime fires while the
// FIFO still has no writer.
TEST_P(FileTest, OpeningAFifoWithoutAWriterBlocksNoWorker) {
  const Path fifo = dir() / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::atomic<bool> read_done{false};
  std::atomic<bool> stop{false};
  // The writer: started once the timer has fired (or, if the runtime is
  // stuck, after 20 s, so that the test fails instead of hanging: its open
  // completes the stuck reader's). Non-blocking opens, retried: where the
  // reader is already gone nothing would ever meet a blocking one.
  std::atomic<bool> release{false};
  std::thread writer([&] {
    const auto deadline = std::chrono::steady_clock::now() + 20s;
    while (!release.load() && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(1ms);
    while (!stop.load() && !read_done.load()) {
      const int fd = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
      if (fd >= 0) {
        EXPECT_EQ(::write(fd, "hello", 5), 5);
        ::close(fd);
        return;
      }
      std::this_thread::sleep_for(1ms);
    }
  });
  struct Outcome {
    bool timer_fired_while_waiting = false;
    std::optional<Expected<std::vector<std::byte>>> data;
  };
  Outcome out = rt().block_on(
      [](Path fifo, std::atomic<bool>* read_done, std::atomic<bool>* release) -> Task<Outcome> {
        JoinHandle<Expected<std::vector<std::byte>>> reader =
            spawn([](Path fifo, std::atomic<bool>* done) -> Task<Expected<std::vector<std::byte>>> {
              Expected<std::vector<std::byte>> r = co_await fs::read(fifo);
              done->store(true);
              co_return r;
            }(fifo, read_done));
        co_await volt::sleep(50ms);
        Outcome o;
        o.timer_fired_while_waiting = true;
        release->store(true);
        o.data = co_await reader;
        co_return o;
      }(fifo, &read_done, &release));
  stop.store(true);
  release.store(true);
  writer.join();
  EXPECT_TRUE(out.timer_fired_while_waiting);
  ASSERT_TRUE(out.data.has_value());
  ASSERT_TRUE(*out.data) << out.data->error().message();
  // Inline, fs::read opens the FIFO without waiting and the blocking pool
  // waits for its input; the pool's own open waits as open(2) does. Either
  // way the writer's bytes arrive. io_uring's open (the engine-only modes)
  // does not wait (it opens without blocking, then clears O_NONBLOCK), so
  // there the read may find no writer yet and end at once, empty: a known
  // difference, listed in docs/design.md.
  if (!GetParam().io_uring || GetParam().inline_ops) {
    const std::vector<std::byte>& bytes = out.data->value();
    const std::string text(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    EXPECT_EQ(text, "hello");
  }
}

// The other order: a writer already waits in its open(2) when fs::read
// comes. The read's open lets it through; the read must then keep that FIFO
// open to the end (closing it and opening again would leave the writer
// writing into a FIFO without a reader: EPIPE).
TEST_P(FileTest, ReadingAFifoWhoseWriterWaitsInOpenGetsItsBytes) {
  const Path fifo = dir() / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::atomic<pid_t> writer_tid{0};
  std::atomic<bool> stop{false};
  std::thread writer([&] {
    // SIGPIPE is directed at this thread: blocked, a write to a FIFO whose
    // reader left is EPIPE here, not the end of the test binary.
    sigset_t pipe_only;
    sigemptyset(&pipe_only);
    sigaddset(&pipe_only, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_only, nullptr);
    writer_tid.store(static_cast<pid_t>(::syscall(SYS_gettid)));
    // Blocking, once the reader exists; bounded, so that a lost reader
    // fails the test instead of hanging it.
    int fd = -1;
    while (fd < 0 && !stop.load()) {
      fd = ::open(fifo.c_str(), O_WRONLY | O_CLOEXEC);
      if (fd < 0 && errno != EINTR) break;
    }
    if (fd < 0) return;
    EXPECT_EQ(::write(fd, "hello", 5), 5) << std::strerror(errno);
    ::close(fd);
  });
  // Until the writer sleeps in openat (its /proc syscall line names it).
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  bool in_open = false;
  while (!in_open && std::chrono::steady_clock::now() < deadline) {
    const pid_t tid = writer_tid.load();
    if (tid != 0) {
      std::ifstream in("/proc/self/task/" + std::to_string(tid) + "/syscall");
      long nr = -1;
      in >> nr;
      in_open = nr == SYS_openat;
    }
    if (!in_open) std::this_thread::sleep_for(1ms);
  }
  auto got = rt().block_on([](Path fifo) -> Task<Expected<std::vector<std::byte>>> {
    auto r = co_await volt::timeout(10s, fs::read(fifo));
    co_return r.flatten();
  }(fifo));
  if (!got) {  // let a writer still waiting go
    stop.store(true);
    const int fd = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    writer.join();
    if (fd >= 0) ::close(fd);
  } else {
    writer.join();
  }
  ASSERT_TRUE(got) << got.error().message();
  const std::string text(reinterpret_cast<const char*>(got->data()), got->size());
  EXPECT_EQ(text, "hello");
}

// fstat's size is more than a vector can hold (a sparse file of 2^63 - 1
// bytes): an error value, not an exception, and no descriptor left open.
TEST_P(FileTest, ReadOfAFileLargerThanAVectorCanBeIsEfbig) {
  // tmpfs allows it (ext4 stops at 16 TiB, where the allocation fails as
  // ENOMEM instead, which AddressSanitizer would report as a crash).
  Path p = "/dev/shm/volt-huge-" + std::to_string(::getpid());
  { std::ofstream(p) << ""; }
  struct Unlink {
    const Path& p;
    ~Unlink() { ::unlink(p.c_str()); }
  } unlink_at_end{p};
  if (::truncate(p.c_str(), std::numeric_limits<off_t>::max()) != 0)
    GTEST_SKIP() << "no file system here takes a sparse file that large: " << std::strerror(errno);
  const int fds = open_fds();
  auto got = rt().block_on([](Path p) -> Task<Expected<std::vector<std::byte>>> {
    auto r = co_await fs::read(p);
    co_return r;
  }(p));
  ASSERT_FALSE(got);
  EXPECT_TRUE(is_errno(got.error(), EFBIG)) << got.error().message();
  EXPECT_EQ(open_fds(), fds);
}

TEST_P(FileTest, ReadFromAColdPageCacheGoesThroughTheEngine) {
  const Path p = dir() / "cold";
  write_fixture(p, pattern_bytes(600'000));
  evict_from_page_cache(p);
  auto got = rt().block_on([](Path p) -> Task<Expected<std::vector<std::byte>>> {
    auto r = co_await fs::read(p);
    co_return r;
  }(p));
  ASSERT_TRUE(got) << got.error().message();
  EXPECT_TRUE(*got == pattern_bytes(600'000));
}

TEST_P(FileTest, ReadToStringAndErrors) {
  const Path p = dir() / "text";
  const std::string text = "line one\nline two\n";
  std::ofstream(p) << text;
  const Path missing = dir() / "missing";
  const Path d = dir();
  rt().block_on([](Path p, Path missing, Path d, std::string text) -> Task<void> {
    auto s = co_await fs::read_to_string(p);
    EXPECT_TRUE(s && *s == text);
    auto m = co_await fs::read(missing);
    EXPECT_TRUE(!m && is_errno(m.error(), ENOENT)) << (m ? "ok" : m.error().message());
    auto md = co_await fs::read_to_string(missing);
    EXPECT_TRUE(!md && is_errno(md.error(), ENOENT));
    auto isdir = co_await fs::read(d);
    EXPECT_TRUE(!isdir && is_errno(isdir.error(), EISDIR))
        << (isdir ? "ok" : isdir.error().message());
  }(p, missing, d, text));
}

TEST_P(FileTest, WriteCreatesTruncatesAndAppendAppends) {
  const Path p = dir() / "out";
  const Path nowhere = dir() / "no-such-dir" / "out";
  rt().block_on([](Path p, Path nowhere) -> Task<void> {
    const std::string first = "first version, longer than the second\n";
    const std::string second = "second\n";
    EXPECT_TRUE(co_await fs::write(p, first));
    EXPECT_EQ(*co_await fs::read_to_string(p), first);
    EXPECT_TRUE(co_await fs::write(p, second));  // truncates
    EXPECT_EQ(*co_await fs::read_to_string(p), second);
    EXPECT_TRUE(co_await fs::append(p, first));
    EXPECT_EQ(*co_await fs::read_to_string(p), second + first);
    auto bad = co_await fs::write(nowhere, first);
    EXPECT_TRUE(!bad && is_errno(bad.error(), ENOENT)) << (bad ? "ok" : bad.error().message());
    // A large write (several engine chunks, past the linked chain's size).
    const std::vector<std::byte> big = pattern_bytes(5 << 20);
    EXPECT_TRUE(co_await fs::write(p, big));
    auto back = co_await fs::read(p);
    EXPECT_TRUE(back && *back == big);
  }(p, nowhere));
}

// ---- OpenOptions ----

TEST(OpenOptionsFlags, ContradictionsAreEinval) {
  EXPECT_FALSE(fs::OpenOptions().flags());                              // no access
  EXPECT_FALSE(fs::OpenOptions().read(true).truncate(true).flags());    // truncate, no write
  EXPECT_FALSE(fs::OpenOptions().read(true).create(true).flags());      // create, no write
  EXPECT_FALSE(fs::OpenOptions().append(true).truncate(true).flags());  // append + truncate
  EXPECT_TRUE(fs::OpenOptions().append(true).create(true).flags());
  auto f = fs::OpenOptions().read(true).write(true).create_new(true).flags();
  ASSERT_TRUE(f);
  EXPECT_EQ(*f & (O_CREAT | O_EXCL | O_ACCMODE), O_CREAT | O_EXCL | O_RDWR);
  EXPECT_TRUE(*f & O_CLOEXEC);
}

TEST_P(FileTest, OpenOptionsBehaveAsStd) {
  const Path p = dir() / "opts";
  rt().block_on([](Path p) -> Task<void> {
    auto missing = co_await fs::File::open(p);
    EXPECT_TRUE(!missing && is_errno(missing.error(), ENOENT));
    auto created = co_await fs::File::create_new(p);
    EXPECT_TRUE(created) << created.error().message();
    auto again = co_await fs::File::create_new(p);
    EXPECT_TRUE(!again && is_errno(again.error(), EEXIST));
    auto einval = co_await fs::OpenOptions().read(true).truncate(true).open(p);
    EXPECT_TRUE(!einval && is_errno(einval.error(), EINVAL));
    // mode: created with 0600 (the umask cannot add bits).
    const Path q = p.string() + "-mode";
    auto m = co_await fs::OpenOptions().write(true).create(true).mode(0600).open(q);
    EXPECT_TRUE(m);
    auto meta = co_await fs::metadata(q);
    EXPECT_TRUE(meta && (meta->permissions().mode() & 0777) == 0600);
  }(p));
}

// ---- File: cursor, positional, the rest ----

TEST_P(FileTest, ReadWriteAndSeekShareTheCursor) {
  const Path p = dir() / "cursor";
  rt().block_on([](Path p) -> Task<void> {
    auto f = co_await fs::OpenOptions().read(true).write(true).create(true).open(p);
    EXPECT_TRUE(f);
    if (!f) co_return;
    const std::string hello = "hello, world";
    EXPECT_EQ(*co_await f->write(hello), hello.size());
    EXPECT_EQ(*co_await f->seek(fs::SeekFrom::start(7)), 7u);
    char buf[16] = {};
    auto n = co_await f->read(io::MutableBuffer(buf, sizeof buf));
    EXPECT_TRUE(n && *n == 5 && std::string_view(buf, 5) == "world");
    auto eof = co_await f->read(io::MutableBuffer(buf, sizeof buf));
    EXPECT_TRUE(eof && *eof == 0);
    EXPECT_EQ(*co_await f->seek(fs::SeekFrom::end(-5)), 7u);
    EXPECT_EQ(*co_await f->seek(fs::SeekFrom::current(2)), 9u);
    // io::AsyncRead users: read_exact through the generic helper.
    EXPECT_EQ(*co_await f->seek(fs::SeekFrom::start(0)), 0u);
    char five[5];
    EXPECT_TRUE(co_await io::read_exact(*f, io::MutableBuffer(five, 5)));
    EXPECT_EQ(std::string_view(five, 5), "hello");
    auto bad = co_await f->seek(fs::SeekFrom::current(-100));
    EXPECT_TRUE(!bad && is_errno(bad.error(), EINVAL));
  }(p));
}

TEST_P(FileTest, PositionalReadsAndWritesLeaveTheCursor) {
  const Path p = dir() / "pos";
  write_fixture(p, pattern_bytes(100'000));
  rt().block_on([](Path p) -> Task<void> {
    auto f = co_await fs::OpenOptions().read(true).write(true).open(p);
    EXPECT_TRUE(f);
    if (!f) co_return;
    std::vector<std::byte> block(4096);
    EXPECT_TRUE(co_await f->read_exact_at(block, 50'000));
    EXPECT_TRUE(block == pattern_bytes(4096, 50'000));
    const std::string mark = "MARK";
    EXPECT_TRUE(co_await f->write_all_at(mark, 10));
    char four[4];
    EXPECT_TRUE(co_await f->read_exact_at(io::MutableBuffer(four, 4), 10));
    EXPECT_EQ(std::string_view(four, 4), "MARK");
    EXPECT_EQ(*co_await f->seek(fs::SeekFrom::current(0)), 0u);  // untouched
    auto past = co_await f->read_at(block, 200'000);
    EXPECT_TRUE(past && *past == 0);
    auto short_exact = co_await f->read_exact_at(block, 100'000 - 100);
    EXPECT_TRUE(!short_exact && short_exact.error() == errc::unexpected_eof);
  }(p));
}

// ---- O_DIRECT ----

// Whether this file system takes O_DIRECT (-1: refused), and whether it
// would refuse a vector's buffer (1: a 16-aligned address is EINVAL, as on
// this project's test machines' ext4 over virtio disks, whose DMA alignment
// is 512; NVMe's is 4 and tmpfs takes any, 0). Only with 1 do the
// misaligned-buffer tests below fail without an aligned buffer of the op's
// own; the routing test fails without the fix either way.
int direct_io_enforces_alignment(const Path& p) {
  const int fd = ::open(p.c_str(), O_RDONLY | O_DIRECT | O_CLOEXEC);
  if (fd < 0) return -1;
  alignas(4096) static char block[2 * 4096];
  const ssize_t n = ::pread(fd, block + 16, 4096, 0);
  const int err = errno;
  ::close(fd);
  return n < 0 && err == EINVAL ? 1 : 0;
}

// A 16 KiB pattern file at `p`, written back and out of the page cache
// (a dirty page makes an RWF_NOWAIT direct read say EAGAIN, which would
// hide an inline attempt), opened O_RDONLY | O_DIRECT by open(2); -1 if the
// file system refuses O_DIRECT.
int open_direct_fixture(const Path& p) {
  write_fixture(p, pattern_bytes(1 << 14));
  evict_from_page_cache(p);
  return ::open(p.c_str(), O_RDONLY | O_DIRECT | O_CLOEXEC);
}

// The caller's buffers are misaligned on purpose: what the kernel sees is
// the operation's own buffer (file.hpp, "Cancellation"), which must then be
// aligned. Before it was, every one of these calls failed with EINVAL on
// this machine's ext4 (the inline attempt, then the engine's vector).
TEST_P(FileTest, DirectIoWorksThroughMisalignedCallerBuffers) {
  const Path p = dir() / "direct";
  write_fixture(p, pattern_bytes(1 << 16));
  const int enforced = direct_io_enforces_alignment(p);
  if (enforced < 0) GTEST_SKIP() << "this file system refuses O_DIRECT";
  RecordProperty("vector_refused", enforced);
  rt().block_on([](Path p) -> Task<void> {
    auto f = co_await fs::OpenOptions().read(true).write(true).custom_flags(O_DIRECT).open(p);
    EXPECT_TRUE(f) << f.error().message();
    if (!f) co_return;
    std::vector<std::byte> storage(3 * 4096);
    io::MutableBuffer odd(storage.data() + 1, 8192);
    Expected<void> r = co_await f->read_exact_at(odd, 4096);
    EXPECT_TRUE(r) << r.error().message();
    EXPECT_TRUE(std::equal(storage.begin() + 1, storage.begin() + 1 + 8192,
                           pattern_bytes(8192, 4096).begin()));
    // A write from a misaligned source, then the cursor's read and write.
    std::vector<std::byte> fresh = pattern_bytes(4096, 777);
    std::copy(fresh.begin(), fresh.end(), storage.begin() + 3);
    r = co_await f->write_all_at(io::ConstBuffer(storage.data() + 3, 4096), 8192);
    EXPECT_TRUE(r) << r.error().message();
    auto n = co_await f->read(io::MutableBuffer(storage.data() + 5, 4096));
    EXPECT_TRUE(n && *n == 4096) << (n ? "short" : n.error().message());
    EXPECT_TRUE(std::equal(storage.begin() + 5, storage.begin() + 5 + 4096,
                           pattern_bytes(4096, 0).begin()));
    n = co_await f->write(io::ConstBuffer(storage.data() + 5, 4096));  // at the cursor: 4096
    EXPECT_TRUE(n && *n == 4096) << (n ? "short" : n.error().message());
    // A dup keeps O_DIRECT (the flags are the open file's, shared).
    auto clone = co_await f->try_clone();
    EXPECT_TRUE(clone);
    if (clone) {
      r = co_await clone->read_exact_at(io::MutableBuffer(storage.data() + 7, 4096), 8192);
      EXPECT_TRUE(r) << r.error().message();
      EXPECT_TRUE(std::equal(storage.begin() + 7, storage.begin() + 7 + 4096, fresh.begin()));
    }
  }(p));
  // What the writes left, read back without O_DIRECT.
  std::vector<std::byte> expected = pattern_bytes(1 << 16);
  std::copy_n(pattern_bytes(4096, 0).begin(), 4096, expected.begin() + 4096);
  std::copy_n(pattern_bytes(4096, 777).begin(), 4096, expected.begin() + 8192);
  std::ifstream in(p, std::ios::binary);
  std::vector<char> got((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_EQ(got.size(), expected.size());
  EXPECT_EQ(std::memcmp(got.data(), expected.data(), got.size()), 0);
}

// A descriptor opened elsewhere with O_DIRECT: File::from_fd asks the
// kernel for its flags.
TEST_P(FileTest, DirectIoOfAnAdoptedDescriptorIsSeen) {
  const int fd = open_direct_fixture(dir() / "direct_adopted");
  if (fd < 0) GTEST_SKIP() << "this file system refuses O_DIRECT";
  auto f = fs::File::from_fd(fd);
  ASSERT_TRUE(f);
  rt().block_on([](fs::File f) -> Task<void> {
    std::vector<std::byte> storage(4096 + 64);
    Expected<void> r = co_await f.read_exact_at(io::MutableBuffer(storage.data() + 9, 4096), 4096);
    EXPECT_TRUE(r) << r.error().message();
    EXPECT_TRUE(std::equal(storage.begin() + 9, storage.begin() + 9 + 4096,
                           pattern_bytes(4096, 4096).begin()));
  }(std::move(*f)));
}

// An O_DIRECT read always goes to the device: RWF_NOWAIT does not refuse it
// (it refuses only to wait for locks or write-back), so the inline attempt
// would hold the worker for the disk's latency (1.3 ms a MiB here). It must
// go to the engine: in the pool mode with inline attempts on, the read
// starts the pool's first thread. (The fixture is out of the page cache:
// its dirty pages would have made the inline attempt say EAGAIN.)
TEST_P(FileTest, DirectIoReadsGoToTheEngineEvenWhenInlineIsOn) {
  if (GetParam().io_uring || !GetParam().inline_ops)
    GTEST_SKIP() << "observable through the blocking pool's threads only";
  const int fd = open_direct_fixture(dir() / "direct_engine");
  if (fd < 0) GTEST_SKIP() << "this file system refuses O_DIRECT";
  auto f = fs::File::from_fd(fd);
  ASSERT_TRUE(f);
  ASSERT_EQ(rt().stats().blocking_threads, 0u);
  rt().block_on([](fs::File f) -> Task<void> {
    alignas(4096) static std::byte block[4096];  // aligned: the inline call would succeed
    Expected<void> r = co_await f.read_exact_at(io::MutableBuffer(block, 4096), 0);
    EXPECT_TRUE(r) << r.error().message();
    EXPECT_TRUE(std::equal(block, block + 4096, pattern_bytes(4096).begin()));
  }(std::move(*f)));
  EXPECT_GE(rt().stats().blocking_threads, 1u);
}

TEST_P(FileTest, SyncSetLenMetadataPermissionsCloneClose) {
  const Path p = dir() / "misc";
  rt().block_on([](Path p) -> Task<void> {
    auto f = co_await fs::File::create(p);
    EXPECT_TRUE(f);
    if (!f) co_return;
    EXPECT_TRUE(co_await io::write_all(*f, std::string_view("0123456789")));
    EXPECT_TRUE(co_await f->sync_data());
    EXPECT_TRUE(co_await f->sync_all());
    EXPECT_TRUE(co_await f->set_len(4));
    auto m = co_await f->metadata();
    EXPECT_TRUE(m && m->len() == 4 && m->is_file() && !m->is_dir());
    EXPECT_TRUE(co_await f->set_len(1000));
    EXPECT_EQ((*co_await fs::metadata(p)).len(), 1000u);
    EXPECT_TRUE(co_await f->set_permissions(fs::Permissions(0640)));
    EXPECT_EQ((*co_await fs::metadata(p)).permissions().mode() & 0777, 0640u);
    auto clone = co_await f->try_clone();
    EXPECT_TRUE(clone);
    // Shared cursor: a seek through the clone moves the original's.
    EXPECT_EQ(*co_await clone->seek(fs::SeekFrom::start(3)), 3u);
    EXPECT_EQ(*co_await f->seek(fs::SeekFrom::current(0)), 3u);
    EXPECT_TRUE(co_await f->close());
    EXPECT_FALSE(*f);
    auto after = co_await f->write(std::string_view("x"));
    EXPECT_TRUE(!after && is_errno(after.error(), EBADF));
    EXPECT_TRUE(co_await clone->close());
  }(p));
}

TEST_P(FileTest, MetadataSymlinksAndExistence) {
  const Path file = dir() / "target";
  const Path link = dir() / "link";
  const Path dangling = dir() / "dangling";
  write_fixture(file, pattern_bytes(1234));
  std::filesystem::create_symlink(file, link);
  std::filesystem::create_symlink(dir() / "nothing-here", dangling);
  const Path d = dir();
  rt().block_on([](Path file, Path link, Path dangling, Path d) -> Task<void> {
    auto m = co_await fs::metadata(link);
    EXPECT_TRUE(m && m->is_file() && m->len() == 1234);
    auto l = co_await fs::symlink_metadata(link);
    EXPECT_TRUE(l && l->is_symlink() && !l->is_file());
    auto dm = co_await fs::metadata(d);
    EXPECT_TRUE(dm && dm->is_dir());
    EXPECT_TRUE(dm && dm->file_type().type() == std::filesystem::file_type::directory);
    auto gone = co_await fs::metadata(dangling);
    EXPECT_TRUE(!gone && is_errno(gone.error(), ENOENT));
    EXPECT_TRUE(*co_await fs::try_exists(file));
    EXPECT_FALSE(*co_await fs::try_exists(dangling));
    const Path under_file = file / "x";  // ENOTDIR on the way: "does not exist"
    EXPECT_FALSE(*co_await fs::try_exists(under_file));
    // Times: modified is recent.
    const auto age = std::chrono::system_clock::now() - m->modified();
    EXPECT_LT(age, std::chrono::hours(1));
  }(file, link, dangling, d));
}

// ---- a large copy ----

TEST_P(FileTest, SixtyFourMebibytesCopiedByteForByte) {
  constexpr std::size_t kSize = 64u << 20;
  const Path from = dir() / "big";
  const Path by_copy = dir() / "big.copy";
  const Path by_stream = dir() / "big.stream";
  write_fixture(from, pattern_bytes(kSize));
  rt().block_on([](Path from, Path by_copy, Path by_stream) -> Task<void> {
    // fs::copy (copy_file_range on the pool).
    auto copied = co_await fs::copy(from, by_copy);
    EXPECT_TRUE(copied && *copied == kSize) << (copied ? "short" : copied.error().message());
    // A File to File stream copy through io::copy (AsyncRead -> AsyncWrite).
    auto in = co_await fs::File::open(from);
    auto out = co_await fs::File::create(by_stream);
    EXPECT_TRUE(in && out);
    if (!in || !out) co_return;
    auto streamed = co_await io::copy(*in, *out);
    EXPECT_TRUE(streamed && *streamed == kSize)
        << (streamed ? "short" : streamed.error().message());
    EXPECT_TRUE(co_await out->sync_data());
  }(from, by_copy, by_stream));
  const auto expected = pattern_bytes(kSize);
  EXPECT_TRUE(read_fixture(by_copy) == expected);
  EXPECT_TRUE(read_fixture(by_stream) == expected);
}

// ---- many tasks on one File ----

TEST_P(FileTest, SixteenTasksReadAndWriteOneFileAtOnce) {
  constexpr std::size_t kTasks = 16;
  constexpr std::size_t kRegion = 64 * 1024;
  const Path p = dir() / "shared";
  write_fixture(p, std::vector<std::byte>(kTasks * kRegion));
  rt().block_on([](Path p) -> Task<void> {
    auto f = co_await fs::OpenOptions().read(true).write(true).open(p);
    EXPECT_TRUE(f);
    if (!f) co_return;
    std::vector<JoinHandle<bool>> tasks;
    for (std::size_t t = 0; t < kTasks; ++t) {
      tasks.push_back(spawn([](const fs::File& file, std::size_t t) -> Task<bool> {
        // Each task writes its region in 4 KiB blocks, then reads it back.
        const std::uint64_t base = t * kRegion;
        for (std::size_t off = 0; off < kRegion; off += 4096) {
          const auto block = pattern_bytes(4096, base + off);
          if (!co_await file.write_all_at(block, base + off)) co_return false;
        }
        std::vector<std::byte> back(kRegion);
        if (!co_await file.read_exact_at(back, base)) co_return false;
        co_return back == pattern_bytes(kRegion, base);
      }(*f, t)));
    }
    for (auto& t : tasks)
      EXPECT_TRUE(co_await t);
  }(p));
  EXPECT_TRUE(read_fixture(p) == pattern_bytes(kTasks * kRegion));
}

// ---- cancellation ----

TEST_P(FileTest, CancelledReadsFreeNothingEarlyAndLeakNoDescriptor) {
  const Path p = dir() / "cancel";
  write_fixture(p, pattern_bytes(1 << 20));
  // 10,000 as the issue asks, under ASan too (its point: nothing freed
  // early); TSan, ten times slower per read, runs 2,000.
#if defined(__SANITIZE_THREAD__)
  const int rounds = 2'000;
#else
  const int rounds = 10'000;
#endif
  const int completed = rt().block_on([](Path p, int rounds) -> Task<int> {
    auto f = co_await fs::File::open(p);
    EXPECT_TRUE(f);
    if (!f) co_return 0;
    std::mt19937 rng(42);
    int completed = 0;
    for (int i = 0; i < rounds; ++i) {
      // From time to time the file leaves the page cache: reads then wait for
      // the disk, in the kernel (io_uring) or on a pool thread, and the
      // deadline cancels them while the kernel still writes into the op.
      if (i % 64 == 0) evict_from_page_cache(p);
      std::vector<std::byte> buf(4096);
      const std::uint64_t off = (rng() % 256) * 4096;
      auto d = std::chrono::microseconds(rng() % 50);
      // Alternate whole-file reads (the engine's linked chain) and
      // positional reads; the deadline cancels some mid-flight.
      if (i % 2) {
        auto r = co_await volt::timeout(d, f->read_at(buf, off));
        if (r && *r && **r == 4096) {
          ++completed;
          EXPECT_TRUE(buf == pattern_bytes(4096, off));
        }
      } else {
        auto r = co_await volt::timeout(d, fs::read(p));
        if (r && *r) ++completed;
      }
    }
    co_return completed;
  }(p, rounds));
  rt_.reset();  // shutdown waits for whatever the kernel still works on
  // The runtime's own descriptors close when its last pool thread has left.
  EXPECT_TRUE(wait_until([&] { return open_fds() == fds_at_start_; })) << open_fds();
  std::printf("[ info     ] %d of %d reads completed before their deadline (the rest cancelled)\n",
              completed, rounds);
}

TEST_P(FileTest, ShutdownWithOperationsInFlightNeitherHangsNorLeaks) {
  const Path p = dir() / "inflight";
  write_fixture(p, pattern_bytes(256 << 10));
  rt().block_on([](Path p) -> Task<void> {
    for (int i = 0; i < 64; ++i) {
      // Detached: the runtime's shutdown finds them running.
      (void)spawn([](Path p) -> Task<void> {
        for (;;) {
          auto r = co_await fs::read(p);
          if (!r) co_return;
          auto w = co_await fs::write(p.string() + ".copy", *r);
          if (!w) co_return;
        }
      }(p));
    }
    co_await volt::sleep(20ms);
  }(p));
  Watchdog watchdog(kNotHung, "runtime shutdown with file operations in flight");
  rt_.reset();
  EXPECT_TRUE(wait_until([&] { return open_fds() == fds_at_start_; })) << open_fds();
}

INSTANTIATE_TEST_SUITE_P(Modes, FileTest, ::testing::ValuesIn(kFsModes), FsModeName());

// ---- faults ----

class FileFaultTest : public FileTest {};

TEST_P(FileFaultTest, OutOfDescriptorsIsEmfileAndLeaksNothing) {
  const Path p = dir() / "emfile";
  write_fixture(p, pattern_bytes(10));
  const int fds_before = open_fds();
  rt().block_on([](Path p) -> Task<void> {
    rlimit saved{};
    ::getrlimit(RLIMIT_NOFILE, &saved);
    std::vector<int> fillers;
    rlimit tight = saved;
    tight.rlim_cur = 256;
    ::setrlimit(RLIMIT_NOFILE, &tight);
    for (int fd; (fd = ::dup(0)) >= 0;)
      fillers.push_back(fd);
    auto f = co_await fs::File::open(p);
    auto r = co_await fs::read(p);
    auto w = co_await fs::write(p, std::string_view("x"));
    for (int fd : fillers)
      ::close(fd);
    ::setrlimit(RLIMIT_NOFILE, &saved);
    // By value (see tests/net/tcp_errors_test.cpp on UBSan and EMFILE).
    EXPECT_TRUE(!f && f.error().value() == EMFILE) << (f ? "opened" : f.error().message());
    // io_uring's linked whole-file read opens into a registered slot, not a
    // descriptor: it may succeed where open(2) cannot. Else EMFILE.
    if (r) {
      EXPECT_TRUE(*r == pattern_bytes(10));
    } else {
      EXPECT_EQ(r.error().value(), EMFILE);
    }
    // The same for the linked write.
    if (!w) {
      EXPECT_EQ(w.error().value(), EMFILE);
    }
  }(p));
  EXPECT_EQ(open_fds(), fds_before);
}

TEST_P(FileFaultTest, WritePastTheFileSizeLimitIsEfbig) {
  const Path p = dir() / "efbig";
  rt().block_on([](Path p) -> Task<void> {
    auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
    rlimit saved{};
    ::getrlimit(RLIMIT_FSIZE, &saved);
    rlimit small = saved;
    small.rlim_cur = 64 * 1024;
    ::setrlimit(RLIMIT_FSIZE, &small);
    auto w = co_await fs::write(p, pattern_bytes(200 * 1024));
    auto f = co_await fs::OpenOptions().write(true).open(p);
    Expected<void> at = std::error_code();
    if (f) at = co_await f->write_all_at(std::string_view("x"), 100 * 1024);
    ::setrlimit(RLIMIT_FSIZE, &saved);
    std::signal(SIGXFSZ, old_handler);
    EXPECT_TRUE(!w && is_errno(w.error(), EFBIG)) << (w ? "written" : w.error().message());
    EXPECT_TRUE(!at && is_errno(at.error(), EFBIG)) << (at ? "written" : at.error().message());
  }(p));
  // The prefix that fit is there: nothing beyond the limit, nothing lost before it.
  const auto on_disk = read_fixture(p);
  EXPECT_EQ(on_disk.size(), 64u * 1024);
  const auto expected = pattern_bytes(64 * 1024);
  const auto diff = std::mismatch(on_disk.begin(), on_disk.end(), expected.begin(), expected.end());
  EXPECT_TRUE(on_disk == expected) << "first difference at byte " << (diff.first - on_disk.begin());
}

// Tokio's BufWriter<File> can lose data when a flush fails (tokio #6325):
// here the failed flush reports the error, keeps exactly the bytes the
// kernel did not take, and the next flush writes them, each byte once.
TEST_P(FileFaultTest, FailedFlushKeepsExactlyTheUnwrittenBytes) {
  const Path p = dir() / "bufwriter";
  rt().block_on([](Path p) -> Task<void> {
    auto f = co_await fs::File::create(p);
    EXPECT_TRUE(f);
    if (!f) co_return;
    io::BufWriter out(std::move(*f), 256 * 1024);
    const auto data = pattern_bytes(100 * 1024);
    EXPECT_TRUE(co_await io::write_all(out, data));  // buffered, nothing written yet
    auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
    rlimit saved{};
    ::getrlimit(RLIMIT_FSIZE, &saved);
    rlimit small = saved;
    small.rlim_cur = 40 * 1024;
    ::setrlimit(RLIMIT_FSIZE, &small);
    auto failed = co_await out.flush();
    const std::size_t left = out.buffer().size();
    ::setrlimit(RLIMIT_FSIZE, &saved);
    std::signal(SIGXFSZ, old_handler);
    EXPECT_TRUE(!failed && is_errno(failed.error(), EFBIG))
        << (failed ? "flushed" : failed.error().message());
    EXPECT_EQ(left, 60u * 1024) << "the 40 KiB the kernel took left the buffer, the rest stayed";
    EXPECT_TRUE(co_await out.flush());
    EXPECT_TRUE(out.buffer().empty());
  }(p));
  EXPECT_TRUE(read_fixture(p) == pattern_bytes(100 * 1024));
}

INSTANTIATE_TEST_SUITE_P(Modes, FileFaultTest, ::testing::ValuesIn(kFsModes), FsModeName());

}  // namespace
}  // namespace volt::test
