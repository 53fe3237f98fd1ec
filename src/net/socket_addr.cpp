// volt/net/socket_addr.hpp: text and OS forms of IP and Unix socket addresses.
#include "volt/net/socket_addr.hpp"

#include <arpa/inet.h>
#include <net/if.h>

#include <cstring>
#include <ostream>

namespace volt::net {
namespace {

// inet_pton wants a NUL-terminated string; the longest valid text is
// INET6_ADDRSTRLEN - 1 ("ffff:...:255.255.255.255"), so anything that does not
// fit in this buffer is not an address.
constexpr std::size_t kMaxIpText = INET6_ADDRSTRLEN;

bool parse_ip(std::string_view text, IpAddr& out) noexcept {
  if (text.empty() || text.size() >= kMaxIpText) return false;
  char buf[kMaxIpText];
  std::memcpy(buf, text.data(), text.size());
  buf[text.size()] = '\0';
  // An embedded NUL would make inet_pton see only a prefix of the text.
  if (std::strlen(buf) != text.size()) return false;
  if (text.find(':') == std::string_view::npos) {
    std::array<std::uint8_t, 4> octets;
    if (::inet_pton(AF_INET, buf, octets.data()) != 1) return false;
    out = IpAddr::v4(octets);
  } else {
    std::array<std::uint8_t, 16> octets;
    if (::inet_pton(AF_INET6, buf, octets.data()) != 1) return false;
    out = IpAddr::v6(octets);
  }
  return true;
}

bool all_digits(std::string_view s) noexcept {
  if (s.empty()) return false;
  for (char c : s)
    if (c < '0' || c > '9') return false;
  return true;
}

// Decimal digits only (no sign, no blanks), at most `max`. Leading zeros are
// accepted ("080" is 80), as Rust's and getaddrinfo's numeric parsers do.
bool parse_decimal(std::string_view s, std::uint32_t max, std::uint32_t& out) noexcept {
  if (!all_digits(s)) return false;
  std::uint64_t v = 0;
  for (char c : s) {
    v = v * 10 + static_cast<std::uint64_t>(c - '0');
    if (v > max) return false;
  }
  out = static_cast<std::uint32_t>(v);
  return true;
}

bool parse_port(std::string_view s, std::uint16_t& out) noexcept {
  std::uint32_t v = 0;
  if (!parse_decimal(s, 65535, v)) return false;
  out = static_cast<std::uint16_t>(v);
  return true;
}

// "%2" or "%eth0" after an IPv6 address: a numeric index, or an interface name
// looked up now (0 from if_nametoindex: no such interface).
bool parse_scope(std::string_view s, std::uint32_t& out) noexcept {
  if (s.empty()) return false;
  if (all_digits(s)) return parse_decimal(s, 0xffffffffu, out);
  if (s.size() >= IF_NAMESIZE) return false;
  char name[IF_NAMESIZE];
  std::memcpy(name, s.data(), s.size());
  name[s.size()] = '\0';
  if (std::strlen(name) != s.size()) return false;
  out = ::if_nametoindex(name);
  return out != 0;
}

}  // namespace

// ---- IpAddr ----

Expected<IpAddr> IpAddr::parse(std::string_view text) noexcept {
  IpAddr ip;
  if (!parse_ip(text, ip)) return errc::invalid_argument;
  return ip;
}

std::string IpAddr::to_string() const {
  char buf[INET6_ADDRSTRLEN];
  // inet_ntop cannot fail here: the family is valid and the buffer fits
  // either form.
  ::inet_ntop(v6_ ? AF_INET6 : AF_INET, bytes_.data(), buf, sizeof buf);
  return buf;
}

std::ostream& operator<<(std::ostream& os, const IpAddr& ip) {
  return os << ip.to_string();
}

// ---- SocketAddr ----

SocketAddr::SocketAddr(const IpAddr& ip, std::uint16_t port) noexcept {
  // Zeroed first: sin_zero, the flow info and the scope id are part of what
  // the kernel reads and what == compares.
  std::memset(&storage_, 0, sizeof storage_);
  set_ip(ip);
  set_port(port);
}

void SocketAddr::set_ip(const IpAddr& ip) noexcept {
  const std::uint16_t port = storage_.any.sa_family == 0 ? 0 : this->port();
  if (ip.is_v4()) {
    if (!is_v4()) {
      std::memset(&storage_, 0, sizeof storage_);
      storage_.v4.sin_family = AF_INET;
      storage_.v4.sin_port = htons(port);
    }
    const auto octets = ip.v4_octets();
    std::memcpy(&storage_.v4.sin_addr, octets.data(), octets.size());
  } else {
    if (!is_v6()) {
      std::memset(&storage_, 0, sizeof storage_);
      storage_.v6.sin6_family = AF_INET6;
      storage_.v6.sin6_port = htons(port);
    }
    const auto octets = ip.v6_octets();
    std::memcpy(&storage_.v6.sin6_addr, octets.data(), octets.size());
  }
}

void SocketAddr::set_port(std::uint16_t port) noexcept {
  // sin_port and sin6_port sit at the same offset, but each form is written
  // through its own member rather than relying on that.
  if (is_v6()) {
    storage_.v6.sin6_port = htons(port);
  } else {
    storage_.v4.sin_port = htons(port);
  }
}

IpAddr SocketAddr::ip() const noexcept {
  if (is_v6()) {
    std::array<std::uint8_t, 16> octets;
    std::memcpy(octets.data(), &storage_.v6.sin6_addr, octets.size());
    return IpAddr::v6(octets);
  }
  std::array<std::uint8_t, 4> octets;
  std::memcpy(octets.data(), &storage_.v4.sin_addr, octets.size());
  return IpAddr::v4(octets);
}

std::uint16_t SocketAddr::port() const noexcept {
  return ntohs(is_v6() ? storage_.v6.sin6_port : storage_.v4.sin_port);
}

std::uint32_t SocketAddr::scope_id() const noexcept {
  return is_v6() ? storage_.v6.sin6_scope_id : 0;
}

void SocketAddr::set_scope_id(std::uint32_t id) noexcept {
  if (is_v6()) storage_.v6.sin6_scope_id = id;
}

std::uint32_t SocketAddr::flowinfo() const noexcept {
  return is_v6() ? ntohl(storage_.v6.sin6_flowinfo) : 0;
}

void SocketAddr::set_flowinfo(std::uint32_t info) noexcept {
  if (is_v6()) storage_.v6.sin6_flowinfo = htonl(info);
}

Expected<SocketAddr> SocketAddr::parse(std::string_view text) noexcept {
  std::uint16_t port = 0;
  if (!text.empty() && text.front() == '[') {
    const std::size_t close = text.find(']');
    if (close == std::string_view::npos) return errc::invalid_argument;
    std::string_view inside = text.substr(1, close - 1);
    const std::string_view rest = text.substr(close + 1);
    if (rest.size() < 2 || rest.front() != ':' || !parse_port(rest.substr(1), port))
      return errc::invalid_argument;
    std::uint32_t scope = 0;
    if (const std::size_t pct = inside.find('%'); pct != std::string_view::npos) {
      if (!parse_scope(inside.substr(pct + 1), scope)) return errc::invalid_argument;
      inside = inside.substr(0, pct);
    }
    IpAddr ip;
    // Brackets are for IPv6 only: "[1.2.3.4]:80" is rejected.
    if (inside.find(':') == std::string_view::npos || !parse_ip(inside, ip))
      return errc::invalid_argument;
    SocketAddr addr(ip, port);
    addr.set_scope_id(scope);
    return addr;
  }
  const std::size_t colon = text.rfind(':');
  if (colon == std::string_view::npos) return errc::invalid_argument;
  const std::string_view host = text.substr(0, colon);
  // An IPv6 address with a port needs brackets ("::1:80" is ambiguous), so a
  // host with a colon of its own is not an IPv4 address and is rejected.
  IpAddr ip;
  if (host.find(':') != std::string_view::npos || !parse_ip(host, ip) ||
      !parse_port(text.substr(colon + 1), port))
    return errc::invalid_argument;
  return SocketAddr(ip, port);
}

Expected<SocketAddr> SocketAddr::from_sockaddr(const sockaddr* addr, socklen_t len) noexcept {
  if (addr == nullptr || len < static_cast<socklen_t>(sizeof(sa_family_t)))
    return errc::invalid_argument;
  // Copied rather than read through `addr`: the caller's buffer is usually a
  // sockaddr_storage, and memcpy is the aliasing-safe way to reinterpret it.
  sa_family_t family;
  std::memcpy(&family, reinterpret_cast<const char*>(addr) + offsetof(sockaddr, sa_family),
              sizeof family);
  SocketAddr out;
  if (family == AF_INET && len >= static_cast<socklen_t>(sizeof(sockaddr_in))) {
    std::memcpy(&out.storage_.v4, addr, sizeof(sockaddr_in));
    // The padding carries nothing; zeroed so == does not depend on it.
    std::memset(out.storage_.v4.sin_zero, 0, sizeof out.storage_.v4.sin_zero);
    return out;
  }
  if (family == AF_INET6 && len >= static_cast<socklen_t>(sizeof(sockaddr_in6))) {
    std::memcpy(&out.storage_.v6, addr, sizeof(sockaddr_in6));
    return out;
  }
  return errc::invalid_argument;
}

std::string SocketAddr::to_string() const {
  std::string out;
  if (is_v6()) {
    out += '[';
    out += ip().to_string();
    if (scope_id() != 0) {
      out += '%';
      out += std::to_string(scope_id());
    }
    out += ']';
  } else {
    out += ip().to_string();
  }
  out += ':';
  out += std::to_string(port());
  return out;
}

bool operator==(const SocketAddr& a, const SocketAddr& b) noexcept {
  return (a <=> b) == 0;
}

std::strong_ordering operator<=>(const SocketAddr& a, const SocketAddr& b) noexcept {
  if (auto c = a.ip() <=> b.ip(); c != 0) return c;
  if (auto c = a.port() <=> b.port(); c != 0) return c;
  if (auto c = a.scope_id() <=> b.scope_id(); c != 0) return c;
  return a.flowinfo() <=> b.flowinfo();
}

std::ostream& operator<<(std::ostream& os, const SocketAddr& addr) {
  return os << addr.to_string();
}

// ---- UnixAddr ----

UnixAddr::UnixAddr() noexcept : len_(kPathOffset) {
  std::memset(&storage_, 0, sizeof storage_);
  storage_.sun_family = AF_UNIX;
}

Expected<UnixAddr> UnixAddr::from_path(std::string_view path) noexcept {
  if (path.empty()) return errc::invalid_argument;
  if (path.front() == '@' || path.front() == '\0') return from_abstract_name(path.substr(1));
  if (path.size() > kMaxPathLen || path.find('\0') != std::string_view::npos)
    return errc::invalid_argument;
  UnixAddr out;
  std::memcpy(out.storage_.sun_path, path.data(), path.size());
  // The terminating NUL (already there from the zeroing) is counted: the form
  // the kernel itself reports for a bound pathname socket.
  out.len_ = kPathOffset + static_cast<socklen_t>(path.size()) + 1;
  return out;
}

Expected<UnixAddr> UnixAddr::from_abstract_name(std::string_view name) noexcept {
  if (name.size() > kMaxPathLen) return errc::invalid_argument;
  UnixAddr out;
  // sun_path[0] stays NUL: that is what makes the name abstract. Every byte
  // up to len_ is part of the name (no terminator).
  std::memcpy(out.storage_.sun_path + 1, name.data(), name.size());
  out.len_ = kPathOffset + 1 + static_cast<socklen_t>(name.size());
  return out;
}

Expected<UnixAddr> UnixAddr::from_sockaddr(const sockaddr* addr, socklen_t len) noexcept {
  if (addr == nullptr || len < kPathOffset || len > static_cast<socklen_t>(sizeof(sockaddr_un)))
    return errc::invalid_argument;
  UnixAddr out;
  std::memcpy(&out.storage_, addr, len);
  if (out.storage_.sun_family != AF_UNIX) return errc::invalid_argument;
  if (len == kPathOffset || out.storage_.sun_path[0] != '\0') {
    // A pathname may come with or without its NUL (and a 108-byte one has
    // none); keep the path up to the first NUL and count one NUL after it if
    // sun_path has room, as from_path does, so that == sees one form.
    const std::size_t path_len = ::strnlen(out.storage_.sun_path, len - kPathOffset);
    if (path_len < sizeof out.storage_.sun_path) {
      std::memset(out.storage_.sun_path + path_len, 0, sizeof out.storage_.sun_path - path_len);
      out.len_ = kPathOffset + static_cast<socklen_t>(path_len) + (path_len == 0 ? 0 : 1);
    } else {
      out.len_ = len;
    }
    return out;
  }
  out.len_ = len;  // abstract: the length delimits the name
  return out;
}

std::string_view UnixAddr::path() const noexcept {
  if (!is_pathname()) return {};
  return {storage_.sun_path, ::strnlen(storage_.sun_path, len_ - kPathOffset)};
}

std::string_view UnixAddr::abstract_name() const noexcept {
  if (!is_abstract()) return {};
  return {storage_.sun_path + 1, static_cast<std::size_t>(len_ - kPathOffset - 1)};
}

std::string UnixAddr::to_string() const {
  if (is_unnamed()) return "(unnamed)";
  if (is_abstract()) {
    // Appended rather than "@" + std::string(...), which trips GCC 12's
    // -Wrestrict false positive (GCC bug 105329) at -O3.
    const std::string_view name = abstract_name();
    std::string out;
    out.reserve(name.size() + 1);
    out += '@';
    out.append(name);
    return out;
  }
  return std::string(path());
}

bool operator==(const UnixAddr& a, const UnixAddr& b) noexcept {
  return a.len_ == b.len_ &&
         std::memcmp(a.storage_.sun_path, b.storage_.sun_path, a.len_ - UnixAddr::kPathOffset) == 0;
}

std::ostream& operator<<(std::ostream& os, const UnixAddr& addr) {
  return os << addr.to_string();
}

}  // namespace volt::net

