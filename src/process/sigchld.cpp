// The SIGCHLD fallback, for kernels without pidfds (or VOLT_PROCESS_PIDFD=0).
//
// The registry maps the pid of every child spawned in this mode and not yet
// reaped to its ExitWatch (shared with its Child, if that still exists). A
// "volt-sigchld-w" thread waits on volt::signal's SIGCHLD stream
// (Signal::recv_blocking) and wakes the "volt-sigchld" scanner, which scans
// after each delivery (deliveries coalesce) and, while children are
// registered, every 100 ms in any case (a lost SIGCHLD delays an exit by at
// most that; see scanner()):
//
//   1. Peek: waitid(P_ALL, WEXITED | WNOHANG | WNOWAIT) names one exited
//      child without reaping it. If it is ours, reap that pid
//      (waitid(P_PID, WNOHANG)), store its status in its ExitWatch, notify
//      its waiter alone, drop it from the registry, and peek again. Each
//      exited child costs two waitid calls and wakes one task: n children
//      exiting one by one cost O(n) in total, not Tokio 1.24's O(n^2) (there
//      every SIGCHLD woke every waiting child to try its own waitpid).
//   2. If the peek names a child that is not ours (another library's, which
//      it has not reaped yet), the peek would keep naming it; only then each
//      registered pid is tried with waitid(P_PID, WNOHANG): O(registered)
//      for that scan.
//
// No lost exit: the scan holds the registry's mutex, and spawn() holds it
// from before posix_spawn until the pid is registered, so no scan can peek
// a pid of ours that is not registered yet. A child exiting after a scan's
// last peek raises a SIGCHLD counted after the Signal's last recv (the
// Signal marks deliveries seen when recv returns, before the scan), so
// another scan follows. A waiter checks `result` and then awaits the Notify;
// notify_one stores a permit if it is not waiting yet, so the wake-up cannot
// fall between its check and its wait.
//
//   3. Whatever the peek says, when it reports no children at all (ECHILD),
//      and on every timed sweep, each registered pid is tried as in 2: a
//      child someone else reaped (a waitpid(-1) elsewhere, or the kernel
//      while SIGCHLD is ignored) is never named by a peek, and its wait()
//      would otherwise never end. Its try says ECHILD, which wait() returns.
//
// Limits (documented in process.hpp): a SIGCHLD handler installed by
// someone else after ours replaces it (then exits are seen by the 100 ms
// sweep only); SIGCHLD set to SIG_IGN makes the kernel reap children itself
// (wait gives ECHILD, within a sweep). kill() and a kill-on-drop first try
// to reap the pid (still_running_locked): a child someone else reaped is
// found gone there and not signalled. What remains is another party's
// waitpid(-1) between that try and the kill, after which the kill signals a
// pid the kernel may give out again (only after a wrap of the pid space);
// and a pid reaped elsewhere and given again (after a wrap) to another child
// of this process that volt did not spawn, which the try then takes for
// ours. The pidfd mode has neither, which is why it is the default.
//
// Lock order: registry mutex, then the Wakeup's mutex (sigchld_register);
// the scanner never holds the Wakeup's mutex while taking the registry's.
//
// Lock order: registry mutex, then an ExitWatch's lock. notify_one is called
// after the watch's lock is released (under the registry mutex: it only
// schedules the waiting task, which takes neither lock to be scheduled).
#include <pthread.h>
#include <sys/wait.h>

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "process/internal.hpp"
#include "volt/signal/signal.hpp"

