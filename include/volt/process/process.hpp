// volt/process/process.hpp: child processes (Tokio's tokio::process):
// Command to describe and start one, Child to talk to it and wait for it,
// ExitStatus and Output for what it did.
//
//   // Run to completion, capturing both output streams (no shell involved):
//   auto out = co_await volt::process::Command("git").args({"rev-parse", "HEAD"}).output();
//   if (!out) co_return out.error();          // e.g. ENOENT: git is not installed
//   if (out->status.success()) use(out->stdout);
//
//   // Talk to it through pipes; its stdin is an io::AsyncWrite, stdout an io::AsyncRead:
//   volt::process::Command sort("sort");
//   sort.stdin(volt::process::Stdio::piped()).stdout(volt::process::Stdio::piped());
//   auto child = sort.spawn();
//   co_await volt::io::write_all(*child->stdin, std::string_view("b\na\n"));
//   auto result = co_await std::move(*child).wait_with_output();  // closes stdin first
//
//   // Bound it in time (a cancelled wait leaves the child waitable):
//   auto status = co_await volt::timeout(5s, child->wait());
//   if (!status) co_await child->kill();      // SIGKILL, then reap
//
//   // a | b without a shell:
//   auto a = Command("ls").stdout(Stdio::piped()).spawn();
//   auto b = Command("wc").arg("-l").stdin(Stdio(std::move(*a->stdout))).spawn();
//
// How a child is started: posix_spawn (glibc's clone(CLONE_VM|CLONE_VFORK):
// the parent's memory is never copied, the calling worker waits only for the
// kernel's exec path), with file actions for stdio and the working
// directory, POSIX_SPAWN_SETPGROUP for process_group, every signal mask
// bit cleared and SIGPIPE reset to SIG_DFL in the child. Every descriptor
// volt owns is close-on-exec, so the child inherits only 0, 1 and 2 (and
// whatever the program itself left open without O_CLOEXEC).
//
// How its exit is seen: a pidfd (pidfd_open, Linux 5.3) registered with the
// runtime's I/O driver like a socket; wait() waits for it to be readable and
// reaps with waitid(P_PIDFD). Where pidfd_open is unavailable (ENOSYS), or
// with VOLT_PROCESS_PIDFD=0 in the environment, a SIGCHLD fallback through
// volt::signal is used: one thread finds which children exited and wakes
// only their waiters (src/process/sigchld.cpp has the algorithm).
//
// Guarantees:
//  - A program that cannot be started (not found, not executable, a bad
//    working directory) is an error from spawn() with exec's errno (ENOENT,
//    EACCES, ENOEXEC, ENOTDIR...), never a child exiting with 127.
//  - A NUL inside the program, an argument, arg0, the working directory or
//    an env() key or value (a C string would end there and another command
//    would run), or an env() key that is empty or holds '=':
//    errc::invalid_argument from spawn(), before anything is started.
//  - Errors are values (Expected), never exceptions: EMFILE while making
//    pipes, errc::no_runtime outside a runtime (spawn needs one to register
//    the pipes and the pidfd).
//  - No zombies: a Child destroyed before it was reaped is reaped in the
//    background (a process-wide "volt-reaper" thread, started on first need,
//    waits for the pidfds of such children); with kill_on_drop(true) it is
//    sent SIGKILL first. This works whatever SIGCHLD handler the program or
//    another library installed (pidfd mode).
//  - wait() closes the child's stdin first (a child reading its input to
//    the end cannot deadlock the caller), then waits. Cancelling it (timeout,
//    select, abort) leaves the child unreaped: wait() or try_wait() again
//    later. Once reaped, the status is kept and every later wait() gives it.
//  - kill(), start_kill() and signal() go through the pidfd
//    (pidfd_send_signal), so they can never reach another process that
//    reused the pid. Once the child was reaped they send nothing and succeed.
//    (The SIGCHLD fallback, without pidfds, signals the pid; it first
//    checks, in the same critical section as its own reaping, that the pid
//    is still a running child of this process.)
//  - wait_with_output() and output() read stdout and stderr concurrently:
//    a child filling both pipes cannot deadlock. Cancelling them (or
//    status()) drops the Child: it keeps running unless kill_on_drop(true)
//    was set, and is reaped in the background either way.
//  - SIGCHLD set to SIG_IGN (or SA_NOCLDWAIT) by the program makes the
//    kernel reap children itself: wait() and try_wait() then give ECHILD (in
//    both modes), and spawn() still succeeds for a child that exited before
//    its pidfd could be opened (signal() to it sends nothing). Only the
//    exit status is lost.
//  - The SIGCHLD fallback installs volt::signal's SIGCHLD handler (a handler
//    installed later by someone else replaces it; exits are then seen by a
//    sweep made every 100 ms while fallback children exist), serialises
//    spawn() calls with a mutex, and reaps a dropped child when it exits.
//    A zombie child of another library that it does not reap makes each
//    SIGCHLD try every registered child (see src/process/sigchld.cpp).
//  - SIGPIPE: see io/pipe.hpp (set to SIG_IGN in this process if it was
//    SIG_DFL; children get SIG_DFL back).
//
// Thread safety and lifetimes: a Child is used by one task at a time (its
// pipe ends may be moved out and used by other tasks). The Task returned by
// wait() / kill() refers to the Child, which must outlive it and stay
// where it is meanwhile (a Child moved during a wait() leaves the status in
// the moved-from object, and the new owner's wait() says ECHILD); output(),
// status() and wait_with_output() own everything they use. The pidfd is
// owned by the Child until reaped; a Child dropped unreaped hands a copy of
// it to the reaper thread, which owns it from then on.
//
// Naming note: the members stdin/stdout/stderr share their names with
// <cstdio>'s macros, which glibc defines as themselves (harmless).
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "volt/detail/io_operation.hpp"
#include "volt/expected.hpp"
#include "volt/io/pipe.hpp"
#include "volt/task/task.hpp"

