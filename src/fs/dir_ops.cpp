// volt/fs/fs.hpp: the calls on names (rename, links, directories, copy,
// permissions), each one system call or a short sequence of them on the
// blocking pool.
//
// Each public function is an ordinary function that hands copies of its
// arguments to a coroutine's by-value parameters, so the task may be stored
// and awaited after the caller's paths are gone. The coroutine makes one
// spawn_blocking hop with a plain function and its arguments (never a
// capturing lambda in the co_await statement: README, "Compiler issues").
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "volt/error.hpp"
#include "volt/fs/fs.hpp"
#include "volt/task/spawn_blocking.hpp"

namespace volt::fs {
namespace {

std::error_code errno_code(int err) noexcept {
  return std::error_code(err, std::system_category());
}

// The errno of the call that just failed, read before anything can change it.
std::error_code last_error() noexcept {
  return errno_code(errno);
}

Expected<void> check(int rc) noexcept {
  if (rc == 0) return {};
  return last_error();
}

// Closes on scope exit; close errors are irrelevant for descriptors only read.
class Fd {
 public:
  explicit Fd(int fd) noexcept : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const noexcept { return fd_; }
  // Gives up ownership (to close it with its error checked, or to fdopendir).
  int release() noexcept { return std::exchange(fd_, -1); }

