// volt/net/socket_addr.hpp: IP addresses, IP socket addresses and Unix
// socket addresses, as values that convert to and from the OS form.
//
//   volt::net::SocketAddr a = volt::net::SocketAddr::parse("127.0.0.1:8080").value();
//   volt::net::SocketAddr b(volt::net::IpAddr::v6_loopback(), 443);   // "[::1]:443"
//   ::connect(fd, b.as_sockaddr(), b.sockaddr_len());
//
//   sockaddr_storage ss; socklen_t len = sizeof ss;
//   ::getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len);
//   volt::Expected<SocketAddr> peer =
//       SocketAddr::from_sockaddr(reinterpret_cast<sockaddr*>(&ss), len);
//
//   auto u = volt::net::UnixAddr::from_path("@my-service");   // Linux abstract name
//
// IpAddr: an IPv4 or IPv6 address. Parsed from its text form ("10.0.0.1",
// "::1", "::ffff:1.2.3.4"; inet_pton's rules: four decimal octets without
// leading zeros for IPv4, no brackets, no scope, no surrounding blanks).
// to_string gives the canonical text (RFC 5952 for IPv6: lower case, the
// longest run of zero groups compressed). An IPv4-mapped IPv6 address
// (::ffff:a.b.c.d) stays IPv6 (to_canonical() turns it into the IPv4 one);
// is_loopback/is_unspecified follow the address's own family, as in Rust:
// ::ffff:127.0.0.1 is not loopback until made canonical.
//
// SocketAddr: an IpAddr and a port (and, for IPv6, a scope id and flow info).
// It holds the sockaddr_in / sockaddr_in6 itself, so as_sockaddr() and
// sockaddr_len() cost nothing and the pointer stays valid as long as the
// SocketAddr does. Text form: "1.2.3.4:80", "[::1]:80", "[fe80::1%2]:80" (a
// numeric scope id, or an interface name on parse, resolved with
// if_nametoindex). Ports are decimal 0..65535.
//
// UnixAddr: an AF_UNIX address, one of
//  - a pathname ("/run/app.sock", at most 107 bytes, no NUL byte),
//  - a Linux abstract name, written "@name" or with a leading NUL byte
//    (the name, at most 107 bytes, may hold any byte), or
//  - unnamed (an unbound socket, or the peer of a socketpair).
// A file really named "@x" is reached as "./@x". to_string() shows a pathname
// as is, an abstract name as "@name", an unnamed address as "(unnamed)".
//
// Guarantees:
//  - Nothing here throws (except std::bad_alloc from to_string), allocates
//    outside to_string, or makes a system call (except parse with an
//    interface-name scope).
//  - Bad input is a value, never an exception or a partly filled address:
//    parse/from_path/from_sockaddr return errc::invalid_argument for text
//    that is not an address, a missing or out-of-range port ("1.2.3.4",
//    "1.2.3.4:70000"), an unbracketed IPv6 address with a port, a
//    truncated sockaddr length, a family other than the expected ones
//    (AF_INET/AF_INET6 for SocketAddr, AF_UNIX for UnixAddr), and a Unix
//    path too long for sun_path or holding a NUL byte.
//  - Equality compares everything the OS form carries: family, address,
//    port, and for IPv6 the scope id and flow info; for UnixAddr the kind and
//    the bytes of the path or name.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <array>
#include <compare>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <string>
#include <string_view>

#include "volt/expected.hpp"

namespace volt::net {

class IpAddr {
 public:
  // 0.0.0.0, the IPv4 unspecified address.
  constexpr IpAddr() noexcept = default;

  static constexpr IpAddr v4(std::uint8_t a, std::uint8_t b, std::uint8_t c,
                             std::uint8_t d) noexcept {
    IpAddr ip;
    ip.bytes_ = {a, b, c, d};
    return ip;
  }
  static constexpr IpAddr v4(const std::array<std::uint8_t, 4>& octets) noexcept {
    return v4(octets[0], octets[1], octets[2], octets[3]);
  }
  static constexpr IpAddr v6(const std::array<std::uint8_t, 16>& octets) noexcept {
    IpAddr ip;
    ip.v6_ = true;
    ip.bytes_ = octets;
    return ip;
  }
  // 127.0.0.1, ::1, 0.0.0.0, ::
  static constexpr IpAddr v4_loopback() noexcept { return v4(127, 0, 0, 1); }
  static constexpr IpAddr v6_loopback() noexcept {
    return v6({0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1});
  }
  static constexpr IpAddr v4_any() noexcept { return IpAddr(); }
  static constexpr IpAddr v6_any() noexcept { return v6({}); }