namespace volt::process {

using ChildStdin = io::PipeWriter;
using ChildStdout = io::PipeReader;
using ChildStderr = io::PipeReader;

// How a child terminated, as waitpid(2)'s status word.
class ExitStatus {
 public:
  // From a waitpid-style status word (WIFEXITED, WTERMSIG...).
  explicit constexpr ExitStatus(int raw) noexcept : raw_(raw) {}
  static constexpr ExitStatus from_exit_code(int code) noexcept {
    return ExitStatus((code & 0xff) << 8);
  }
  static constexpr ExitStatus from_signal(int signum, bool core_dumped = false) noexcept {
    return ExitStatus((signum & 0x7f) | (core_dumped ? 0x80 : 0));
  }

  // Exited with code 0.
  constexpr bool success() const noexcept { return code() == 0; }
  // The exit code (0..255) if it exited; nullopt if a signal ended it.
  constexpr std::optional<int> code() const noexcept {
    if ((raw_ & 0x7f) == 0) return (raw_ >> 8) & 0xff;
    return std::nullopt;
  }
  // The signal that ended it, if one did.
  constexpr std::optional<int> signal() const noexcept {
    if ((raw_ & 0x7f) != 0 && (raw_ & 0x7f) != 0x7f) return raw_ & 0x7f;
    return std::nullopt;
  }
  constexpr bool core_dumped() const noexcept { return signal().has_value() && (raw_ & 0x80); }
  constexpr int raw() const noexcept { return raw_; }
  friend constexpr bool operator==(ExitStatus, ExitStatus) noexcept = default;

 private:
  int raw_;
};

// What a child did: its status and everything it wrote to stdout/stderr
// (empty for a stream that was not piped).
struct Output {
  ExitStatus status{0};
  std::string stdout;
  std::string stderr;
};

// What a child's stdin, stdout or stderr is connected to.
class Stdio {
 public:
  // The parent's own descriptor (the default for spawn() and status()).
  static Stdio inherit() noexcept { return Stdio(Kind::kInherit); }
  // A new pipe: the parent's end appears as Child::stdin/stdout/stderr.
  static Stdio piped() noexcept { return Stdio(Kind::kPiped); }
  // /dev/null.
  static Stdio null() noexcept { return Stdio(Kind::kNull); }
  // A descriptor the caller owns and hands over: given to the child, closed
  // in the parent once spawn() has used it (or when the Stdio is dropped).
  static Stdio from_fd(int owned_fd) noexcept;
  // Another child's (or io::pipe()'s) pipe end, for pipelines: `a | b` is
  // b.stdin(Stdio(std::move(*a.stdout))). The end is closed in the parent
  // once spawn() gave it to the child, and made blocking first (the child
  // shares its open file description; programs expect blocking stdio).
  explicit Stdio(io::PipeReader&& reader) noexcept;
  explicit Stdio(io::PipeWriter&& writer) noexcept;

  Stdio(Stdio&& other) noexcept;
  Stdio& operator=(Stdio&& other) noexcept;
  Stdio(const Stdio&) = delete;
  Stdio& operator=(const Stdio&) = delete;
  ~Stdio();

 private:
  friend class Command;
  enum class Kind : unsigned char { kInherit, kPiped, kNull, kFd, kPipeEnd };
  explicit Stdio(Kind kind) noexcept : kind_(kind) {}
  Kind kind_ = Kind::kInherit;
  int fd_ = -1;                 // kFd: owned
  volt::detail::IoHandle end_;  // kPipeEnd: a registered pipe end
};

class Child;

// A description of a child process to start (std::process::Command). Every
// setter returns *this for chaining. Nothing happens until spawn(),
// status() or output().
class Command {
 public:
  // The program: a path containing '/' is used as is (relative to
  // current_dir if one is set), a bare name is searched in PATH (the
  // child's PATH if env() changes it, else this process's).
  explicit Command(std::string program);
  Command(Command&&) noexcept;
  Command& operator=(Command&&) noexcept;
  ~Command();