namespace volt::process::detail {

namespace {

struct Registry {
  std::mutex mutex;
  bool started = false;                                            // guarded by mutex
  std::unordered_map<pid_t, std::shared_ptr<ExitWatch>> children;  // guarded by mutex
};

Registry& registry() {
  static Registry* r = new Registry;  // leaked: the thread may run during exit()
  return *r;
}

// Reaps `w`'s child if it exited. Under the registry mutex. True if it is
// gone (reaped now, or waitid failed: ECHILD when someone else reaped it);
// then its result is stored and its waiter notified.
bool reap_locked(ExitWatch& w) {
  siginfo_t info{};
  int rc;
  do {
    rc = ::waitid(P_PID, static_cast<id_t>(w.pid), &info, WEXITED | WNOHANG);
  } while (rc != 0 && errno == EINTR);
  if (rc == 0 && info.si_pid == 0) return false;
  Expected<ExitStatus> result =
      rc == 0 ? Expected<ExitStatus>(status_from(info))
              : Expected<ExitStatus>(std::error_code(errno, std::system_category()));
  {
    std::lock_guard guard(w.lock);
    w.result = std::move(result);
  }
  w.exited.notify_one();
  return true;
}

// `sweep`: the scanner's timed look (no SIGCHLD came for kSweep). Then every
// registered pid is tried, whatever the peek says: a child reaped by
// someone else (a waitpid(-1) of another library's, or the kernel itself
// while SIGCHLD is ignored) is never named by the peek again, and only this
// finds it gone (ECHILD) and ends its wait(). O(registered) a sweep, in this
// fallback mode only.
void scan(bool sweep) {
  Registry& r = registry();
  std::lock_guard guard(r.mutex);
  bool try_all = sweep;
  for (;;) {
    siginfo_t info{};
    if (::waitid(P_ALL, 0, &info, WEXITED | WNOHANG | WNOWAIT) != 0) {
      if (errno == EINTR) continue;
      // ECHILD: no unreaped child at all, so whatever is still registered
      // was reaped by someone else: each try below says ECHILD.
      if (errno == ECHILD) try_all = true;
      break;
    }
    if (info.si_pid == 0) break;  // none exited
    auto it = r.children.find(info.si_pid);
    if (it == r.children.end()) {  // not ours
      try_all = true;
      break;
    }
    std::shared_ptr<ExitWatch> w = it->second;
    if (!reap_locked(*w)) break;  // cannot happen: it was just seen exited
    r.children.erase(it);
  }
  if (!try_all) return;
  for (auto it = r.children.begin(); it != r.children.end();) {
    if (reap_locked(*it->second))
      it = r.children.erase(it);
    else
      ++it;
  }
}

// Wakes the scanner: a SIGCHLD arrived (pending), or a child was registered
// (the scanner recomputes its timeout).
struct Wakeup {
  std::mutex mutex;
  std::condition_variable cv;
  bool pending = false;  // a delivery; guarded by mutex
  bool kicked = false;   // a registration; guarded by mutex
};

Wakeup& wakeup() {
  static Wakeup* w = new Wakeup;  // leaked, as the registry
  return *w;
}

bool have_children() {
  Registry& r = registry();
  std::lock_guard guard(r.mutex);
  return !r.children.empty();
}

// "volt-sigchld-wait": turns each SIGCHLD delivery into a wake-up.
void listen(volt::signal::Signal sigchld) {
  ::pthread_setname_np(::pthread_self(), "volt-sigchld-w");
  Wakeup& w = wakeup();
  for (;;) {
    sigchld.recv_blocking();
    {
      std::lock_guard guard(w.mutex);
      w.pending = true;
    }
    w.cv.notify_one();
  }
}

// "volt-sigchld": scans after each delivery and, while children are
// registered, at least every kSweep (a SIGCHLD can be lost to us: a handler
// installed later by someone else replaces ours, and ThreadSanitizer holds
// a signal that lands on a thread parked in a raw futex). An idle process
// with no fallback child makes no wake-ups.
void scanner() {
  ::pthread_setname_np(::pthread_self(), "volt-sigchld");
  constexpr auto kSweep = std::chrono::milliseconds(100);
  Wakeup& w = wakeup();
  for (;;) {
    // Looked at before taking w.mutex (lock order: registry, then w.mutex,
    // as sigchld_register takes them); a registration after the look sets
    // `kicked`, so the wait below cannot miss it.
    const bool any = have_children();
    bool sweep = false;
    {
      std::unique_lock lock(w.mutex);
      if (!w.pending && !w.kicked) {
        if (any)
          sweep = !w.cv.wait_for(lock, kSweep, [&w] { return w.pending || w.kicked; });
        else
          w.cv.wait(lock);
      }
      w.pending = false;
      w.kicked = false;
    }
    scan(sweep);
  }
}

}  // namespace

Expected<std::unique_lock<std::mutex>> sigchld_lock_for_spawn() noexcept {
  Registry& r = registry();
  std::unique_lock lock(r.mutex);
  if (!r.started) {
    try {
      // The Signal first: every SIGCHLD after this is counted for it.
      volt::signal::Signal sigchld = volt::signal::signal(SIGCHLD);
      std::thread(listen, std::move(sigchld)).detach();
      std::thread(scanner).detach();
    } catch (const std::system_error& e) {
      return e.code();
    } catch (...) {
      return std::make_error_code(std::errc::not_enough_memory);
    }
    r.started = true;
  }
  return lock;
}

SpawnRegistration sigchld_prepare() {
  SpawnRegistration prepared;
  prepared.watch = std::make_shared<ExitWatch>();
  // The map's node, made in a map of its own and taken out of it; and room
  // in the registry for one more, so that inserting it will not rehash.
  std::unordered_map<pid_t, std::shared_ptr<ExitWatch>> one;
  one.emplace(0, prepared.watch);
  prepared.node = one.extract(one.begin());
  Registry& r = registry();  // the caller holds the mutex
  r.children.reserve(r.children.size() + 1);
  return prepared;
}

std::shared_ptr<ExitWatch> sigchld_register(pid_t pid, SpawnRegistration prepared) noexcept {
  std::shared_ptr<ExitWatch> w = std::move(prepared.watch);
  w->pid = pid;
  prepared.node.key() = pid;
  auto added = registry().children.insert(std::move(prepared.node));  // reserved: no allocation
  if (!added.inserted) {
    // The pid is registered already: that child was reaped by someone else
    // (the kernel gives a pid again only once it is reaped), and no sweep
    // has found it yet. Its wait ends as the sweep would end it (ECHILD),
    // and the entry is the new child's.
    ExitWatch& stale = *added.position->second;
    {
      std::lock_guard guard(stale.lock);
      stale.result = Expected<ExitStatus>(std::error_code(ECHILD, std::system_category()));
    }
    stale.exited.notify_one();
    added.position->second = std::move(added.node.mapped());
  }
  // The scanner may be waiting without a timeout (no children until now).
  Wakeup& wake = wakeup();
  {
    std::lock_guard guard(wake.mutex);
    wake.kicked = true;
  }
  wake.cv.notify_one();
  return w;
}

std::optional<Expected<ExitStatus>> sigchld_result(ExitWatch& w) {
  std::lock_guard guard(w.lock);
  return w.result;
}

namespace {

// reap_locked, and once `w` is gone its registry entry goes too (only if
// it is still w's: a newer child may have been registered under the pid).
bool reap_and_unregister_locked(Registry& r, ExitWatch& w) {
  if (!reap_locked(w)) return false;
  auto it = r.children.find(w.pid);
  if (it != r.children.end() && it->second.get() == &w) r.children.erase(it);
  return true;
}

}  // namespace

std::optional<Expected<ExitStatus>> sigchld_try_reap(ExitWatch& w) {
  Registry& r = registry();
  std::lock_guard guard(r.mutex);
  {
    std::lock_guard watch_guard(w.lock);
    if (w.result) return w.result;
  }
  if (!reap_and_unregister_locked(r, w)) return std::nullopt;
  std::lock_guard watch_guard(w.lock);
  return w.result;
}

namespace {

// Under the registry mutex, before signalling w.pid: reaps it if it has
// exited, and records ECHILD if it is no longer our child at all (someone
// else reaped it, and the kernel may have given its pid to another process
// since). True if it is still our running child, the only case in which a
// signal may be sent: our reaping happens only under this mutex, so it stays
// ours until the kill, and only another party's waitpid(-1) between the
// two can still take it (the pid then needs a wrap of the pid space before
// the kill to be reused).
bool still_running_locked(Registry& r, ExitWatch& w) {
  {
    std::lock_guard watch_guard(w.lock);
    if (w.result) return false;
  }
  return !reap_and_unregister_locked(r, w);
}

}  // namespace

Expected<void> sigchld_signal(ExitWatch& w, int signum) {
  Registry& r = registry();
  std::lock_guard guard(r.mutex);
  // An exited child has nothing to signal, as in the pidfd mode (ESRCH).
  if (!still_running_locked(r, w)) return {};
  if (::kill(w.pid, signum) != 0) return std::error_code(errno, std::system_category());
  return {};
}

void sigchld_orphan(ExitWatch& w, bool kill) noexcept {
  Registry& r = registry();
  std::lock_guard guard(r.mutex);
  if (!still_running_locked(r, w)) return;
  if (!kill) return;  // still registered: the scanner reaps it when it exits
  ::kill(w.pid, SIGKILL);
  // A killed child is usually not gone yet: then the scanner reaps it.
  reap_and_unregister_locked(r, w);
}

}  // namespace volt::process::detail
