// volt/net/datagram_ops.hpp: the awaitable send and receive operations of the
// datagram sockets (UdpSocket, UnixDatagram).
//
// Each is returned by the socket's member function of the same name and is
// awaited once. `Addr` is the socket's address type (SocketAddr for UDP,
// UnixAddr for Unix datagrams):
//
//   co_await s.send_to(buf, addr)  -> Expected<std::size_t>  (the whole datagram)
//   co_await s.recv_from(buf)      -> Expected<std::pair<std::size_t, Addr>>
//   co_await s.peek_from(buf)      -> Expected<std::pair<std::size_t, Addr>>
//   co_await s.peek_sender()       -> Expected<Addr>  (the datagram stays queued)
//   co_await s.send(buf)           -> Expected<std::size_t>  (connected sockets)
//   co_await s.recv(buf)           -> Expected<std::size_t>  (connected sockets)
//
//   char buf[1500];
//   auto got = co_await socket.recv_from(buf);
//   if (got) co_await socket.send_to(volt::io::ConstBuffer(buf, got->first), got->second);
//
// One operation is one datagram: a send sends `buf` as one datagram (or fails,
// e.g. std::errc::message_size when it is larger than the protocol allows);
// a receive takes exactly one datagram off the queue.
//
// Truncation. recv and recv_from give the number of bytes stored in `buf`,
// never more than buf.size(). A datagram longer than the buffer is truncated:
// its first buf.size() bytes are stored and the rest is discarded, without
// an error (as recv(2), std and Tokio do). To learn a datagram's full length
// before taking it, peek_from: it copies what fits but leaves the datagram
// queued, and gives its FULL length (recv's MSG_PEEK | MSG_TRUNC), which may
// exceed buf.size(); then receive it with a buffer that large. A datagram of
// 0 bytes is a datagram: recv gives 0, which is not an end of stream.
//
// Guarantees (see detail/io_operation.hpp for the mechanism):
//  - Waiting allocates nothing; each operation takes one unit of the task's
//    cooperative budget. Several tasks may send and receive on one socket at
//    once; each receive takes a different datagram.
//  - Errors are the system's codes: compare with std::errc
//    (connection_refused after an ICMP port-unreachable on a connected UDP
//    socket, message_size, ...). Sends use MSG_NOSIGNAL: never a SIGPIPE.
//  - A socket closed (its handle reset) while the operation waited gives
//    errc::closed.
//  - Cancellation (destroying the awaitable, e.g. by timeout or select) while
//    waiting: nothing was sent or received (all of them are cancel-safe).
//  - send_to copies the destination address into the operation: the address
//    argument may be a temporary. The buffer must stay valid until the
//    operation completes or is destroyed.
#pragma once

#include <sys/socket.h>

#include <cstddef>
#include <cstring>
#include <type_traits>
#include <utility>

#include "volt/detail/io_operation.hpp"
#include "volt/expected.hpp"
#include "volt/io/buffer.hpp"
#include "volt/net/socket_addr.hpp"
#include "volt/net/syscall_op.hpp"

namespace volt::net {

namespace detail {
// A received sender address as an Addr. For UnixAddr a length too short to
// hold the family (what the kernel reports for an unnamed sender) is the
// unnamed address; anything else goes through Addr::from_sockaddr.
template <class Addr>
Expected<Addr> received_addr(const sockaddr_storage& storage, socklen_t len) noexcept {
  if constexpr (std::is_same_v<Addr, UnixAddr>) {
    if (len < static_cast<socklen_t>(sizeof(sa_family_t))) return UnixAddr();
  }
  return Addr::from_sockaddr(reinterpret_cast<const sockaddr*>(&storage), len);
}
}  // namespace detail

// sendto(2) of one datagram to `dest`.
class [[nodiscard]] SendTo : public detail::SyscallOp {
 public:
  SendTo(const volt::detail::IoHandle& h, io::ConstBuffer buf, const sockaddr* dest,
         socklen_t dest_len) noexcept
      : SyscallOp(h, volt::detail::Interest::kWrite, &step), buf_(buf) {
    // Copied, so that a temporary address may be passed; a length that does
    // not fit is clamped and rejected by the kernel (EINVAL).
    dest_len_ = dest_len <= sizeof dest_ ? dest_len : socklen_t{sizeof dest_};
    if (dest) std::memcpy(&dest_, dest, dest_len_);
  }
  Expected<std::size_t> await_resume() noexcept { return outcome(done_); }

