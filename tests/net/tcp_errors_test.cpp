// TCP failure paths and resource hygiene: peer reset in the middle of a
// read and of a write, a read with a timeout, a read raced by select against
// a cancellation token (nothing lost either way), no descriptor leaked over
// many connect/accept/close cycles, and an accept loop in a child process
// with a low descriptor limit (setrlimit) that survives EMFILE and recovers.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "net/net_support.hpp"
#include "runtime/runtime_support.hpp"
#include "volt/net/tcp.hpp"
#include "volt/sync/cancellation_token.hpp"
#include "volt/task/join_handle.hpp"
#include "volt/task/select.hpp"
#include "volt/time/sleep.hpp"
#include "volt/time/timeout.hpp"

extern char** environ;

namespace volt::test {
namespace {

using namespace std::chrono_literals;
using net::SocketAddr;
using net::TcpListener;
using net::TcpStream;

struct Pair {
  TcpListener listener;
  TcpStream client;
  TcpStream server;
};

Task<Pair> connected_pair() {
  Pair p;
  p.listener = *TcpListener::bind(loopback());
  p.client = *(co_await TcpStream::connect(*p.listener.local_addr()));
  p.server = std::move((*(co_await p.listener.accept())).first);
  co_return p;
}

// Closes with SO_LINGER {on, 0}: the peer gets a RST, not a FIN.
void reset(TcpStream& s) {
  linger l{1, 0};
  ASSERT_EQ(::setsockopt(s.native_handle(), SOL_SOCKET, SO_LINGER, &l, sizeof l), 0);
  s.close();
}

std::size_t open_descriptors() {
  std::size_t n = 0;
  for ([[maybe_unused]] auto& e : std::filesystem::directory_iterator("/proc/self/fd"))
    ++n;
  return n;
}

TEST(TcpErrors, PeerResetDuringRead) {
  Runtime rt = make_runtime(kMultiThread2);
  rt.block_on([]() -> Task<void> {
    Pair p = co_await connected_pair();
    auto reader = spawn([](TcpStream& s) -> Task<std::error_code> {
      char buf[64];
      auto n = co_await s.read(buf);
      co_return n ? std::error_code() : n.error();
    }(p.server));
    co_await sleep(20ms);  // the reader is (very likely) waiting by now
    reset(p.client);
    std::error_code ec = co_await reader;
    EXPECT_EQ(ec, std::errc::connection_reset);
  }());
}

TEST(TcpErrors, PeerResetDuringWrite) {
  Runtime rt = make_runtime(kMultiThread2);
  rt.block_on([]() -> Task<void> {
    Pair p = co_await connected_pair();
    // Nobody reads on the client side: the writer fills both socket buffers
    // and waits; then the client resets.
    auto writer = spawn([](TcpStream& s) -> Task<std::error_code> {
      std::vector<char> chunk(1 << 16, 'x');
      for (;;) {
        auto w = co_await s.write_all(chunk);
        if (!w) co_return w.error();
      }
    }(p.server));
    co_await sleep(50ms);
    reset(p.client);
    std::error_code ec = co_await writer;
    EXPECT_TRUE(ec == std::errc::connection_reset || ec == std::errc::broken_pipe) << ec.message();
  }());
}

TEST(TcpErrors, ReadWithTimeoutThenDataStillArrives) {
  Runtime rt = make_runtime(kMultiThread2);
  rt.block_on([]() -> Task<void> {
    Pair p = co_await connected_pair();
    char buf[16];
    auto timed = co_await volt::timeout(20ms, p.server.read(buf));
    EXPECT_EQ(timed.error(), make_error_code(errc::timed_out));
    EXPECT_TRUE(co_await p.client.write_all(std::string_view("late data")));
    auto n = co_await volt::timeout(kNotHung, p.server.read(buf));
    EXPECT_TRUE(n && *n);
    EXPECT_EQ(std::string_view(buf, **n), "late data");
  }());
}

TEST(TcpErrors, SelectReadAgainstCancellationLosesNothing) {
  Runtime rt = make_runtime(kMultiThread2);
  rt.block_on([]() -> Task<void> {
    Pair p = co_await connected_pair();
    CancellationToken token;
    char buf[16];
    auto canceller = spawn([](CancellationToken t) -> Task<void> {
      co_await sleep(10ms);
      t.cancel();
    }(token));
    auto first = co_await select(p.server.read(buf), token.cancelled());
    EXPECT_EQ(first.index(), 1u);  // cancelled: the read took nothing
    co_await canceller;
    EXPECT_TRUE(co_await p.client.write_all(std::string_view("kept")));
    // With a fresh token only the read can win, and it has all the data.
    CancellationToken fresh;
    auto second = co_await select(p.server.read(buf), fresh.cancelled());
    EXPECT_EQ(second.index(), 0u);
    auto& n = std::get<0>(second);
    EXPECT_TRUE(n);
    EXPECT_EQ(std::string_view(buf, *n), "kept");
  }());
}

TEST(TcpErrors, NoDescriptorLeakedOverManyConnections) {
  Runtime rt = make_runtime(kMultiThread2);
  const std::size_t cycles = scale(10000);
  rt.block_on([](std::size_t n) -> Task<void> {
    auto listener = TcpListener::bind(loopback(), 4096);
    const SocketAddr addr = *listener->local_addr();
    // Warm up (the runtime's own descriptors, lazily made ones) before counting.
    {
      auto c = co_await TcpStream::connect(addr);
      auto s = co_await listener->accept();
    }
    const std::size_t before = open_descriptors();
    std::size_t failures = 0;
    for (std::size_t i = 0; i < n; ++i) {
      auto c = co_await TcpStream::connect(addr);
      auto s = co_await listener->accept();
      if (!c || !s) {
        ++failures;
        continue;
      }
      // Half the cycles exchange a byte, half close at once; alternate which
      // side closes first.
      if (i % 2 == 0) {
        char b = 'x';
        if (!co_await c->write_all(io::ConstBuffer(&b, 1))) ++failures;
        if (!co_await s->first.read_exact(io::MutableBuffer(&b, 1))) ++failures;
      }
      if (i % 3 == 0) s->first.close();
    }
    EXPECT_EQ(failures, 0u);
    EXPECT_EQ(open_descriptors(), before);
  }(cycles));
}

// ---- EMFILE: an accept loop in a child process with few descriptors ----

constexpr const char* kChildEnv = "VOLT_TEST_EMFILE_CHILD";
constexpr int kChildFdLimit = 48;
constexpr int kClients = 80;
// AcceptOutOfDescriptorsBacksOffInsteadOfSpinning: descriptors another thread
// may free while the test holds every number (see there).
constexpr int kMaxHoles = 2;

// The child: serves echo with RLIMIT_NOFILE = kChildFdLimit. Prints its
// port, then "emfile <n>" once it has seen n > 0 accept errors, and exits 0
// after echoing to kClients connections in all.
// The highest descriptor number open in this process.
int highest_open_fd() {
  int highest = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd"))
    highest = std::max(highest, std::stoi(entry.path().filename().string()));
  return highest;
}

int run_emfile_child() {
  rlimit lim{kChildFdLimit, kChildFdLimit};
  if (::setrlimit(RLIMIT_NOFILE, &lim) != 0) return 2;
  Runtime rt = make_runtime(kMultiThread2);
  return rt.block_on([]() -> Task<int> {
    auto listener = TcpListener::bind(loopback(), 256);
    if (!listener) co_return 3;
    std::printf("port %u\n", static_cast<unsigned>(listener->local_addr()->port()));
    std::fflush(stdout);
    int served = 0;
    int errors = 0;
    std::vector<JoinHandle<void>> echoes;
    while (served < kClients) {
      auto accepted = co_await listener->accept();
      if (!accepted) {
        // Compared by value, not `== std::errc::too_many_files_open`: that
        // makes a virtual call on the category, and UBSan's first check of
        // a vptr opens a pipe, which fails here, out of descriptors, and is
        // misreported as an invalid vptr.
        const std::error_code ec = accepted.error();
        if (ec.value() != EMFILE || &ec.category() != &std::system_category()) co_return 4;
        if (errors++ == 0) {
          std::printf("emfile\n");
          std::fflush(stdout);
        }
        co_await sleep(5ms);  // back off: descriptors free up as peers leave
        continue;
      }
      ++served;
      echoes.push_back(spawn([](TcpStream s) -> Task<void> {
        char buf[64];
        for (;;) {
          auto n = co_await s.read(buf);
          if (!n || *n == 0) co_return;
          if (!co_await s.write_all(io::ConstBuffer(buf, *n))) co_return;
        }
      }(std::move(accepted->first))));
    }
    for (auto& e : echoes)
      co_await e;
    co_return errors > 0 ? 0 : 5;
  }());
}

TEST(TcpErrors, AcceptLoopSurvivesDescriptorExhaustion) {
  if (std::getenv(kChildEnv)) GTEST_SKIP() << "this process is the child";
  int out[2];
  ASSERT_EQ(::pipe2(out, O_CLOEXEC), 0);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
  std::string self = std::filesystem::read_symlink("/proc/self/exe");
  std::string filter = "--gtest_filter=TcpErrorsChild.Serve";
  char* argv[] = {self.data(), filter.data(), nullptr};
  std::vector<std::string> env_storage;
  for (char** e = environ; *e; ++e)
    env_storage.emplace_back(*e);
  env_storage.emplace_back(std::string(kChildEnv) + "=1");
  std::vector<char*> envp;
  for (auto& e : env_storage)
    envp.push_back(e.data());
  envp.push_back(nullptr);
  pid_t child = 0;
  ASSERT_EQ(posix_spawn(&child, self.c_str(), &actions, nullptr, argv, envp.data()), 0);
  posix_spawn_file_actions_destroy(&actions);
  ::close(out[1]);
  FILE* from_child = ::fdopen(out[0], "r");
  ASSERT_NE(from_child, nullptr);

  auto next_line = [&]() -> std::string {
    char line[256];
    while (std::fgets(line, sizeof line, from_child)) {
      std::string_view l(line);
      if (l.starts_with("port ") || l.starts_with("emfile")) return std::string(l);
    }
    return {};
  };
  const std::string port_line = next_line();
  ASSERT_TRUE(port_line.starts_with("port ")) << port_line;
  const auto port = static_cast<std::uint16_t>(std::stoi(port_line.substr(5)));

  Runtime rt = make_runtime(kMultiThread2);
  const bool ok = rt.block_on([](std::uint16_t p, auto read_line) -> Task<bool> {
    const SocketAddr addr(net::IpAddr::v4_loopback(), p);
    // More clients than the child has descriptors: the kernel completes the
    // handshakes from the backlog; the child's accept runs out.
    std::vector<TcpStream> clients;
    for (int i = 0; i < kClients; ++i) {
      auto c = co_await TcpStream::connect(addr);
      if (!c) {
        ADD_FAILURE() << "connect " << i << ": " << c.error().message();
        co_return false;
      }
      clients.push_back(std::move(*c));
    }
    // Wait for the child to report EMFILE (blocking read of its pipe on the
    // blocking pool, so a worker is not blocked).
    std::string line = co_await spawn_blocking([&read_line] { return read_line(); });
    EXPECT_EQ(line.substr(0, 6), "emfile");
    // Every client gets its echo: the ones accepted early answer now; the
    // rest once earlier clients leave and free the child's descriptors.
    for (auto& c : clients) {
      char msg[8] = "ping123";
      char reply[8] = {};
      auto w = co_await c.write_all(msg);
      if (!w) {
        ADD_FAILURE() << "write: " << w.error().message();
        co_return false;
      }
      auto r = co_await volt::timeout(kNotHung, c.read_exact(reply));
      if (!r || !*r) {
        ADD_FAILURE() << "no echo: " << (r ? r->error() : r.error()).message();
        co_return false;
      }
      if (std::string_view(reply, 8) != std::string_view(msg, 8)) co_return false;
      c.close();  // frees one of the child's descriptors
    }
    co_return true;
  }(port, next_line));
  EXPECT_TRUE(ok);
  // Drain the child's output to its end: closing the pipe while it still
  // prints its test report would kill it with SIGPIPE.
  char rest[256];
  while (std::fgets(rest, sizeof rest, from_child)) {
  }
  std::fclose(from_child);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "child exit code (2 setrlimit, 3 bind, 4 other accept "
                                       "error, 5 never saw EMFILE)";
}

// Out of descriptors, a loop that retries accept() at once does not spin:
// accept() waits kAcceptBackoff (10 ms) before it reports the error again, and a
// descriptor freed during the back-off is used without the error at all.
// In-process: the soft descriptor limit is lowered to what is open now, for
// the length of the test only. On the current-thread runtime, so that the
// freeing task (below) runs before the accept's retry: its deadline is
// earlier, timers fire in deadline order, and one thread runs the woken
// tasks in that order (on two workers the retry could be stolen first).
TEST(TcpErrors, AcceptOutOfDescriptorsBacksOffInsteadOfSpinning) {
  if (std::getenv(kChildEnv)) GTEST_SKIP() << "this process is the child";
  Runtime rt = make_runtime(kCurrentThread);
  rt.block_on([]() -> Task<void> {
    auto listener = TcpListener::bind(loopback(), 64);
    EXPECT_TRUE(listener);
    const SocketAddr addr = *listener->local_addr();
    // Pending connections, so the listener stays readable: two for the test,
    // and spares for accepts that met a hole (below).
    std::vector<TcpStream> clients;
    for (int i = 0; i < 2 + kMaxHoles; ++i) {
      auto c = co_await TcpStream::connect(addr);
      EXPECT_TRUE(c);
      clients.push_back(std::move(*c));
    }
    rlimit saved{};
    EXPECT_EQ(::getrlimit(RLIMIT_NOFILE, &saved), 0);
    rlimit tight = saved;
    tight.rlim_cur = static_cast<rlim_t>(highest_open_fd() + 1);
    EXPECT_EQ(::setrlimit(RLIMIT_NOFILE, &tight), 0);
    // Fill every free number below the limit.
    std::vector<int> fillers;
    auto fill = [&fillers] {
      for (int fd; (fd = ::dup(0)) >= 0;)
        fillers.push_back(fd);
    };
    fill();
    EXPECT_FALSE(fillers.empty());
    // A naive retry loop for 200 ms: without the back-off this made
    // thousands of failed accept calls (bounded only by the budget).
    // A hole: another thread of this process closed a descriptor after the
    // fill (work an earlier test in this binary left behind, finishing late
    // under a sanitizer: CI saw an accept succeed at once, once). The kernel
    // cannot accept without a free number, so the accept is right; the hole
    // is filled again and the loop goes on. More than kMaxHoles is a failure.
    int errors = 0;
    int holes = 0;
    const auto end = std::chrono::steady_clock::now() + 200ms;
    while (std::chrono::steady_clock::now() < end) {
      auto r = co_await listener->accept();
      if (r) {
        r->first.close();
        fill();
        if (++holes > kMaxHoles) {
          ADD_FAILURE() << "accepted " << holes << " times while out of descriptors";
          break;
        }
        continue;
      }
      EXPECT_EQ(r.error().value(), EMFILE);  // by value: see run_emfile_child
      ++errors;
    }
    EXPECT_GE(errors, 2);
    EXPECT_LE(errors, 200ms / net::detail::kAcceptBackoff + 2) << errors << " errors in 200 ms";
    // A descriptor freed during the back-off: the accept succeeds, no error.
    // The deadline is fixed before the accept starts its back-off, so it is
    // the earlier one however late the freeing task first runs.
    auto freeing = spawn([](int fd, Instant deadline) -> Task<void> {
      co_await volt::sleep_until(deadline);
      ::close(fd);
    }(fillers.back(), volt::time::now() + net::detail::kAcceptBackoff / 2));
    fillers.pop_back();
    auto r = co_await listener->accept();
    EXPECT_TRUE(r) << r.error().message();
    co_await freeing;
    for (int fd : fillers)
      ::close(fd);
    EXPECT_EQ(::setrlimit(RLIMIT_NOFILE, &saved), 0);
  }());
}

TEST(TcpErrorsChild, Serve) {
  if (!std::getenv(kChildEnv)) GTEST_SKIP() << "runs only as the child of the EMFILE test";
  EXPECT_EQ(run_emfile_child(), 0);
}

}  // namespace
}  // namespace volt::test
