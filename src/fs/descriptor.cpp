#include "fs/descriptor.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

namespace volt::fs::detail {

FileDescriptor* FileDescriptor::adopt(int fd) {
  // A descriptor fcntl cannot read (not open) is adopted all the same: its
  // operations report EBADF as any other's would.
  const int flags = ::fcntl(fd, F_GETFL);
  return new FileDescriptor(fd, flags >= 0 && (flags & O_DIRECT) != 0);
}

FileDescriptor* FileDescriptor::adopt(int fd, bool direct_io) {
  return new FileDescriptor(fd, direct_io);
}

std::error_code FileDescriptor::release() noexcept {
  if (refs_.fetch_sub(1, std::memory_order_acq_rel) != 1) return {};
  std::error_code ec;
  // Not retried on EINTR: Linux has released the descriptor whatever close
  // returns, and a retry could close a number reused meanwhile.
  if (::close(fd_) != 0 && errno != EINTR) ec = {errno, std::system_category()};
  delete this;
  return ec;
}

}  // namespace volt::fs::detail
