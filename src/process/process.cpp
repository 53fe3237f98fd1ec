// volt::process: Stdio, Command::spawn (posix_spawn), and Child (waiting
// through a pidfd registered with the driver, or the SIGCHLD fallback).
//
// Lifetimes:
//  - The pidfd belongs to the Child (its IoHandle) until the child is reaped
//    (then it is closed at once) or the Child is dropped unreaped (then a
//    duplicate goes to the reaper thread, which owns it until it reaps the
//    child; the Child's own copy is closed by its IoHandle).
//  - In fallback mode the ExitWatch is shared by the Child and the registry
//    (shared_ptr): the scanner thread may reap and notify after the Child is
//    gone.
//  - Pipe ends are ordinary PipeReader/PipeWriter objects owned by the Child
//    until moved out.
#include "volt/process/process.hpp"

#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <system_error>
#include <variant>

#include "process/internal.hpp"
#include "runtime/runtime_core.hpp"
#include "volt/detail/io_operation.hpp"
#include "volt/io/pipe.hpp"
#include "volt/task/select.hpp"

extern char** environ;

namespace volt::process {

namespace detail {

ExitStatus status_from(const siginfo_t& info) noexcept {
  switch (info.si_code) {
    case CLD_EXITED:
      return ExitStatus::from_exit_code(info.si_status);
    case CLD_DUMPED:
      return ExitStatus::from_signal(info.si_status, true);
    default:  // CLD_KILLED (WEXITED reports nothing else)
      return ExitStatus::from_signal(info.si_status, false);
  }
}

bool pidfd_mode() noexcept {
  static const bool on = [] {
    const char* env = std::getenv("VOLT_PROCESS_PIDFD");
    if (env != nullptr && std::strcmp(env, "0") == 0) return false;
    const int fd = static_cast<int>(::syscall(SYS_pidfd_open, ::getpid(), 0));
    // ENOSYS: an old kernel. EPERM or EACCES: a seccomp filter or a security
    // module refuses the call (older container profiles), and would refuse
    // every child's pidfd after its program had started. EMFILE now says
    // nothing about support.
    if (fd < 0) return errno != ENOSYS && errno != EPERM && errno != EACCES;
    // waitid(P_PIDFD) came a release after pidfd_open (5.4): on our own
    // pidfd it says ECHILD (not our child) where supported, EINVAL if not.
    siginfo_t info{};
    const int r =
        ::waitid(static_cast<idtype_t>(P_PIDFD), static_cast<id_t>(fd), &info, WEXITED | WNOHANG);
    const bool supported = !(r != 0 && errno == EINVAL);
    ::close(fd);
    return supported;
  }();
  return on;
}

}  // namespace detail

namespace {

std::error_code last_error() noexcept {
  return {errno, std::system_category()};
}

int pidfd_send_signal(int pidfd, int signum) noexcept {
  return static_cast<int>(::syscall(SYS_pidfd_send_signal, pidfd, signum, nullptr, 0));
}

// waitid(P_PIDFD, WNOHANG), EINTR retried: the status, nullopt while the
// child runs, or the error (ECHILD if somebody else reaped it).
Expected<std::optional<ExitStatus>> waitid_pidfd(int pidfd) noexcept {
  siginfo_t info{};
  while (::waitid(static_cast<idtype_t>(P_PIDFD), static_cast<id_t>(pidfd), &info,
                  WEXITED | WNOHANG) != 0) {
    if (errno != EINTR) return last_error();
  }
  if (info.si_pid == 0) return std::optional<ExitStatus>();
  return std::optional<ExitStatus>(detail::status_from(info));
}

// Waits for the pidfd to be readable (the child exited) and reaps it. Its
// step makes the non-blocking waitid: a child still running is a
// "would block" (the readiness is cleared, tick-checked, and the operation
// waits for the driver's edge). Cancel-safe: until the step reaped, nothing
// was done.
class [[nodiscard]] PidfdWait : public volt::detail::IoOperation {
 public:
  explicit PidfdWait(const volt::detail::IoHandle& h) noexcept
      : IoOperation(h, volt::detail::Interest::kRead, &step) {}
  Expected<ExitStatus> await_resume() noexcept {
    finish();
    if (closed()) return errc::closed;
    if (error_ != 0) return std::error_code(error_, std::system_category());
    return status_;
  }

