// Step 1 of a file operation (volt/fs/file.hpp): the system calls the kernel
// can promise not to block in, made on the calling thread.
//
//  - open_cached: openat2 with RESOLVE_CACHED fails with EAGAIN instead of
//    reading a directory from the disk (Linux 5.12). It refuses O_CREAT and
//    O_TRUNC outright, so only plain opens come here.
//  - read_nowait: preadv2 with RWF_NOWAIT fails with EAGAIN instead of
//    waiting for the disk, and returns a short count when only a prefix is
//    in the page cache (Linux 4.14).
//  - stat_cached: a cached O_PATH open, statx on it, close: the lookup is
//    what can block, and RESOLVE_CACHED rules that out; getattr of a local
//    file system reads the in-memory inode (a network file system may ask
//    its server: the price of a correct answer there).
// A kernel without one of them (ENOSYS, EINVAL for an unknown flag,
// EOPNOTSUPP from a file system) turns that call off for the process: every
// operation then goes to the engine. Each returns -EAGAIN for "use the
// engine", or the result (-errno for a real error).
#pragma once

#include <sys/stat.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace volt::fs::detail {

// Without O_NONBLOCK in `flags`, only a regular file or a directory is
// opened (anything else: -EAGAIN, for the engine); with it, anything.
int open_cached(const char* path, int flags) noexcept;
std::int64_t read_nowait(int fd, void* buf, std::size_t len, std::int64_t offset) noexcept;
int stat_cached(const char* path, bool follow, struct statx* out) noexcept;

// Tests: false makes every call above return -EAGAIN, so that each
// operation runs on the engine (the path a cold page cache takes).
void set_inline_enabled(bool on) noexcept;
bool inline_enabled() noexcept;

// The most one inline read or engine read moves at once: larger requests
// return a short count (read) or loop (read_exact_at, whole files), so a
// worker never copies more than this between two budget checks.
inline constexpr std::size_t kMaxIoChunk = 1 << 20;

// Whole-file reads grow their result this much at a time, each part zero-
// filled (resize cannot skip it) just before a read overwrites it, so the
// read copies into lines the fill left in cache. Filling a 16 MiB result
// first and reading after made every copy write to memory the cache had
// evicted: fs_read_16m took 1.36-1.39 times Tokio's time (whose buffer is
// never zero-filled), and 0.93-0.99 with this; 128 KiB and 512 KiB parts
// measured the same, 32 KiB 1.05, 64 KiB 1.01, 1 MiB 1.14.
inline constexpr std::size_t kZeroFillChunk = std::size_t{256} << 10;

// The size a whole-file result is resized to before its next read, `have`
// bytes read so far into a container reserved from fstat: the next part of
// the reserve, or, once it is used up (the file grew since fstat, or fstat
// did not know its size, as in procfs), double.
inline std::size_t whole_file_next_size(std::size_t have, std::size_t capacity) noexcept {
  if (have < capacity) return have + std::min(capacity - have, kZeroFillChunk);
  return have < 4096 ? 8192 : 2 * have;
}

}  // namespace volt::fs::detail
