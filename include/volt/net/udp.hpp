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
// send_to / recv_from / peek_from / peek_sender, connect + send / recv, the
// try_ forms, readable / writable, addresses, SO_BROADCAST, ttl, tos /
// tclass_v6, multicast membership (v4 and v6), loop and ttl. The operations
// are those of datagram_ops.hpp (see there for truncation and cancellation).
//
//   // Receive a multicast group on the loopback interface (a sender reaches
//   // it through lo by choosing lo as its outgoing multicast interface,
//   // IP_MULTICAST_IF on native_handle(): no wrapper here, as in Tokio):
//   auto m = volt::net::UdpSocket::bind("0.0.0.0:5353").value();
//   m.join_multicast_v4(*volt::net::IpAddr::parse("239.1.2.3"),
//                       volt::net::IpAddr::v4_loopback()).value();
//   auto from = co_await m.peek_sender();        // who sent the next one
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
#include <cstdint>
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

  // Hop limit of outgoing unicast datagrams: IP_TTL on an IPv4 socket,
  // IPV6_UNICAST_HOPS on an IPv6 one; 1..255 (the kernel's EINVAL,
  // std::errc::invalid_argument, otherwise).
  Expected<void> set_ttl(std::uint32_t ttl) const noexcept;
  Expected<std::uint32_t> ttl() const noexcept;
  // IP_TOS: the IPv4 type-of-service byte (DSCP << 2 | ECN) of outgoing
  // datagrams; 0..255. Linux may drop ECN bits it manages itself.
  Expected<void> set_tos(std::uint32_t tos) const noexcept;
  Expected<std::uint32_t> tos() const noexcept;
  // IPV6_TCLASS: the IPv6 traffic class (an IPv6 socket; an IPv4 one
  // gives the kernel's error); 0..255.
  Expected<void> set_tclass_v6(std::uint32_t tclass) const noexcept;
  Expected<std::uint32_t> tclass_v6() const noexcept;

  // Multicast. join_multicast_v4: IP_ADD_MEMBERSHIP of `group` (an IPv4
  // multicast address, 224.0.0.0/4) on the interface whose address is
  // `interface` (IpAddr::v4_any(): the kernel picks by route). An IPv6
  // argument: errc::invalid_argument. Errors from the kernel:
  // invalid_argument (not a multicast group), no_such_device (no interface
  // with that address), address_in_use (joined already)...
  Expected<void> join_multicast_v4(const IpAddr& group, const IpAddr& interface) const noexcept;
  Expected<void> leave_multicast_v4(const IpAddr& group, const IpAddr& interface) const noexcept;
  // IPV6_ADD_MEMBERSHIP of `group` (ff00::/8) on interface `ifindex`
  // (if_nametoindex; 0: the kernel picks). An IPv4 group:
  // errc::invalid_argument. Needs an IPv6 socket.
  Expected<void> join_multicast_v6(const IpAddr& group, std::uint32_t ifindex) const noexcept;
  Expected<void> leave_multicast_v6(const IpAddr& group, std::uint32_t ifindex) const noexcept;
  // IP_MULTICAST_LOOP / IPV6_MULTICAST_LOOP: whether this host's own
  // multicast datagrams are delivered to its member sockets (default on).
  Expected<void> set_multicast_loop_v4(bool on) const noexcept;
  Expected<bool> multicast_loop_v4() const noexcept;
  Expected<void> set_multicast_loop_v6(bool on) const noexcept;
  Expected<bool> multicast_loop_v6() const noexcept;
  // IP_MULTICAST_TTL: hop limit of outgoing IPv4 multicast (default 1:
  // the local network); 0..255.
  Expected<void> set_multicast_ttl_v4(std::uint32_t ttl) const noexcept;
  Expected<std::uint32_t> multicast_ttl_v4() const noexcept;

  // Adopts a bound, non-blocking UDP socket (closed on failure).
  static Expected<UdpSocket> from_fd(int fd) noexcept;
};

}  // namespace volt::net
