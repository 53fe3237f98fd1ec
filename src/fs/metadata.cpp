// volt/fs/metadata.hpp: Metadata from a struct statx, and FileType's
// <filesystem> name.
#include "volt/fs/metadata.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <system_error>

namespace volt::fs {
namespace {

Metadata::TimePoint to_time_point(const struct statx_timestamp& ts) noexcept {
  const auto since_epoch = std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec);
  // system_clock's duration is nanoseconds on libstdc++ and libc++ alike; the
  // cast keeps this correct (if coarser) where it is not.
  return Metadata::TimePoint(
      std::chrono::duration_cast<Metadata::TimePoint::duration>(since_epoch));
}

}  // namespace

std::filesystem::file_type FileType::type() const noexcept {
  using std::filesystem::file_type;
  switch (bits_) {
    case 0100000u:
      return file_type::regular;
    case 0040000u:
      return file_type::directory;
    case 0120000u:
      return file_type::symlink;
    case 0060000u:
      return file_type::block;
    case 0020000u:
      return file_type::character;
    case 0010000u:
      return file_type::fifo;
    case 0140000u:
      return file_type::socket;
    default:
      return file_type::unknown;
  }
}

Expected<Metadata::TimePoint> Metadata::created() const {
  if (!has_btime_) return std::make_error_code(std::errc::function_not_supported);
  return btime_;
}

Metadata Metadata::from_statx(const void* statx_buffer) noexcept {
  const auto& stx = *static_cast<const struct statx*>(statx_buffer);
  Metadata m;
  m.mode_ = stx.stx_mode;
  m.uid_ = stx.stx_uid;
  m.gid_ = stx.stx_gid;
  m.size_ = stx.stx_size;
  m.ino_ = stx.stx_ino;
  m.dev_ = makedev(stx.stx_dev_major, stx.stx_dev_minor);
  m.rdev_ = makedev(stx.stx_rdev_major, stx.stx_rdev_minor);
  m.nlink_ = stx.stx_nlink;
  m.blksize_ = stx.stx_blksize;
  m.blocks_ = stx.stx_blocks;
  m.atime_ = to_time_point(stx.stx_atime);
  m.mtime_ = to_time_point(stx.stx_mtime);
  m.ctime_ = to_time_point(stx.stx_ctime);
  // The kernel leaves stx_btime zero, not absent, where the file system
  // keeps no birth time; only the mask tells.
  m.has_btime_ = (stx.stx_mask & STATX_BTIME) != 0;
  if (m.has_btime_) m.btime_ = to_time_point(stx.stx_btime);
  return m;
}

}  // namespace volt::fs