 private:
  static Step step(IoOperation& op) noexcept {
    auto& self = static_cast<PidfdWait&>(op);
    Expected<std::optional<ExitStatus>> r = waitid_pidfd(self.fd());
    if (!r) {
      self.error_ = r.error().value();
      return Step::kDone;
    }
    if (!r->has_value()) return Step::kWouldBlock;
    self.status_ = **r;
    return Step::kDone;
  }
  ExitStatus status_{0};
  int error_ = 0;
};

// Reads `out` and `err` (either may be null) to their ends concurrently,
// appending to the strings: a child filling one pipe while we wait on the
// other cannot deadlock. One select per read while both are open.
Task<Expected<void>> drain_both(io::PipeReader* out, io::PipeReader* err, std::string& out_text,
                                std::string& err_text) {
  constexpr std::size_t kChunk = 64 << 10;
  std::unique_ptr<char[]> buf_out(new char[kChunk]);
  std::unique_ptr<char[]> buf_err(new char[kChunk]);
  bool out_open = out != nullptr;
  bool err_open = err != nullptr;
  while (out_open && err_open) {
    std::variant<Expected<std::size_t>, Expected<std::size_t>> r =
        co_await volt::select(out->read(io::MutableBuffer(buf_out.get(), kChunk)),
                              err->read(io::MutableBuffer(buf_err.get(), kChunk)));
    if (r.index() == 0) {
      Expected<std::size_t>& n = std::get<0>(r);
      if (!n) co_return n.error();
      if (*n == 0) out_open = false;
      out_text.append(buf_out.get(), *n);
    } else {
      Expected<std::size_t>& n = std::get<1>(r);
      if (!n) co_return n.error();
      if (*n == 0) err_open = false;
      err_text.append(buf_err.get(), *n);
    }
  }
  while (out_open) {
    Expected<std::size_t> n = co_await out->read(io::MutableBuffer(buf_out.get(), kChunk));
    if (!n) co_return n.error();
    if (*n == 0) out_open = false;
    out_text.append(buf_out.get(), *n);
  }
  while (err_open) {
    Expected<std::size_t> n = co_await err->read(io::MutableBuffer(buf_err.get(), kChunk));
    if (!n) co_return n.error();
    if (*n == 0) err_open = false;
    err_text.append(buf_err.get(), *n);
  }
  Expected<void> ok;
  co_return ok;
}

Task<Expected<Output>> collect_output(Child child) {
  child.stdin.reset();
  Output out;
  io::PipeReader* so = child.stdout ? &*child.stdout : nullptr;
  io::PipeReader* se = child.stderr ? &*child.stderr : nullptr;
  Expected<void> drained = co_await drain_both(so, se, out.stdout, out.stderr);
  if (!drained) co_return drained.error();
  Expected<ExitStatus> status = co_await child.wait();
  if (!status) co_return status.error();
  out.status = *status;
  co_return std::move(out);
}

Task<Expected<ExitStatus>> wait_owned(Expected<Child> child) {
  if (!child) co_return child.error();
  Expected<ExitStatus> status = co_await child->wait();
  co_return status;
}

Task<Expected<Output>> output_owned(Expected<Child> child) {
  if (!child) co_return child.error();
  Expected<Output> out = co_await std::move(*child).wait_with_output();
  co_return out;
}

// posix_spawn's two objects, destroyed on every path.
struct SpawnObjects {
  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attr;
  bool actions_ok = false;
  bool attr_ok = false;
  ~SpawnObjects() {
    if (actions_ok) ::posix_spawn_file_actions_destroy(&actions);
    if (attr_ok) ::posix_spawnattr_destroy(&attr);
  }
};

// Descriptors the parent closes after the spawn (or on failure).
struct FdList {
  std::array<int, 8> fds{};
  std::size_t count = 0;
  void add(int fd) noexcept { fds[count++] = fd; }
  ~FdList() {
    for (std::size_t i = 0; i < count; ++i)
      ::close(fds[i]);
  }
};

// The child's PATH lookup when env() changed PATH: the first entry where
// `name` is executable; EACCES if one exists but is not, else ENOENT.
Expected<std::string> search_path(const std::string& name, const char* path) {
  if (path == nullptr) path = "/bin:/usr/bin";  // glibc's execvp default
  int error = ENOENT;
  for (const char* p = path;;) {
    const char* end = std::strchr(p, ':');
    // Built by appends (GCC 12 warns, -Wrestrict, on operator+ and on
    // assigning a literal here).
    std::string candidate;
    if (end == p || *p == '\0')
      candidate.push_back('.');
    else
      candidate.append(p, end ? static_cast<std::size_t>(end - p) : std::strlen(p));
    candidate += '/';
    candidate += name;
    // Only an executable regular file (execvp's rule): a directory of the
    // program's name passes access(X_OK), and stopping there made spawn fail
    // with EACCES where the same command without env() ran the next entry.
    struct stat st;
    if (::stat(candidate.c_str(), &st) == 0) {
      if (S_ISREG(st.st_mode) && ::access(candidate.c_str(), X_OK) == 0) return candidate;
      error = EACCES;  // there, but not something to run: keep looking
    } else if (errno == EACCES) {
      error = EACCES;
    }
    if (!end) break;
    p = end + 1;
  }
  return std::error_code(error, std::system_category());
}

}  // namespace

// ---- Stdio ----

Stdio Stdio::from_fd(int owned_fd) noexcept {
  // Ours now: close-on-exec, so that the child gets it only as the stdio
  // descriptor spawn() dup2()s it onto (which clears the flag there), not
  // also under its own number, and no child spawned meanwhile gets it.
  if (owned_fd >= 0) ::fcntl(owned_fd, F_SETFD, FD_CLOEXEC);
  Stdio s(Kind::kFd);
  s.fd_ = owned_fd;
  return s;
}

Stdio::Stdio(io::PipeReader&& reader) noexcept
    : kind_(Kind::kPipeEnd), end_(std::move(reader.handle_)) {}
Stdio::Stdio(io::PipeWriter&& writer) noexcept
    : kind_(Kind::kPipeEnd), end_(std::move(writer.handle_)) {}

Stdio::Stdio(Stdio&& other) noexcept
    : kind_(std::exchange(other.kind_, Kind::kInherit)),
      fd_(std::exchange(other.fd_, -1)),
      end_(std::move(other.end_)) {}

Stdio& Stdio::operator=(Stdio&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    kind_ = std::exchange(other.kind_, Kind::kInherit);
    fd_ = std::exchange(other.fd_, -1);
    end_ = std::move(other.end_);
  }
  return *this;
}

