#include "net/socket_util.hpp"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <climits>
#include <utility>

namespace volt::net::detail {

std::error_code open_socket(int family, int type, volt::detail::IoHandle& out) noexcept {
  const int fd = ::socket(family, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return errno_code();
  return volt::detail::IoHandle::open(fd, out);
}

std::error_code open_socket_pair(int type, volt::detail::IoHandle& first,
                                 volt::detail::IoHandle& second) noexcept {
  int fds[2];
  if (::socketpair(AF_UNIX, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fds) < 0) return errno_code();
  volt::detail::IoHandle a;
  // IoHandle::open closes the descriptor it is given on failure; the other
  // one is still ours to close.
  if (std::error_code ec = volt::detail::IoHandle::open(fds[0], a)) {
    ::close(fds[1]);
    return ec;
  }
  volt::detail::IoHandle b;
  if (std::error_code ec = volt::detail::IoHandle::open_like(fds[1], a, b)) return ec;
  first = std::move(a);
  second = std::move(b);
  return {};
}

int accept_fd(int listen_fd, sockaddr_storage& peer, socklen_t& peer_len) noexcept {
  for (;;) {
    peer_len = sizeof peer;
    const int fd = ::accept4(listen_fd, reinterpret_cast<sockaddr*>(&peer), &peer_len,
                             SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd >= 0) return fd;
    if (errno == EINTR || errno == ECONNABORTED) continue;
    return -errno;
  }
}

Expected<void> connect_now(int fd, const sockaddr* addr, socklen_t len) noexcept {
  if (fd < 0) return errc::closed;
  for (;;) {
    if (::connect(fd, addr, len) == 0) return {};
    if (errno != EINTR) return errno_code();
  }
}

int new_socket(int family, int type) noexcept {
  const int fd = ::socket(family, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  return fd >= 0 ? fd : -errno;
}

bool enable_queue_hint(int fd) noexcept {
  const int on = 1;
  return ::setsockopt(fd, IPPROTO_TCP, TCP_INQ, &on, sizeof on) == 0;
}

Expected<void> connect_now(const volt::detail::IoHandle& h, const sockaddr* addr,
                           socklen_t len) noexcept {
  const volt::detail::IoUse use(h);
  return connect_now(use.fd(), addr, len);
}

Expected<void> set_flag(const volt::detail::IoHandle& h, int level, int option, bool on) noexcept {
  const volt::detail::IoUse use(h);
  if (use.fd() < 0) return errc::closed;
  const int value = on ? 1 : 0;
  if (::setsockopt(use.fd(), level, option, &value, sizeof value) < 0) return errno_code();
  return {};
}

Expected<bool> get_flag(const volt::detail::IoHandle& h, int level, int option) noexcept {
  const volt::detail::IoUse use(h);
  if (use.fd() < 0) return errc::closed;
  int value = 0;
  socklen_t len = sizeof value;
  if (::getsockopt(use.fd(), level, option, &value, &len) < 0) return errno_code();
  return value != 0;
}

Expected<std::optional<std::error_code>> take_socket_error(int fd) noexcept {
  if (fd < 0) return errc::closed;
  int value = 0;
  socklen_t len = sizeof value;
  if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &value, &len) < 0) return errno_code();
  if (value == 0) return std::optional<std::error_code>();
  return std::optional<std::error_code>(errno_code(value));
}

volt::detail::IoOperation::Step ConnectWait::step(IoOperation& op) noexcept {
  auto& self = static_cast<ConnectWait&>(op);
  int err = 0;
  socklen_t len = sizeof err;
  if (::getsockopt(self.fd(), SOL_SOCKET, SO_ERROR, &err, &len) < 0) err = errno;
  if (err != 0) {
    self.error_ = err;
    return Step::kDone;
  }
  sockaddr_storage peer{};
  socklen_t peer_len = sizeof peer;
  if (::getpeername(self.fd(), reinterpret_cast<sockaddr*>(&peer), &peer_len) == 0)
    return Step::kDone;
  if (errno == ENOTCONN) return Step::kWouldBlock;  // still in progress
  self.error_ = errno;
  return Step::kDone;
}

Expected<void> set_int_option(int fd, int level, int option, int value) noexcept {
  if (fd < 0) return errc::closed;
  if (::setsockopt(fd, level, option, &value, sizeof value) < 0) return errno_code();
  return {};
}

Expected<int> get_int_option(int fd, int level, int option) noexcept {
  if (fd < 0) return errc::closed;
  int value = 0;
  socklen_t len = sizeof value;
  if (::getsockopt(fd, level, option, &value, &len) < 0) return errno_code();
  return value;
}

Expected<void> set_linger(int fd, std::optional<std::chrono::seconds> linger) noexcept {
  if (fd < 0) return errc::closed;
  ::linger value{};
  if (linger) {
    if (linger->count() < 0 || linger->count() > INT_MAX) return errc::invalid_argument;
    value.l_onoff = 1;
    value.l_linger = static_cast<int>(linger->count());
  }
  if (::setsockopt(fd, SOL_SOCKET, SO_LINGER, &value, sizeof value) < 0) return errno_code();
  return {};
}

Expected<std::optional<std::chrono::seconds>> get_linger(int fd) noexcept {
  if (fd < 0) return errc::closed;
  ::linger value{};
  socklen_t len = sizeof value;
  if (::getsockopt(fd, SOL_SOCKET, SO_LINGER, &value, &len) < 0) return errno_code();
  if (value.l_onoff == 0) return std::optional<std::chrono::seconds>();
  return std::optional<std::chrono::seconds>(std::chrono::seconds(value.l_linger));
}

namespace {
// The hop-limit option of `fd`'s family.
Expected<std::pair<int, int>> ttl_option(int fd) noexcept {
  Expected<int> family = get_int_option(fd, SOL_SOCKET, SO_DOMAIN);
  if (!family) return family.error();
  if (*family == AF_INET6) return std::pair<int, int>(IPPROTO_IPV6, IPV6_UNICAST_HOPS);
  return std::pair<int, int>(IPPROTO_IP, IP_TTL);
}
}  // namespace

Expected<void> set_ttl(int fd, std::uint32_t ttl) noexcept {
  Expected<std::pair<int, int>> opt = ttl_option(fd);
  if (!opt) return opt.error();
  if (ttl > INT_MAX) return errc::invalid_argument;
  return set_int_option(fd, opt->first, opt->second, static_cast<int>(ttl));
}

Expected<std::uint32_t> get_ttl(int fd) noexcept {
  Expected<std::pair<int, int>> opt = ttl_option(fd);
  if (!opt) return opt.error();
  Expected<int> v = get_int_option(fd, opt->first, opt->second);
  if (!v) return v.error();
  return static_cast<std::uint32_t>(*v);
}

Expected<sockaddr_storage> local_name(int fd, socklen_t& len) noexcept {
  if (fd < 0) return errc::closed;
  sockaddr_storage storage{};
  len = sizeof storage;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&storage), &len) < 0) return errno_code();
  return storage;
}

}  // namespace volt::net::detail
