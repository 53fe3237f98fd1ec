#include "volt/net/udp.hpp"

#include <sys/socket.h>

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

}  // namespace volt::net
