// The process module's internals shared by process.cpp, reaper.cpp and
// sigchld.cpp.
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <cstddef>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_map>

#include "volt/expected.hpp"
#include "volt/process/process.hpp"
#include "volt/sync/notify.hpp"

namespace volt::process::detail {

// The status a waitid(WEXITED) reported.
ExitStatus status_from(const siginfo_t& info) noexcept;

// Whether exits are watched through pidfds (decided once per process: off
// if pidfd_open or waitid(P_PIDFD) is missing, or VOLT_PROCESS_PIDFD=0).
bool pidfd_mode() noexcept;

// ---- The background reaper (reaper.cpp), pidfd mode ----
// Takes ownership of `pidfd` (a child not reaped yet) and reaps the child
// when it exits. Thread-safe; starts the "volt-reaper" thread on first use.
void reaper_adopt_pidfd(int pidfd, pid_t pid) noexcept;
// The same for a child known only by its pid (its pidfd could not be made):
// swept with waitid(WNOHANG) every 50 ms while any is left.
void reaper_adopt_pid(pid_t pid) noexcept;
// Children the reaper still holds (pidfds not yet closed, pids not yet
// reaped): for tests.
std::size_t reaper_pending() noexcept;

// ---- The SIGCHLD fallback (sigchld.cpp) ----
// One child's exit, shared by its Child and the registry. The scanner
// thread sets `result` (under `lock`) when it reaps the child, then calls
// exited.notify_one(): the Notify's stored permit means a waiter that checks
// `result` and then awaits notified() cannot miss it.
struct ExitWatch {
  pid_t pid = 0;
  std::mutex lock;
  std::optional<Expected<ExitStatus>> result;  // guarded by lock
  volt::Notify exited;
};

// Taken around posix_spawn in fallback mode, so that the scanner cannot
// look at the new pid before it is registered. Starts the SIGCHLD Signal and
// the "volt-sigchld" thread on first use (their errors are returned).
Expected<std::unique_lock<std::mutex>> sigchld_lock_for_spawn() noexcept;
// What registering a child takes, allocated before the spawn (the lock
// above held): once the child runs, registering it cannot fail, since a
// child nobody watches could never be waited for or reaped. May throw
// std::bad_alloc, while nothing has been spawned.
struct SpawnRegistration {
  std::shared_ptr<ExitWatch> watch;
  std::unordered_map<pid_t, std::shared_ptr<ExitWatch>>::node_type node;
};
SpawnRegistration sigchld_prepare();
// Registers the child just spawned (the lock above still held): allocates
// nothing.
std::shared_ptr<ExitWatch> sigchld_register(pid_t pid, SpawnRegistration prepared) noexcept;
// The result if the scanner (or try_reap) already reaped it.
std::optional<Expected<ExitStatus>> sigchld_result(ExitWatch& w);
// Reaps now if it exited (WNOHANG).
std::optional<Expected<ExitStatus>> sigchld_try_reap(ExitWatch& w);
// kill(pid, signum) unless already reaped (then nothing, success).
Expected<void> sigchld_signal(ExitWatch& w, int signum);
// The Child is gone: SIGKILL if asked; the scanner reaps it when it exits.
void sigchld_orphan(ExitWatch& w, bool kill) noexcept;

}  // namespace volt::process::detail