Stdio::~Stdio() {
  if (fd_ >= 0) ::close(fd_);
}

// ---- Command ----

Command::Command(std::string program) : program_(std::move(program)) {}
Command::Command(Command&&) noexcept = default;
Command& Command::operator=(Command&&) noexcept = default;
Command::~Command() = default;

Command& Command::arg(std::string a) {
  args_.push_back(std::move(a));
  return *this;
}
Command& Command::args(std::initializer_list<std::string_view> list) {
  for (std::string_view a : list)
    args_.emplace_back(a);
  return *this;
}
Command& Command::arg0(std::string a) {
  arg0_ = std::move(a);
  return *this;
}
Command& Command::env(std::string key, std::string value) {
  env_changes_.emplace_back(std::move(key), std::move(value));
  return *this;
}
Command& Command::env_remove(std::string key) {
  env_changes_.emplace_back(std::move(key), std::nullopt);
  return *this;
}
Command& Command::env_clear() {
  env_clear_ = true;
  env_changes_.clear();
  return *this;
}
Command& Command::current_dir(std::filesystem::path dir) {
  cwd_ = std::move(dir);
  return *this;
}
Command& Command::stdin(Stdio s) {
  stdin_ = std::move(s);
  return *this;
}
Command& Command::stdout(Stdio s) {
  stdout_ = std::move(s);
  return *this;
}
Command& Command::stderr(Stdio s) {
  stderr_ = std::move(s);
  return *this;
}
Command& Command::process_group(pid_t pgid) {
  pgroup_ = pgid;
  return *this;
}
Command& Command::kill_on_drop(bool on) noexcept {
  kill_on_drop_ = on;
  return *this;
}