namespace {
// FNV-1a: enough to spread addresses over hash buckets.
std::size_t fnv1a(std::size_t h, const void* data, std::size_t n) noexcept {
  const auto* p = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 1099511628211ull;
  }
  return h;
}
constexpr std::size_t kFnvBasis = 14695981039346656037ull;
}  // namespace

std::size_t std::hash<volt::net::IpAddr>::operator()(const volt::net::IpAddr& ip) const noexcept {
  const auto octets = ip.is_v4() ? std::array<std::uint8_t, 16>{} : ip.v6_octets();
  const auto v4 = ip.v4_octets();
  std::size_t h = fnv1a(kFnvBasis, octets.data(), octets.size());
  h = fnv1a(h, v4.data(), v4.size());
  const unsigned char family = ip.is_v6() ? 6 : 4;
  return fnv1a(h, &family, 1);
}

std::size_t std::hash<volt::net::SocketAddr>::operator()(
    const volt::net::SocketAddr& addr) const noexcept {
  std::size_t h = std::hash<volt::net::IpAddr>()(addr.ip());
  const std::uint16_t port = addr.port();
  const std::uint32_t scope = addr.scope_id();
  const std::uint32_t flow = addr.flowinfo();
  h = fnv1a(h, &port, sizeof port);
  h = fnv1a(h, &scope, sizeof scope);
  return fnv1a(h, &flow, sizeof flow);
}
