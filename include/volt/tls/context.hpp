// volt/tls/context.hpp: the shared configuration of TLS connections (an
// OpenSSL SSL_CTX): certificates, trust, protocol bounds, ALPN, resumption.
//
//   // A server: its certificate chain and key (PEM files or PEM in memory).
//   volt::tls::Context server = volt::tls::Context::server()
//                                   .certificate_chain_file("cert.pem")
//                                   .private_key_file("key.pem")
//                                   .alpn({"h2", "http/1.1"})
//                                   .build()
//                                   .value();
//
//   // A client: the system's trust store unless CA files are given;
//   // verification and host name checking are on.
//   volt::tls::Context client = volt::tls::Context::client().build().value();
//   auto tls = (co_await volt::tls::connect(client, std::move(tcp), "example.com")).value();
//
// Guarantees:
//  - build() reports the first bad setting (a missing file, a key that does
//    not match the certificate, an unknown version bound) as an error whose
//    message() is OpenSSL's reason; nothing is half-configured.
//  - A Context is a cheap, copyable handle to immutable shared state; it may
//    be used by any number of connections on any threads at once, and each
//    connection keeps what it needs alive (a Context may be destroyed while
//    its connections live on).
//  - Clients verify the peer by default: the chain against the trust anchors
//    and the name given to connect() against the certificate (a DNS name, or
//    an IPv4/IPv6 literal matched against IP subject alternative names).
//    verify_peer(false) turns both off (tests only: it accepts anyone).
//  - Servers do not ask for client certificates unless verify_peer(true) is
//    set; then a client without a certificate trusted by ca_file() fails
//    the handshake.
//  - Renegotiation is refused (TLS 1.2); TLS 1.0 and 1.1 cannot be enabled.
//  - session_resumption(false): no session cache and no tickets (every
//    handshake is full). On (the default), a server issues tickets and a
//    client remembers one session per server name and offers it next time.
//    A connection dropped without shutdown() leaves its session resumable;
//    one that ended in a fatal error (an alert, a truncated stream) does not.
//  - native_handle() is the SSL_CTX* (an escape hatch for anything not
//    wrapped here); change it only before the first connection uses it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "volt/expected.hpp"

struct ssl_ctx_st;  // OpenSSL's SSL_CTX

namespace volt::tls {

enum class Version : std::uint8_t { tls1_2, tls1_3 };

// Error categories. A handshake, read or write that OpenSSL refuses gives a
// code of category() (message(): OpenSSL's library and reason, e.g. "SSL
// routines: wrong version number"); a peer certificate that fails
// verification gives a code of verify_category() whose value is OpenSSL's
// X509_V_ERR_* (message(): "certificate verify failed: certificate has
// expired"). A transport that ends without close_notify gives
// volt::errc::unexpected_eof; a system error its std::errc.
const std::error_category& category() noexcept;
const std::error_category& verify_category() noexcept;

namespace detail {
struct ContextState;
}

class Context {
 public:
  class Builder;

  static Builder server();
  static Builder client();

  bool is_server() const noexcept;
  ::ssl_ctx_st* native_handle() const noexcept;

 private:
  friend class Builder;
  explicit Context(std::shared_ptr<detail::ContextState> state) noexcept
      : state_(std::move(state)) {}

 public:
  // For the implementation (src/tls/).
  const std::shared_ptr<detail::ContextState>& state() const noexcept { return state_; }

 private:
  std::shared_ptr<detail::ContextState> state_;
};

class Context::Builder {
 public:
  // The certificate chain (leaf first) and its private key, as PEM.
  Builder& certificate_chain_file(std::string path);
  Builder& certificate_chain_pem(std::string pem);
  Builder& private_key_file(std::string path);
  Builder& private_key_pem(std::string pem);
  // Trust anchors (PEM, may hold several certificates). A client without
  // any uses the system's default store.
  Builder& ca_file(std::string path);
  Builder& ca_pem(std::string pem);
  // Client: verify the server (default true). Server: require and verify a
  // client certificate (default false).
  Builder& verify_peer(bool on);
  // Protocol bounds (default: TLS 1.2 to TLS 1.3).
  Builder& min_version(Version v);
  Builder& max_version(Version v);
  // ALPN protocols in preference order. A client offers them; a server
  // picks the first of its own list the client offered (a client offering
  // none of them fails the handshake, as RFC 7301 asks).
  Builder& alpn(std::vector<std::string> protocols);
  Builder& session_resumption(bool on);

  Expected<Context> build() const;

 private:
  friend class Context;
  explicit Builder(bool server) noexcept : server_(server) {}

  bool server_;
  bool verify_peer_set_ = false;
  bool verify_peer_ = false;
  bool resumption_ = true;
  Version min_ = Version::tls1_2;
  Version max_ = Version::tls1_3;
  std::string chain_file_, chain_pem_, key_file_, key_pem_, ca_file_, ca_pem_;
  std::vector<std::string> alpn_;
};

}  // namespace volt::tls
