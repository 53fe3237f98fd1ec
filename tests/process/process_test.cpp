// volt::process: spawning, exit statuses, pipes, waiting through pidfds (and
// the SIGCHLD fallback, by re-running this binary with VOLT_PROCESS_PIDFD=0),
// reaping of dropped children, and io::pipe. Every test on both runtime
// flavours.
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "process/internal.hpp"
#include "process/process_support.hpp"
#include "runtime/runtime_support.hpp"

namespace volt::test {
namespace {

using namespace std::chrono_literals;
using process::Child;
using process::Command;
using process::ExitStatus;
using process::Output;
using process::Stdio;

bool process_exists(pid_t pid) {
  return ::kill(pid, 0) == 0;
}

std::string repeat(char c, std::size_t n) {
  return std::string(n, c);
}

class ProcessTest : public ::testing::TestWithParam<Flavour> {
 protected:
  void SetUp() override { rt_.emplace(make_runtime(GetParam())); }
  void TearDown() override { rt_.reset(); }
  Runtime& rt() { return *rt_; }
  std::optional<Runtime> rt_;
};

// ---- exit statuses ----

Task<Expected<ExitStatus>> run_sh(std::string script) {
  Command c("sh");
  c.arg("-c").arg(std::move(script));
  Expected<ExitStatus> st = co_await c.status();
  co_return st;
}

TEST_P(ProcessTest, ExitCodesAndSignals) {
  Expected<ExitStatus> zero = rt().block_on(run_sh("exit 0"));
  ASSERT_TRUE(zero) << zero.error().message();
  EXPECT_TRUE(zero->success());
  EXPECT_EQ(zero->code(), 0);
  EXPECT_EQ(zero->signal(), std::nullopt);

  Expected<ExitStatus> three = rt().block_on(run_sh("exit 3"));
  ASSERT_TRUE(three);
  EXPECT_FALSE(three->success());
  EXPECT_EQ(three->code(), 3);

  Expected<ExitStatus> high = rt().block_on(run_sh("exit 255"));
  ASSERT_TRUE(high);
  EXPECT_EQ(high->code(), 255);

  Expected<ExitStatus> term = rt().block_on(run_sh("kill -TERM $$"));
  ASSERT_TRUE(term);
  EXPECT_FALSE(term->success());
  EXPECT_EQ(term->code(), std::nullopt);
  EXPECT_EQ(term->signal(), SIGTERM);
  EXPECT_EQ(term->raw() & 0x7f, SIGTERM);

  // SIGPIPE is SIG_IGN here (volt set it), SIG_DFL again in the child: a
  // non-interactive sh cannot undo an ignored signal, so it would survive.
  Expected<ExitStatus> pipe = rt().block_on(run_sh("kill -PIPE $$; exit 7"));
  ASSERT_TRUE(pipe);
  EXPECT_EQ(pipe->signal(), SIGPIPE) << "the child inherited an ignored SIGPIPE";
}

TEST_P(ProcessTest, WaitTwiceAndTryWait) {
  auto body = []() -> Task<void> {
    Command c("sh");
    c.args({"-c", "read x; exit 5"}).stdin(Stdio::piped());
    Expected<Child> child = c.spawn();
    EXPECT_TRUE(child) << child.error().message();
    if (!child) co_return;
    EXPECT_GT(child->id(), 0);
    Expected<std::optional<ExitStatus>> early = child->try_wait();
    EXPECT_TRUE(early);
    EXPECT_FALSE(early->has_value()) << "it is blocked reading its stdin";
    Expected<ExitStatus> st = co_await child->wait();  // closes stdin: read gets EOF
    EXPECT_TRUE(st);
    EXPECT_EQ(st->code(), 5);
    EXPECT_FALSE(child->stdin.has_value());
    Expected<ExitStatus> again = co_await child->wait();
    EXPECT_TRUE(again);
    EXPECT_EQ(*again, *st);
    Expected<std::optional<ExitStatus>> after = child->try_wait();
    EXPECT_TRUE(after && after->has_value() && **after == *st);
    EXPECT_TRUE(child->signal(SIGTERM)) << "after reaping: nothing sent, success";
  };
  rt().block_on(body());
}

// ---- env, cwd, arg0 ----

Task<Expected<Output>> output_of(Command c) {
  Expected<Output> out = co_await c.output();
  co_return out;
}

TEST_P(ProcessTest, EnvironmentChanges) {
  ::setenv("VOLT_PROCESS_TEST_KEEP", "kept", 1);
  ::setenv("VOLT_PROCESS_TEST_DROP", "dropped", 1);
  Command c("sh");
  c.args({"-c", "echo \"$FOO|$VOLT_PROCESS_TEST_KEEP|${VOLT_PROCESS_TEST_DROP-unset}\""})
      .env("FOO", "first")
      .env("FOO", "bar baz")
      .env_remove("VOLT_PROCESS_TEST_DROP");
  Expected<Output> out = rt().block_on(output_of(std::move(c)));
  ASSERT_TRUE(out) << out.error().message();
  EXPECT_EQ(out->stdout, "bar baz|kept|unset\n");
  EXPECT_TRUE(out->stderr.empty());
  EXPECT_TRUE(out->status.success());

  Command clear("/usr/bin/env");
  clear.env_clear().env("ONLY", "1");
  Expected<Output> cleared = rt().block_on(output_of(std::move(clear)));
  ASSERT_TRUE(cleared) << cleared.error().message();
  EXPECT_EQ(cleared->stdout, "ONLY=1\n");

  // A bare name is searched in the child's PATH when env() changes it.
  Command nowhere("sh");
  nowhere.arg("-c").arg("exit 0").env("PATH", "/nonexistent-volt-dir");
  Expected<Output> missing = rt().block_on(output_of(std::move(nowhere)));
  ASSERT_FALSE(missing);
  EXPECT_TRUE(is_errno(missing.error(), ENOENT)) << missing.error().message();
  Command found("sh");
  found.arg("-c").arg("echo $PATH").env("PATH", "/usr/bin:/bin");
  Expected<Output> ok = rt().block_on(output_of(std::move(found)));
  ASSERT_TRUE(ok) << ok.error().message();
  EXPECT_EQ(ok->stdout, "/usr/bin:/bin\n");
  ::unsetenv("VOLT_PROCESS_TEST_KEEP");
  ::unsetenv("VOLT_PROCESS_TEST_DROP");
}

TEST_P(ProcessTest, CurrentDirAndArg0) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("volt-proc-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  Command pwd("pwd");
  pwd.current_dir(dir);
  Expected<Output> out = rt().block_on(output_of(std::move(pwd)));
  ASSERT_TRUE(out) << out.error().message();
  EXPECT_EQ(out->stdout, std::filesystem::canonical(dir).string() + "\n");

  Command bad("pwd");
  bad.current_dir(dir / "missing");
  Expected<Output> missing = rt().block_on(output_of(std::move(bad)));
  ASSERT_FALSE(missing);
  EXPECT_TRUE(is_errno(missing.error(), ENOENT)) << missing.error().message();
  std::filesystem::remove_all(dir);

  // argv[0] as the child sees it: sh's own /proc/<pid>/cmdline (not the
  // last command, which sh may exec in its own place).
  Command named("sh");
  named.arg0("volt-named-sh").args({"-c", "tr '\\0' ' ' < /proc/$$/cmdline; exit 0"});
  Expected<Output> cmdline = rt().block_on(output_of(std::move(named)));
  ASSERT_TRUE(cmdline) << cmdline.error().message();
  EXPECT_EQ(cmdline->stdout.rfind("volt-named-sh -c ", 0), 0u) << cmdline->stdout;
}

TEST_P(ProcessTest, ProcessGroup) {
  // Field 5 of /proc/<pid>/stat is the process group ("(sh)" has no space).
  auto pgrp_of_child = [this](bool own_group) -> std::pair<long, long> {
    auto body = [](bool own) -> Task<std::pair<long, long>> {
      Command c("sh");
      c.args({"-c", "cut -d' ' -f5 /proc/$$/stat; exit 0"}).stdout(Stdio::piped());
      if (own) c.process_group(0);
      Expected<Child> child = c.spawn();
      EXPECT_TRUE(child);
      if (!child) co_return std::pair<long, long>(-1, -1);
      const long pid = child->id();
      std::string text;
      Expected<std::size_t> n = co_await io::read_to_string(*child->stdout, text);
      EXPECT_TRUE(n);
      Expected<ExitStatus> st = co_await child->wait();
      EXPECT_TRUE(st && st->success());
      co_return std::pair<long, long>(pid, std::strtol(text.c_str(), nullptr, 10));
    };
    return rt().block_on(body(own_group));
  };
  const auto [pid, pgrp] = pgrp_of_child(true);
  EXPECT_EQ(pgrp, pid) << "leader of a new group";
  const auto [pid2, pgrp2] = pgrp_of_child(false);
  EXPECT_EQ(pgrp2, static_cast<long>(::getpgrp())) << "our group, pid " << pid2;
}

TEST_P(ProcessTest, StdioFromADescriptorAndNull) {
  const std::filesystem::path file =
      std::filesystem::temp_directory_path() / ("volt-proc-out-" + std::to_string(::getpid()));
  const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0);
  auto body = [](int fd) -> Task<Expected<ExitStatus>> {
    Command c("sh");
    // stdin is /dev/null: cat sees end of input at once.
    c.args({"-c", "cat; echo to-file"}).stdin(Stdio::null()).stdout(Stdio::from_fd(fd));
    Expected<ExitStatus> st = co_await c.status();
    co_return st;
  };
  Expected<ExitStatus> st = rt().block_on(body(fd));
  ASSERT_TRUE(st) << st.error().message();
  EXPECT_TRUE(st->success());
  EXPECT_EQ(::fcntl(fd, F_GETFD), -1) << "the descriptor was handed over and closed";
  std::ifstream in(file);
  std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(content, "to-file\n");
  std::filesystem::remove(file);
}

// ---- programs that cannot start ----

TEST_P(ProcessTest, NotFoundAndNotExecutable) {
  auto spawn_error = [this](Command c) -> std::error_code {
    auto body = [](Command c) -> Task<std::error_code> {
      Expected<Child> child = c.spawn();
      if (child) co_return std::error_code();
      co_return child.error();
    };
    return rt().block_on(body(std::move(c)));
  };
  EXPECT_TRUE(is_errno(spawn_error(Command("volt-no-such-program-xyz")), ENOENT));
  EXPECT_TRUE(is_errno(spawn_error(Command("/nonexistent/volt-x")), ENOENT));

  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("volt-proc-x-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::filesystem::path plain = dir / "plain";
  { std::ofstream(plain) << "#!/bin/sh\nexit 0\n"; }
  ::chmod(plain.c_str(), 0644);
  const std::filesystem::path garbage = dir / "garbage";
  {
    std::ofstream(garbage) << "\x7f"
                              "ELF not really";
  }
  ::chmod(garbage.c_str(), 0755);
  EXPECT_TRUE(is_errno(spawn_error(Command(plain.string())), EACCES));
  EXPECT_TRUE(is_errno(spawn_error(Command(dir.string())), EACCES));
  const std::error_code noexec = spawn_error(Command(garbage.string()));
  EXPECT_TRUE(is_errno(noexec, ENOEXEC)) << noexec.message();
  std::filesystem::remove_all(dir);
  // No child was left behind by any of these.
  EXPECT_EQ(count_zombies(), 0);
}

TEST(ProcessNoRuntimeTest, SpawnOutsideARuntimeIsAnError) {
  Expected<Child> child = Command("true").spawn();
  ASSERT_FALSE(child);
  EXPECT_EQ(child.error(), make_error_code(errc::no_runtime));
}

// ---- pipes ----

Task<Expected<void>> feed(process::ChildStdin in, std::string data) {
  Expected<void> r = co_await in.write_all(io::ConstBuffer(data.data(), data.size()));
  in.close();
  co_return r;
}

Task<void> cat_both_ways(std::size_t size) {
  std::string data(size, '\0');
  for (std::size_t i = 0; i < size; ++i)
    data[i] = static_cast<char>((i * 131 + i / 4096) & 0xff);
  Command c("cat");
  c.stdin(Stdio::piped()).stdout(Stdio::piped());
  Expected<Child> child = c.spawn();
  EXPECT_TRUE(child) << child.error().message();
  if (!child) co_return;
  EXPECT_TRUE(child->stdin && child->stdout && !child->stderr);
  JoinHandle<Expected<void>> writer = volt::spawn(feed(std::move(*child->stdin), data));
  child->stdin.reset();
  std::string got;
  Expected<std::size_t> n = co_await io::read_to_string(*child->stdout, got);
  EXPECT_TRUE(n) << n.error().message();
  Expected<void> wrote = co_await writer;
  EXPECT_TRUE(wrote) << wrote.error().message();
  Expected<ExitStatus> st = co_await child->wait();
  EXPECT_TRUE(st && st->success());
  EXPECT_EQ(got.size(), size);
  EXPECT_TRUE(got == data) << "the bytes came back changed";
}

TEST_P(ProcessTest, SixtyFourMiBThroughCatBothWays) {
  rt().block_on(cat_both_ways(64u << 20));
}

TEST_P(ProcessTest, WaitWithOutputReadsTenMiBFromBothStreamsAtOnce) {
  // stderr first, then stdout: a caller reading one stream to its end before
  // the other deadlocks whichever it picks (64 KiB pipes).
  constexpr std::size_t kSize = 10u << 20;
  auto body = []() -> Task<Expected<Output>> {
    Command c("sh");
    c.args({"-c",
            "head -c 10485760 /dev/zero | tr '\\0' e >&2; head -c 10485760 /dev/zero | tr '\\0' o"})
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .stdin(Stdio::piped());
    Expected<Child> child = c.spawn();
    if (!child) co_return child.error();
    auto collect = std::move(*child).wait_with_output();
    Expected<Expected<Output>> out = co_await volt::timeout(kNotHung, std::move(collect));
    co_return out.flatten();
  };
  Expected<Output> out = rt().block_on(body());
  ASSERT_TRUE(out) << out.error().message();
  EXPECT_TRUE(out->status.success());
  EXPECT_EQ(out->stdout.size(), kSize);
  EXPECT_EQ(out->stderr.size(), kSize);
  EXPECT_TRUE(out->stdout == repeat('o', kSize));
  EXPECT_TRUE(out->stderr == repeat('e', kSize));
}

TEST_P(ProcessTest, ChildClosingItsStdinEarlyGivesBrokenPipeNotSigpipe) {
  auto body = []() -> Task<void> {
    Command c("sh");
    c.args({"-c", "exec 0<&-; echo closed; exec sleep 5"})
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true);
    Expected<Child> child = c.spawn();
    EXPECT_TRUE(child) << child.error().message();
    if (!child) co_return;
    char buf[16];
    Expected<std::size_t> n = co_await child->stdout->read(io::MutableBuffer(buf, sizeof buf));
    EXPECT_TRUE(n && *n == 7 && std::string(buf, 7) == "closed\n");
    std::string data(1 << 20, 'x');
    Expected<void> w = co_await child->stdin->write_all(io::ConstBuffer(data.data(), data.size()));
    EXPECT_FALSE(w);
    EXPECT_EQ(w.error(), std::errc::broken_pipe) << w.error().message();
    Expected<void> killed = co_await child->kill();
    EXPECT_TRUE(killed);
  };
  rt().block_on(body());
  // Still here: no SIGPIPE ended this process.
  struct sigaction now = {};
  ::sigaction(SIGPIPE, nullptr, &now);
  EXPECT_TRUE(now.sa_handler == SIG_IGN) << "volt sets SIGPIPE to SIG_IGN (io/pipe.hpp)";
}

TEST_P(ProcessTest, ChildPipesWorkWithTheGenericIoUtilities) {
  // BufWriter over a child's stdin, BufReader::lines over its stdout, and
  // io::write_all of each line into another child's stdin.
  auto body = []() -> Task<void> {
    Command sorter("sort");
    sorter.stdin(Stdio::piped()).stdout(Stdio::piped());
    Expected<Child> sort = sorter.spawn();
    EXPECT_TRUE(sort) << sort.error().message();
    if (!sort) co_return;
    Command counter("wc");
    counter.arg("-l").stdin(Stdio::piped()).stdout(Stdio::piped());
    Expected<Child> wc = counter.spawn();
    EXPECT_TRUE(wc) << wc.error().message();
    if (!wc) co_return;
    {
      io::BufWriter<process::ChildStdin> in(std::move(*sort->stdin));
      sort->stdin.reset();
      for (int i = 999; i >= 0; --i) {
        std::string line = std::to_string(i);
        line += '\n';
        Expected<void> w = co_await io::write_all(in, io::ConstBuffer(line.data(), line.size()));
        EXPECT_TRUE(w);
      }
      Expected<void> closed = co_await in.shutdown();  // flush, then end of input
      EXPECT_TRUE(closed);
    }
    // sort's output, line by line, also copied into wc.
    auto lines = io::BufReader<process::ChildStdout>(std::move(*sort->stdout)).lines();
    std::vector<std::string> got;
    for (;;) {
      Expected<std::optional<std::string>> line = co_await lines.next_line();
      EXPECT_TRUE(line);
      if (!line || !line->has_value()) break;
      std::string text = **line;
      text += '\n';
      Expected<void> w =
          co_await io::write_all(*wc->stdin, io::ConstBuffer(text.data(), text.size()));
      EXPECT_TRUE(w);
      got.push_back(std::move(**line));
    }
    EXPECT_EQ(got.size(), 1000u);
    EXPECT_TRUE(std::is_sorted(got.begin(), got.end()));
    Expected<Output> counted = co_await std::move(*wc).wait_with_output();
    EXPECT_TRUE(counted);
    EXPECT_EQ(std::strtol(counted->stdout.c_str(), nullptr, 10), 1000);
    Expected<ExitStatus> st = co_await sort->wait();
    EXPECT_TRUE(st && st->success());
  };
  rt().block_on(body());
}

TEST_P(ProcessTest, PipelineWithoutAShell) {
  auto body = []() -> Task<void> {
    Command a("sh");
    a.args({"-c", "head -c 1048576 /dev/zero; printf 'x\\ny\\n'"}).stdout(Stdio::piped());
    Expected<Child> first = a.spawn();
    EXPECT_TRUE(first) << first.error().message();
    if (!first) co_return;
    Command b("wc");
    b.arg("-c").stdin(Stdio(std::move(*first->stdout))).stdout(Stdio::piped());
    first->stdout.reset();
    Expected<Child> second = b.spawn();
    EXPECT_TRUE(second) << second.error().message();
    if (!second) co_return;
    std::string counted;
    Expected<std::size_t> n = co_await io::read_to_string(*second->stdout, counted);
    EXPECT_TRUE(n);
    EXPECT_EQ(std::strtoul(counted.c_str(), nullptr, 10), 1048576u + 4u) << counted;
    Expected<ExitStatus> sa = co_await first->wait();
    Expected<ExitStatus> sb = co_await second->wait();
    EXPECT_TRUE(sa && sa->success());
    EXPECT_TRUE(sb && sb->success());
  };
  rt().block_on(body());
}

TEST_P(ProcessTest, IoPipeCarriesBytesAndEndOfStream) {
  auto body = []() -> Task<void> {
    auto made = io::pipe();
    EXPECT_TRUE(made) << made.error().message();
    if (!made) co_return;
    io::PipeReader reader = std::move(made->first);
    io::PipeWriter writer = std::move(made->second);
    EXPECT_TRUE(::fcntl(reader.native_handle(), F_GETFD) & FD_CLOEXEC);
    EXPECT_TRUE(::fcntl(writer.native_handle(), F_GETFL) & O_NONBLOCK);
    // More than the pipe holds: the writer must wait for the reader.
    std::string data(1 << 20, 'p');
    JoinHandle<Expected<void>> w = volt::spawn(feed(std::move(writer), data));
    std::string got;
    Expected<std::size_t> n = co_await io::read_to_string(reader, got);
    EXPECT_TRUE(n);
    Expected<void> wrote = co_await w;
    EXPECT_TRUE(wrote);
    EXPECT_TRUE(got == data);
    char b;
    Expected<std::size_t> empty = reader.try_read(io::MutableBuffer(&b, 1));
    EXPECT_TRUE(empty && *empty == 0) << "end of stream";
  };
  rt().block_on(body());
}

// ---- many children, dropped children ----

Task<Expected<int>> wait_code(Child* child) {
  Expected<ExitStatus> st = co_await child->wait();
  if (!st) co_return st.error();
  co_return st->code().value_or(-1);
}

TEST_P(ProcessTest, FiveHundredConcurrentChildren) {
  rlimit lim{};
  ::getrlimit(RLIMIT_NOFILE, &lim);
  if (lim.rlim_cur < 4096 && lim.rlim_max >= 4096) {
    rlimit raised = lim;
    raised.rlim_cur = 4096;
    ::setrlimit(RLIMIT_NOFILE, &raised);
  }
  constexpr int kChildren = 500;
  auto body = []() -> Task<void> {
    // All alive at once: each blocks reading its stdin until wait() closes it.
    std::vector<Child> children;
    children.reserve(kChildren);
    for (int i = 0; i < kChildren; ++i) {
      Command c("sh");
      c.arg("-c").arg("read x; exit " + std::to_string(i % 200)).stdin(Stdio::piped());
      Expected<Child> child = c.spawn();
      EXPECT_TRUE(child) << i << ": " << child.error().message();
      if (!child) co_return;
      children.push_back(std::move(*child));
    }
    std::vector<JoinHandle<Expected<int>>> waits;
    waits.reserve(kChildren);
    for (int i = kChildren - 1; i >= 0; --i)
      waits.push_back(volt::spawn(wait_code(&children[i])));
    for (int i = 0; i < kChildren; ++i) {
      Expected<int> code = co_await waits[i];
      EXPECT_TRUE(code);
      EXPECT_EQ(*code, (kChildren - 1 - i) % 200);
    }
  };
  rt().block_on(body());
  ::setrlimit(RLIMIT_NOFILE, &lim);
  EXPECT_EQ(count_zombies(), 0);
}

TEST_P(ProcessTest, DroppedChildrenAreReaped) {
  constexpr int kChildren = 1000;
  auto body = []() -> Task<void> {
    for (int i = 0; i < kChildren; ++i) {
      Expected<Child> child = Command("true").spawn();
      EXPECT_TRUE(child) << child.error().message();
      if (!child) co_return;
    }  // dropped at once, running or not
    co_return;
  };
  rt().block_on(body());
  EXPECT_TRUE(wait_until([] { return count_zombies() == 0; }))
      << count_zombies() << " zombies left";
  // And the reaper let go of every pidfd it was given (pidfd mode).
  EXPECT_TRUE(wait_until([] { return process::detail::reaper_pending() == 0; }))
      << process::detail::reaper_pending() << " still held";
}

TEST_P(ProcessTest, KillOnDropKillsAndReaps) {
  auto body = [](bool kill) -> Task<pid_t> {
    Command c("sleep");
    c.arg("1000").kill_on_drop(kill);
    Expected<Child> child = c.spawn();
    EXPECT_TRUE(child);
    co_return child ? child->id() : 0;
  };
  const pid_t killed = rt().block_on(body(true));
  ASSERT_GT(killed, 0);
  EXPECT_TRUE(wait_until([&] { return !process_exists(killed); }))
      << "killed on drop and reaped (a zombie still exists for kill(0))";

  const pid_t kept = rt().block_on(body(false));
  ASSERT_GT(kept, 0);
  std::this_thread::sleep_for(50ms);
  EXPECT_TRUE(process_exists(kept)) << "without kill_on_drop it keeps running";
  ::kill(kept, SIGKILL);
  EXPECT_TRUE(wait_until([&] { return !process_exists(kept); })) << "reaped in the background";
  EXPECT_EQ(count_zombies(), 0);
}

TEST_P(ProcessTest, KillAndTimeoutAroundWait) {
  auto body = []() -> Task<void> {
    Expected<Child> child = Command("sleep").arg("1000").spawn();
    EXPECT_TRUE(child);
    if (!child) co_return;
    auto wait = child->wait();
    Expected<Expected<ExitStatus>> timed = co_await volt::timeout(50ms, std::move(wait));
    EXPECT_FALSE(timed);
    EXPECT_EQ(timed.error(), make_error_code(errc::timed_out));
    // Cancelled: still there, still waitable.
    Expected<std::optional<ExitStatus>> still = child->try_wait();
    EXPECT_TRUE(still && !still->has_value());
    EXPECT_TRUE(process_exists(child->id()));
    Expected<void> killed = co_await child->kill();
    EXPECT_TRUE(killed) << killed.error().message();
    Expected<ExitStatus> st = co_await child->wait();
    EXPECT_TRUE(st);
    EXPECT_EQ(st->signal(), SIGKILL);

    Expected<Child> other = Command("sleep").arg("1000").spawn();
    EXPECT_TRUE(other);
    if (!other) co_return;
    EXPECT_TRUE(other->signal(SIGTERM));
    Expected<ExitStatus> termed = co_await other->wait();
    EXPECT_TRUE(termed);
    EXPECT_EQ(termed->signal(), SIGTERM);
    EXPECT_TRUE(other->start_kill()) << "after reaping: nothing to do, success";
  };
  rt().block_on(body());
}

TEST_P(ProcessTest, WorksWhenSomeoneElseHandlesSigchld) {
  struct sigaction old = {};
  struct sigaction mine = {};
  mine.sa_handler = [](int) {};
  ::sigemptyset(&mine.sa_mask);
  ::sigaction(SIGCHLD, &mine, &old);
  Expected<ExitStatus> st = rt().block_on(run_sh("exit 9"));
  ::sigaction(SIGCHLD, &old, nullptr);
  ASSERT_TRUE(st) << st.error().message();
  EXPECT_EQ(st->code(), 9);
}

// A child reaped by someone else (here a waitpid for exactly its pid; a
// waitpid(-1) elsewhere, or SIGCHLD set to SIG_IGN, does the same): wait()
// ends, with ECHILD, in both modes. In the SIGCHLD fallback no peek ever
// names such a child again; only the scanner's timed sweep finds it gone.
TEST_P(ProcessTest, ChildReapedBySomeoneElseEndsItsWait) {
  auto body = []() -> Task<void> {
    for (int round = 0; round < 3; ++round) {
      // Another child alive meanwhile: the fallback's peek then says "none
      // exited" rather than "no children" (both must end the wait).
      Expected<Child> other = Command("sleep").arg("1000").kill_on_drop(true).spawn();
      EXPECT_TRUE(other);
      Expected<Child> child = Command("sleep").arg("0.05").spawn();
      EXPECT_TRUE(child);
      if (!child || !other) co_return;
      if (round == 2) (void)other.value().start_kill();
      int raw = 0;
      pid_t r;
      do {
        r = ::waitpid(child->id(), &raw, 0);
      } while (r < 0 && errno == EINTR);
      const bool reaped_here = r == child->id();
      // Otherwise the fallback's scanner reaped it first (ECHILD here).
      EXPECT_TRUE(reaped_here || errno == ECHILD) << std::strerror(errno);
      // Gone: nothing to signal, and its pid is not ours to signal any more
      // (the fallback used to kill(2) it, and report that call's ESRCH).
      Expected<void> killed = child->start_kill();
      EXPECT_TRUE(killed) << killed.error().message();
      Expected<Expected<ExitStatus>> st = co_await volt::timeout(10s, child->wait());
      EXPECT_TRUE(st) << "wait() did not end";
      if (!st) co_return;
      if (reaped_here) {
        EXPECT_FALSE(*st);
        if (!*st) {
          EXPECT_TRUE(is_errno(st->error(), ECHILD)) << st->error().message();
        }
      } else {
        EXPECT_TRUE(*st && st->value().success());
      }
    }
  };
  rt().block_on(body());
}

// A descriptor handed over with Stdio::from_fd reaches the child only as
// the stdio descriptor it was given for, not also under its own number.
TEST_P(ProcessTest, HandedOverDescriptorIsNotInheritedTwice) {
  int p[2];
  ASSERT_EQ(::pipe2(p, O_CLOEXEC), 0);
  ASSERT_EQ(::fcntl(p[1], F_SETFD, 0), 0);  // as a caller's plain pipe() would leave it
  const std::string script =
      "if [ -e /proc/$$/fd/" + std::to_string(p[1]) + " ]; then echo twice; else echo once; fi";
  auto body = [](std::string script, int fd) -> Task<Expected<ExitStatus>> {
    Command c("sh");
    c.arg("-c").arg(std::move(script)).stdout(Stdio::from_fd(fd));
    Expected<ExitStatus> st = co_await c.status();
    co_return st;
  };
  Expected<ExitStatus> st = rt().block_on(body(script, p[1]));
  ASSERT_TRUE(st) << st.error().message();
  EXPECT_TRUE(st->success());
  char buf[16] = {};
  const ssize_t n = ::read(p[0], buf, sizeof buf);
  ::close(p[0]);
  EXPECT_EQ(std::string(buf, n > 0 ? static_cast<std::size_t>(n) : 0), "once\n");
}

// ---- descriptors ----

TEST_P(ProcessTest, ChildSeesOnlyItsStdioDescriptors) {
  auto body = []() -> Task<void> {
    // Open a few of every kind of descriptor volt owns first.
    auto p = io::pipe();
    EXPECT_TRUE(p);
    auto listener = net::TcpListener::bind("127.0.0.1:0");
    EXPECT_TRUE(listener);
    std::filesystem::path exe = "/proc/self/exe";
    Expected<fs::File> file = co_await fs::File::open(exe);
    EXPECT_TRUE(file);
    Command sleeper("sleep");
    sleeper.arg("1000").stdin(Stdio::piped()).stdout(Stdio::piped()).kill_on_drop(true);
    Expected<Child> other = sleeper.spawn();  // a pidfd and two pipe ends
    EXPECT_TRUE(other);
    const std::set<int> before = open_fd_set();
    std::set<int> foreign;  // descriptors this process had without close-on-exec (not volt's)
    for (int fd : before)
      if (fd > 2 && !(::fcntl(fd, F_GETFD) & FD_CLOEXEC)) foreign.insert(fd);
    Command ls("ls");
    ls.arg("/proc/self/fd").stdout(Stdio::piped());
    Expected<Output> out = co_await ls.output();
    EXPECT_TRUE(out) << out.error().message();
    if (!out) co_return;
    std::set<int> seen;
    std::size_t start = 0;
    while (start < out->stdout.size()) {
      std::size_t end = out->stdout.find('\n', start);
      if (end == std::string::npos) end = out->stdout.size();
      seen.insert(std::atoi(out->stdout.substr(start, end - start).c_str()));
      start = end + 1;
    }
    // Exactly 0, 1, 2, what this process holds without close-on-exec (not
    // volt's: inherited by the test binary, if any), and ls's own directory
    // descriptor, the lowest number free in the child.
    std::set<int> expected = foreign;
    expected.insert({0, 1, 2});
    int lowest = 3;
    while (expected.count(lowest))
      ++lowest;
    expected.insert(lowest);
    EXPECT_TRUE(seen == expected) << "child saw: " << out->stdout;
  };
  rt().block_on(body());
}

TEST_P(ProcessTest, EmfileAtSpawnLeaksNothing) {
  // Children dropped by earlier tests of this process (gtest_repeat,
  // shuffle) must be gone first: the reaper closes their pidfds meanwhile.
  ASSERT_TRUE(wait_until([] { return process::detail::reaper_pending() == 0; }));
  rlimit lim{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &lim), 0);
  auto body = [](int spare) -> Task<std::error_code> {
    Command c("true");
    c.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
    const std::set<int> before = open_fd_set();
    rlimit lim{};
    ::getrlimit(RLIMIT_NOFILE, &lim);
    rlimit tight = lim;
    tight.rlim_cur = static_cast<rlim_t>(*before.rbegin() + 1 + spare);
    // Fill the holes below the highest descriptor so that exactly `spare` are free.
    std::vector<int> fillers;
    for (int fd = 0; fd <= *before.rbegin(); ++fd)
      if (!before.count(fd)) fillers.push_back(::open("/dev/null", O_RDONLY | O_CLOEXEC));
    ::setrlimit(RLIMIT_NOFILE, &tight);
    Expected<Child> child = c.spawn();
    ::setrlimit(RLIMIT_NOFILE, &lim);
    for (int fd : fillers)
      ::close(fd);
    std::error_code ec = child ? std::error_code() : child.error();
    if (child) {
      Expected<ExitStatus> st = co_await child->wait();
      EXPECT_TRUE(st);
      child->stdout.reset();
      child->stderr.reset();
    }
    const std::set<int> after = open_fd_set();
    EXPECT_TRUE(after == before) << "descriptors leaked or lost (spare " << spare << ")";
    co_return ec;
  };
  // 3 free: the stdin pipe (2) and half of the stdout pipe.
  std::error_code ec = rt().block_on(body(3));
  EXPECT_TRUE(is_errno(ec, EMFILE)) << ec.message();
  // 6 free: all three pipes, then no room for the pidfd (the child is
  // killed and reaped).
  ec = rt().block_on(body(6));
  EXPECT_TRUE(is_errno(ec, EMFILE)) << ec.message();
  // With room it works.
  ec = rt().block_on(body(12));
  EXPECT_FALSE(ec) << ec.message();
  EXPECT_TRUE(wait_until([] { return count_zombies() == 0; }));
}

