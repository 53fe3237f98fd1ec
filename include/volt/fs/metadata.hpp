// volt/fs/metadata.hpp: what a file is (Metadata, FileType, Permissions).
//
//   auto m = co_await volt::fs::metadata("/etc/hosts");
//   if (m && m->is_file()) std::printf("%llu bytes\n", (unsigned long long)m->len());
//   if (m && m->permissions().readonly()) { ... }
//
// Metadata is a snapshot of statx(2): plain data, copyable, taken when the
// call that returned it ran. Times are std::chrono::system_clock time points
// (nanosecond resolution where the file system keeps it). created() is an
// error value on file systems that do not record a birth time.
//
// The names follow <filesystem> where it has one (file_type, perms) and
// Tokio's std::fs::Metadata otherwise (len, is_file, modified).
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>

#include "volt/expected.hpp"

namespace volt::fs {

// The kind of a file: one of the S_IFMT kinds, or unknown (a directory entry
// whose kind the file system did not report and that could not be asked).
class FileType {
 public:
  FileType() noexcept = default;
  // From the S_IFMT bits of a mode (st_mode, stx_mode).
  static FileType from_mode(std::uint32_t mode) noexcept { return FileType(mode & 0170000u); }

  bool is_file() const noexcept { return bits_ == 0100000u; }
  bool is_dir() const noexcept { return bits_ == 0040000u; }
  bool is_symlink() const noexcept { return bits_ == 0120000u; }
  bool is_block_device() const noexcept { return bits_ == 0060000u; }
  bool is_char_device() const noexcept { return bits_ == 0020000u; }
  bool is_fifo() const noexcept { return bits_ == 0010000u; }
  bool is_socket() const noexcept { return bits_ == 0140000u; }
  // <filesystem>'s name for the kind (file_type::unknown for an unknown kind).
  std::filesystem::file_type type() const noexcept;

  friend bool operator==(FileType, FileType) noexcept = default;

 private:
  explicit FileType(std::uint32_t bits) noexcept : bits_(bits) {}
  std::uint32_t bits_ = 0;
};

// The permission bits of a file (the low 12 bits of its mode: rwx for owner,
// group and others, plus set-user-ID, set-group-ID and sticky).
class Permissions {
 public:
  Permissions() noexcept = default;
  explicit Permissions(std::uint32_t mode) noexcept : mode_(mode & 07777u) {}
  explicit Permissions(std::filesystem::perms p) noexcept
      : mode_(static_cast<std::uint32_t>(p) & 07777u) {}

  std::uint32_t mode() const noexcept { return mode_; }
  std::filesystem::perms perms() const noexcept { return std::filesystem::perms(mode_); }
  // True if nobody has write permission (as Tokio's / std's readonly()).
  bool readonly() const noexcept { return (mode_ & 0222u) == 0; }
  // Clears (readonly) or sets (not readonly) the owner's write bit; as std,
  // it does not touch group and others when making a file writable.
  void set_readonly(bool readonly) noexcept {
    if (readonly)
      mode_ &= ~0222u;
    else
      mode_ |= 0200u;
  }

  friend bool operator==(Permissions, Permissions) noexcept = default;

 private:
  std::uint32_t mode_ = 0;
};

class Metadata {
 public:
  using TimePoint = std::chrono::system_clock::time_point;

  Metadata() noexcept = default;

  FileType file_type() const noexcept { return FileType::from_mode(mode_); }
  bool is_file() const noexcept { return file_type().is_file(); }
  bool is_dir() const noexcept { return file_type().is_dir(); }
  // Only from symlink_metadata (metadata follows links).
  bool is_symlink() const noexcept { return file_type().is_symlink(); }
  // Size in bytes (of the link itself for symlink_metadata).
  std::uint64_t len() const noexcept { return size_; }
  Permissions permissions() const noexcept { return Permissions(mode_); }

  // Last modification, last access, last status change.
  TimePoint modified() const noexcept { return mtime_; }
  TimePoint accessed() const noexcept { return atime_; }
  TimePoint changed() const noexcept { return ctime_; }
  // Birth time, where the file system records it; otherwise the error
  // std::errc::function_not_supported.
  Expected<TimePoint> created() const;

  // The rest of statx's basic fields.
  std::uint32_t mode() const noexcept { return mode_; }
  std::uint32_t uid() const noexcept { return uid_; }
  std::uint32_t gid() const noexcept { return gid_; }
  std::uint64_t ino() const noexcept { return ino_; }
  std::uint64_t dev() const noexcept { return dev_; }
  std::uint64_t rdev() const noexcept { return rdev_; }
  std::uint64_t nlink() const noexcept { return nlink_; }
  std::uint64_t blksize() const noexcept { return blksize_; }
  std::uint64_t blocks() const noexcept { return blocks_; }  // 512-byte units

  // Fills from a struct statx (`const void*` keeps <sys/stat.h>'s statx out
  // of this header). For the implementation and for tests.
  static Metadata from_statx(const void* statx_buffer) noexcept;

 private:
  std::uint32_t mode_ = 0;
  std::uint32_t uid_ = 0;
  std::uint32_t gid_ = 0;
  bool has_btime_ = false;
  std::uint64_t size_ = 0;
  std::uint64_t ino_ = 0;
  std::uint64_t dev_ = 0;
  std::uint64_t rdev_ = 0;
  std::uint64_t nlink_ = 0;
  std::uint64_t blksize_ = 0;
  std::uint64_t blocks_ = 0;
  TimePoint atime_{};
  TimePoint mtime_{};
  TimePoint ctime_{};
  TimePoint btime_{};
};

}  // namespace volt::fs
