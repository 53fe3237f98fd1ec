// FileDescriptor: the shared owner of a File's descriptor.
//
// A File and every operation of it that is in flight (a blocking-pool job, an
// io_uring request not yet submitted) hold a reference; the descriptor is
// closed when the last one goes. So a File destroyed while a cancelled
// write_at still runs on a pool thread cannot let the descriptor number be
// reused under that write (it would write into whatever file got the number).
// io_uring requests resolve the descriptor to the kernel's file object when
// they are submitted, which happens before submit() returns, so they hold a
// reference only until then.
#pragma once

#include <atomic>
#include <cstdint>
#include <system_error>

namespace volt::fs::detail {

class FileDescriptor {
 public:
  // Takes ownership of `fd`; one reference, the caller's. The first asks
  // the kernel whether `fd` was opened with O_DIRECT (fcntl), the second is
  // told (an open that knows its flags, or a dup of a File, which shares
  // them).
  static FileDescriptor* adopt(int fd);
  static FileDescriptor* adopt(int fd, bool direct_io);

  int fd() const noexcept { return fd_; }
  // O_DIRECT, as it was when the descriptor was adopted (a later fcntl on
  // File::native_handle() is not seen). Such a file's reads and writes skip
  // the inline attempt, which would wait for the device on the calling
  // worker, and go through a 4096-aligned buffer (FileOp::allocate).
  bool direct_io() const noexcept { return direct_io_; }

  void retain() noexcept {
    // relaxed: the caller already holds a reference, so the object cannot go
    // meanwhile; nothing is published by taking another.
    refs_.fetch_add(1, std::memory_order_relaxed);
  }
  // Drops a reference; the last one closes the descriptor and frees the
  // object. Returns close(2)'s error if this call closed it, else {}.
  std::error_code release() noexcept;

 private:
  FileDescriptor(int fd, bool direct_io) noexcept : fd_(fd), direct_io_(direct_io) {}
  const int fd_;
  const bool direct_io_;
  // acq_rel in release(): the decrement that reaches zero must see every
  // other holder's use of the descriptor before it closes it (their release
  // pairs with its acquire).
  std::atomic<std::uint32_t> refs_{1};
};

// A counted reference (movable, copyable).
class FdRef {
 public:
  FdRef() noexcept = default;
  explicit FdRef(FileDescriptor* fd) noexcept : fd_(fd) {}  // adopts a reference
  FdRef(const FdRef& other) noexcept : fd_(other.fd_) {
    if (fd_) fd_->retain();
  }
  FdRef(FdRef&& other) noexcept : fd_(other.fd_) { other.fd_ = nullptr; }
  FdRef& operator=(FdRef other) noexcept {
    std::swap(fd_, other.fd_);
    return *this;
  }
  ~FdRef() { reset(); }
  std::error_code reset() noexcept {
    FileDescriptor* fd = fd_;
    fd_ = nullptr;
    return fd ? fd->release() : std::error_code{};
  }
  int fd() const noexcept { return fd_ ? fd_->fd() : -1; }
  bool direct_io() const noexcept { return fd_ && fd_->direct_io(); }
  FileDescriptor* get() const noexcept { return fd_; }
  explicit operator bool() const noexcept { return fd_ != nullptr; }

 private:
  FileDescriptor* fd_ = nullptr;
};

}  // namespace volt::fs::detail
