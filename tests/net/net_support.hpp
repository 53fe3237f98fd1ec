// What the socket tests share: the loopback address with a port the kernel
// picks (bind, then ask local_addr()).
#pragma once

#include "volt/net/socket_addr.hpp"

namespace volt::test {

inline net::SocketAddr loopback() {
  return net::SocketAddr(net::IpAddr::v4_loopback(), 0);
}

}  // namespace volt::test
