// tls::Context: building an SSL_CTX from the Builder's settings, and the two
// error categories.
#include "volt/tls/context.hpp"

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <climits>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>

#include "tls/context_state.hpp"
#include "volt/error.hpp"

namespace volt::tls {
namespace {

class TlsCategory final : public std::error_category {
 public:
  const char* name() const noexcept override { return "tls"; }
  std::string message(int ev) const override {
    const auto e = static_cast<unsigned long>(ev);
    const char* lib = ERR_lib_error_string(e);
    const char* reason = ERR_reason_error_string(e);
    std::string m = lib != nullptr ? lib : "OpenSSL";
    m += ": ";
    if (reason != nullptr) {
      m += reason;
    } else {
      m += "error ";
      m += std::to_string(ev);
    }
    return m;
  }
};

class VerifyCategory final : public std::error_category {
 public:
  const char* name() const noexcept override { return "tls verify"; }
  std::string message(int ev) const override {
    std::string m = "certificate verify failed: ";
    m += X509_verify_cert_error_string(ev);
    return m;
  }
};

// OpenSSL's first error on this thread's queue, or `fallback` if it is empty.
std::error_code queued_error(std::error_code fallback) {
  const unsigned long e = ERR_get_error();
  ERR_clear_error();
  return e == 0 ? fallback : detail::openssl_error(e);
}

int version_number(Version v) {
  return v == Version::tls1_3 ? TLS1_3_VERSION : TLS1_2_VERSION;
}

// Server ALPN: the first of our protocols the client offers; none is a fatal
// no_application_protocol alert (RFC 7301 3.2).
int select_alpn(SSL*, const unsigned char** out, unsigned char* outlen, const unsigned char* in,
                unsigned int inlen, void* arg) {
  const auto* state = static_cast<const detail::ContextState*>(arg);
  unsigned char* chosen = nullptr;
  const auto* ours = reinterpret_cast<const unsigned char*>(state->alpn_wire.data());
  if (SSL_select_next_proto(&chosen, outlen, ours, static_cast<unsigned>(state->alpn_wire.size()),
                            in, inlen) != OPENSSL_NPN_NEGOTIATED)
    return SSL_TLSEXT_ERR_ALERT_FATAL;
  *out = chosen;
  return SSL_TLSEXT_ERR_OK;
}

// PEM certificates from memory: the first is the leaf, the rest its chain
// (server), or every one a trust anchor (add_to_store).
Expected<void> use_chain_pem(SSL_CTX* ctx, const std::string& pem) {
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  if (bio == nullptr) return queued_error(make_error_code(std::errc::not_enough_memory));
  X509* leaf = PEM_read_bio_X509_AUX(bio, nullptr, nullptr, nullptr);
  if (leaf == nullptr || SSL_CTX_use_certificate(ctx, leaf) != 1) {
    X509_free(leaf);
    BIO_free(bio);
    return queued_error(make_error_code(errc::invalid_argument));
  }
  X509_free(leaf);
  SSL_CTX_clear_chain_certs(ctx);
  while (X509* extra = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr)) {
    if (SSL_CTX_add0_chain_cert(ctx, extra) != 1) {
      X509_free(extra);
      BIO_free(bio);
      return queued_error(make_error_code(errc::invalid_argument));
    }
  }
  ERR_clear_error();  // the loop ends on "no start line"
  BIO_free(bio);
  return {};
}

Expected<void> add_to_store(SSL_CTX* ctx, const std::string& pem) {
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  if (bio == nullptr) return queued_error(make_error_code(std::errc::not_enough_memory));
  X509_STORE* store = SSL_CTX_get_cert_store(ctx);
  int added = 0;
  while (X509* cert = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr)) {
    if (X509_STORE_add_cert(store, cert) == 1) ++added;
    if (SSL_CTX_get_verify_mode(ctx) & SSL_VERIFY_FAIL_IF_NO_PEER_CERT) {
      // A server asking for client certificates names the CAs it accepts.
      SSL_CTX_add_client_CA(ctx, cert);
    }
    X509_free(cert);
  }
  ERR_clear_error();
  BIO_free(bio);
  if (added == 0) return make_error_code(errc::invalid_argument);
  return {};
}