Expected<Child> Command::spawn() {
  return spawn_with(Default::kInherit);
}

Task<Expected<ExitStatus>> Command::status() {
  return wait_owned(spawn_with(Default::kInherit));
}

Task<Expected<Output>> Command::output() {
  return output_owned(spawn_with(Default::kOutput));
}

namespace {

// The Stdio a slot stands for at this spawn (moved out; spawn_with puts
// back the kinds that own nothing), or `fallback` for an unset slot.
Stdio take_slot(std::optional<Stdio>& slot, Stdio fallback) noexcept {
  if (!slot) return fallback;
  return std::move(*slot);
}

}  // namespace

Expected<Child> Command::spawn_with(Default defaults) {
  if (volt::detail::RuntimeCore::current() == nullptr) return errc::no_runtime;
  // A NUL would cut a C string short: refuse rather than run something else
  // (an argument "abc\0rm" would reach the child as "abc"). Before any Stdio
  // slot is taken, so the Command can be fixed and spawned again.
  const auto has_nul = [](std::string_view text) { return text.find('\0') != text.npos; };
  bool bad = has_nul(program_) || (arg0_ && has_nul(*arg0_)) || (cwd_ && has_nul(cwd_->native()));
  for (const std::string& a : args_)
    bad = bad || has_nul(a);
  for (const auto& [key, value] : env_changes_)
    bad = bad || key.empty() || has_nul(key) || key.find('=') != std::string::npos ||
          (value && has_nul(*value));
  if (bad) return errc::invalid_argument;
  io::detail::ignore_sigpipe_once();
  const bool output = defaults == Default::kOutput;

  Stdio slots[3] = {take_slot(stdin_, output ? Stdio::null() : Stdio::inherit()),
                    take_slot(stdout_, output ? Stdio::piped() : Stdio::inherit()),
                    take_slot(stderr_, output ? Stdio::piped() : Stdio::inherit())};
  // Slots that held nothing are put back, so the Command can spawn again.
  std::optional<Stdio>* const saved[3] = {&stdin_, &stdout_, &stderr_};
  for (int i = 0; i < 3; ++i) {
    if (saved[i]->has_value() &&
        (slots[i].kind_ == Stdio::Kind::kInherit || slots[i].kind_ == Stdio::Kind::kPiped ||
         slots[i].kind_ == Stdio::Kind::kNull))
      **saved[i] = Stdio(slots[i].kind_);
    else
      saved[i]->reset();
  }

  SpawnObjects objects;
  if (int rc = ::posix_spawn_file_actions_init(&objects.actions); rc != 0)
    return std::error_code(rc, std::system_category());
  objects.actions_ok = true;
  if (int rc = ::posix_spawnattr_init(&objects.attr); rc != 0)
    return std::error_code(rc, std::system_category());
  objects.attr_ok = true;

  FdList close_after;  // child ends and temporaries: closed on every path
  FdList parent_ends;  // our ends of new pipes: closed unless adopted
  int parent_end[3] = {-1, -1, -1};
  std::optional<volt::detail::IoUse> uses[3];  // pipe ends lent to the child

  for (int i = 0; i < 3; ++i) {
    Stdio& s = slots[i];
    int src = -1;
    switch (s.kind_) {
      case Stdio::Kind::kInherit:
        continue;
      case Stdio::Kind::kNull:
        if (int rc = ::posix_spawn_file_actions_addopen(&objects.actions, i, "/dev/null",
                                                        i == 0 ? O_RDONLY : O_WRONLY, 0);
            rc != 0)
          return std::error_code(rc, std::system_category());
        continue;
      case Stdio::Kind::kPiped: {
        // Both ends non-blocking and close-on-exec in one call; the child's
        // end (its own open file description) is made blocking again.
        int p[2];
        if (::pipe2(p, O_CLOEXEC | O_NONBLOCK) != 0) return last_error();
        const int child_end = i == 0 ? p[0] : p[1];
        parent_end[i] = i == 0 ? p[1] : p[0];
        parent_ends.add(parent_end[i]);
        close_after.add(child_end);
        if (::fcntl(child_end, F_SETFL, i == 0 ? O_RDONLY : O_WRONLY) != 0) return last_error();
        src = child_end;
        break;
      }
      case Stdio::Kind::kFd:
        src = s.fd_;
        if (src < 0) return std::error_code(EBADF, std::system_category());
        break;
      case Stdio::Kind::kPipeEnd: {
        uses[i].emplace(s.end_);
        src = uses[i]->fd();
        if (src < 0) return errc::closed;
        // The child shares the open file description: give it blocking I/O,
        // as programs expect of their stdio (our copy is closed after the
        // spawn, so nothing of ours relies on O_NONBLOCK any more).
        const int fl = ::fcntl(src, F_GETFL);
        if (fl >= 0 && (fl & O_NONBLOCK)) ::fcntl(src, F_SETFL, fl & ~O_NONBLOCK);
        break;
      }
    }
    // A source among 0..2 could be overwritten by an earlier dup2 of the
    // file actions: move it above 2 first.
    if (src < 3 && src != i) {
      const int moved = ::fcntl(src, F_DUPFD_CLOEXEC, 3);
      if (moved < 0) return last_error();
      close_after.add(moved);
      src = moved;
    }
    // dup2 onto the target clears close-on-exec there (glibc also does so
    // when src == target).
    if (int rc = ::posix_spawn_file_actions_adddup2(&objects.actions, src, i); rc != 0)
      return std::error_code(rc, std::system_category());
  }

  if (cwd_) {
    if (int rc = ::posix_spawn_file_actions_addchdir_np(&objects.actions, cwd_->c_str()); rc != 0)
      return std::error_code(rc, std::system_category());
  }

  short flags = POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF;
  sigset_t none;
  ::sigemptyset(&none);
  ::posix_spawnattr_setsigmask(&objects.attr, &none);
  sigset_t defaults_set;
  ::sigemptyset(&defaults_set);
  ::sigaddset(&defaults_set, SIGPIPE);  // ignored by us (io/pipe.hpp), default for the child
  ::posix_spawnattr_setsigdefault(&objects.attr, &defaults_set);
  if (pgroup_) {
    flags |= POSIX_SPAWN_SETPGROUP;
    ::posix_spawnattr_setpgroup(&objects.attr, *pgroup_);
  }
  ::posix_spawnattr_setflags(&objects.attr, flags);

  std::vector<char*> argv;
  argv.reserve(args_.size() + 2);
  argv.push_back(const_cast<char*>(arg0_ ? arg0_->c_str() : program_.c_str()));
  for (std::string& a : args_)
    argv.push_back(a.data());
  argv.push_back(nullptr);

  std::vector<std::string> env_store;
  std::vector<char*> envp;
  char* const* envp_ptr = environ;
  bool path_changed = false;
  if (env_clear_ || !env_changes_.empty()) {
    if (!env_clear_)
      for (char** e = environ; *e != nullptr; ++e)
        env_store.emplace_back(*e);
    for (const auto& change : env_changes_) {
      const std::string& key = change.first;  // not a structured binding: captured below (clang 14)
      const std::optional<std::string>& value = change.second;
      if (key == "PATH") path_changed = true;
      std::erase_if(env_store, [&key](const std::string& e) {
        return e.size() > key.size() && e[key.size()] == '=' && e.compare(0, key.size(), key) == 0;
      });
      if (value) {
        std::string entry = key;  // appended, not operator+ (GCC 12 -Wrestrict)
        entry += '=';
        entry += *value;
        env_store.push_back(std::move(entry));
      }
    }
    if (env_clear_) path_changed = true;
    envp.reserve(env_store.size() + 1);
    for (std::string& e : env_store)
      envp.push_back(e.data());
    envp.push_back(nullptr);
    envp_ptr = envp.data();
  }

  bool search = program_.find('/') == std::string::npos;
  std::string resolved;
  const char* path = program_.c_str();
  if (search && path_changed) {
    const char* child_path = nullptr;
    for (const std::string& e : env_store)
      if (e.compare(0, 5, "PATH=") == 0) child_path = e.c_str() + 5;
    Expected<std::string> found = search_path(program_, child_path);
    if (!found) return found.error();
    resolved = std::move(*found);
    path = resolved.c_str();
    search = false;
  }

  pid_t pid = 0;
  int rc = 0;
  std::shared_ptr<detail::ExitWatch> watch;
  const bool pidfd = detail::pidfd_mode();
  if (pidfd) {
    rc = search ? ::posix_spawnp(&pid, path, &objects.actions, &objects.attr, argv.data(), envp_ptr)
                : ::posix_spawn(&pid, path, &objects.actions, &objects.attr, argv.data(), envp_ptr);
  } else {
    Expected<std::unique_lock<std::mutex>> lock = detail::sigchld_lock_for_spawn();
    if (!lock) return lock.error();
    detail::SpawnRegistration prepared = detail::sigchld_prepare();
    rc = search ? ::posix_spawnp(&pid, path, &objects.actions, &objects.attr, argv.data(), envp_ptr)
                : ::posix_spawn(&pid, path, &objects.actions, &objects.attr, argv.data(), envp_ptr);
    if (rc == 0) watch = detail::sigchld_register(pid, std::move(prepared));
  }
  if (rc != 0) return std::error_code(rc, std::system_category());

  Child child;
  child.pid_ = pid;
  child.watch_ = std::move(watch);
  if (pidfd) {
    const int fd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));  // always close-on-exec
    std::error_code ec = fd < 0 ? last_error() : volt::detail::IoHandle::open(fd, child.pidfd_);
    if (fd < 0 && ec.value() == ESRCH) {
      // Our child, not reaped by us, yet gone: the kernel reaped it as it
      // exited (SIGCHLD ignored, or SA_NOCLDWAIT), or someone's waitpid(-1)
      // did. The program ran; only its status is lost. Nothing may be sent
      // to the pid, which another process may hold by now.
      child.reaped_elsewhere_ = true;
      ec.clear();
    }
    if (ec) {
      // Without a pidfd we cannot watch it: kill it and reap it here (a
      // killed child exits at once; the reaper thread is no help when
      // descriptors are short, as it needs some to start).
      ::kill(pid, SIGKILL);
      while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
      }
      child.pid_ = 0;
      return ec;
    }
  }
  // From here a failure leaves a Child that kills and reaps on drop.
  child.kill_on_drop_ = true;
  for (int i = 0; i < 3; ++i) {
    if (parent_end[i] < 0) continue;
    // Adopted: no longer ours to close (IoHandle::open closes it on failure too).
    parent_ends.count = 0;
    for (int j = i + 1; j < 3; ++j)
      if (parent_end[j] >= 0) parent_ends.add(parent_end[j]);
    // Already non-blocking and close-on-exec: registered as is.
    volt::detail::IoHandle end;
    if (std::error_code ec = volt::detail::IoHandle::open(parent_end[i], end)) return ec;
    if (i == 0)
      child.stdin = io::PipeWriter(std::move(end));
    else if (i == 1)
      child.stdout = io::PipeReader(std::move(end));
    else
      child.stderr = io::PipeReader(std::move(end));
  }
  child.kill_on_drop_ = kill_on_drop_;
  return child;
}

