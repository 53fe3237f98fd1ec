// Tests of IpAddr, SocketAddr and UnixAddr (include/volt/net/socket_addr.hpp):
// parse/format round trips for IPv4 and IPv6 (canonical text, scope ids),
// rejection of malformed text as errc::invalid_argument (never a throw),
// the OS form (field values, from_sockaddr of what the kernel reports for a
// bound socket, wrong families and short lengths), ordering, hashing, and
// Unix addresses: pathname, abstract, unnamed, too long, round trips through
// bind/getsockname.
#include "volt/net/socket_addr.hpp"

#include <arpa/inet.h>
#include <net/if.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "runtime/runtime_support.hpp"

namespace volt::test {
namespace {

using net::IpAddr;
using net::SocketAddr;
using net::UnixAddr;
using namespace std::string_view_literals;

// A socket closed at scope exit.
struct Fd {
  int fd;
  explicit Fd(int f) : fd(f) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

// ---- IpAddr ----

TEST(IpAddr, ConstantsAndPredicates) {
  EXPECT_TRUE(IpAddr::v4_loopback().is_v4());
  EXPECT_TRUE(IpAddr::v4_loopback().is_loopback());
  EXPECT_FALSE(IpAddr::v4_loopback().is_unspecified());
  EXPECT_TRUE(IpAddr::v6_loopback().is_v6());
  EXPECT_TRUE(IpAddr::v6_loopback().is_loopback());
  EXPECT_TRUE(IpAddr::v4_any().is_unspecified());
  EXPECT_FALSE(IpAddr::v4_any().is_loopback());
  EXPECT_TRUE(IpAddr::v6_any().is_unspecified());
  EXPECT_TRUE(IpAddr::v6_any().is_v6());
  EXPECT_TRUE(IpAddr::v4(127, 1, 2, 3).is_loopback()) << "all of 127/8 is loopback";
  EXPECT_FALSE(IpAddr::v4(10, 0, 0, 1).is_loopback());
  EXPECT_EQ(IpAddr(), IpAddr::v4_any());
  EXPECT_NE(IpAddr::v4_any(), IpAddr::v6_any()) << "same bytes, different family";
  EXPECT_EQ(IpAddr::v4_loopback().to_string(), "127.0.0.1");
  EXPECT_EQ(IpAddr::v6_loopback().to_string(), "::1");
  EXPECT_EQ(IpAddr::v4_any().to_string(), "0.0.0.0");
  EXPECT_EQ(IpAddr::v6_any().to_string(), "::");
  static_assert(IpAddr::v6_loopback().is_loopback(), "usable in constant expressions");
}

TEST(IpAddr, ParseAndFormatRoundTrip) {
  for (const char* text : {"0.0.0.0", "1.2.3.4", "255.255.255.255", "10.0.0.1", "::", "::1",
                           "2001:db8::1", "fe80::1:2:3:4", "::ffff:1.2.3.4", "1:2:3:4:5:6:7:8"}) {
    Expected<IpAddr> ip = IpAddr::parse(text);
    ASSERT_TRUE(ip) << text;
    EXPECT_EQ(ip->to_string(), text);
    EXPECT_EQ(IpAddr::parse(ip->to_string()).value(), *ip) << text;
  }
  EXPECT_EQ(IpAddr::parse("1.2.3.4").value(), IpAddr::v4(1, 2, 3, 4));
  EXPECT_EQ((IpAddr::parse("1.2.3.4").value().v4_octets()),
            (std::array<std::uint8_t, 4>{1, 2, 3, 4}));
  // Non-canonical IPv6 text comes back canonical (RFC 5952).
  EXPECT_EQ(IpAddr::parse("2001:DB8:0:0:0:0:0:1").value().to_string(), "2001:db8::1");
  EXPECT_EQ(IpAddr::parse("0:0:0:0:0:0:0:1").value(), IpAddr::v6_loopback());
}

TEST(IpAddr, MappedAddressesStayV6UntilCanonical) {
  IpAddr mapped = IpAddr::parse("::ffff:127.0.0.1").value();
  EXPECT_TRUE(mapped.is_v6());
  EXPECT_FALSE(mapped.is_loopback());
  EXPECT_EQ(mapped.to_canonical(), IpAddr::v4_loopback());
  EXPECT_TRUE(mapped.to_canonical().is_loopback());
  EXPECT_EQ(IpAddr::v6_loopback().to_canonical(), IpAddr::v6_loopback());
  EXPECT_EQ(IpAddr::parse("::1.2.3.4").value().to_canonical().is_v6(), true)
      << "the deprecated compatible form is not a mapped address";
  EXPECT_EQ(IpAddr::v4(9, 8, 7, 6).to_canonical(), IpAddr::v4(9, 8, 7, 6));
}

TEST(IpAddr, BadTextIsInvalidArgument) {
  for (std::string_view text :
       {""sv, "1.2.3"sv, "1.2.3.4.5"sv, "256.1.1.1"sv, "1.2.3.-4"sv, " 1.2.3.4"sv, "1.2.3.4 "sv,
        "01.2.3.4"sv, "1.2.3.4:80"sv, "[::1]"sv, "::1%1"sv, "gg::1"sv, "1:2:3:4:5:6:7:8:9"sv,
        ":::"sv, "localhost"sv, "1.2.3.4\0junk"sv, "::1\0"sv}) {
    Expected<IpAddr> ip = IpAddr::parse(text);
    EXPECT_FALSE(ip) << "accepted '" << text << "'";
    EXPECT_EQ(ip.error(), code(errc::invalid_argument));
  }
  EXPECT_FALSE(IpAddr::parse(std::string(10'000, '1')));
}

TEST(IpAddr, OrderingHashAndStream) {
  std::set<IpAddr> ordered = {IpAddr::v6_loopback(), IpAddr::v4(10, 0, 0, 2),
                              IpAddr::v4(10, 0, 0, 1), IpAddr::v6_any()};
  std::vector<IpAddr> seen(ordered.begin(), ordered.end());
  EXPECT_EQ(seen, (std::vector<IpAddr>{IpAddr::v4(10, 0, 0, 1), IpAddr::v4(10, 0, 0, 2),
                                       IpAddr::v6_any(), IpAddr::v6_loopback()}));
  std::unordered_set<IpAddr> hashed = {IpAddr::v4_any(), IpAddr::v6_any(), IpAddr::v4_any()};
  EXPECT_EQ(hashed.size(), 2u);
  std::ostringstream os;
  os << IpAddr::v6_loopback() << ' ' << IpAddr::v4(1, 2, 3, 4);
  EXPECT_EQ(os.str(), "::1 1.2.3.4");
}

// ---- SocketAddr ----

TEST(SocketAddr, ParseAndFormatRoundTrip) {
  for (const char* text :
       {"1.2.3.4:80", "0.0.0.0:0", "255.255.255.255:65535", "127.0.0.1:8080", "[::1]:80", "[::]:0",
        "[2001:db8::1]:443", "[::ffff:1.2.3.4]:8", "[fe80::1%2]:9"}) {
    Expected<SocketAddr> addr = SocketAddr::parse(text);
    ASSERT_TRUE(addr) << text;
    EXPECT_EQ(addr->to_string(), text);
    EXPECT_EQ(SocketAddr::parse(addr->to_string()).value(), *addr) << text;
  }
  SocketAddr a = SocketAddr::parse("10.1.2.3:8080").value();
  EXPECT_TRUE(a.is_v4());
  EXPECT_EQ(a.ip(), IpAddr::v4(10, 1, 2, 3));
  EXPECT_EQ(a.port(), 8080);
  SocketAddr b = SocketAddr::parse("[::1]:443").value();
  EXPECT_TRUE(b.is_v6());
  EXPECT_EQ(b.ip(), IpAddr::v6_loopback());
  EXPECT_EQ(b.port(), 443);
  EXPECT_EQ(b.scope_id(), 0u);
  EXPECT_EQ(SocketAddr::parse("1.2.3.4:080").value().port(), 80) << "leading zeros";
  EXPECT_EQ(SocketAddr::parse("[2001:DB8::0:1]:1").value().to_string(), "[2001:db8::1]:1");
}

TEST(SocketAddr, ConstructAndModify) {
  SocketAddr a(IpAddr::v6_loopback(), 80);
  EXPECT_EQ(a.to_string(), "[::1]:80");
  a.set_port(65535);
  EXPECT_EQ(a.port(), 65535);
  a.set_scope_id(7);
  a.set_flowinfo(0x12345);
  EXPECT_EQ(a.scope_id(), 7u);
  EXPECT_EQ(a.flowinfo(), 0x12345u);
  EXPECT_EQ(a.to_string(), "[::1%7]:65535");
  a.set_ip(IpAddr::v4(8, 8, 4, 4));
  EXPECT_TRUE(a.is_v4());
  EXPECT_EQ(a.to_string(), "8.8.4.4:65535") << "the port survives a change of family";
  EXPECT_EQ(a.scope_id(), 0u);
  a.set_scope_id(3);  // ignored on IPv4
  EXPECT_EQ(a.scope_id(), 0u);
  EXPECT_EQ(a, SocketAddr(IpAddr::v4(8, 8, 4, 4), 65535));
  a.set_ip(IpAddr::v6_any());
  EXPECT_EQ(a.to_string(), "[::]:65535");
  EXPECT_EQ(a.scope_id(), 0u) << "a change of family starts from a clean sockaddr_in6";
  EXPECT_EQ(SocketAddr().to_string(), "0.0.0.0:0");
}

TEST(SocketAddr, BadTextIsInvalidArgument) {
  for (std::string_view text : {""sv,
                                "1.2.3.4"sv,
                                "1.2.3.4:"sv,
                                "1.2.3.4:70000"sv,
                                "1.2.3.4:65536"sv,
                                "1.2.3.4:-1"sv,
                                "1.2.3.4:+80"sv,
                                "1.2.3.4: 80"sv,
                                "1.2.3.4:80 "sv,
                                "1.2.3.4:0x50"sv,
                                "1.2.3.4:99999999999999999999999"sv,
                                "1.2.3:80"sv,
                                "256.0.0.1:80"sv,
                                ":80"sv,
                                "[::1"sv,
                                "[::1]"sv,
                                "[::1]:"sv,
                                "[::1]80"sv,
                                "[::1]:80]"sv,
                                "::1:80"sv,
                                "::1"sv,
                                "[1.2.3.4]:80"sv,
                                "[]:80"sv,
                                "[::1%]:80"sv,
                                "[::1%no-such-if0]:80"sv,
                                "[::1%4294967296]:80"sv,
                                "localhost:80"sv,
                                "garbage"sv,
                                "1.2.3.4:80\0"sv,
                                "[::1]:80:80"sv}) {
    Expected<SocketAddr> addr = SocketAddr::parse(text);
    EXPECT_FALSE(addr) << "accepted '" << text << "'";
    EXPECT_EQ(addr.error(), code(errc::invalid_argument)) << text;
  }
}

TEST(SocketAddr, ScopeByInterfaceName) {
  const unsigned lo = ::if_nametoindex("lo");
  if (lo == 0) GTEST_SKIP() << "no loopback interface named lo";
  SocketAddr a = SocketAddr::parse("[fe80::1%lo]:80").value();
  EXPECT_EQ(a.scope_id(), lo);
  EXPECT_EQ(a.to_string(), "[fe80::1%" + std::to_string(lo) + "]:80")
      << "formatted with the numeric index, which parses back";
  EXPECT_EQ(SocketAddr::parse(a.to_string()).value(), a);
}

TEST(SocketAddr, OsFormFields) {
  SocketAddr a = SocketAddr::parse("192.168.1.20:8080").value();
  ASSERT_EQ(a.sockaddr_len(), sizeof(sockaddr_in));
  ASSERT_EQ(a.as_sockaddr()->sa_family, AF_INET);
  sockaddr_in in;
  std::memcpy(&in, a.as_sockaddr(), sizeof in);
  EXPECT_EQ(in.sin_port, htons(8080));
  EXPECT_EQ(in.sin_addr.s_addr, ::inet_addr("192.168.1.20"));

  SocketAddr b = SocketAddr::parse("[2001:db8::7%5]:443").value();
  ASSERT_EQ(b.sockaddr_len(), sizeof(sockaddr_in6));
  ASSERT_EQ(b.as_sockaddr()->sa_family, AF_INET6);
  sockaddr_in6 in6;
  std::memcpy(&in6, b.as_sockaddr(), sizeof in6);
  EXPECT_EQ(in6.sin6_port, htons(443));
  EXPECT_EQ(in6.sin6_scope_id, 5u);
  in6_addr expected;
  ASSERT_EQ(::inet_pton(AF_INET6, "2001:db8::7", &expected), 1);
  EXPECT_EQ(std::memcmp(&in6.sin6_addr, &expected, sizeof expected), 0);
}

TEST(SocketAddr, SockaddrRoundTrip) {
  for (const char* text : {"1.2.3.4:80", "[::1]:80", "[fe80::abcd%3]:65535", "0.0.0.0:0"}) {
    SocketAddr a = SocketAddr::parse(text).value();
    a.set_flowinfo(99);
    Expected<SocketAddr> back = SocketAddr::from_sockaddr(a.as_sockaddr(), a.sockaddr_len());
    ASSERT_TRUE(back) << text;
    EXPECT_EQ(*back, a) << text;
    EXPECT_EQ(back->flowinfo(), a.flowinfo());
    // From a sockaddr_storage, as accept() fills it in, with garbage after
    // the address and in sin_zero.
    sockaddr_storage ss;
    std::memset(&ss, 0xab, sizeof ss);
    std::memcpy(&ss, a.as_sockaddr(), a.sockaddr_len());
    if (a.is_v4()) std::memset(reinterpret_cast<sockaddr_in*>(&ss)->sin_zero, 0x5a, 8);
    back = SocketAddr::from_sockaddr(reinterpret_cast<sockaddr*>(&ss), sizeof ss);
    ASSERT_TRUE(back) << text;
    EXPECT_EQ(*back, a) << text;
  }
}

TEST(SocketAddr, FromSockaddrRejectsOtherFamiliesAndShortLengths) {
  sockaddr_un un{};
  un.sun_family = AF_UNIX;
  EXPECT_EQ(SocketAddr::from_sockaddr(reinterpret_cast<sockaddr*>(&un), sizeof un).error(),
            code(errc::invalid_argument));
  sockaddr_storage ss{};
  ss.ss_family = AF_UNSPEC;
  EXPECT_EQ(SocketAddr::from_sockaddr(reinterpret_cast<sockaddr*>(&ss), sizeof ss).error(),
            code(errc::invalid_argument));
  SocketAddr v4 = SocketAddr::parse("1.2.3.4:5").value();
  SocketAddr v6 = SocketAddr::parse("[::1]:5").value();
  EXPECT_FALSE(SocketAddr::from_sockaddr(v4.as_sockaddr(), v4.sockaddr_len() - 1));
  EXPECT_FALSE(SocketAddr::from_sockaddr(v6.as_sockaddr(), sizeof(sockaddr_in)));
  EXPECT_FALSE(SocketAddr::from_sockaddr(v4.as_sockaddr(), 1));
  EXPECT_FALSE(SocketAddr::from_sockaddr(v4.as_sockaddr(), 0));
  EXPECT_EQ(SocketAddr::from_sockaddr(nullptr, sizeof(sockaddr_in)).error(),
            code(errc::invalid_argument));
}

// The kernel takes as_sockaddr() as is, and what it reports back converts.
TEST(SocketAddr, BindAndGetsocknameThroughTheOsForm) {
  for (IpAddr ip : {IpAddr::v4_loopback(), IpAddr::v6_loopback()}) {
    Fd s(::socket(ip.is_v4() ? AF_INET : AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (s.fd < 0 && ip.is_v6()) continue;  // no IPv6 in this environment
    ASSERT_GE(s.fd, 0);
    SocketAddr want(ip, 0);
    if (::bind(s.fd, want.as_sockaddr(), want.sockaddr_len()) != 0) {
      ASSERT_TRUE(ip.is_v6()) << "bind to 127.0.0.1:0 failed: " << std::strerror(errno);
      continue;  // ::1 not configured
    }
    sockaddr_storage ss;
    socklen_t len = sizeof ss;
    ASSERT_EQ(::getsockname(s.fd, reinterpret_cast<sockaddr*>(&ss), &len), 0);
    Expected<SocketAddr> got = SocketAddr::from_sockaddr(reinterpret_cast<sockaddr*>(&ss), len);
    ASSERT_TRUE(got);
    EXPECT_EQ(got->ip(), ip);
    EXPECT_NE(got->port(), 0) << "the kernel chose a port";
    want.set_port(got->port());
    EXPECT_EQ(*got, want);
  }
}

TEST(SocketAddr, OrderingHashAndStream) {
  SocketAddr a = SocketAddr::parse("1.2.3.4:80").value();
  SocketAddr b = SocketAddr::parse("1.2.3.4:81").value();
  SocketAddr c = SocketAddr::parse("[::1]:1").value();
  SocketAddr c_scoped = SocketAddr::parse("[::1%1]:1").value();
  EXPECT_LT(a, b);
  EXPECT_LT(b, c) << "IPv4 before IPv6";
  EXPECT_NE(c, c_scoped) << "the scope id is part of the address";
  EXPECT_LT(c, c_scoped);
  std::unordered_set<SocketAddr> hashed = {a, b, c, c_scoped,
                                           SocketAddr::parse("1.2.3.4:80").value()};
  EXPECT_EQ(hashed.size(), 4u);
  std::ostringstream os;
  os << a << ' ' << c;
  EXPECT_EQ(os.str(), "1.2.3.4:80 [::1]:1");
}

// ---- UnixAddr ----

TEST(UnixAddr, Pathname) {
  UnixAddr a = UnixAddr::from_path("/run/app.sock").value();
  EXPECT_TRUE(a.is_pathname());
  EXPECT_FALSE(a.is_abstract());
  EXPECT_FALSE(a.is_unnamed());
  EXPECT_EQ(a.path(), "/run/app.sock");
  EXPECT_EQ(a.abstract_name(), "");
  EXPECT_EQ(a.to_string(), "/run/app.sock");
  EXPECT_EQ(a.as_sockaddr()->sa_family, AF_UNIX);
  EXPECT_EQ(a.sockaddr_len(), offsetof(sockaddr_un, sun_path) + std::strlen("/run/app.sock") + 1);
  const auto* un = reinterpret_cast<const sockaddr_un*>(a.as_sockaddr());
  EXPECT_STREQ(un->sun_path, "/run/app.sock");
  EXPECT_EQ(UnixAddr::from_path("relative.sock").value().path(), "relative.sock");
}

TEST(UnixAddr, AbstractNames) {
  UnixAddr a = UnixAddr::from_path("@volt-test").value();
  EXPECT_TRUE(a.is_abstract());
  EXPECT_FALSE(a.is_pathname());
  EXPECT_EQ(a.abstract_name(), "volt-test");
  EXPECT_EQ(a.path(), "");
  EXPECT_EQ(a.to_string(), "@volt-test");
  EXPECT_EQ(a.sockaddr_len(), offsetof(sockaddr_un, sun_path) + 1 + 9) << "no terminator";
  EXPECT_EQ(reinterpret_cast<const sockaddr_un*>(a.as_sockaddr())->sun_path[0], '\0');
  EXPECT_EQ(UnixAddr::from_path("\0volt-test"sv).value(), a);
  EXPECT_EQ(UnixAddr::from_abstract_name("volt-test").value(), a);
  // Abstract names may hold any byte, NUL included.
  UnixAddr odd = UnixAddr::from_abstract_name("a\0b"sv).value();
  EXPECT_EQ(odd.abstract_name(), "a\0b"sv);
  EXPECT_NE(odd, UnixAddr::from_abstract_name("a").value());
}

TEST(UnixAddr, Unnamed) {
  UnixAddr u;
  EXPECT_TRUE(u.is_unnamed());
  EXPECT_FALSE(u.is_pathname());
  EXPECT_FALSE(u.is_abstract());
  EXPECT_EQ(u.sockaddr_len(), sizeof(sa_family_t));
  EXPECT_EQ(u.to_string(), "(unnamed)");
  EXPECT_EQ(u.path(), "");
  EXPECT_EQ(u, UnixAddr());
}

TEST(UnixAddr, LimitsAndBadPaths) {
  const std::size_t max = UnixAddr::kMaxPathLen;
  EXPECT_EQ(max, sizeof(sockaddr_un::sun_path) - 1);
  EXPECT_TRUE(UnixAddr::from_path(std::string(max, 'p')));
  EXPECT_EQ(UnixAddr::from_path(std::string(max + 1, 'p')).error(), code(errc::invalid_argument))
      << "a path longer than sun_path (with its NUL)";
  EXPECT_EQ(UnixAddr::from_path(std::string(4096, 'p')).error(), code(errc::invalid_argument));
  // Built by assignment: "@" + std::string(n, c) trips GCC 12's -Wrestrict
  // false positive (GCC bug 105329) at -O3.
  std::string abstract(max + 1, 'n');
  abstract[0] = '@';
  EXPECT_TRUE(UnixAddr::from_path(abstract)) << "'@' and a name of the longest length";
  abstract += 'n';
  EXPECT_EQ(UnixAddr::from_path(abstract).error(), code(errc::invalid_argument));
  EXPECT_EQ(UnixAddr::from_abstract_name(std::string(max + 1, 'n')).error(),
            code(errc::invalid_argument));
  EXPECT_EQ(UnixAddr::from_path("").error(), code(errc::invalid_argument));
  EXPECT_EQ(UnixAddr::from_path("/tmp/a\0b"sv).error(), code(errc::invalid_argument));
  EXPECT_EQ(UnixAddr::from_path(std::string(max, 'p')).value().path().size(), max);
}

TEST(UnixAddr, FromSockaddr) {
  for (const char* p : {"/tmp/x.sock", "@abstract"}) {
    UnixAddr a = UnixAddr::from_path(p).value();
    Expected<UnixAddr> back = UnixAddr::from_sockaddr(a.as_sockaddr(), a.sockaddr_len());
    ASSERT_TRUE(back) << p;
    EXPECT_EQ(*back, a) << p;
  }
  // A pathname reported without its NUL, or with bytes after it, is the same
  // address.
  UnixAddr a = UnixAddr::from_path("/tmp/x.sock").value();
  sockaddr_un un;
  std::memset(&un, 'z', sizeof un);
  std::memcpy(&un, a.as_sockaddr(), a.sockaddr_len());
  EXPECT_EQ(UnixAddr::from_sockaddr(reinterpret_cast<sockaddr*>(&un), a.sockaddr_len() - 1).value(),
            a);
  EXPECT_EQ(UnixAddr::from_sockaddr(reinterpret_cast<sockaddr*>(&un), sizeof un).value(), a);
  // sun_path filled to the last byte, no NUL (the kernel allows it).
  std::memset(un.sun_path, 'q', sizeof un.sun_path);
  Expected<UnixAddr> full = UnixAddr::from_sockaddr(reinterpret_cast<sockaddr*>(&un), sizeof un);
  ASSERT_TRUE(full);
  EXPECT_EQ(full->path(), std::string(sizeof un.sun_path, 'q'));
  // Unnamed: the family alone.
  EXPECT_TRUE(UnixAddr::from_sockaddr(a.as_sockaddr(), sizeof(sa_family_t)).value().is_unnamed());
  // Wrong family, short and long lengths, null.
  SocketAddr in = SocketAddr::parse("1.2.3.4:5").value();
  EXPECT_EQ(UnixAddr::from_sockaddr(in.as_sockaddr(), in.sockaddr_len()).error(),
            code(errc::invalid_argument));
  EXPECT_FALSE(UnixAddr::from_sockaddr(a.as_sockaddr(), 1));
  sockaddr_storage big{};
  big.ss_family = AF_UNIX;
  EXPECT_FALSE(UnixAddr::from_sockaddr(reinterpret_cast<sockaddr*>(&big), sizeof big));
  EXPECT_FALSE(UnixAddr::from_sockaddr(nullptr, sizeof(sockaddr_un)));
}

// bind() accepts as_sockaddr() as is, and getsockname reports the same
// address back, for a pathname, an abstract name and an unbound socket.
TEST(UnixAddr, BindAndGetsocknameThroughTheOsForm) {
  char dir_template[] = "/tmp/volt-unix-XXXXXX";
  ASSERT_NE(::mkdtemp(dir_template), nullptr);
  const std::string path = std::string(dir_template) + "/s.sock";
  const std::string abstract = "@volt-addr-test-" + std::to_string(::getpid());
  for (const std::string& name : {path, abstract}) {
    Fd s(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    ASSERT_GE(s.fd, 0);
    UnixAddr want = UnixAddr::from_path(name).value();
    ASSERT_EQ(::bind(s.fd, want.as_sockaddr(), want.sockaddr_len()), 0)
        << name << ": " << std::strerror(errno);
    sockaddr_storage ss;
    socklen_t len = sizeof ss;
    ASSERT_EQ(::getsockname(s.fd, reinterpret_cast<sockaddr*>(&ss), &len), 0);
    Expected<UnixAddr> got = UnixAddr::from_sockaddr(reinterpret_cast<sockaddr*>(&ss), len);
    ASSERT_TRUE(got) << name;
    EXPECT_EQ(*got, want) << name;
    EXPECT_EQ(got->to_string(), name);
  }
  ::unlink(path.c_str());
  ::rmdir(dir_template);
  Fd unbound(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_storage ss;
  socklen_t len = sizeof ss;
  ASSERT_EQ(::getsockname(unbound.fd, reinterpret_cast<sockaddr*>(&ss), &len), 0);
  EXPECT_TRUE(UnixAddr::from_sockaddr(reinterpret_cast<sockaddr*>(&ss), len).value().is_unnamed());
}

}  // namespace
}  // namespace volt::test
