#include "volt/net/udp.hpp"

#include <netinet/in.h>
#include <sys/socket.h>

#include <climits>
#include <cstring>

#include "net/socket_util.hpp"

namespace volt::net {

using volt::detail::IoHandle;

Expected<UdpSocket> UdpSocket::bind(const SocketAddr& addr) noexcept {
  UdpSocket socket;
  if (std::error_code ec =
          detail::open_socket(addr.is_v6() ? AF_INET6 : AF_INET, SOCK_DGRAM, socket.handle_))
    return ec;
  // No SO_REUSEADDR: for UDP on Linux it lets a second socket bind the same
  // port and share (steal) its datagrams; a bind conflict should be an error.
  if (::bind(socket.handle_.fd(), addr.as_sockaddr(), addr.sockaddr_len()) < 0)
    return detail::errno_code();
  return socket;
}

Expected<UdpSocket> UdpSocket::bind(std::string_view addr) noexcept {
  Expected<SocketAddr> parsed = SocketAddr::parse(addr);
  if (!parsed) return parsed.error();
  return bind(*parsed);
}

Expected<UdpSocket> UdpSocket::from_fd(int fd) noexcept {
  UdpSocket socket;
  if (std::error_code ec = IoHandle::open(fd, socket.handle_)) return ec;
  return socket;
}

Expected<void> UdpSocket::connect(const SocketAddr& peer) const noexcept {
  return detail::connect_now(handle_, peer.as_sockaddr(), peer.sockaddr_len());
}

Expected<SocketAddr> UdpSocket::local_addr() const noexcept {
  return detail::socket_name<SocketAddr>(handle_, false);
}

Expected<SocketAddr> UdpSocket::peer_addr() const noexcept {
  return detail::socket_name<SocketAddr>(handle_, true);
}

Expected<void> UdpSocket::set_broadcast(bool on) const noexcept {
  return detail::set_flag(handle_, SOL_SOCKET, SO_BROADCAST, on);
}

Expected<bool> UdpSocket::broadcast() const noexcept {
  return detail::get_flag(handle_, SOL_SOCKET, SO_BROADCAST);
}

namespace {

Expected<void> set_uint(const IoHandle& h, int level, int option, std::uint32_t v) noexcept {
  if (v > INT_MAX) return errc::invalid_argument;
  return detail::with_fd(
      h, [&](int fd) { return detail::set_int_option(fd, level, option, static_cast<int>(v)); });
}

Expected<std::uint32_t> get_uint(const IoHandle& h, int level, int option) noexcept {
  return detail::with_fd(h, [&](int fd) -> Expected<std::uint32_t> {
    Expected<int> v = detail::get_int_option(fd, level, option);
    if (!v) return v.error();
    return static_cast<std::uint32_t>(*v);
  });
}

Expected<void> membership_v4(const IoHandle& h, int option, const IpAddr& group,
                             const IpAddr& interface) noexcept {
  if (!group.is_v4() || !interface.is_v4()) return errc::invalid_argument;
  ip_mreq req{};
  const auto g = group.v4_octets();
  const auto i = interface.v4_octets();
  std::memcpy(&req.imr_multiaddr.s_addr, g.data(), g.size());  // network order
  std::memcpy(&req.imr_interface.s_addr, i.data(), i.size());
  return detail::with_fd(h, [&](int fd) -> Expected<void> {
    if (::setsockopt(fd, IPPROTO_IP, option, &req, sizeof req) < 0) return detail::errno_code();
    return {};
  });
}

Expected<void> membership_v6(const IoHandle& h, int option, const IpAddr& group,
                             std::uint32_t ifindex) noexcept {
  if (!group.is_v6()) return errc::invalid_argument;
  ipv6_mreq req{};
  const auto g = group.v6_octets();
  std::memcpy(req.ipv6mr_multiaddr.s6_addr, g.data(), g.size());
  req.ipv6mr_interface = ifindex;
  return detail::with_fd(h, [&](int fd) -> Expected<void> {
    if (::setsockopt(fd, IPPROTO_IPV6, option, &req, sizeof req) < 0) return detail::errno_code();
    return {};
  });
}

}  // namespace

Expected<void> UdpSocket::set_ttl(std::uint32_t ttl) const noexcept {
  return detail::with_fd(handle_, [&](int fd) { return detail::set_ttl(fd, ttl); });
}

Expected<std::uint32_t> UdpSocket::ttl() const noexcept {
  return detail::with_fd(handle_, [](int fd) { return detail::get_ttl(fd); });
}

Expected<void> UdpSocket::set_tos(std::uint32_t tos) const noexcept {
  return set_uint(handle_, IPPROTO_IP, IP_TOS, tos);
}

Expected<std::uint32_t> UdpSocket::tos() const noexcept {
  return get_uint(handle_, IPPROTO_IP, IP_TOS);
}

Expected<void> UdpSocket::set_tclass_v6(std::uint32_t tclass) const noexcept {
  return set_uint(handle_, IPPROTO_IPV6, IPV6_TCLASS, tclass);
}

Expected<std::uint32_t> UdpSocket::tclass_v6() const noexcept {
  return get_uint(handle_, IPPROTO_IPV6, IPV6_TCLASS);
}

Expected<void> UdpSocket::join_multicast_v4(const IpAddr& group,
                                            const IpAddr& interface) const noexcept {
  return membership_v4(handle_, IP_ADD_MEMBERSHIP, group, interface);
}

Expected<void> UdpSocket::leave_multicast_v4(const IpAddr& group,
                                             const IpAddr& interface) const noexcept {
  return membership_v4(handle_, IP_DROP_MEMBERSHIP, group, interface);
}

Expected<void> UdpSocket::join_multicast_v6(const IpAddr& group,
                                            std::uint32_t ifindex) const noexcept {
  return membership_v6(handle_, IPV6_ADD_MEMBERSHIP, group, ifindex);
}

Expected<void> UdpSocket::leave_multicast_v6(const IpAddr& group,
                                             std::uint32_t ifindex) const noexcept {
  return membership_v6(handle_, IPV6_DROP_MEMBERSHIP, group, ifindex);
}

Expected<void> UdpSocket::set_multicast_loop_v4(bool on) const noexcept {
  return detail::set_flag(handle_, IPPROTO_IP, IP_MULTICAST_LOOP, on);
}

Expected<bool> UdpSocket::multicast_loop_v4() const noexcept {
  return detail::get_flag(handle_, IPPROTO_IP, IP_MULTICAST_LOOP);
}

Expected<void> UdpSocket::set_multicast_loop_v6(bool on) const noexcept {
  return detail::set_flag(handle_, IPPROTO_IPV6, IPV6_MULTICAST_LOOP, on);
}

Expected<bool> UdpSocket::multicast_loop_v6() const noexcept {
  return detail::get_flag(handle_, IPPROTO_IPV6, IPV6_MULTICAST_LOOP);
}

Expected<void> UdpSocket::set_multicast_ttl_v4(std::uint32_t ttl) const noexcept {
  return set_uint(handle_, IPPROTO_IP, IP_MULTICAST_TTL, ttl);
}

Expected<std::uint32_t> UdpSocket::multicast_ttl_v4() const noexcept {
  return get_uint(handle_, IPPROTO_IP, IP_MULTICAST_TTL);
}

}  // namespace volt::net