// ---- Child ----

Child::Child(Child&& other) noexcept
    : stdin(std::move(other.stdin)),
      stdout(std::move(other.stdout)),
      stderr(std::move(other.stderr)),
      pid_(std::exchange(other.pid_, 0)),
      pidfd_(std::move(other.pidfd_)),
      watch_(std::move(other.watch_)),
      status_(other.status_),
      kill_on_drop_(other.kill_on_drop_),
      reaped_elsewhere_(other.reaped_elsewhere_) {}

Child& Child::operator=(Child&& other) noexcept {
  if (this != &other) {
    release();
    stdin = std::move(other.stdin);
    stdout = std::move(other.stdout);
    stderr = std::move(other.stderr);
    pid_ = std::exchange(other.pid_, 0);
    pidfd_ = std::move(other.pidfd_);
    watch_ = std::move(other.watch_);
    status_ = other.status_;
    kill_on_drop_ = other.kill_on_drop_;
    reaped_elsewhere_ = other.reaped_elsewhere_;
  }
  return *this;
}

Child::~Child() {
  release();
}

void Child::release() noexcept {
  if (pid_ == 0 || status_) return;
  if (watch_) {
    detail::sigchld_orphan(*watch_, kill_on_drop_);
    watch_.reset();
    pid_ = 0;
    return;
  }
  {
    const volt::detail::IoUse use(pidfd_);
    const int fd = use.fd();
    if (fd >= 0) {
      if (kill_on_drop_) pidfd_send_signal(fd, SIGKILL);
      Expected<std::optional<ExitStatus>> now = waitid_pidfd(fd);
      // Reaped now, or an error (ECHILD: reaped elsewhere): nothing to hand over.
      if (!now || now->has_value()) {
        pid_ = 0;
      } else {
        const int copy = ::fcntl(fd, F_DUPFD_CLOEXEC, 3);
        if (copy >= 0)
          detail::reaper_adopt_pidfd(copy, pid_);
        else
          detail::reaper_adopt_pid(pid_);
        pid_ = 0;
      }
    }
  }
  pidfd_.reset();
}