  Command& arg(std::string a);
  Command& args(std::initializer_list<std::string_view> list);
  template <class Range>
  Command& args(const Range& range) {
    for (const auto& a : range)
      arg(std::string(a));
    return *this;
  }
  // argv[0] as the child sees it (default: the program as given).
  Command& arg0(std::string a);

  // The child's environment: this process's, with these changes applied at
  // spawn() in the order made.
  Command& env(std::string key, std::string value);
  template <class Range>
  Command& envs(const Range& pairs) {
    for (const auto& [k, v] : pairs)
      env(std::string(k), std::string(v));
    return *this;
  }
  Command& env_remove(std::string key);
  // Start from an empty environment (changes made after this still apply).
  Command& env_clear();

  // The child's working directory (chdir before exec; ENOENT from spawn()
  // if it does not exist).
  Command& current_dir(std::filesystem::path dir);

  Command& stdin(Stdio s);
  Command& stdout(Stdio s);
  Command& stderr(Stdio s);

  // setpgid(0, pgid) in the child: 0 makes it the leader of a new group.
  Command& process_group(pid_t pgid);
  // SIGKILL the child if its Child is dropped before it was reaped.
  Command& kill_on_drop(bool on) noexcept;

  // Starts the child. Stdio defaults: inherit for all three. A Stdio made
  // from a descriptor or a pipe end is used up (that slot reverts to the
  // default). Needs a runtime (the pipes and the pidfd are registered with
  // it).
  Expected<Child> spawn();
  // Starts the child now (stdio defaults: inherit) and returns a task that
  // waits for it.
  Task<Expected<ExitStatus>> status();
  // Starts the child now (defaults: stdin null, stdout and stderr piped)
  // and returns a task that collects its output and status.
  Task<Expected<Output>> output();

  const std::string& program() const noexcept { return program_; }
  const std::vector<std::string>& get_args() const noexcept { return args_; }

 private:
  enum class Default { kInherit, kOutput };
  Expected<Child> spawn_with(Default defaults);

  std::string program_;
  std::optional<std::string> arg0_;
  std::vector<std::string> args_;
  bool env_clear_ = false;
  // (key, value); a missing value removes the key.
  std::vector<std::pair<std::string, std::optional<std::string>>> env_changes_;
  std::optional<std::filesystem::path> cwd_;
  std::optional<Stdio> stdin_, stdout_, stderr_;
  std::optional<pid_t> pgroup_;
  bool kill_on_drop_ = false;
  // pidfd mode: gone before spawn() could open its pidfd (reaped by the
  // kernel under SIGCHLD=SIG_IGN, or by another waiter); wait() says ECHILD.
  bool reaped_elsewhere_ = false;
};

namespace detail {
struct ExitWatch;  // the SIGCHLD fallback's per-child state (src/process/sigchld.hpp)
}  // namespace detail

// A running (or finished, not yet dropped) child process.
class Child {
 public:
  Child(Child&& other) noexcept;
  Child& operator=(Child&& other) noexcept;
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  // Not reaped yet: SIGKILL if kill_on_drop, then handed to the background
  // reaper (see the contract above).
  ~Child();

  // The parent's ends of the pipes asked for with Stdio::piped().
  std::optional<ChildStdin> stdin;
  std::optional<ChildStdout> stdout;
  std::optional<ChildStderr> stderr;

  // The process id (still valid after the child exits: until it is reaped
  // the pid cannot be reused).
  pid_t id() const noexcept { return pid_; }

  // Closes stdin, waits for the child to exit, reaps it. Cancel-safe.
  Task<Expected<ExitStatus>> wait();
  // The status if it has exited (reaping it), nullopt if it is running.
  Expected<std::optional<ExitStatus>> try_wait();
  // Closes stdin, reads stdout and stderr to their ends concurrently, then
  // waits. Consumes the child.
  Task<Expected<Output>> wait_with_output() &&;

  // SIGKILL, then wait() (the child is reaped when it completes).
  Task<Expected<void>> kill();
  // Sends SIGKILL without waiting.
  Expected<void> start_kill();
  // Sends `signum` (ESRCH never: after the child is reaped, nothing is sent
  // and it succeeds). EINVAL for a bad number.
  Expected<void> signal(int signum);

  // True once the child exited and was reaped (by wait/try_wait).
  bool reaped() const noexcept { return status_.has_value(); }

 private:
  friend class Command;
  Child() noexcept = default;
  void release() noexcept;  // the destructor's work
  Expected<std::optional<ExitStatus>> reap_nohang();

  pid_t pid_ = 0;
  volt::detail::IoHandle pidfd_;              // pidfd mode
  std::shared_ptr<detail::ExitWatch> watch_;  // SIGCHLD mode
  std::optional<ExitStatus> status_;
  bool kill_on_drop_ = false;
  // pidfd mode: gone before spawn() could open its pidfd (reaped by the
  // kernel under SIGCHLD=SIG_IGN, or by another waiter); wait() says ECHILD.
  bool reaped_elsewhere_ = false;
};

}  // namespace volt::process
