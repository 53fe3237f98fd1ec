#include "volt/net/datagram_ops.hpp"

#include <sys/socket.h>

#include <cerrno>

namespace volt::net {

using Step = volt::detail::IoOperation::Step;

Step SendTo::step(IoOperation& op) noexcept {
  auto& self = static_cast<SendTo&>(op);
  Step result = Step::kDone;
  self.syscall(
      [&self] {
        return ::sendto(self.fd(), self.buf_.data(), self.buf_.size(), MSG_NOSIGNAL,
                        reinterpret_cast<const sockaddr*>(&self.dest_), self.dest_len_);
      },
      self.done_, result);
  return result;
}

Step Send::step(IoOperation& op) noexcept {
  auto& self = static_cast<Send&>(op);
  Step result = Step::kDone;
  self.syscall(
      [&self] { return ::send(self.fd(), self.buf_.data(), self.buf_.size(), MSG_NOSIGNAL); },
      self.done_, result);
  return result;
}

Step Recv::step(IoOperation& op) noexcept {
  auto& self = static_cast<Recv&>(op);
  Step result = Step::kDone;
  self.syscall([&self] { return ::recv(self.fd(), self.buf_.data(), self.buf_.size(), 0); },
               self.done_, result);
  return result;
}

Step RecvFromBase::step(IoOperation& op) noexcept {
  auto& self = static_cast<RecvFromBase&>(op);
  Step result = Step::kDone;
  self.syscall(
      [&self] {
        // Reset on every try: recvfrom writes the length it filled in.
        self.from_len_ = sizeof self.from_;
        return ::recvfrom(self.fd(), self.buf_.data(), self.buf_.size(), self.flags_,
                          reinterpret_cast<sockaddr*>(&self.from_), &self.from_len_);
      },
      self.done_, result);
  return result;
}

namespace detail {

Expected<std::size_t> try_send_to(const volt::detail::IoHandle& h, io::ConstBuffer buf,
                                  const sockaddr* dest, socklen_t dest_len) noexcept {
  return try_syscall(h, volt::detail::Interest::kWrite, [&](int fd) {
    return ::sendto(fd, buf.data(), buf.size(), MSG_NOSIGNAL, dest, dest_len);
  });
}

Expected<std::size_t> try_recv_from(const volt::detail::IoHandle& h, io::MutableBuffer buf,
                                    int flags, sockaddr_storage& from,
                                    socklen_t& from_len) noexcept {
  return try_syscall(h, volt::detail::Interest::kRead, [&](int fd) {
    from_len = sizeof from;
    return ::recvfrom(fd, buf.data(), buf.size(), flags, reinterpret_cast<sockaddr*>(&from),
                      &from_len);
  });
}

}  // namespace detail

}  // namespace volt::net
