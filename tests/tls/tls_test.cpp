// tests/tls: volt::tls against itself (this file's first part) and against
// OpenSSL's command-line tools and curl as outside parties.
#include "volt/tls/stream.hpp"

#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/runtime_support.hpp"
#include "volt/io/util.hpp"
#include "volt/net/tcp.hpp"
#include "volt/task/join_handle.hpp"
#include "volt/tls/context.hpp"

namespace volt::test {
namespace {

using net::SocketAddr;
using net::TcpListener;
using net::TcpStream;
using TlsStream = tls::Stream<TcpStream>;

SocketAddr loopback() {
  return SocketAddr(net::IpAddr::v4_loopback(), 0);
}

// A scratch directory with a self-signed CA and a leaf for "localhost" and
// 127.0.0.1 it signed, made by the openssl command once per test binary.
struct Pki {
  std::filesystem::path dir;
  std::string ca, cert, key;
};

const Pki& pki() {
  static const Pki made = [] {
    Pki p;
    char tmpl[] = "/tmp/volt-tls-test-XXXXXX";
    p.dir = ::mkdtemp(tmpl);
    const std::string d = p.dir.string();
    p.ca = d + "/ca.pem";
    p.cert = d + "/cert.pem";
    p.key = d + "/key.pem";
    std::string script = "set -e; cd '";
    script += d;
    script +=
        "'; openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes "
        "-keyout ca.key -out ca.pem -days 30 -subj /CN=volt-test-ca 2>/dev/null; "
        "openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout key.pem "
        "-out leaf.csr -subj /CN=localhost 2>/dev/null; "
        "printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\\n' > ext.cnf; "
        "openssl x509 -req -in leaf.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 30 "
        "-extfile ext.cnf -out cert.pem 2>/dev/null";
    std::string cmd = "sh -c \"";
    cmd += script;
    cmd += "\"";
    if (std::system(cmd.c_str()) != 0) std::abort();
    return p;
  }();
  return made;
}

tls::Context server_context() {
  return tls::Context::server().certificate_chain_file(pki().cert).private_key_file(pki().key)
      .build()
      .value();
}

tls::Context client_context() {
  return tls::Context::client().ca_file(pki().ca).build().value();
}

class TlsFlavours : public ::testing::TestWithParam<Flavour> {};

Task<void> echo_server(TcpListener listener, tls::Context ctx) {
  Expected<std::pair<TcpStream, SocketAddr>> conn = co_await listener.accept();
  EXPECT_TRUE(conn);
  Expected<TlsStream> s = co_await tls::accept(ctx, std::move(conn->first));
  EXPECT_TRUE(s) << s.error().message();
  if (!s) co_return;
  char buf[4096];
  for (;;) {
    Expected<std::size_t> n = co_await s->read(buf);
    EXPECT_TRUE(n) << n.error().message();
    if (!n || *n == 0) break;
    EXPECT_TRUE(co_await s->write_all(io::ConstBuffer(buf, *n)));
  }
  EXPECT_TRUE(co_await s->shutdown());
}

TEST_P(TlsFlavours, EchoThenCloseNotify) {
  Runtime rt = make_runtime(GetParam());
  rt.block_on([]() -> Task<void> {
    TcpListener listener = TcpListener::bind(loopback()).value();
    const SocketAddr addr = *listener.local_addr();
    JoinHandle<void> server = spawn(echo_server(std::move(listener), server_context()));
    TcpStream tcp = (co_await TcpStream::connect(addr)).value();
    Expected<TlsStream> s = co_await tls::connect(client_context(), std::move(tcp), "localhost");
    EXPECT_TRUE(s) << s.error().message();
    if (!s) co_return;
    EXPECT_EQ(s->version(), tls::Version::tls1_3);
    std::optional<tls::CertificateInfo> peer = s->peer_certificate();
    EXPECT_TRUE(peer);
    if (peer) {
      EXPECT_EQ(peer->subject, "CN=localhost");
      EXPECT_EQ(peer->dns_names, std::vector<std::string>{"localhost"});
      EXPECT_EQ(peer->ip_addresses, std::vector<std::string>{"127.0.0.1"});
    }
    for (int i = 0; i < 100; ++i) {
      std::string msg = "message ";
      msg += std::to_string(i);
      EXPECT_TRUE(co_await s->write_all(msg));
      std::string back(msg.size(), '\0');
      EXPECT_TRUE(co_await io::read_exact(*s, back));
      EXPECT_EQ(back, msg);
    }
    EXPECT_TRUE(co_await s->shutdown());
    char buf[16];
    Expected<std::size_t> end = co_await s->read(buf);
    EXPECT_TRUE(end) << end.error().message();
    if (end) EXPECT_EQ(*end, 0u);
    co_await server;
  }());
}

TEST_P(TlsFlavours, WrongHostNameIsAVerifyError) {
  Runtime rt = make_runtime(GetParam());
  rt.block_on([]() -> Task<void> {
    TcpListener listener = TcpListener::bind(loopback()).value();
    const SocketAddr addr = *listener.local_addr();
    JoinHandle<void> server = spawn([](TcpListener l, tls::Context ctx) -> Task<void> {
      auto conn = co_await l.accept();
      Expected<TlsStream> s = co_await tls::accept(ctx, std::move(conn->first));
      EXPECT_FALSE(s);  // the client aborts with an alert
    }(std::move(listener), server_context()));
    TcpStream tcp = (co_await TcpStream::connect(addr)).value();
    Expected<TlsStream> s = co_await tls::connect(client_context(), std::move(tcp), "example.com");
    EXPECT_FALSE(s);
    if (!s) {
      EXPECT_EQ(&s.error().category(), &tls::verify_category());
      EXPECT_NE(s.error().message().find("certificate verify failed: "), std::string::npos)
          << s.error().message();
    }
    co_await server;
  }());
}

INSTANTIATE_TEST_SUITE_P(Flavours, TlsFlavours,
                         ::testing::Values(kCurrentThread, kMultiThread1, kMultiThread2),
                         FlavourName());

}  // namespace
}  // namespace volt::test
