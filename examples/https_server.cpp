// https_server: examples/http_server behind TLS (volt::tls over OpenSSL): the
// same minimal HTTP/1.1 keep-alive server, the same answers, the same
// graceful shutdown.
//
//   ./build/release/examples/https_server PORT|ADDRESS CERT.pem KEY.pem
//   ./build/release/examples/https_server 8443 cert.pem key.pem
//   curl --cacert ca.pem https://localhost:8443/        # Hello, World!
//   ./build/release/examples/https_get https://localhost:8443/ --cacert ca.pem
//
// PORT alone listens on 127.0.0.1:PORT; ADDRESS is "ip:port" as for
// http_server ("[::1]:8443", "0.0.0.0:8443"; port 0 picks a free port,
// printed on the first line of stdout: "listening on https://ADDRESS/").
// CERT.pem is the server's certificate chain (leaf first), KEY.pem its
// private key; a file that is missing or a key that does not match is
// reported at start (exit status 1). A self-signed pair for localhost:
//
//   openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes
//     -keyout key.pem -out cert.pem -days 30 -subj /CN=localhost
//     -addext subjectAltName=DNS:localhost,IP:127.0.0.1        (one line)
//
// (then clients trust cert.pem itself: https_get --cacert cert.pem).
//
// Each accepted connection does its TLS handshake (TLS 1.2 or 1.3, ALPN
// "http/1.1"; at most 10 s, a failed one is reported on stderr and closes
// that connection only), then is served by http_handler.hpp's
// serve_connection on the tls::Stream<TcpStream>, as http_server serves a
// TcpStream; a connection that ends cleanly sends close_notify.
//
// SIGTERM or SIGINT (Ctrl-C): as http_server: no new connections, idle ones
// closed (with close_notify), a request in flight answered, at most 5 s of
// drain, exit status 0.
#include <chrono>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "http_handler.hpp"
#include "volt/tls/context.hpp"
#include "volt/tls/stream.hpp"

namespace {

using namespace std::chrono_literals;
using TlsStream = volt::tls::Stream<volt::net::TcpStream>;

}  // namespace

// A TLS connection that ends cleanly says so (close_notify) before closing.
template <>
inline constexpr bool http_example::kShutdownWhenDone<TlsStream> = true;

namespace {

constexpr auto kHandshakeLimit = 10s;

// One connection: the handshake, then HTTP over TLS. The shutdown guard counts it
// (handshake included) in the server's live connections.
volt::Task<void> serve_tls(volt::tls::Context context, volt::net::TcpStream tcp,
                           http_example::ConnectionShutdown shutdown) {
  // On the transport, before the handshake: its flights go out at once too.
  if (!tcp.set_nodelay(true)) co_return;
  std::string peer = "a client";
  if (volt::Expected<volt::net::SocketAddr> addr = tcp.peer_addr()) peer = addr->to_string();
  volt::Expected<TlsStream> tls =
      (co_await volt::timeout(kHandshakeLimit, volt::tls::accept(context, std::move(tcp))))
          .flatten();
  if (!tls) {
    // A client that does not trust us, speaks plain HTTP, or went away.
    std::fprintf(stderr, "%s: TLS handshake failed: %s\n", peer.c_str(),
                 tls.error().message().c_str());
    co_return;
  }
  co_await http_example::serve_connection(std::move(*tls), std::move(shutdown.token),
                                          std::move(shutdown.guard));
}

// http_handler.hpp's connection handler for TLS.
struct TlsHttp {
  static constexpr std::string_view kScheme = "https";
  volt::tls::Context context;
  volt::Task<void> operator()(volt::net::TcpStream tcp,
                              http_example::ConnectionShutdown shutdown) const {
    return serve_tls(context, std::move(tcp), std::move(shutdown));
  }
};

bool all_digits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s)
    if (c < '0' || c > '9') return false;
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s PORT|ADDRESS CERT.pem KEY.pem\n", argv[0]);
    return 2;
  }
  std::string address = argv[1];
  if (all_digits(address)) {
    std::string full = "127.0.0.1:";
    full += address;
    address = std::move(full);
  }
  volt::Expected<volt::tls::Context> context = volt::tls::Context::server()
                                                   .certificate_chain_file(argv[2])
                                                   .private_key_file(argv[3])
                                                   .alpn({"http/1.1"})
                                                   .build();
  if (!context) {
    std::fprintf(stderr, "cannot use %s and %s: %s\n", argv[2], argv[3],
                 context.error().message().c_str());
    return 1;
  }
  volt::Runtime rt = volt::Runtime::Builder().thread_name("https").build();
  return rt.block_on(
      http_example::serve_until_signalled(address, 5s, TlsHttp{std::move(*context)}));
}