  // "192.168.0.1" or "fe80::1"; errc::invalid_argument for anything else.
  static Expected<IpAddr> parse(std::string_view text) noexcept;

  constexpr bool is_v4() const noexcept { return !v6_; }
  constexpr bool is_v6() const noexcept { return v6_; }
  // 127.0.0.0/8 for IPv4, ::1 for IPv6.
  constexpr bool is_loopback() const noexcept {
    return v6_ ? *this == v6_loopback() : bytes_[0] == 127;
  }
  // 0.0.0.0 or ::
  constexpr bool is_unspecified() const noexcept {
    return v6_ ? *this == v6_any() : *this == v4_any();
  }
  // An IPv4-mapped IPv6 address (::ffff:a.b.c.d) as the IPv4 address a.b.c.d;
  // any other address unchanged. What a dual-stack socket's peer address
  // means.
  constexpr IpAddr to_canonical() const noexcept {
    if (!v6_) return *this;
    for (std::size_t i = 0; i < 10; ++i)
      if (bytes_[i] != 0) return *this;
    if (bytes_[10] != 0xff || bytes_[11] != 0xff) return *this;
    return v4(bytes_[12], bytes_[13], bytes_[14], bytes_[15]);
  }

  // The address in network order. v4_octets() of an IPv6 address and
  // v6_octets() of an IPv4 one are all zero (see to_canonical for mapping).
  constexpr std::array<std::uint8_t, 4> v4_octets() const noexcept {
    if (v6_) return {};
    return {bytes_[0], bytes_[1], bytes_[2], bytes_[3]};
  }
  constexpr std::array<std::uint8_t, 16> v6_octets() const noexcept {
    return v6_ ? bytes_ : std::array<std::uint8_t, 16>{};
  }

  // "127.0.0.1", "::1", "::ffff:1.2.3.4".
  std::string to_string() const;

  friend constexpr bool operator==(const IpAddr&, const IpAddr&) noexcept = default;
  // IPv4 before IPv6, then by address bytes.
  friend constexpr std::strong_ordering operator<=>(const IpAddr&,
                                                    const IpAddr&) noexcept = default;

 private:
  // Declared in this order so that the defaulted ordering is family first.
  bool v6_ = false;
  // IPv4 in the first four bytes, the rest zero (so == and <=> can compare
  // the whole array).
  std::array<std::uint8_t, 16> bytes_{};
};

std::ostream& operator<<(std::ostream& os, const IpAddr& ip);

class SocketAddr {
 public:
  // 0.0.0.0:0
  SocketAddr() noexcept : SocketAddr(IpAddr(), 0) {}
  SocketAddr(const IpAddr& ip, std::uint16_t port) noexcept;

  // "1.2.3.4:80", "[::1]:80", "[fe80::1%eth0]:80", "[fe80::1%2]:80".
  // errc::invalid_argument for anything else (see the header comment).
  static Expected<SocketAddr> parse(std::string_view text) noexcept;
  // From what accept/getpeername/recvfrom filled in. errc::invalid_argument
  // for a null pointer, a family other than AF_INET/AF_INET6, or a length
  // shorter than that family's sockaddr.
  static Expected<SocketAddr> from_sockaddr(const sockaddr* addr, socklen_t len) noexcept;

