#include "volt/net/stream_ops.hpp"

#include "io/io_source.hpp"
#include "net/socket_util.hpp"
#include "volt/net/stream_socket.hpp"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace volt::net {

using Step = volt::detail::IoOperation::Step;

Step Read::step(IoOperation& op) noexcept {
  auto& self = static_cast<Read&>(op);
  Step result;
  if (!self.syscall([&self] { return ::recv(self.fd(), self.buf_.data(), self.buf_.size(), 0); },
                    self.done_, result))
    return result;
  // A stream socket's short read took everything queued (see kDoneDrained).
  return self.done_ > 0 && self.done_ < self.buf_.size() ? Step::kDoneDrained : Step::kDone;
}

namespace {

// recv(2) of `buf` that also reads TCP_INQ's report of the bytes left queued
// into `queued` (unchanged if the socket gave none).
ssize_t recv_reporting_queue(int fd, io::MutableBuffer buf, int& queued) noexcept {
  iovec iov{buf.data(), buf.size()};
  alignas(cmsghdr) unsigned char control[CMSG_SPACE(sizeof(int))];
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  const ssize_t n = ::recvmsg(fd, &msg, 0);
  if (n < 0) return n;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level == SOL_TCP && c->cmsg_type == TCP_CM_INQ)
      std::memcpy(&queued, CMSG_DATA(c), sizeof queued);
  }
  return n;
}

}  // namespace

Step ReadExact::step(IoOperation& op) noexcept {
  auto& self = static_cast<ReadExact&>(op);
  // -1: unknown. After a peer's FIN the kernel reports at least 1, so end of
  // stream is never taken for a drained queue.
  int queued = -1;
  while (self.done_ < self.buf_.size()) {
    const io::MutableBuffer rest = self.buf_.after(self.done_);
    std::size_t n = 0;
    Step result;
    const bool received =
        self.reports_queue_
            ? self.syscall([&] { return recv_reporting_queue(self.fd(), rest, queued); }, n, result)
            : self.syscall([&] { return ::recv(self.fd(), rest.data(), rest.size(), 0); }, n,
                           result);
    if (!received) return result;
    if (n == 0) {
      self.eof_ = true;
      break;
    }
    self.done_ += n;
  }
  return queued == 0 ? Step::kDoneDrained : Step::kDone;
}

Step Write::step(IoOperation& op) noexcept {
  auto& self = static_cast<Write&>(op);
  Step result;
  if (!self.syscall(
          [&self] { return ::send(self.fd(), self.buf_.data(), self.buf_.size(), MSG_NOSIGNAL); },
          self.done_, result))
    return result;
  return self.done_ < self.buf_.size() ? Step::kDoneDrained : Step::kDone;
}

Step WriteAll::step(IoOperation& op) noexcept {
  auto& self = static_cast<WriteAll&>(op);
  while (!self.buf_.empty()) {
    std::size_t n = 0;
    Step result;
    if (!self.syscall(
            [&self] { return ::send(self.fd(), self.buf_.data(), self.buf_.size(), MSG_NOSIGNAL); },
            n, result))
      return result;
    // A stream socket never accepts 0 bytes of a non-empty send without an
    // error; guard anyway rather than loop forever.
    if (n == 0) {
      self.error_ = EPIPE;
      break;
    }
    self.buf_ = self.buf_.after(n);
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
  Step result;
  if (!self.syscall([&] { return ::sendmsg(self.fd(), &msg, MSG_NOSIGNAL); }, self.done_, result))
    return result;
  return Step::kDone;
}

Step Peek::step(IoOperation& op) noexcept {
  auto& self = static_cast<Peek&>(op);
  Step result;
  if (!self.syscall(
          [&self] { return ::recv(self.fd(), self.buf_.data(), self.buf_.size(), MSG_PEEK); },
          self.done_, result))
    return result;
  // kDone, never kDoneDrained: the bytes are still queued.
  return Step::kDone;
}

Step ReadBuf::step(IoOperation& op) noexcept {
  auto& self = static_cast<ReadBuf&>(op);
  std::vector<std::byte>& vec = *self.vec_;
  const std::size_t old = vec.size();
  const std::size_t spare = std::min(vec.capacity() - old, kReadBufMaxRead);
  // Within capacity: resize allocates nothing (and cannot throw). The bytes
  // received into are zero-filled first (a vector cannot expose
  // uninitialised elements), and the size goes back to old + n before the
  // step returns, so no one (a cancellation included) sees it larger.
  vec.resize(old + spare);
  Step result;
  const bool received = self.syscall([&] { return ::recv(self.fd(), vec.data() + old, spare, 0); },
                                     self.done_, result);
  vec.resize(old + (received ? self.done_ : 0));
  if (!received) return result;
  return self.done_ > 0 && self.done_ < spare ? Step::kDoneDrained : Step::kDone;
}

Step ReadyEvents::step(IoOperation& op) noexcept {
  auto& self = static_cast<ReadyEvents&>(op);
  using volt::detail::IoSource;
  // The word again (attempt() read it a moment ago and found a bit of the
  // interest): a flag the driver added since is reported too.
  const std::uint64_t bits = self.source()->readiness();
  Readiness r;
  if (is_readable(self.interest_)) {
    r.readable = (bits & IoSource::kReadable) != 0;
    r.read_closed = (bits & IoSource::kReadClosed) != 0;
  }
  if (is_writable(self.interest_)) {
    r.writable = (bits & IoSource::kWritable) != 0;
    r.write_closed = (bits & IoSource::kWriteClosed) != 0;
  }
  r.error = (bits & IoSource::kError) != 0;
  // Another task's EAGAIN may have cleared the bits in between: report the
  // plain direction(s) asked for (a spurious report, which the contract
  // allows). Never kWouldBlock: with kBoth its clear would drop the other
  // direction's readiness, which nobody has consumed.
  if (r.is_empty()) {
    r.readable = is_readable(self.interest_);
    r.writable = is_writable(self.interest_);
  }
  self.seen_ = r;
  return Step::kDone;
}

namespace detail {

Expected<std::size_t> try_peek(const volt::detail::IoHandle& h, io::MutableBuffer buf) noexcept {
  return try_syscall(h, volt::detail::Interest::kRead,
                     [&](int fd) { return ::recv(fd, buf.data(), buf.size(), MSG_PEEK); });
}

void reserve_read_buf(std::vector<std::byte>& vec) {
  if (vec.size() < vec.capacity()) return;
  vec.reserve(std::max(vec.capacity() * 2, kReadBufMinCapacity));
}

Expected<std::size_t> try_read(const volt::detail::IoHandle& h, io::MutableBuffer buf) noexcept {
  return try_syscall(h, volt::detail::Interest::kRead,
                     [&](int fd) { return ::recv(fd, buf.data(), buf.size(), 0); });
}

Expected<std::size_t> try_write(const volt::detail::IoHandle& h, io::ConstBuffer buf) noexcept {
  return try_syscall(h, volt::detail::Interest::kWrite,
                     [&](int fd) { return ::send(fd, buf.data(), buf.size(), MSG_NOSIGNAL); });
}

Expected<void> shutdown(const volt::detail::IoHandle& h, int how) noexcept {
  const volt::detail::IoUse use(h);
  if (use.fd() < 0) return errc::closed;
  if (::shutdown(use.fd(), how) < 0) return std::error_code(errno, std::system_category());
  return {};
}

}  // namespace detail

Expected<std::optional<std::error_code>> detail::take_error(
    const volt::detail::IoHandle& h) noexcept {
  const volt::detail::IoUse use(h);
  return take_socket_error(use.fd());
}

}  // namespace volt::net
