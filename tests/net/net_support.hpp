// What the socket tests share: the loopback address with a port the kernel
// picks (bind, then ask local_addr()), and CO_ASSERT_TRUE for coroutines.
#pragma once

#include "volt/net/socket_addr.hpp"

// ASSERT_* returns, which a coroutine may not: this one co_returns.
#define CO_ASSERT_TRUE(cond) \
  if (!(cond)) {             \
    ADD_FAILURE();           \
    co_return;               \
  }

namespace volt::test {

inline net::SocketAddr loopback() {
  return net::SocketAddr(net::IpAddr::v4_loopback(), 0);
}

}  // namespace volt::test
