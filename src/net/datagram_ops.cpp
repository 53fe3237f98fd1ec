#include "volt/net/datagram_ops.hpp"

#include <sys/socket.h>

#include <cerrno>

namespace volt::net {

using Step = volt::detail::IoOperation::Step;

namespace {

// A datagram system call's outcome. EINTR retries at once; EAGAIN waits for
// readiness; anything else (ECONNREFUSED after an ICMP error, EMSGSIZE, ...)
// finishes the operation with that error.
enum class Outcome { kRetry, kWait, kFail };
Outcome classify(int err) noexcept {
  if (err == EINTR) return Outcome::kRetry;
  if (err == EAGAIN || err == EWOULDBLOCK) return Outcome::kWait;
  return Outcome::kFail;
}

// Runs `call` (returning ssize_t, -1 with errno on failure) to an outcome:
// the byte count into `done`, or the errno into `error`.
template <class Call>
Step run(Call call, std::size_t& done, int& error) noexcept {
  for (;;) {
    const ssize_t n = call();
    if (n >= 0) {
      done = static_cast<std::size_t>(n);
      return Step::kDone;
    }
    switch (classify(errno)) {
      case Outcome::kRetry:
        continue;
      case Outcome::kWait:
        return Step::kWouldBlock;
      case Outcome::kFail:
        error = errno;
        return Step::kDone;
    }
  }
}

}  // namespace

Step SendTo::step(IoOperation& op) noexcept {
  auto& self = static_cast<SendTo&>(op);
  return run(
      [&self] {
        return ::sendto(self.fd_, self.buf_.data(), self.buf_.size(), MSG_NOSIGNAL,
                        reinterpret_cast<const sockaddr*>(&self.dest_), self.dest_len_);
      },
      self.done_, self.error_);
}

Step Send::step(IoOperation& op) noexcept {
  auto& self = static_cast<Send&>(op);
  return run([&self] { return ::send(self.fd_, self.buf_.data(), self.buf_.size(), MSG_NOSIGNAL); },
             self.done_, self.error_);
}

Step Recv::step(IoOperation& op) noexcept {
  auto& self = static_cast<Recv&>(op);
  return run([&self] { return ::recv(self.fd_, self.buf_.data(), self.buf_.size(), 0); },
             self.done_, self.error_);
}

Step RecvFromBase::step(IoOperation& op) noexcept {
  auto& self = static_cast<RecvFromBase&>(op);
  return run(
      [&self] {
        // Reset on every try: recvfrom writes the length it filled in.
        self.from_len_ = sizeof self.from_;
        return ::recvfrom(self.fd_, self.buf_.data(), self.buf_.size(), self.flags_,
                          reinterpret_cast<sockaddr*>(&self.from_), &self.from_len_);
      },
      self.done_, self.error_);
}

namespace detail {

Expected<std::size_t> try_send_to(const volt::detail::IoHandle& h, io::ConstBuffer buf,
                                  const sockaddr* dest, socklen_t dest_len) noexcept {
  if (!h) return errc::closed;
  const std::uint64_t seen = volt::detail::io_readiness(h);
  for (;;) {
    const ssize_t n = ::sendto(h.fd(), buf.data(), buf.size(), MSG_NOSIGNAL, dest, dest_len);
    if (n >= 0) return static_cast<std::size_t>(n);
    if (errno == EINTR) continue;
    const int err = errno;
    if (err == EAGAIN || err == EWOULDBLOCK)
      volt::detail::io_clear_readiness(h, seen, volt::detail::Interest::kWrite);
    return std::error_code(err, std::system_category());
  }
}

Expected<std::size_t> try_recv_from(const volt::detail::IoHandle& h, io::MutableBuffer buf,
                                    int flags, sockaddr_storage& from,
                                    socklen_t& from_len) noexcept {
  if (!h) return errc::closed;
  const std::uint64_t seen = volt::detail::io_readiness(h);
  for (;;) {
    from_len = sizeof from;
    const ssize_t n = ::recvfrom(h.fd(), buf.data(), buf.size(), flags,
                                 reinterpret_cast<sockaddr*>(&from), &from_len);
    if (n >= 0) return static_cast<std::size_t>(n);
    if (errno == EINTR) continue;
    const int err = errno;
    if (err == EAGAIN || err == EWOULDBLOCK)
      volt::detail::io_clear_readiness(h, seen, volt::detail::Interest::kRead);
    return std::error_code(err, std::system_category());
  }
}

}  // namespace detail

}  // namespace volt::net
