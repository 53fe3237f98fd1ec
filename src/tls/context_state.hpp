// src/tls/context_state.hpp: what a tls::Context shares with every Session
// made from it (each Session holds a reference, so a Context may be
// destroyed while its connections live on).
#pragma once

#include <openssl/ssl.h>

#include <mutex>
#include <string>
#include <unordered_map>

#include "volt/tls/context.hpp"

namespace volt::tls::detail {

struct ContextState {
  ContextState() = default;
  ContextState(const ContextState&) = delete;
  ContextState& operator=(const ContextState&) = delete;
  ~ContextState();

  SSL_CTX* ctx = nullptr;
  bool server = false;
  bool verify_peer = false;
  bool resumption = true;
  // Server: our ALPN list in wire format (length-prefixed), for the select
  // callback. Client: given to OpenSSL at build().
  std::string alpn_wire;

  // Client resumption: the newest session per server name. OpenSSL's
  // new-session callback stores here (with the Session's lock held: lock
  // order Session::mutex_ -> cache_mutex, never the reverse).
  std::mutex cache_mutex;
  std::unordered_map<std::string, SSL_SESSION*> cache;
};

// The packed OpenSSL error as an error_code of tls::category() (or the
// system error it wraps).
std::error_code openssl_error(unsigned long e) noexcept;

// The client's new-session callback (session.cpp): keeps the session under
// its connection's server name.
int remember_session(SSL* ssl, SSL_SESSION* session);

}  // namespace volt::tls::detail
