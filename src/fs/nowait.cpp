#include "fs/nowait.hpp"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>

namespace volt::fs::detail {

namespace {

// relaxed, both: a stale true costs one failing call more.
std::atomic<bool> have_cached_open{true};
std::atomic<bool> have_nowait_read{true};
std::atomic<bool> inline_on{true};

int openat2_cached(const char* path, int flags) noexcept {
  open_how how{};
  how.flags = static_cast<std::uint64_t>(flags | O_CLOEXEC);
  how.resolve = RESOLVE_CACHED;
  return static_cast<int>(::syscall(SYS_openat2, AT_FDCWD, path, &how, sizeof how));
}

}  // namespace

void set_inline_enabled(bool on) noexcept {
  inline_on.store(on, std::memory_order_relaxed);
}
bool inline_enabled() noexcept {
  return inline_on.load(std::memory_order_relaxed);
}

// The lookup is not all that can block: opening a FIFO waits for its other
// end, and a device's open may wait too (a terminal's carrier). Those are
// opened by the engine, off the workers. So an open of the file itself
// (without O_NONBLOCK, which never waits) is preceded by an O_PATH open,
// which never opens the object (no FIFO rendezvous, no driver call) and
// tells its type: three system calls more (about 3 us on this VM; File
// opens only: fs::read opens with O_NONBLOCK, whole_file.cpp). Only regular
// files and directories are opened here.
int open_cached(const char* path, int flags) noexcept {
  if (!have_cached_open.load(std::memory_order_relaxed) || !inline_enabled()) return -EAGAIN;
  int fd;
  if (flags & (O_PATH | O_NONBLOCK)) {
    fd = openat2_cached(path, flags);  // neither waits for a FIFO's other end
  } else {
    fd = openat2_cached(path, O_PATH | (flags & (O_NOFOLLOW | O_DIRECTORY)));
    if (fd >= 0) {
      struct stat st {};
      const int r = ::fstat(fd, &st);
      ::close(fd);
      if (r != 0 || !(S_ISREG(st.st_mode) || S_ISDIR(st.st_mode))) return -EAGAIN;
      // Replaced by a FIFO between the two opens: then this one may wait,
      // as an open on a blocking pool thread would have.
      fd = openat2_cached(path, flags);
    }
  }
  if (fd >= 0) return fd;
  const int err = errno;
  // EPERM: also what a seccomp filter older than openat2 answers for it
  // (as for epoll_pwait2, driver.cpp); the engine's open(2) then says
  // whether the open itself is refused.
  if (err == EPERM) return -EAGAIN;
  if (err == ENOSYS || err == E2BIG || err == EINVAL) {
    // No openat2 (Linux < 5.6) or no RESOLVE_CACHED (< 5.12). EINVAL could
    // also be the caller's flags: the engine's open reports it properly.
    if (err != EINVAL) have_cached_open.store(false, std::memory_order_relaxed);
    return -EAGAIN;
  }
  return -err;
}

std::int64_t read_nowait(int fd, void* buf, std::size_t len, std::int64_t offset) noexcept {
  if (!have_nowait_read.load(std::memory_order_relaxed) || !inline_enabled()) return -EAGAIN;
  iovec iov{buf, len};
  for (;;) {
    ssize_t n = ::preadv2(fd, &iov, 1, offset, RWF_NOWAIT);
    if (n >= 0) return n;
    const int err = errno;
    if (err == EINTR) continue;
    if (err == EAGAIN) return -EAGAIN;
    // EOPNOTSUPP: this file system has no non-blocking reads; ENOSYS /
    // EINVAL: no preadv2 or no RWF_NOWAIT. ESPIPE: a pipe or a socket with
    // an offset. Let the engine do it (and report the error if real).
    if (err == EOPNOTSUPP || err == ENOSYS || err == EINVAL || err == ESPIPE) {
      if (err == ENOSYS) have_nowait_read.store(false, std::memory_order_relaxed);
      return -EAGAIN;
    }
    return -err;
  }
}

int stat_cached(const char* path, bool follow, struct statx* out) noexcept {
  int fd = open_cached(path, O_PATH | (follow ? 0 : O_NOFOLLOW));
  if (fd < 0) return fd;
  int r = ::statx(fd, "", AT_EMPTY_PATH, STATX_BASIC_STATS | STATX_BTIME, out);
  const int err = errno;
  ::close(fd);
  return r == 0 ? 0 : -err;
}

}  // namespace volt::fs::detail