 private:
  int fd_;
};

// ---- the blocking functions (run on a blocking-pool thread) ----

Expected<void> rename_blocking(const Path& from, const Path& to) {
  return check(::renameat(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str()));
}

Expected<void> remove_file_blocking(const Path& path) {
  return check(::unlinkat(AT_FDCWD, path.c_str(), 0));
}

Expected<void> remove_dir_blocking(const Path& path) {
  return check(::unlinkat(AT_FDCWD, path.c_str(), AT_REMOVEDIR));
}

Expected<void> hard_link_blocking(const Path& existing, const Path& link) {
  return check(::linkat(AT_FDCWD, existing.c_str(), AT_FDCWD, link.c_str(), 0));
}

Expected<void> symlink_blocking(const Path& target, const Path& link) {
  return check(::symlinkat(target.c_str(), AT_FDCWD, link.c_str()));
}

Expected<Path> read_link_blocking(const Path& path) {
  // Linux does not bound a link's length by PATH_MAX everywhere (some file
  // systems store longer targets): grow until the target fits with room to
  // spare, which is how a truncated result is told from an exact fit.
  std::string buf(256, '\0');
  for (;;) {
    const ssize_t n = ::readlinkat(AT_FDCWD, path.c_str(), buf.data(), buf.size());
    if (n < 0) return last_error();
    if (static_cast<std::size_t>(n) < buf.size()) {
      buf.resize(static_cast<std::size_t>(n));
      return Path(std::move(buf));
    }
    buf.resize(buf.size() * 2);
  }
}

Expected<Path> canonicalize_blocking(const Path& path) {
  const std::unique_ptr<char, void (*)(void*)> resolved(::realpath(path.c_str(), nullptr),
                                                        std::free);
  if (!resolved) return last_error();
  return Path(resolved.get());
}

Expected<void> set_permissions_blocking(const Path& path, std::uint32_t mode) {
  return check(::fchmodat(AT_FDCWD, path.c_str(), static_cast<mode_t>(mode), 0));
}

bool exists_as_directory(const Path& path) noexcept {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// mkdir that counts an existing directory (or a link to one, as std's
// create_dir_all does) as success: the caller asked for it to exist, and
// another process may have made it first.
int make_dir_existing_ok(const Path& path, mode_t mode) noexcept {
  if (::mkdirat(AT_FDCWD, path.c_str(), mode) == 0) return 0;
  const int err = errno;
  if (err == EEXIST && exists_as_directory(path)) return 0;
  return err;
}

Expected<void> create_dir_all_blocking(const Path& path, std::uint32_t mode_bits) {
  const auto mode = static_cast<mode_t>(mode_bits);
  int err = make_dir_existing_ok(path, mode);
  if (err == 0) return {};
  if (err != ENOENT) return errno_code(err);
  // Walk up (iteratively: a deep path must not exhaust a pool thread's
  // stack) to the nearest ancestor that exists or can be made, then make the
  // missing ones top down.
  std::vector<Path> missing{path};
  for (;;) {
    Path parent = missing.back().parent_path();
    // Nothing left to make (a relative path's first component, or the
    // root): the ENOENT stands.
    if (parent.empty() || parent == missing.back()) return errno_code(ENOENT);
    err = make_dir_existing_ok(parent, mode);
    if (err == 0) break;
    if (err != ENOENT) return errno_code(err);
    missing.push_back(std::move(parent));
  }
  while (!missing.empty()) {
    err = make_dir_existing_ok(missing.back(), mode);
    if (err != 0) return errno_code(err);
    missing.pop_back();
  }
  return {};
}

Expected<void> create_dir_blocking(const Path& path, std::uint32_t mode) {
  return check(::mkdirat(AT_FDCWD, path.c_str(), static_cast<mode_t>(mode)));
}

// Empties the directory open as `dir_fd` (which it takes and closes) without
// following symbolic links: subdirectories are opened relative to their
// parent with O_NOFOLLOW, so a link swapped in for a directory at any time is
// never entered. Entries that vanish meanwhile (ENOENT) are not errors.
int remove_contents(int dir_fd) noexcept {
  DIR* dir = ::fdopendir(dir_fd);
  if (dir == nullptr) {
    const int err = errno;
    ::close(dir_fd);
    return err;
  }
  const std::unique_ptr<DIR, int (*)(DIR*)> owner(dir, ::closedir);
  const int fd = ::dirfd(dir);
  for (;;) {
    errno = 0;
    const dirent* entry = ::readdir(dir);
    if (entry == nullptr) return errno;
    const char* name = entry->d_name;
    if (name[0] == '.' && (name[1] == '\0' || (name[1] == '.' && name[2] == '\0'))) continue;
    bool is_dir = entry->d_type == DT_DIR;
    if (entry->d_type == DT_UNKNOWN) {
      struct stat st;
      if (::fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
        if (errno == ENOENT) continue;
        return errno;
      }
      is_dir = S_ISDIR(st.st_mode);
    }
    if (is_dir) {
      const int child = ::openat(fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (child < 0) {
        const int err = errno;
        if (err == ENOENT) continue;
        // Replaced by a link or a file since the listing: remove that instead.
        if (err != ELOOP && err != ENOTDIR) return err;
        if (::unlinkat(fd, name, 0) != 0 && errno != ENOENT) return errno;
        continue;
      }
      if (const int err = remove_contents(child); err != 0) return err;
      if (::unlinkat(fd, name, AT_REMOVEDIR) != 0 && errno != ENOENT) return errno;
    } else if (::unlinkat(fd, name, 0) != 0 && errno != ENOENT) {
      return errno;
    }
  }
}

Expected<void> remove_dir_all_blocking(const Path& given) {
  // A trailing '/' would make the kernel follow a final link ("link/" is
  // the directory it points to): the name without it is the link itself.
  std::string name = given.native();
  while (name.size() > 1 && name.back() == '/')
    name.pop_back();
  const Path path(std::move(name));
  // "." or ".." last: rmdir refuses them (EINVAL, ENOTEMPTY), so refuse
  // before emptying the directory rather than after.
  if (path.filename() == "." || path.filename() == "..") return errno_code(EINVAL);
  struct stat st;
  if (::fstatat(AT_FDCWD, path.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return last_error();
  // A link to a directory: remove the link, as std's and Tokio's do, never
  // what it points to.
  if (S_ISLNK(st.st_mode)) return check(::unlinkat(AT_FDCWD, path.c_str(), 0));
  if (!S_ISDIR(st.st_mode)) return errno_code(ENOTDIR);
  // O_NOFOLLOW: ELOOP if a link was put in its place since the fstatat.
  const int fd = ::openat(AT_FDCWD, path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return last_error();
  if (const int err = remove_contents(fd); err != 0) return errno_code(err);
  return check(::unlinkat(AT_FDCWD, path.c_str(), AT_REMOVEDIR));
}

// Writes all of `data`, retrying short writes and EINTR. 0 or an errno.
int write_all(int fd, const char* data, std::size_t len) noexcept {
  while (len > 0) {
    const ssize_t n = ::write(fd, data, len);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (n == 0) return EIO;  // no progress: looping would never end
    data += n;
    len -= static_cast<std::size_t>(n);
  }
  return 0;
}

// Copies from the descriptors' current offsets to the end of `in`. Adds the
// bytes copied to `copied`; 0 or an errno.
int copy_by_read_write(int in, int out, std::uint64_t& copied) {
  std::vector<char> buf(128 * 1024);
  for (;;) {
    const ssize_t n = ::read(in, buf.data(), buf.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (n == 0) return 0;
    if (const int err = write_all(out, buf.data(), static_cast<std::size_t>(n)); err != 0)
      return err;
    copied += static_cast<std::uint64_t>(n);
  }
}

// Errors of copy_file_range that mean "not between these two files" rather
// than a failed copy: across file systems before Linux 5.3 or on ones that
// refuse it (EXDEV), an old kernel or a seccomp filter (ENOSYS, EPERM), a
// file the call does not take (EINVAL, EOPNOTSUPP). Where the failure is
// real, read or write reports it again.
bool use_read_write_instead(int err) noexcept {
  return err == EXDEV || err == ENOSYS || err == EINVAL || err == EOPNOTSUPP || err == EPERM;
}

int copy_contents(int in, int out, std::uint64_t& copied) {
  // The most one call moves: a round 1 GiB, under the kernel's per-call cap
  // (INT_MAX & PAGE_MASK).
  constexpr std::size_t kChunk = std::size_t{1} << 30;
  for (;;) {
    const ssize_t n = ::copy_file_range(in, nullptr, out, nullptr, kChunk, 0);
    if (n > 0) {
      copied += static_cast<std::uint64_t>(n);
      continue;
    }
    if (n == 0) {
      // 0 at the start may be a file whose size the kernel cannot know
      // (procfs, sysfs report 0 and copy nothing): read it to be sure. Later
      // it is the end.
      if (copied == 0) return copy_by_read_write(in, out, copied);
      return 0;
    }
    const int err = errno;
    if (err == EINTR) continue;
    // Both offsets moved together with whatever was copied so far: the
    // fallback continues from there.
    if (use_read_write_instead(err)) return copy_by_read_write(in, out, copied);
    return err;
  }
}

Expected<std::uint64_t> copy_blocking(const Path& from, const Path& to) {
  const Fd in(::openat(AT_FDCWD, from.c_str(), O_RDONLY | O_CLOEXEC));
  if (in.get() < 0) return last_error();
  struct stat in_st;
  if (::fstat(in.get(), &in_st) != 0) return last_error();
  if (S_ISDIR(in_st.st_mode)) return errno_code(EISDIR);
  const mode_t perm = in_st.st_mode & 07777;
  // Not O_TRUNC: when `to` is `from` (or a link to it) truncating first
  // would destroy the only copy of the data.
  Fd out(::openat(AT_FDCWD, to.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, perm));
  if (out.get() < 0) return last_error();
  struct stat out_st;
  if (::fstat(out.get(), &out_st) != 0) return last_error();
  if (out_st.st_dev == in_st.st_dev && out_st.st_ino == in_st.st_ino) return errno_code(EINVAL);
  // A regular destination gets the source's permission bits (the creation
  // mode went through the umask, and an existing file kept its own) and
  // loses its old contents; a device or a FIFO is written as it is.
  if (S_ISREG(out_st.st_mode)) {
    if (::fchmod(out.get(), perm) != 0) return last_error();
    if (::ftruncate(out.get(), 0) != 0) return last_error();
  }
  std::uint64_t copied = 0;
  if (const int err = copy_contents(in.get(), out.get(), copied); err != 0) return errno_code(err);
  // close reports write-back errors on some file systems (NFS): a copy whose
  // close failed did not succeed.
  if (::close(out.release()) != 0 && errno != EINTR) return last_error();
  return copied;
}

// ---- the coroutines: one hop each ----

using PathFn = Expected<void> (*)(const Path&);
using TwoPathFn = Expected<void> (*)(const Path&, const Path&);
using ModeFn = Expected<void> (*)(const Path&, std::uint32_t);

// A refusal by the pool (runtime shutting down, errc::runtime_shutdown) is
// a result like any failure, as in net::lookup_host.
Task<Expected<void>> run1(PathFn fn, Path path) {
  try {
    Expected<void> r = co_await volt::spawn_blocking(fn, std::move(path));
    co_return r;
  } catch (const Error& e) {
    co_return e.code();
  }
}

Task<Expected<void>> run2(TwoPathFn fn, Path a, Path b) {
  try {
    Expected<void> r = co_await volt::spawn_blocking(fn, std::move(a), std::move(b));
    co_return r;
  } catch (const Error& e) {
    co_return e.code();
  }
}

Task<Expected<void>> run_mode(ModeFn fn, Path path, std::uint32_t mode) {
  try {
    Expected<void> r = co_await volt::spawn_blocking(fn, std::move(path), mode);
    co_return r;
  } catch (const Error& e) {
    co_return e.code();
  }
}

Task<Expected<Path>> run_path(Expected<Path> (*fn)(const Path&), Path path) {
  try {
    Expected<Path> r = co_await volt::spawn_blocking(fn, std::move(path));
    co_return r;
  } catch (const Error& e) {
    co_return e.code();
  }
}

Task<Expected<std::uint64_t>> run_copy(Path from, Path to) {
  try {
    Expected<std::uint64_t> r =
        co_await volt::spawn_blocking(copy_blocking, std::move(from), std::move(to));
    co_return r;
  } catch (const Error& e) {
    co_return e.code();
  }
}

}  // namespace

// The parameters of run1() and the others are Paths by value: the caller's paths
// are copied into the coroutine frame here, before these functions return.

Task<Expected<std::uint64_t>> copy(const Path& from, const Path& to) {
  return run_copy(from, to);
}

Task<Expected<void>> rename(const Path& from, const Path& to) {
  return run2(rename_blocking, from, to);
}

Task<Expected<void>> remove_file(const Path& path) {
  return run1(remove_file_blocking, path);
}

Task<Expected<void>> remove_dir(const Path& path) {
  return run1(remove_dir_blocking, path);
}

Task<Expected<void>> remove_dir_all(const Path& path) {
  return run1(remove_dir_all_blocking, path);
}

Task<Expected<void>> create_dir(const Path& path) {
  return run_mode(create_dir_blocking, path, 0777);
}

Task<Expected<void>> create_dir_all(const Path& path) {
  return run_mode(create_dir_all_blocking, path, 0777);
}

Task<Expected<void>> hard_link(const Path& existing, const Path& link) {
  return run2(hard_link_blocking, existing, link);
}

Task<Expected<void>> symlink(const Path& target, const Path& link) {
  return run2(symlink_blocking, target, link);
}

Task<Expected<Path>> read_link(const Path& path) {
  return run_path(read_link_blocking, path);
}

Task<Expected<Path>> canonicalize(const Path& path) {
  return run_path(canonicalize_blocking, path);
}

Task<Expected<void>> set_permissions(const Path& path, Permissions perm) {
  return run_mode(set_permissions_blocking, path, perm.mode());
}

Task<Expected<void>> DirBuilder::create(const Path& path) const {
  if (recursive_) return run_mode(create_dir_all_blocking, path, mode_);
  return run_mode(create_dir_blocking, path, mode_);
}

}  // namespace volt::fs