INSTANTIATE_TEST_SUITE_P(Flavours, ProcessTest, ::testing::Values(kMultiThread2, kCurrentThread),
                         FlavourName());

// ---- the SIGCHLD fallback ----

TEST(ProcessModeTest, ModeFollowsTheEnvironment) {
  const char* env = std::getenv("VOLT_PROCESS_PIDFD");
  const bool forced_off = env != nullptr && std::strcmp(env, "0") == 0;
  if (forced_off) {
    EXPECT_FALSE(process::detail::pidfd_mode());
  } else {
    EXPECT_TRUE(process::detail::pidfd_mode()) << "this kernel has pidfd_open and P_PIDFD";
  }
}

// This binary again, with VOLT_PROCESS_PIDFD=0, on the tests that wait.
TEST(ProcessModeTest, SigchldFallbackPassesTheWaitingTests) {
  if (const char* env = std::getenv("VOLT_PROCESS_PIDFD"); env != nullptr)
    GTEST_SKIP() << "already the fallback run";

  Runtime rt = make_runtime(kMultiThread2);
  auto body = []() -> Task<Expected<Output>> {
    Command self("/proc/self/exe");
    // The tests whose outcome depends on how exits are seen (not the pipe
    // or spawn-error ones, which do not wait through the mode).
    std::string filter = "--gtest_filter=ProcessModeTest.ModeFollowsTheEnvironment";
    for (const char* name :
         {"ExitCodesAndSignals", "WaitTwiceAndTryWait", "PipelineWithoutAShell",
          "WaitWithOutputReadsTenMiBFromBothStreamsAtOnce", "FiveHundredConcurrentChildren",
          "DroppedChildrenAreReaped", "KillOnDropKillsAndReaps", "KillAndTimeoutAroundWait",
          "WorksWhenSomeoneElseHandlesSigchld", "ChildReapedBySomeoneElseEndsItsWait"}) {
      filter += ":*ProcessTest.";
      filter += name;
      filter += "/*";
    }
    self.arg(std::move(filter)).env("VOLT_PROCESS_PIDFD", "0");
    Expected<Output> out = co_await self.output();
    co_return out;
  };
  Expected<Output> out = rt.block_on(body());
  ASSERT_TRUE(out) << out.error().message();
  EXPECT_TRUE(out->status.success()) << out->stdout << out->stderr;
  // 1 + 10 tests on 2 flavours: a filter that matched nothing would pass too.
  EXPECT_NE(out->stdout.find("[  PASSED  ] 21 tests"), std::string::npos) << out->stdout;
}

}  // namespace
}  // namespace volt::test
