// volt/net/udp.hpp: UDP sockets on the runtime's I/O driver.
//
//   auto socket = volt::net::UdpSocket::bind("127.0.0.1:9000").value();
//   char buf[1500];
//   for (;;) {                                   // an echo service
//     auto got = co_await socket.recv_from(buf);
//     if (!got) break;
//     auto [n, from] = *got;
//     co_await socket.send_to(volt::io::ConstBuffer(buf, n), from);
//   }
//
//   // A client with a default peer:
//   auto c = volt::net::UdpSocket::bind("0.0.0.0:0").value();
//   c.connect(server).value();                   // synchronous: no handshake
//   co_await c.send(std::string_view("ping"));
//   auto n = co_await c.recv(buf);               // only the peer's datagrams
//
// UdpSocket: bind (IPv4 or IPv6, IPV6_V6ONLY left to the system default),
// send_to / recv_from / peek_from, connect + send / recv, the try_ forms,
// readable / writable, addresses, SO_BROADCAST. The operations are those of
// datagram_ops.hpp (see there for truncation and cancellation).
//
// Guarantees:
//  - The descriptor is non-blocking, close-on-exec, registered once with the
//    runtime's driver and closed exactly once when its owner goes.
//  - Several tasks may send and receive on one socket at once (through a
//    shared reference; the socket must outlive them): each datagram goes to
//    exactly one receive; no readiness edge is lost between them.
//  - UDP itself may drop, duplicate or reorder datagrams, and a receiver
//    whose queue (SO_RCVBUF) is full drops new ones; nothing here adds
//    reliability.
//  - connect() only sets the default peer (and filters what recv/recv_from
//    receive to it); it never waits. After an ICMP port-unreachable, the next
//    operation on a connected socket may give std::errc::connection_refused.
//  - Creating a socket outside a runtime gives errc::no_runtime; any operation
//    on an empty (moved-from or closed) socket gives errc::closed.
//  - Errors are values (Expected), never exceptions; SIGPIPE is never raised.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>
#include <utility>

#include "volt/detail/io_operation.hpp"
#include "volt/expected.hpp"
#include "volt/io/buffer.hpp"
#include "volt/net/datagram_ops.hpp"
#include "volt/net/datagram_socket.hpp"
#include "volt/net/socket_addr.hpp"
#include "volt/net/stream_ops.hpp"

namespace volt::net {

class UdpSocket : public DatagramSocket<SocketAddr> {
 public:
  // An empty socket: every operation gives errc::closed.
  UdpSocket() noexcept = default;
  UdpSocket(UdpSocket&&) noexcept = default;
  UdpSocket& operator=(UdpSocket&&) noexcept = default;

  // socket + bind. Port 0 picks a free port (see local_addr). Errors:
  // address_in_use, address_not_available (an address not on this host),
  // permission_denied, errc::no_runtime...
  static Expected<UdpSocket> bind(const SocketAddr& addr) noexcept;
  // bind(SocketAddr::parse(text)): errc::invalid_argument if it does not parse.
  static Expected<UdpSocket> bind(std::string_view addr) noexcept;

  // The default peer: send() goes there, recv() takes only its datagrams.
  // Synchronous. Errors: network_unreachable, address_family_not_supported
  // (an IPv6 peer on an IPv4 socket), errc::closed...
  Expected<void> connect(const SocketAddr& peer) const noexcept;

  Expected<SocketAddr> local_addr() const noexcept;
  // The connected peer; std::errc::not_connected before connect().
  Expected<SocketAddr> peer_addr() const noexcept;
  // SO_BROADCAST: whether datagrams may be sent to a broadcast address.
  Expected<void> set_broadcast(bool on) const noexcept;
  Expected<bool> broadcast() const noexcept;

  // Adopts a bound, non-blocking UDP socket (closed on failure).
  static Expected<UdpSocket> from_fd(int fd) noexcept;
};

}  // namespace volt::net
