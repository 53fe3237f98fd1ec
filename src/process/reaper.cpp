// The background reaper (pidfd mode): children whose Child was dropped
// before they were reaped.
//
// One process-wide "volt-reaper" thread, started on first need and never
// stopped (its state is leaked on purpose, so exit() cannot destroy it
// under the thread). It blocks in an epoll instance of its own holding the
// pidfds it was given (level-triggered: a readable pidfd is an exited
// child), reaps each with waitid(P_PIDFD, WNOHANG) and closes it. A thread
// rather than a runtime task: it keeps reaping after every runtime shut
// down, and a Child may be dropped outside any runtime.
//
// Children known only by pid (their pidfd could not be made or duplicated:
// EMFILE) are swept with waitid(P_PID, WNOHANG) every 50 ms while any is
// left; an eventfd wakes the thread to recompute its timeout.
//
// Ownership: a pidfd passed to reaper_adopt_pidfd belongs to the reaper
// from the call; it is closed after the child is reaped (or waitid fails,
// e.g. ECHILD when another waitpid(-1) took it).
#include <pthread.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#include "process/internal.hpp"

namespace volt::process::detail {

namespace {

struct Reaper {
  std::mutex mutex;
  bool started = false;     // guarded by mutex
  int epoll_fd = -1;        // set before the thread starts, then constant
  int event_fd = -1;        // likewise
  std::vector<pid_t> pids;  // pid-only orphans; guarded by mutex
  std::size_t pidfds = 0;   // pidfds held (for tests); guarded by mutex
};

Reaper& reaper() {
  static Reaper* r = new Reaper;  // leaked: see above
  return *r;
}

// True when the child behind `pidfd` is gone (reaped now, or waitid failed).
bool reap_pidfd(int pidfd) noexcept {
  siginfo_t info{};
  for (;;) {
    if (::waitid(static_cast<idtype_t>(P_PIDFD), static_cast<id_t>(pidfd), &info,
                 WEXITED | WNOHANG) == 0)
      return info.si_pid != 0;
    if (errno != EINTR) return true;
  }
}

bool reap_pid(pid_t pid) noexcept {
  siginfo_t info{};
  for (;;) {
    if (::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG) == 0)
      return info.si_pid != 0;
    if (errno != EINTR) return true;
  }
}

void run(Reaper* r) {
  ::pthread_setname_np(::pthread_self(), "volt-reaper");
  epoll_event events[64];
  for (;;) {
    int timeout = -1;
    {
      std::lock_guard guard(r->mutex);
      if (!r->pids.empty()) timeout = 50;
    }
    const int n = ::epoll_wait(r->epoll_fd, events, 64, timeout);
    for (int i = 0; i < n; ++i) {
      const int fd = events[i].data.fd;
      if (fd == r->event_fd) {
        std::uint64_t value;
        [[maybe_unused]] const ssize_t got = ::read(fd, &value, sizeof value);
        continue;
      }
      if (reap_pidfd(fd)) {
        epoll_event unused{};
        ::epoll_ctl(r->epoll_fd, EPOLL_CTL_DEL, fd, &unused);
        ::close(fd);
        std::lock_guard guard(r->mutex);
        --r->pidfds;
      }
    }
    std::lock_guard guard(r->mutex);
    std::erase_if(r->pids, [](pid_t pid) { return reap_pid(pid); });
  }
}

// Under r.mutex.
bool start(Reaper& r) noexcept {
  if (r.started) return true;
  if (r.epoll_fd < 0) r.epoll_fd = ::epoll_create1(EPOLL_CLOEXEC);
  if (r.epoll_fd < 0) return false;
  if (r.event_fd < 0) {
    r.event_fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (r.event_fd < 0) return false;
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = r.event_fd;
    if (::epoll_ctl(r.epoll_fd, EPOLL_CTL_ADD, r.event_fd, &ev) != 0) {
      ::close(r.event_fd);
      r.event_fd = -1;
      return false;
    }
  }
  try {
    std::thread(run, &r).detach();
  } catch (...) {
    return false;
  }
  r.started = true;
  return true;
}

}  // namespace

void reaper_adopt_pidfd(int pidfd, pid_t pid) noexcept {
  Reaper& r = reaper();
  std::lock_guard guard(r.mutex);
  if (start(r)) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = pidfd;
    if (::epoll_ctl(r.epoll_fd, EPOLL_CTL_ADD, pidfd, &ev) == 0) {
      ++r.pidfds;
      return;
    }
  }
  ::close(pidfd);
  // No epoll slot (ENOMEM, ENOSPC: max_user_watches) or no thread: the
  // pid sweep (only if the thread runs; otherwise the zombie stays until we
  // exit, which only a process unable to start a thread would see).
  try {
    r.pids.push_back(pid);
  } catch (...) {
    return;
  }
  if (r.started) {
    const std::uint64_t one = 1;
    [[maybe_unused]] const ssize_t put = ::write(r.event_fd, &one, sizeof one);
  }
}

void reaper_adopt_pid(pid_t pid) noexcept {
  Reaper& r = reaper();
  std::lock_guard guard(r.mutex);
  if (!start(r)) return;
  try {
    r.pids.push_back(pid);
  } catch (...) {
    return;
  }
  const std::uint64_t one = 1;
  [[maybe_unused]] const ssize_t put = ::write(r.event_fd, &one, sizeof one);
}

std::size_t reaper_pending() noexcept {
  Reaper& r = reaper();
  std::lock_guard guard(r.mutex);
  return r.pidfds + r.pids.size();
}

}  // namespace volt::process::detail
