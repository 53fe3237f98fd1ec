#include "volt/fs/file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>

#include "fs/descriptor.hpp"
#include "fs/engine.hpp"
#include "fs/file_internal.hpp"
#include "fs/nowait.hpp"
#include "volt/task/join_handle.hpp"
#include "volt/task/yield_now.hpp"

namespace volt::fs {

using detail::FdRef;
using detail::FileDescriptor;
using detail::FileOp;
using detail::OpAwaiter;
using detail::OpKind;

namespace detail {

std::error_code errno_code(std::int64_t negative_errno) noexcept {
  return {static_cast<int>(-negative_errno), std::system_category()};
}

bool spend_budget() noexcept {
  return volt::detail::coop_try_consume();
}

namespace {
// relaxed: a stale true costs one failing call more.
std::atomic<bool> have_nowait_write{true};
}  // namespace

std::int64_t write_nowait(int fd, const void* buf, std::size_t len, std::int64_t offset) noexcept {
  if (!have_nowait_write.load(std::memory_order_relaxed) || !inline_enabled()) return -EAGAIN;
  iovec iov{const_cast<void*>(buf), len};
  for (;;) {
    ssize_t n = ::pwritev2(fd, &iov, 1, offset, RWF_NOWAIT);
    if (n >= 0) return n;
    const int err = errno;
    if (err == EINTR) continue;
    if (err == EAGAIN) return -EAGAIN;
    // No non-blocking buffered writes on this kernel or file system.
    if (err == EOPNOTSUPP || err == ENOSYS || err == EINVAL || err == ESPIPE) {
      if (err == EOPNOTSUPP || err == ENOSYS)
        have_nowait_write.store(false, std::memory_order_relaxed);
      return -EAGAIN;
    }
    return -err;
  }
}

File make_file(int fd, int open_flags) {
  return File(FileDescriptor::adopt(fd, (open_flags & O_DIRECT) != 0));
}

}  // namespace detail

using detail::errno_code;

File::File() noexcept = default;
File::File(FileDescriptor* fd) noexcept : fd_(fd) {}
File::File(File&& other) noexcept : fd_(std::exchange(other.fd_, nullptr)) {}
File& File::operator=(File&& other) noexcept {
  if (this != &other) {
    if (fd_) fd_->release();
    fd_ = std::exchange(other.fd_, nullptr);
  }
  return *this;
}
File::~File() {
  if (fd_) fd_->release();
}

File::operator bool() const noexcept {
  return fd_ != nullptr;
}
int File::native_handle() const noexcept {
  return fd_ ? fd_->fd() : -1;
}

Expected<File> File::from_fd(int fd) {
  if (fd < 0) return std::error_code(EBADF, std::system_category());
  return File(FileDescriptor::adopt(fd));
}

namespace {

template <class T>
Task<Expected<T>> ready(Expected<T> value) {
  co_return value;
}

FdRef share(FileDescriptor* fd) noexcept {
  if (!fd) return FdRef();
  fd->retain();
  return FdRef(fd);
}

// An engine read of at most kMaxIoChunk bytes into `buf` (through the op's
// own buffer: the kernel never writes into the caller's memory, which a
// cancelled caller may free).
Task<Expected<std::size_t>> engine_read(FdRef file, io::MutableBuffer buf, std::int64_t offset) {
  auto* op = new FileOp(OpKind::kRead);
  OpAwaiter wait(op);  // owns the op from here, whatever throws
  op->len = std::min(buf.size(), detail::kMaxIoChunk);
  if (!op->allocate(file.direct_io())) co_return std::error_code(ENOMEM, std::system_category());
  op->file = std::move(file);
  op->offset = offset;
  if (!co_await wait) co_return errc::no_runtime;
  if (op->res < 0) co_return errno_code(op->res);
  const auto n = static_cast<std::size_t>(op->res);
  std::memcpy(buf.data(), op->io_data(), n);
  co_return n;
}

// An engine write of at most kMaxIoChunk bytes (copied into the op first).
Task<Expected<std::size_t>> engine_write(FdRef file, io::ConstBuffer bytes, std::int64_t offset) {
  auto* op = new FileOp(OpKind::kWrite);
  OpAwaiter wait(op);
  op->len = std::min(bytes.size(), detail::kMaxIoChunk);
  if (!op->fill(bytes.data(), file.direct_io()))
    co_return std::error_code(ENOMEM, std::system_category());
  op->file = std::move(file);
  op->offset = offset;
  if (!co_await wait) co_return errc::no_runtime;
  if (op->res < 0) co_return errno_code(op->res);
  co_return static_cast<std::size_t>(op->res);
}

// The task holds a reference on the descriptor (FdRef), so a File destroyed
// while the task runs leaves it open until the task ends.
Task<Expected<std::size_t>> read_impl(FdRef fd, io::MutableBuffer buf, std::int64_t offset) {
  if (!fd) co_return std::error_code(EBADF, std::system_category());
  if (buf.size() == 0) co_return std::size_t{0};
  if (!detail::spend_budget()) co_await volt::yield_now();
  // O_DIRECT never reads the page cache: RWF_NOWAIT would not refuse it,
  // and the read would wait for the device on this worker.
  if (!fd.direct_io()) {
    const std::size_t len = std::min(buf.size(), detail::kMaxIoChunk);
    const std::int64_t n = detail::read_nowait(fd.fd(), buf.data(), len, offset);
    if (n != -EAGAIN) {
      if (n < 0) co_return errno_code(n);
      co_return static_cast<std::size_t>(n);
    }
  }
  Expected<std::size_t> r = co_await engine_read(fd, buf, offset);
  co_return r;
}

Task<Expected<std::size_t>> write_impl(FdRef fd, io::ConstBuffer bytes, std::int64_t offset) {
  if (!fd) co_return std::error_code(EBADF, std::system_category());
  if (bytes.size() == 0) co_return std::size_t{0};
  if (!detail::spend_budget()) co_await volt::yield_now();
  if (!fd.direct_io()) {  // as in read_impl
    const std::size_t len = std::min(bytes.size(), detail::kMaxIoChunk);
    const std::int64_t n = detail::write_nowait(fd.fd(), bytes.data(), len, offset);
    if (n != -EAGAIN) {
      if (n < 0) co_return errno_code(n);
      co_return static_cast<std::size_t>(n);
    }
  }
  Expected<std::size_t> r = co_await engine_write(fd, bytes, offset);
  co_return r;
}

Task<Expected<void>> simple_op(FdRef fd, OpKind kind, std::int64_t offset, std::uint32_t mode,
                               bool datasync) {
  if (!fd) co_return std::error_code(EBADF, std::system_category());
  auto* op = new FileOp(kind);
  op->file = std::move(fd);
  op->offset = offset;
  op->mode = mode;
  op->datasync = datasync;
  OpAwaiter wait(op);
  if (!co_await wait) co_return errc::no_runtime;
  if (op->res < 0) co_return errno_code(op->res);
  co_return Expected<void>();
}

}  // namespace

Task<Expected<std::size_t>> File::read(io::MutableBuffer buf) {
  return read_impl(share(fd_), buf, -1);
}

Task<Expected<std::size_t>> File::write(io::ConstBuffer bytes) {
  return write_impl(share(fd_), bytes, -1);
}

Task<Expected<std::size_t>> File::read_at(io::MutableBuffer buf, std::uint64_t offset) const {
  return read_impl(share(fd_), buf, static_cast<std::int64_t>(offset));
}

Task<Expected<std::size_t>> File::write_at(io::ConstBuffer bytes, std::uint64_t offset) const {
  return write_impl(share(fd_), bytes, static_cast<std::int64_t>(offset));
}

namespace {

// The loops of read_exact_at and write_all_at, on a reference of their own to
// the descriptor (not on the File: it may be moved or dropped meanwhile).
Task<Expected<void>> read_exact_impl(FdRef fd, io::MutableBuffer buf, std::uint64_t offset) {
  std::size_t done = 0;
  while (done < buf.size()) {
    Expected<std::size_t> n =
        co_await read_impl(fd, buf.after(done), static_cast<std::int64_t>(offset + done));
    if (!n) co_return n.error();
    if (*n == 0) co_return errc::unexpected_eof;
    done += *n;
  }
  co_return Expected<void>();
}

Task<Expected<void>> write_all_impl(FdRef fd, io::ConstBuffer bytes, std::uint64_t offset) {
  std::size_t done = 0;
  while (done < bytes.size()) {
    Expected<std::size_t> n =
        co_await write_impl(fd, bytes.after(done), static_cast<std::int64_t>(offset + done));
    if (!n) co_return n.error();
    if (*n == 0) co_return errc::write_zero;
    done += *n;
  }
  co_return Expected<void>();
}

}  // namespace

Task<Expected<void>> File::read_exact_at(io::MutableBuffer buf, std::uint64_t offset) const {
  return read_exact_impl(share(fd_), buf, offset);
}

Task<Expected<void>> File::write_all_at(io::ConstBuffer bytes, std::uint64_t offset) const {
  return write_all_impl(share(fd_), bytes, offset);
}

Task<Expected<void>> File::flush() {
  co_return Expected<void>();
}
Task<Expected<void>> File::shutdown() {
  co_return Expected<void>();
}

io::Ready<Expected<std::uint64_t>> File::seek(SeekFrom to) {
  if (!fd_)
    return io::Ready<Expected<std::uint64_t>>(std::error_code(EBADF, std::system_category()));
  const int whence = to.whence == SeekFrom::Whence::kStart ? SEEK_SET
                     : to.whence == SeekFrom::Whence::kEnd ? SEEK_END
                                                           : SEEK_CUR;
  const off_t pos = ::lseek(fd_->fd(), to.offset, whence);
  if (pos < 0)
    return io::Ready<Expected<std::uint64_t>>(std::error_code(errno, std::system_category()));
  return io::Ready<Expected<std::uint64_t>>(static_cast<std::uint64_t>(pos));
}

Task<Expected<void>> File::sync_all() const {
  return simple_op(share(fd_), OpKind::kFsync, 0, 0, false);
}
Task<Expected<void>> File::sync_data() const {
  return simple_op(share(fd_), OpKind::kFsync, 0, 0, true);
}
Task<Expected<void>> File::set_len(std::uint64_t len) const {
  return simple_op(share(fd_), OpKind::kFtruncate, static_cast<std::int64_t>(len), 0, false);
}
Task<Expected<void>> File::set_permissions(Permissions perm) const {
  return simple_op(share(fd_), OpKind::kFchmod, 0, perm.mode(), false);
}

// metadata, try_clone and close do their (non-blocking) system call in the
// call itself, so the returned task never refers to the File.
Task<Expected<Metadata>> File::metadata() const {
  if (!fd_) return ready<Metadata>(std::error_code(EBADF, std::system_category()));
  // statx of an open file reads the in-memory inode: it does not block.
  struct statx stx {};
  if (::statx(fd_->fd(), "", AT_EMPTY_PATH, STATX_BASIC_STATS | STATX_BTIME, &stx) != 0)
    return ready<Metadata>(std::error_code(errno, std::system_category()));
  return ready<Metadata>(Metadata::from_statx(&stx));
}

Task<Expected<File>> File::try_clone() const {
  if (!fd_) return ready<File>(std::error_code(EBADF, std::system_category()));
  const int fd = ::fcntl(fd_->fd(), F_DUPFD_CLOEXEC, 0);  // never blocks
  if (fd < 0) return ready<File>(std::error_code(errno, std::system_category()));
  // A dup shares the open file's status flags, O_DIRECT among them.
  return ready<File>(File(FileDescriptor::adopt(fd, fd_->direct_io())));
}

Task<Expected<void>> File::close() {
  FileDescriptor* fd = std::exchange(fd_, nullptr);
  const std::error_code ec = fd ? fd->release() : std::error_code();
  if (ec) return ready<void>(ec);
  return ready<void>(Expected<void>());
}

}  // namespace volt::fs
