// volt::io pipes: the read/write steps (SyscallOp with read(2)/write(2)),
// adoption of a descriptor, io::pipe(), and the once-per-process SIGPIPE
// disposition change (see io/pipe.hpp for why SIG_IGN and not a mask).
#include "volt/io/pipe.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <system_error>

namespace volt::io {

namespace detail {

using Step = volt::detail::IoOperation::Step;

Step PipeRead::step(IoOperation& op) noexcept {
  auto& self = static_cast<PipeRead&>(op);
  Step result;
  if (!self.syscall([&self] { return ::read(self.fd(), self.buf_.data(), self.buf_.size()); },
                    self.done_, result))
    return result;
  // A short read took everything the pipe held (kDoneDrained, as sockets).
  return self.done_ > 0 && self.done_ < self.buf_.size() ? Step::kDoneDrained : Step::kDone;
}

Step PipeWrite::step(IoOperation& op) noexcept {
  auto& self = static_cast<PipeWrite&>(op);
  Step result;
  if (!self.syscall([&self] { return ::write(self.fd(), self.buf_.data(), self.buf_.size()); },
                    self.done_, result))
    return result;
  // A short write filled the pipe.
  return self.done_ < self.buf_.size() ? Step::kDoneDrained : Step::kDone;
}

Step PipeWriteAll::step(IoOperation& op) noexcept {
  auto& self = static_cast<PipeWriteAll&>(op);
  while (!self.buf_.empty()) {
    std::size_t n = 0;
    Step result;
    if (!self.syscall([&self] { return ::write(self.fd(), self.buf_.data(), self.buf_.size()); }, n,
                      result))
      return result;
    if (n == 0) {  // write(2) of a non-empty buffer never returns 0 on a pipe
      self.error_ = EPIPE;
      break;
    }
    self.buf_ = self.buf_.after(n);
  }
  return Step::kDone;
}

void ignore_sigpipe_once() noexcept {
  // A function-local static: initialised once, thread-safely (the compiler's
  // guard), by whichever thread makes the first pipe or child.
  static const bool done = [] {
    struct sigaction old = {};
    if (::sigaction(SIGPIPE, nullptr, &old) == 0 && !(old.sa_flags & SA_SIGINFO) &&
        old.sa_handler == SIG_DFL) {
      struct sigaction ignore = {};
      ignore.sa_handler = SIG_IGN;
      ::sigemptyset(&ignore.sa_mask);
      ::sigaction(SIGPIPE, &ignore, nullptr);
    }
    return true;
  }();
  (void)done;
}

namespace {

// Non-blocking and close-on-exec, each set only if missing.
std::error_code prepare(int fd) noexcept {
  const int fl = ::fcntl(fd, F_GETFL);
  if (fl < 0) return {errno, std::system_category()};
  if (!(fl & O_NONBLOCK) && ::fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
    return {errno, std::system_category()};
  const int fdf = ::fcntl(fd, F_GETFD);
  if (fdf < 0) return {errno, std::system_category()};
  if (!(fdf & FD_CLOEXEC) && ::fcntl(fd, F_SETFD, fdf | FD_CLOEXEC) < 0)
    return {errno, std::system_category()};
  return {};
}

}  // namespace

std::error_code adopt(int fd, volt::detail::IoHandle& out) noexcept {
  ignore_sigpipe_once();
  if (std::error_code ec = prepare(fd)) {
    ::close(fd);
    return ec;
  }
  return volt::detail::IoHandle::open(fd, out);
}

}  // namespace detail

Expected<PipeReader> PipeReader::from_fd(int fd) noexcept {
  PipeReader r;
  if (std::error_code ec = detail::adopt(fd, r.handle_)) return ec;
  return r;
}

Expected<PipeWriter> PipeWriter::from_fd(int fd) noexcept {
  PipeWriter w;
  if (std::error_code ec = detail::adopt(fd, w.handle_)) return ec;
  return w;
}

Expected<std::size_t> PipeReader::try_read(MutableBuffer buf) const noexcept {
  return net::detail::try_syscall(handle_, volt::detail::Interest::kRead,
                                  [&](int fd) { return ::read(fd, buf.data(), buf.size()); });
}

Expected<std::size_t> PipeWriter::try_write(ConstBuffer buf) const noexcept {
  return net::detail::try_syscall(handle_, volt::detail::Interest::kWrite,
                                  [&](int fd) { return ::write(fd, buf.data(), buf.size()); });
}

Expected<std::pair<PipeReader, PipeWriter>> pipe() noexcept {
  detail::ignore_sigpipe_once();
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0)
    return std::error_code(errno, std::system_category());
  PipeReader r;
  PipeWriter w;
  if (std::error_code ec = volt::detail::IoHandle::open(fds[0], r.handle_)) {
    ::close(fds[1]);
    return ec;
  }
  if (std::error_code ec = volt::detail::IoHandle::open(fds[1], w.handle_)) return ec;
  return std::pair<PipeReader, PipeWriter>(std::move(r), std::move(w));
}

}  // namespace volt::io