Expected<void> use_key_pem(SSL_CTX* ctx, const std::string& pem) {
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  if (bio == nullptr) return queued_error(make_error_code(std::errc::not_enough_memory));
  EVP_PKEY* key = PEM_read_bio_PrivateKey(bio, nullptr, nullptr, nullptr);
  BIO_free(bio);
  if (key == nullptr || SSL_CTX_use_PrivateKey(ctx, key) != 1) {
    EVP_PKEY_free(key);
    return queued_error(make_error_code(errc::invalid_argument));
  }
  EVP_PKEY_free(key);
  return {};
}

std::string wire_format(const std::vector<std::string>& protocols) {
  std::string wire;
  for (const std::string& p : protocols) {
    wire += static_cast<char>(p.size());
    wire += p;
  }
  return wire;
}

}  // namespace

const std::error_category& category() noexcept {
  static const TlsCategory c;
  return c;
}

const std::error_category& verify_category() noexcept {
  static const VerifyCategory c;
  return c;
}

namespace detail {

std::error_code openssl_error(unsigned long e) noexcept {
  if (ERR_SYSTEM_ERROR(e)) return {static_cast<int>(ERR_GET_REASON(e)), std::system_category()};
  // ERR_PACK keeps the library in bits 23..30 and the reason below: a
  // positive int (the top bit is ERR_SYSTEM_FLAG, handled above).
  return {static_cast<int>(e & static_cast<unsigned long>(INT_MAX)), category()};
}

ContextState::~ContextState() {
  for (auto& entry : cache)
    SSL_SESSION_free(entry.second);
  SSL_CTX_free(ctx);
}

}  // namespace detail

Context::Builder Context::server() {
  return Builder(true);
}

Context::Builder Context::client() {
  return Builder(false);
}

bool Context::is_server() const noexcept {
  return state_ != nullptr && state_->server;
}

::ssl_ctx_st* Context::native_handle() const noexcept {
  return state_ != nullptr ? state_->ctx : nullptr;
}

Context::Builder& Context::Builder::certificate_chain_file(std::string path) {
  chain_file_ = std::move(path);
  chain_pem_.clear();
  return *this;
}
Context::Builder& Context::Builder::certificate_chain_pem(std::string pem) {
  chain_pem_ = std::move(pem);
  chain_file_.clear();
  return *this;
}
Context::Builder& Context::Builder::private_key_file(std::string path) {
  key_file_ = std::move(path);
  key_pem_.clear();
  return *this;
}
Context::Builder& Context::Builder::private_key_pem(std::string pem) {
  key_pem_ = std::move(pem);
  key_file_.clear();
  return *this;
}
Context::Builder& Context::Builder::ca_file(std::string path) {
  ca_file_ = std::move(path);
  return *this;
}
Context::Builder& Context::Builder::ca_pem(std::string pem) {
  ca_pem_ = std::move(pem);
  return *this;
}
Context::Builder& Context::Builder::verify_peer(bool on) {
  verify_peer_set_ = true;
  verify_peer_ = on;
  return *this;
}
Context::Builder& Context::Builder::min_version(Version v) {
  min_ = v;
  return *this;
}
Context::Builder& Context::Builder::max_version(Version v) {
  max_ = v;
  return *this;
}
Context::Builder& Context::Builder::alpn(std::vector<std::string> protocols) {
  alpn_ = std::move(protocols);
  return *this;
}
Context::Builder& Context::Builder::session_resumption(bool on) {
  resumption_ = on;
  return *this;
}