 private:
  static Step step(IoOperation& op) noexcept;
  io::ConstBuffer buf_;
  sockaddr_storage dest_{};
  socklen_t dest_len_ = 0;
  std::size_t done_ = 0;
};

// send(2) of one datagram to the connected peer.
class [[nodiscard]] Send : public detail::SyscallOp {
 public:
  Send(const volt::detail::IoHandle& h, io::ConstBuffer buf) noexcept
      : SyscallOp(h, volt::detail::Interest::kWrite, &step), buf_(buf) {}
  Expected<std::size_t> await_resume() noexcept { return outcome(done_); }

 private:
  static Step step(IoOperation& op) noexcept;
  io::ConstBuffer buf_;
  std::size_t done_ = 0;
};

// recv(2) of one datagram from the connected peer (bytes stored, see
// "Truncation" above).
class [[nodiscard]] Recv : public detail::SyscallOp {
 public:
  Recv(const volt::detail::IoHandle& h, io::MutableBuffer buf) noexcept
      : SyscallOp(h, volt::detail::Interest::kRead, &step), buf_(buf) {}
  Expected<std::size_t> await_resume() noexcept { return outcome(done_); }

 private:
  static Step step(IoOperation& op) noexcept;
  io::MutableBuffer buf_;
  std::size_t done_ = 0;
};

// The address-independent part of RecvFrom (its system call lives in
// src/net/datagram_ops.cpp).
class RecvFromBase : public detail::SyscallOp {
 protected:
  // flags: 0 (recv_from) or MSG_PEEK | MSG_TRUNC (peek_from).
  RecvFromBase(const volt::detail::IoHandle& h, io::MutableBuffer buf, int flags) noexcept
      : SyscallOp(h, volt::detail::Interest::kRead, &step), flags_(flags), buf_(buf) {}

  int flags_;
  io::MutableBuffer buf_;
  sockaddr_storage from_{};
  socklen_t from_len_ = 0;
  std::size_t done_ = 0;

 private:
  static Step step(IoOperation& op) noexcept;
};

// recvfrom(2) of one datagram: its length and its sender.
template <class Addr>
class [[nodiscard]] RecvFrom : public RecvFromBase {
 public:
  RecvFrom(const volt::detail::IoHandle& h, io::MutableBuffer buf, int flags = 0) noexcept
      : RecvFromBase(h, buf, flags) {}
  Expected<std::pair<std::size_t, Addr>> await_resume() noexcept {
    Expected<std::size_t> n = outcome(done_);
    if (!n) return n.error();
    Expected<Addr> from = detail::received_addr<Addr>(from_, from_len_);
    if (!from) return from.error();
    return std::pair<std::size_t, Addr>(*n, std::move(*from));
  }
};

// The sender of the next datagram, which stays queued (recvfrom of 0 bytes
// with MSG_PEEK): Expected<Addr>. Waits while nothing is queued.
template <class Addr>
class [[nodiscard]] PeekSender : public RecvFromBase {
 public:
  explicit PeekSender(const volt::detail::IoHandle& h) noexcept
      : RecvFromBase(h, io::MutableBuffer(), MSG_PEEK) {}
  Expected<Addr> await_resume() noexcept {
    Expected<std::size_t> n = outcome(done_);
    if (!n) return n.error();
    return detail::received_addr<Addr>(from_, from_len_);
  }
};

namespace detail {
// The try_ forms: one system call, no waiting; would-block is
// std::errc::resource_unavailable_try_again (and clears the registration's
// readiness, so a following readable()/writable() really waits). try_send
// and try_recv are stream_ops.hpp's try_write and try_read (send with
// MSG_NOSIGNAL, recv).
Expected<std::size_t> try_send_to(const volt::detail::IoHandle& h, io::ConstBuffer buf,
                                  const sockaddr* dest, socklen_t dest_len) noexcept;
// recvfrom with `flags`; the sender's address into `from` / `from_len`.
Expected<std::size_t> try_recv_from(const volt::detail::IoHandle& h, io::MutableBuffer buf,
                                    int flags, sockaddr_storage& from,
                                    socklen_t& from_len) noexcept;

template <class Addr>
Expected<std::pair<std::size_t, Addr>> try_recv_from(const volt::detail::IoHandle& h,
                                                     io::MutableBuffer buf,
                                                     int flags = 0) noexcept {
  sockaddr_storage from{};
  socklen_t from_len = 0;
  Expected<std::size_t> n = try_recv_from(h, buf, flags, from, from_len);
  if (!n) return n.error();
  Expected<Addr> addr = received_addr<Addr>(from, from_len);
  if (!addr) return addr.error();
  return std::pair<std::size_t, Addr>(*n, std::move(*addr));
}
}  // namespace detail

}  // namespace volt::net