  IpAddr ip() const noexcept;
  std::uint16_t port() const noexcept;
  bool is_v4() const noexcept { return storage_.any.sa_family == AF_INET; }
  bool is_v6() const noexcept { return storage_.any.sa_family == AF_INET6; }
  // Replaces the address; the port stays. Changing family resets the IPv6
  // scope id and flow info to 0.
  void set_ip(const IpAddr& ip) noexcept;
  void set_port(std::uint16_t port) noexcept;
  // IPv6 only (0 for IPv4; setting it on IPv4 does nothing): the interface
  // index a link-local address is reached through, and the flow label.
  std::uint32_t scope_id() const noexcept;
  void set_scope_id(std::uint32_t id) noexcept;
  std::uint32_t flowinfo() const noexcept;
  void set_flowinfo(std::uint32_t info) noexcept;

  // The OS form, valid while this SocketAddr lives and is not modified.
  const sockaddr* as_sockaddr() const noexcept { return &storage_.any; }
  socklen_t sockaddr_len() const noexcept {
    return is_v6() ? socklen_t{sizeof(sockaddr_in6)} : socklen_t{sizeof(sockaddr_in)};
  }

  // "1.2.3.4:80", "[::1]:80", "[fe80::1%2]:80".
  std::string to_string() const;

  friend bool operator==(const SocketAddr& a, const SocketAddr& b) noexcept;
  // By address (IPv4 first), then port, then scope id and flow info.
  friend std::strong_ordering operator<=>(const SocketAddr& a, const SocketAddr& b) noexcept;

 private:
  // One of the two OS forms. The three structs begin with the family field
  // (their common initial sequence), so any.sa_family may be read whichever
  // is live, and says which one that is.
  union Storage {
    sockaddr any;
    sockaddr_in v4;
    sockaddr_in6 v6;
  };
  Storage storage_;
};

std::ostream& operator<<(std::ostream& os, const SocketAddr& addr);

class UnixAddr {
 public:
  // The longest pathname or abstract name: sun_path less one byte (the
  // pathname's terminating NUL, or the abstract name's leading NUL).
  static constexpr std::size_t kMaxPathLen = sizeof(sockaddr_un::sun_path) - 1;

  // Unnamed.
  UnixAddr() noexcept;

  // A pathname; "@name" or "\0name" for an abstract name. errc::invalid_argument
  // for an empty path, one longer than kMaxPathLen (for an abstract name: the
  // name after the prefix), or a pathname holding a NUL byte.
  static Expected<UnixAddr> from_path(std::string_view path) noexcept;
  // The abstract name `name` (no prefix; any bytes, at most kMaxPathLen).
  static Expected<UnixAddr> from_abstract_name(std::string_view name) noexcept;
  // From what accept/getsockname/recvfrom filled in. errc::invalid_argument for a
  // null pointer, a family other than AF_UNIX, or a length shorter than the
  // family field or longer than sockaddr_un.
  static Expected<UnixAddr> from_sockaddr(const sockaddr* addr, socklen_t len) noexcept;

  bool is_unnamed() const noexcept { return len_ <= kPathOffset; }
  bool is_abstract() const noexcept { return !is_unnamed() && storage_.sun_path[0] == '\0'; }
  bool is_pathname() const noexcept { return !is_unnamed() && !is_abstract(); }
  // The pathname (empty for an abstract or unnamed address).
  std::string_view path() const noexcept;
  // The abstract name without its leading NUL (empty for the other kinds).
  std::string_view abstract_name() const noexcept;

  const sockaddr* as_sockaddr() const noexcept {
    return reinterpret_cast<const sockaddr*>(&storage_);
  }
  socklen_t sockaddr_len() const noexcept { return len_; }

  // The path, "@name" or "(unnamed)".
  std::string to_string() const;

  friend bool operator==(const UnixAddr& a, const UnixAddr& b) noexcept;

 private:
  static constexpr socklen_t kPathOffset = offsetof(sockaddr_un, sun_path);
  sockaddr_un storage_;
  // The length the kernel is given: the family alone (unnamed), or through
  // the pathname's NUL, or through the abstract name's last byte.
  socklen_t len_;
};

std::ostream& operator<<(std::ostream& os, const UnixAddr& addr);

}  // namespace volt::net

template <>
struct std::hash<volt::net::IpAddr> {
  std::size_t operator()(const volt::net::IpAddr& ip) const noexcept;
};
template <>
struct std::hash<volt::net::SocketAddr> {
  std::size_t operator()(const volt::net::SocketAddr& addr) const noexcept;
};
