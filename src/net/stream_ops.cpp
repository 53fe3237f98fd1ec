#include "volt/net/stream_ops.hpp"

#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

namespace volt::net {

using Step = volt::detail::IoOperation::Step;

namespace {

// A system call's errno: EAGAIN (and EWOULDBLOCK) wait for readiness; EINTR
// retries at once; anything else finishes the operation with that error.
enum class Outcome { kRetry, kWait, kFail };
Outcome classify(int err) noexcept {
  if (err == EINTR) return Outcome::kRetry;
  if (err == EAGAIN || err == EWOULDBLOCK) return Outcome::kWait;
  return Outcome::kFail;
}

}  // namespace

Step Read::step(IoOperation& op) noexcept {
  auto& self = static_cast<Read&>(op);
  for (;;) {
    const ssize_t n = ::recv(self.fd_, self.buf_.data(), self.buf_.size(), 0);
    if (n >= 0) {
      self.done_ = static_cast<std::size_t>(n);
      // A stream socket's short read took everything queued (see kDoneDrained).
      return n > 0 && self.done_ < self.buf_.size() ? Step::kDoneDrained : Step::kDone;
    }
    switch (classify(errno)) {
      case Outcome::kRetry:
        continue;
      case Outcome::kWait:
        return Step::kWouldBlock;
      case Outcome::kFail:
        self.error_ = errno;
        return Step::kDone;
    }
  }
}

Step ReadExact::step(IoOperation& op) noexcept {
  auto& self = static_cast<ReadExact&>(op);
  while (self.done_ < self.buf_.size()) {
    const ssize_t n =
        ::recv(self.fd_, self.buf_.data() + self.done_, self.buf_.size() - self.done_, 0);
    if (n > 0) {
      self.done_ += static_cast<std::size_t>(n);
      continue;
    }
    if (n == 0) {
      self.eof_ = true;
      return Step::kDone;
    }
    switch (classify(errno)) {
      case Outcome::kRetry:
        continue;
      case Outcome::kWait:
        return Step::kWouldBlock;
      case Outcome::kFail:
        self.error_ = errno;
        return Step::kDone;
    }
  }
  return Step::kDone;
}

Step Write::step(IoOperation& op) noexcept {
  auto& self = static_cast<Write&>(op);
  for (;;) {
    const ssize_t n = ::send(self.fd_, self.buf_.data(), self.buf_.size(), MSG_NOSIGNAL);
    if (n >= 0) {
      self.done_ = static_cast<std::size_t>(n);
      return self.done_ < self.buf_.size() ? Step::kDoneDrained : Step::kDone;
    }
    switch (classify(errno)) {
      case Outcome::kRetry:
        continue;
      case Outcome::kWait:
        return Step::kWouldBlock;
      case Outcome::kFail:
        self.error_ = errno;
        return Step::kDone;
    }
  }
}

Step WriteAll::step(IoOperation& op) noexcept {
  auto& self = static_cast<WriteAll&>(op);
  while (!self.buf_.empty()) {
    const ssize_t n = ::send(self.fd_, self.buf_.data(), self.buf_.size(), MSG_NOSIGNAL);
    if (n >= 0) {
      // A stream socket never accepts 0 bytes of a non-empty send without an
      // error; guard anyway rather than loop forever.
      if (n == 0) {
        self.error_ = EPIPE;
        return Step::kDone;
      }
      self.buf_ = self.buf_.after(static_cast<std::size_t>(n));
      continue;
    }
    switch (classify(errno)) {
      case Outcome::kRetry:
        continue;
      case Outcome::kWait:
        return Step::kWouldBlock;
      case Outcome::kFail:
        self.error_ = errno;
        return Step::kDone;
    }
  }
  return Step::kDone;
}

Step Writev::step(IoOperation& op) noexcept {
  auto& self = static_cast<Writev&>(op);
  iovec iov[kMaxBuffers];
  const std::size_t count = std::min(self.bufs_.size(), kMaxBuffers);
  for (std::size_t i = 0; i < count; ++i) {
    iov[i].iov_base = const_cast<std::byte*>(self.bufs_[i].data());
    iov[i].iov_len = self.bufs_[i].size();
  }
  msghdr msg{};
  msg.msg_iov = iov;
  msg.msg_iovlen = count;
  for (;;) {
    const ssize_t n = ::sendmsg(self.fd_, &msg, MSG_NOSIGNAL);
    if (n >= 0) {
      self.done_ = static_cast<std::size_t>(n);
      return Step::kDone;
    }
    switch (classify(errno)) {
      case Outcome::kRetry:
        continue;
      case Outcome::kWait:
        return Step::kWouldBlock;
      case Outcome::kFail:
        self.error_ = errno;
        return Step::kDone;
    }
  }
}

namespace detail {

Expected<std::size_t> try_read(const volt::detail::IoHandle& h, io::MutableBuffer buf) noexcept {
  if (!h) return errc::closed;
  const std::uint64_t seen = volt::detail::io_readiness(h);
  for (;;) {
    const ssize_t n = ::recv(h.fd(), buf.data(), buf.size(), 0);
    if (n >= 0) return static_cast<std::size_t>(n);
    if (errno == EINTR) continue;
    const int err = errno;
    if (err == EAGAIN || err == EWOULDBLOCK)
      volt::detail::io_clear_readiness(h, seen, volt::detail::Interest::kRead);
    return std::error_code(err, std::system_category());
  }
}

Expected<std::size_t> try_write(const volt::detail::IoHandle& h, io::ConstBuffer buf) noexcept {
  if (!h) return errc::closed;
  const std::uint64_t seen = volt::detail::io_readiness(h);
  for (;;) {
    const ssize_t n = ::send(h.fd(), buf.data(), buf.size(), MSG_NOSIGNAL);
    if (n >= 0) return static_cast<std::size_t>(n);
    if (errno == EINTR) continue;
    const int err = errno;
    if (err == EAGAIN || err == EWOULDBLOCK)
      volt::detail::io_clear_readiness(h, seen, volt::detail::Interest::kWrite);
    return std::error_code(err, std::system_category());
  }
}

Expected<void> shutdown(const volt::detail::IoHandle& h, int how) noexcept {
  if (!h) return errc::closed;
  if (::shutdown(h.fd(), how) < 0) return std::error_code(errno, std::system_category());
  return {};
}

}  // namespace detail

}  // namespace volt::net
