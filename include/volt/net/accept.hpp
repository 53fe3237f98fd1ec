// volt/net/accept.hpp: the accept operation of the stream listeners
// (TcpListener, UnixListener), written once: AcceptOp<Stream, Addr> gives
// Expected<std::pair<Stream, Addr>>, the connection and its peer's address.
//
// Guarantees:
//  - Cancel-safe: an accept destroyed while waiting has taken nothing; a
//    connection accepted by the system call is always handed out (or closed
//    if the operation is destroyed before it could be, which a completed
//    await never is).
//  - The connection joins the listener's runtime (its driver), whichever
//    thread awaits the accept.
//  - Out of descriptors (EMFILE, ENFILE, ENOBUFS, ENOMEM): accept() waits
//    kAcceptBackoff and tries once more before it reports the error, so a
//    loop that simply retries on error is throttled (one error per back-off,
//    not a spin) and a descriptor freed meanwhile is used without the caller
//    seeing the error at all. The listener's readiness stays set: the
//    connection that could not be taken is still queued, and no new edge
//    would announce it. A server should still log and, if it can, shed
//    load (close idle connections) when it sees the error; retrying at once
//    is safe.
#pragma once

#include <sys/socket.h>

#include <utility>

#include <chrono>

#include "volt/detail/io_operation.hpp"
#include "volt/detail/timer_node.hpp"
#include "volt/expected.hpp"
#include "volt/net/datagram_ops.hpp"
#include "volt/net/stream_socket.hpp"
#include "volt/net/syscall_op.hpp"

namespace volt::net::detail {

// How long accept() waits before trying again when out of descriptors.
inline constexpr std::chrono::milliseconds kAcceptBackoff{10};

class AcceptBase : public SyscallOp {
 public:
  AcceptBase(AcceptBase&& other) noexcept
      : SyscallOp(std::move(other)), reports_queue_(other.reports_queue_) {}
  // Closes a connection accepted but never handed out.
  ~AcceptBase();

 protected:
  explicit AcceptBase(const volt::detail::IoHandle& listener) noexcept
      : SyscallOp(listener, volt::detail::Interest::kRead, &step),
        reports_queue_(listener.reports_queue()) {}
  // Registers the accepted descriptor with the listener's runtime.
  std::error_code adopt(volt::detail::IoHandle& out) noexcept;

  bool reports_queue_;  // the listener's, which its connections inherit
  int accepted_ = -1;
  // Out of descriptors: the back-off before the one retry (see above).
  volt::detail::TimerNode backoff_;
  bool backing_off_ = false;  // armed, not yet retried
  bool backed_off_ = false;   // this operation has had its back-off
  sockaddr_storage peer_{};
  socklen_t peer_len_ = 0;

 private:
  static Step step(IoOperation& op) noexcept;
};

template <class Stream, class Addr>
class [[nodiscard]] AcceptOp : public AcceptBase {
 public:
  explicit AcceptOp(const volt::detail::IoHandle& listener) noexcept : AcceptBase(listener) {}
  Expected<std::pair<Stream, Addr>> await_resume() noexcept {
    if (Expected<void> r = outcome(); !r) return r.error();
    Stream stream;
    if (std::error_code ec = adopt(StreamSocket::handle_of(stream))) return ec;
    Expected<Addr> addr = received_addr<Addr>(peer_, peer_len_);
    if (!addr) return addr.error();
    return std::pair<Stream, Addr>(std::move(stream), std::move(*addr));
  }
};

// accept4 once, no waiting (would-block: resource_unavailable_try_again,
// and the listener's readiness is cleared): the descriptor, or the error.
Expected<int> try_accept_fd(const volt::detail::IoHandle& listener, sockaddr_storage& peer,
                            socklen_t& peer_len) noexcept;

template <class Stream, class Addr>
Expected<std::pair<Stream, Addr>> try_accept(const volt::detail::IoHandle& listener) noexcept {
  sockaddr_storage peer{};
  socklen_t peer_len = 0;
  Expected<int> fd = try_accept_fd(listener, peer, peer_len);
  if (!fd) return fd.error();
  Stream stream;
  volt::detail::IoHandle& handle = StreamSocket::handle_of(stream);
  if (std::error_code ec = volt::detail::IoHandle::open_like(*fd, listener, handle)) return ec;
  handle.set_reports_queue(listener.reports_queue());  // inherited: see AcceptBase::adopt
  Expected<Addr> addr = received_addr<Addr>(peer, peer_len);
  if (!addr) return addr.error();
  return std::pair<Stream, Addr>(std::move(stream), std::move(*addr));
}

}  // namespace volt::net::detail