Expected<Context> Context::Builder::build() const {
  ERR_clear_error();
  if (min_ > max_) return make_error_code(errc::invalid_argument);
  for (const std::string& p : alpn_)
    if (p.empty() || p.size() > 255) return make_error_code(errc::invalid_argument);

  auto state = std::make_shared<detail::ContextState>();
  state->server = server_;
  state->resumption = resumption_;
  state->verify_peer = verify_peer_set_ ? verify_peer_ : !server_;
  state->ctx = SSL_CTX_new(server_ ? TLS_server_method() : TLS_client_method());
  SSL_CTX* ctx = state->ctx;
  if (ctx == nullptr) return queued_error(make_error_code(std::errc::not_enough_memory));

  if (SSL_CTX_set_min_proto_version(ctx, version_number(min_)) != 1 ||
      SSL_CTX_set_max_proto_version(ctx, version_number(max_)) != 1)
    return queued_error(make_error_code(errc::invalid_argument));
  // Renegotiation is a TLS 1.2 attack surface nobody needs; refusing it also
  // means a write never has to read (Stream's halves rely on that only for
  // speed, not for correctness).
  SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION);

  if (state->verify_peer) {
    SSL_CTX_set_verify(
        ctx, server_ ? SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT : SSL_VERIFY_PEER,
        nullptr);
  } else {
    SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, nullptr);
  }
  const bool own_trust = !ca_file_.empty() || !ca_pem_.empty();
  if (!ca_file_.empty()) {
    if (SSL_CTX_load_verify_locations(ctx, ca_file_.c_str(), nullptr) != 1)
      return queued_error(make_error_code(std::errc::no_such_file_or_directory));
    if (server_ && state->verify_peer) {
      if (STACK_OF(X509_NAME)* names = SSL_load_client_CA_file(ca_file_.c_str()))
        SSL_CTX_set_client_CA_list(ctx, names);
    }
  }
  if (!ca_pem_.empty()) {
    if (Expected<void> ok = add_to_store(ctx, ca_pem_); !ok) return ok.error();
  }
  if (!own_trust && state->verify_peer) {
    if (server_) return make_error_code(errc::invalid_argument);  // verify clients against what?
    SSL_CTX_set_default_verify_paths(ctx);
  }

  const bool have_chain = !chain_file_.empty() || !chain_pem_.empty();
  const bool have_key = !key_file_.empty() || !key_pem_.empty();
  if (have_chain != have_key) return make_error_code(errc::invalid_argument);
  if (server_ && !have_chain) return make_error_code(errc::invalid_argument);
  if (!chain_file_.empty() && SSL_CTX_use_certificate_chain_file(ctx, chain_file_.c_str()) != 1)
    return queued_error(make_error_code(std::errc::no_such_file_or_directory));
  if (!chain_pem_.empty()) {
    if (Expected<void> ok = use_chain_pem(ctx, chain_pem_); !ok) return ok.error();
  }
  if (!key_file_.empty() &&
      SSL_CTX_use_PrivateKey_file(ctx, key_file_.c_str(), SSL_FILETYPE_PEM) != 1)
    return queued_error(make_error_code(std::errc::no_such_file_or_directory));
  if (!key_pem_.empty()) {
    if (Expected<void> ok = use_key_pem(ctx, key_pem_); !ok) return ok.error();
  }
  if (have_chain && SSL_CTX_check_private_key(ctx) != 1)
    return queued_error(make_error_code(errc::invalid_argument));

  if (!alpn_.empty()) {
    state->alpn_wire = wire_format(alpn_);
    if (server_) {
      SSL_CTX_set_alpn_select_cb(ctx, select_alpn, state.get());
    } else if (SSL_CTX_set_alpn_protos(
                   ctx, reinterpret_cast<const unsigned char*>(state->alpn_wire.data()),
                   static_cast<unsigned>(state->alpn_wire.size())) != 0) {  // 0 is success here
      return queued_error(make_error_code(errc::invalid_argument));
    }
  }

  if (server_) {
    // OpenSSL refuses to resume a session of a verifying server without an
    // id context ("session id context uninitialized"): one per Context, so
    // a session never resumes under another Context's settings.
    unsigned char sid[SSL_MAX_SID_CTX_LENGTH];
    const auto id = reinterpret_cast<std::uintptr_t>(state.get());
    std::memcpy(sid, "volt", 4);
    std::memcpy(sid + 4, &id, sizeof id);
    if (SSL_CTX_set_session_id_context(ctx, sid, 4 + sizeof id) != 1)
      return queued_error(make_error_code(errc::invalid_argument));
  }
  if (!resumption_) {
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
    SSL_CTX_set_options(ctx, SSL_OP_NO_TICKET);
    SSL_CTX_set_num_tickets(ctx, 0);
  } else if (!server_) {
    // The client cache is ours (ContextState::cache, keyed by server name):
    // OpenSSL's internal one is for servers.
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
    SSL_CTX_sess_set_new_cb(ctx, detail::remember_session);
  }
  return Context(std::move(state));
}

}  // namespace volt::tls
