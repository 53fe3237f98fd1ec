// volt/fs/file.hpp: an open file (File) and how to open one (OpenOptions).
//
//   auto file = co_await volt::fs::File::open("data.bin");
//   if (!file) co_return file.error();                 // e.g. "No such file or directory"
//   std::array<std::byte, 4096> block;
//   auto n = co_await file->read_at(block, 8192);      // positional: no shared cursor
//
//   auto log = co_await volt::fs::OpenOptions().append(true).create(true).open("app.log");
//   co_await volt::io::write_all(*log, std::string_view("started\n"));
//   co_await log->sync_data();                         // on disk, not just in the page cache
//
//   // File models io::AsyncRead and io::AsyncWrite: buffered readers work unchanged.
//   volt::io::BufReader reader(std::move(*file), 64 << 10);
//
// How an operation runs (the same for every method and for fs.hpp's functions):
//  1. On the calling thread, when the kernel can do it without blocking: a
//     read the page cache can serve in full (preadv2 with RWF_NOWAIT), an
//     open whose path is in the dentry cache (openat2 with RESOLVE_CACHED),
//     lseek, fstat. This costs the system call and nothing else.
//  2. Otherwise on the runtime's file engine: io_uring when the kernel offers
//     it (probed when the runtime starts: see Runtime::Builder::io_uring and
//     VOLT_IO_URING), else the blocking pool, one hop per call whatever the
//     size (a read of 16 MiB is one hop, not one per chunk). Opens that
//     create or truncate go to the blocking pool even with io_uring, which
//     would only hand them to a kernel thread of its own. A worker never
//     blocks on a disk either way.
//
// Guarantees:
//  - Unbuffered: a write that returned success was accepted by the kernel
//    (it is in the page cache; sync_data / sync_all put it on the disk).
//    flush() has nothing to do and succeeds; buffering is io::BufWriter's.
//  - Errors are values: the errno of the failed call as a
//    std::system_category code (ENOENT, EACCES, EISDIR, EMFILE, EFBIG, ...).
//  - Positional reads and writes (read_at, write_at, read_exact_at,
//    write_all_at) are const and may run from any number of tasks at once on
//    one File; they never move the cursor. read, write and seek share the
//    file's cursor (the kernel's file offset): one task at a time, as for a
//    stream.
//  - Cancellation (the awaiting task aborted, a timeout, a select): the
//    memory the kernel uses (buffers, paths) is the operation's own until the
//    kernel is done with it, never the caller's, so a cancelled call never
//    writes into memory the caller has freed. What the cancelled call did is
//    unknown: a cancelled read may have advanced the cursor, a cancelled
//    write may have written some or all of its bytes (the result is lost,
//    not the effect), a cancelled open's descriptor is closed.
//  - The descriptor is closed when the last of the File and its operations
//    in flight is gone: never while the kernel or a blocking-pool thread
//    still uses it, so its number cannot be reused under them. Each returned
//    task holds the descriptor, not the File: a File may be moved or
//    dropped while its operations run (the buffers passed to them must stay
//    valid until they complete, as for sockets).
//  - close() reports close(2)'s error (NFS reports a failed write-back
//    there); the destructor closes too but cannot report.
//  - A File may be used on any runtime and outside one (then step 1 only;
//    step 2 gives errc::no_runtime).
//  - O_DIRECT (OpenOptions::custom_flags, or a descriptor given to from_fd
//    that has it): reads and writes always take step 2, since a direct read
//    goes to the device even when asked not to wait, and the kernel sees a
//    buffer of the operation's own aligned to 4096 bytes, so the caller's
//    buffer may sit anywhere; its offset and length must still be multiples
//    of the device's block size (EINVAL otherwise, from the kernel). O_DIRECT
//    set afterwards with fcntl on native_handle() is not seen. Outside a
//    runtime such a file's reads and writes give errc::no_runtime.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>

#include "volt/expected.hpp"
#include "volt/fs/metadata.hpp"
#include "volt/io/async_io.hpp"
#include "volt/io/buffer.hpp"
#include "volt/task/task.hpp"

namespace volt::fs {

class File;

namespace detail {
class FileDescriptor;  // the refcounted owner of a descriptor (src/fs/descriptor.hpp)
File make_file(int fd, int open_flags);  // src/fs/file.cpp
}  // namespace detail

// Where seek moves the cursor: from the start, the end, or the current
// position (Tokio's / std's SeekFrom).
struct SeekFrom {
  enum class Whence { kStart, kEnd, kCurrent };
  Whence whence = Whence::kStart;
  std::int64_t offset = 0;
  static SeekFrom start(std::uint64_t offset) noexcept {
    return {Whence::kStart, static_cast<std::int64_t>(offset)};
  }
  static SeekFrom end(std::int64_t offset) noexcept { return {Whence::kEnd, offset}; }
  static SeekFrom current(std::int64_t offset) noexcept { return {Whence::kCurrent, offset}; }
};

// How to open a file, as std's / Tokio's OpenOptions: nothing is set by
// default; open() fails with EINVAL for a combination that makes no sense
// (neither read nor write nor append; truncate or create_new without write).
//
//   auto f = co_await volt::fs::OpenOptions().write(true).create_new(true).mode(0600).open(p);
class OpenOptions {
 public:
  OpenOptions& read(bool on) noexcept { return set(kRead, on); }
  OpenOptions& write(bool on) noexcept { return set(kWrite, on); }
  // Every write goes to the end of the file (O_APPEND); implies write.
  OpenOptions& append(bool on) noexcept { return set(kAppend, on); }
  OpenOptions& truncate(bool on) noexcept { return set(kTruncate, on); }
  // Create the file if it does not exist.
  OpenOptions& create(bool on) noexcept { return set(kCreate, on); }
  // Create the file, failing with EEXIST if it exists (O_CREAT | O_EXCL);
  // then create and truncate are ignored.
  OpenOptions& create_new(bool on) noexcept { return set(kCreateNew, on); }
  // Permission bits of a created file, before the umask (default 0666).
  OpenOptions& mode(std::uint32_t mode) noexcept {
    mode_ = mode;
    return *this;
  }
  // Extra open(2) flags (O_NOFOLLOW, O_DIRECT, O_SYNC, ...). The access
  // mode bits are ignored; O_CLOEXEC is always added.
  OpenOptions& custom_flags(int flags) noexcept {
    custom_ = flags;
    return *this;
  }