Task<Expected<ExitStatus>> Child::wait() {
  stdin.reset();
  if (status_) co_return *status_;
  if (reaped_elsewhere_) co_return std::error_code(ECHILD, std::system_category());
  if (watch_) {
    for (;;) {
      std::optional<Expected<ExitStatus>> r = detail::sigchld_result(*watch_);
      if (r) {
        if (*r) status_ = **r;
        co_return std::move(*r);
      }
      co_await watch_->exited.notified();
    }
  }
  Expected<ExitStatus> r = co_await PidfdWait(pidfd_);
  if (r) {
    status_ = *r;
    pidfd_.reset();  // reaped: the descriptor is of no further use
  }
  co_return r;
}

Expected<std::optional<ExitStatus>> Child::try_wait() {
  if (status_) return std::optional<ExitStatus>(*status_);
  if (reaped_elsewhere_) return std::error_code(ECHILD, std::system_category());
  if (watch_) {
    std::optional<Expected<ExitStatus>> r = detail::sigchld_try_reap(*watch_);
    if (!r) return std::optional<ExitStatus>();
    if (!*r) return r->error();
    status_ = **r;
    return std::optional<ExitStatus>(*status_);
  }
  return reap_nohang();
}

Expected<std::optional<ExitStatus>> Child::reap_nohang() {
  Expected<std::optional<ExitStatus>> r = errc::closed;
  {
    const volt::detail::IoUse use(pidfd_);
    if (use.fd() >= 0) r = waitid_pidfd(use.fd());
  }
  if (r && r->has_value()) {
    status_ = **r;
    pidfd_.reset();
  }
  return r;
}

Task<Expected<Output>> Child::wait_with_output() && {
  return collect_output(std::move(*this));
}

Task<Expected<void>> Child::kill() {
  Expected<void> sent = start_kill();
  if (!sent) co_return sent;
  Expected<ExitStatus> status = co_await wait();
  if (!status) co_return status.error();
  Expected<void> ok;
  co_return ok;
}

Expected<void> Child::start_kill() {
  return signal(SIGKILL);
}

Expected<void> Child::signal(int signum) {
  if (status_ || reaped_elsewhere_) return {};
  if (watch_) return detail::sigchld_signal(*watch_, signum);
  const volt::detail::IoUse use(pidfd_);
  if (use.fd() < 0) return errc::closed;
  if (pidfd_send_signal(use.fd(), signum) != 0) {
    if (errno == ESRCH) return {};  // exited, not reaped yet: nothing to signal
    return last_error();
  }
  return {};
}

}  // namespace volt::process
