// volt/net/datagram_socket.hpp: DatagramSocket<Addr>, the operations every
// datagram socket has (UdpSocket with SocketAddr, UnixDatagram with
// UnixAddr derive from it and add binding, connecting and their options).
//
// See datagram_ops.hpp for what each operation gives and guarantees. A
// default-constructed or moved-from socket gives errc::closed from every
// operation.
#pragma once

#include <sys/socket.h>

#include <cstddef>
#include <optional>
#include <system_error>
#include <utility>

#include "volt/detail/io_operation.hpp"
#include "volt/expected.hpp"
#include "volt/io/buffer.hpp"
#include "volt/net/datagram_ops.hpp"
#include "volt/net/stream_ops.hpp"
#include "volt/net/syscall_op.hpp"

namespace volt::net {

template <class Addr>
class DatagramSocket {
 public:
  // One datagram to `dest` (copied: may be a temporary).
  SendTo send_to(io::ConstBuffer buf, const Addr& dest) const noexcept {
    return SendTo(handle_, buf, dest.as_sockaddr(), dest.sockaddr_len());
  }
  // One datagram and its sender; bytes stored, at most buf.size().
  RecvFrom<Addr> recv_from(io::MutableBuffer buf) const noexcept {
    return RecvFrom<Addr>(handle_, buf);
  }
  // The next datagram's FULL length and sender, leaving it queued (copies
  // what fits in buf).
  RecvFrom<Addr> peek_from(io::MutableBuffer buf) const noexcept {
    return RecvFrom<Addr>(handle_, buf, MSG_PEEK | MSG_TRUNC);
  }
  // The sender of the next datagram, leaving it queued: decide where it
  // came from before choosing a buffer (or whether to take it).
  PeekSender<Addr> peek_sender() const noexcept { return PeekSender<Addr>(handle_); }
  // After connect(): one datagram to / from the peer. Without a peer, send
  // gives std::errc::destination_address_required.
  Send send(io::ConstBuffer buf) const noexcept { return Send(handle_, buf); }
  Recv recv(io::MutableBuffer buf) const noexcept { return Recv(handle_, buf); }

  // One system call each, no waiting; would-block is
  // std::errc::resource_unavailable_try_again.
  Expected<std::size_t> try_send_to(io::ConstBuffer buf, const Addr& dest) const noexcept {
    return detail::try_send_to(handle_, buf, dest.as_sockaddr(), dest.sockaddr_len());
  }
  Expected<std::pair<std::size_t, Addr>> try_recv_from(io::MutableBuffer buf) const noexcept {
    return detail::try_recv_from<Addr>(handle_, buf);
  }
  // peek_from and peek_sender without waiting: the datagram stays queued;
  // the length is its FULL length, as peek_from's.
  Expected<std::pair<std::size_t, Addr>> try_peek_from(io::MutableBuffer buf) const noexcept {
    return detail::try_recv_from<Addr>(handle_, buf, MSG_PEEK | MSG_TRUNC);
  }
  Expected<Addr> try_peek_sender() const noexcept {
    Expected<std::pair<std::size_t, Addr>> r =
        detail::try_recv_from<Addr>(handle_, io::MutableBuffer(), MSG_PEEK);
    if (!r) return r.error();
    return std::move(r->second);
  }
  Expected<std::size_t> try_send(io::ConstBuffer buf) const noexcept {
    return detail::try_write(handle_, buf);
  }
  Expected<std::size_t> try_recv(io::MutableBuffer buf) const noexcept {
    return detail::try_read(handle_, buf);
  }

  // Waits until a receive (or send) may make progress (a report may be
  // spurious: a try_ form may still give resource_unavailable_try_again).
  net::Ready readable() const noexcept { return {handle_, volt::detail::Interest::kRead}; }
  net::Ready writable() const noexcept { return {handle_, volt::detail::Interest::kWrite}; }

  // The pending socket error (SO_ERROR), cleared by reading it.
  Expected<std::optional<std::error_code>> take_error() const noexcept {
    return detail::take_error(handle_);
  }

  int native_handle() const noexcept { return handle_.native_handle(); }
  explicit operator bool() const noexcept { return static_cast<bool>(handle_); }
  // Closes now (as the destructor does); any task may call it while others
  // use the socket: their operations, waiting or starting later, complete
  // with errc::closed and never touch the descriptor number again.
  void close() noexcept { handle_.close(); }

 protected:
  DatagramSocket() noexcept = default;
  DatagramSocket(DatagramSocket&&) noexcept = default;
  DatagramSocket& operator=(DatagramSocket&&) noexcept = default;
  ~DatagramSocket() = default;

  volt::detail::IoHandle handle_;
};

}  // namespace volt::net