  // Opens `path` (copied: the returned task does not refer to it). The
  // open starts at the call when the kernel can do it without blocking
  // (see above); the task reports its result.
  Task<Expected<File>> open(const std::filesystem::path& path) const;

  // The open(2) flags these options stand for, or EINVAL (for tests and
  // for from_fd users who open descriptors themselves).
  Expected<int> flags() const;
  std::uint32_t creation_mode() const noexcept { return mode_; }

 private:
  enum : unsigned {
    kRead = 1,
    kWrite = 2,
    kAppend = 4,
    kTruncate = 8,
    kCreate = 16,
    kCreateNew = 32
  };
  OpenOptions& set(unsigned bit, bool on) noexcept {
    bits_ = on ? (bits_ | bit) : (bits_ & ~bit);
    return *this;
  }
  unsigned bits_ = 0;
  std::uint32_t mode_ = 0666;
  int custom_ = 0;
};

class File {
 public:
  // Read-only.
  static Task<Expected<File>> open(const std::filesystem::path& path);
  // Write-only; created if missing, truncated if present.
  static Task<Expected<File>> create(const std::filesystem::path& path);
  // Read-write; EEXIST if the file exists.
  static Task<Expected<File>> create_new(const std::filesystem::path& path);
  static OpenOptions options() noexcept { return {}; }
  // Takes ownership of `fd` (closed by the File). EBADF for a negative fd.
  static Expected<File> from_fd(int fd);

  File() noexcept;  // no file: every operation gives EBADF
  File(File&&) noexcept;
  File& operator=(File&&) noexcept;
  File(const File&) = delete;
  File& operator=(const File&) = delete;
  ~File();

  explicit operator bool() const noexcept;
  // The descriptor (owned by the File; -1 if none).
  int native_handle() const noexcept;

  // io::AsyncRead / io::AsyncWrite: at the cursor. read gives 0 at the end
  // of the file. A read may return fewer bytes than asked (at most 1 MiB at
  // a time when it goes to the engine); write may accept fewer.
  // Cancelled: see the file's comment (the cursor may have moved).
  Task<Expected<std::size_t>> read(io::MutableBuffer buf);
  Task<Expected<std::size_t>> write(io::ConstBuffer bytes);
  // Nothing is buffered: succeed at once (for io::AsyncWrite).
  Task<Expected<void>> flush();
  // As flush (a file has no write side to shut); for io::AsyncWrite.
  Task<Expected<void>> shutdown();
  // Moves the cursor; returns the new position from the start. Never blocks
  // (lseek), so it completes at once.
  io::Ready<Expected<std::uint64_t>> seek(SeekFrom to);

  // Positional: at `offset`, not touching the cursor; any number of tasks at
  // once. read_at gives 0 at or past the end; read_exact_at gives
  // errc::unexpected_eof if the file ends first (having read a prefix),
  // write_all_at errc::write_zero if the kernel accepts nothing.
  Task<Expected<std::size_t>> read_at(io::MutableBuffer buf, std::uint64_t offset) const;
  Task<Expected<std::size_t>> write_at(io::ConstBuffer bytes, std::uint64_t offset) const;
  Task<Expected<void>> read_exact_at(io::MutableBuffer buf, std::uint64_t offset) const;
  Task<Expected<void>> write_all_at(io::ConstBuffer bytes, std::uint64_t offset) const;

  // fsync / fdatasync: the file's data (and, for sync_all, its metadata) is
  // on the storage device. The first error after a failed write-back is
  // reported here (and only once by Linux: do not retry and assume success).
  Task<Expected<void>> sync_all() const;
  Task<Expected<void>> sync_data() const;
  // Truncates or extends (with zeros) to `len` bytes; the cursor stays.
  Task<Expected<void>> set_len(std::uint64_t len) const;
  Task<Expected<Metadata>> metadata() const;
  Task<Expected<void>> set_permissions(Permissions perm) const;
  // A second File on the same open file description (dup): it shares the
  // cursor and the flags.
  Task<Expected<File>> try_clone() const;
  // Closes now and reports close(2)'s result. Operations still in flight
  // keep the descriptor until they finish (see the file's comment); then it
  // is closed and this reports success. Afterwards the File is empty.
  Task<Expected<void>> close();

 private:
  explicit File(detail::FileDescriptor* fd) noexcept;
  friend class OpenOptions;
  friend File detail::make_file(int fd, int open_flags);
  detail::FileDescriptor* fd_ = nullptr;  // one reference, or null
};

static_assert(io::AsyncRead<File>);
static_assert(io::AsyncWrite<File>);

}  // namespace volt::fs
