// tls::detail::Session: one SSL object behind a BIO of our own that reads
// from and appends to two in-memory queues (session.hpp has the design).
#include "volt/tls/session.hpp"

#include <arpa/inet.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <algorithm>
#include <cstring>
#include <ctime>
#include <utility>

#include "tls/context_state.hpp"
#include "volt/error.hpp"

namespace volt::tls::detail {
namespace {

// Our BIO type: BIO data is the Session; reads drain the input queue,
// writes append to the output queue. Made once, never freed (OpenSSL keeps
// a pointer in every BIO).
BIO_METHOD* session_bio_method();

long bio_ctrl(BIO* bio, int cmd, long, void*);

int bio_create(BIO* bio) {
  BIO_set_init(bio, 1);
  return 1;
}

int bio_destroy(BIO*) {
  return 1;
}

std::chrono::system_clock::time_point to_time_point(const ASN1_TIME* t) {
  std::tm tm{};
  if (t == nullptr || ASN1_TIME_to_tm(t, &tm) != 1) return {};
  return std::chrono::system_clock::from_time_t(::timegm(&tm));
}

std::string name_string(const X509_NAME* name) {
  BIO* out = BIO_new(BIO_s_mem());
  if (out == nullptr) return {};
  X509_NAME_print_ex(out, name, 0, XN_FLAG_RFC2253);
  char* data = nullptr;
  const long len = BIO_get_mem_data(out, &data);
  std::string s(data, static_cast<std::size_t>(len > 0 ? len : 0));
  BIO_free(out);
  return s;
}

}  // namespace

// SSL_get_error() trusts this thread's error queue: whatever another OpenSSL
// user on this worker left there must go before our call. ERR_clear_error()
// wipes all 16 slots every time (about 1 % of https_plaintext's CPU); the
// queue is nearly always empty, which a peek tells for less.
namespace {
void clear_stale_errors() {
  if (ERR_peek_error() != 0) ERR_clear_error();
}
}  // namespace

// ---- construction ----

namespace {
// relaxed: a statistic; no other memory is published through it.
std::atomic<std::size_t> live_sessions{0};
}  // namespace

Session::Session(const Context& context) : context_(context.state()) {
  live_sessions.fetch_add(1, std::memory_order_relaxed);
}

Session::~Session() {
  // Dropped without a close_notify sent: SSL_free would take the connection
  // for a failed one and mark its session not resumable, and a client's
  // session is the object the Context's cache holds (the one a TLS 1.3 ticket
  // made, or the cached one a TLS 1.2 connection resumed), so every later
  // connection to that name would do a full handshake. A connection dropped
  // by its owner did not fail: count it as shut down, as nginx does. One that
  // met a fatal error keeps OpenSSL's verdict (its alert already removed the
  // session, as RFC 5246 asks).
  if (ssl_ != nullptr && established_ && !fatal_)
    SSL_set_shutdown(ssl_, SSL_get_shutdown(ssl_) | SSL_SENT_SHUTDOWN);
  SSL_free(ssl_);  // frees the BIO too
  live_sessions.fetch_sub(1, std::memory_order_relaxed);
}

std::size_t Session::live() noexcept {
  return live_sessions.load(std::memory_order_relaxed);
}

Expected<std::unique_ptr<Session>> Session::client(const Context& context,
                                                   std::string_view server_name) {
  if (context.state() == nullptr || context.is_server())
    return make_error_code(errc::invalid_argument);
  std::unique_ptr<Session> s(new Session(context));
  if (Expected<void> ok = s->init(false, server_name); !ok) return ok.error();
  return s;
}

Expected<std::unique_ptr<Session>> Session::server(const Context& context) {
  if (context.state() == nullptr || !context.is_server())
    return make_error_code(errc::invalid_argument);
  std::unique_ptr<Session> s(new Session(context));
  if (Expected<void> ok = s->init(true, {}); !ok) return ok.error();
  return s;
}

Expected<void> Session::init(bool server, std::string_view server_name) {
  ERR_clear_error();
  ssl_ = SSL_new(context_->ctx);
  if (ssl_ == nullptr) return make_error_code(std::errc::not_enough_memory);
  BIO* bio = BIO_new(session_bio_method());
  if (bio == nullptr) return make_error_code(std::errc::not_enough_memory);
  BIO_set_data(bio, this);
  SSL_set_bio(ssl_, bio, bio);  // one BIO both ways: SSL owns one reference
  SSL_set_app_data(ssl_, this);
  if (server) {
    SSL_set_accept_state(ssl_);
    return {};
  }
  SSL_set_connect_state(ssl_);
  server_name_.assign(server_name);
  if (server_name_.empty()) {
    // Whose certificate would we check? Refuse rather than accept anyone.
    if (context_->verify_peer) return make_error_code(errc::invalid_argument);
    return {};
  }
  unsigned char ip[16];
  const bool is_ip = ::inet_pton(AF_INET, server_name_.c_str(), ip) == 1 ||
                     ::inet_pton(AF_INET6, server_name_.c_str(), ip) == 1;
  if (!is_ip && SSL_set_tlsext_host_name(ssl_, server_name_.c_str()) != 1)
    return make_error_code(errc::invalid_argument);  // SNI carries DNS names only
  if (context_->verify_peer) {
    const int ok = is_ip ? X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl_), server_name_.c_str())
                         : SSL_set1_host(ssl_, server_name_.c_str());
    if (ok != 1) return make_error_code(errc::invalid_argument);
  }
  if (context_->resumption) {
    const std::lock_guard<std::mutex> lock(context_->cache_mutex);
    auto it = context_->cache.find(server_name_);
    if (it != context_->cache.end()) SSL_set_session(ssl_, it->second);
  }
  return {};
}

int remember_session(SSL* ssl, SSL_SESSION* session) {
  auto* self = static_cast<Session*>(SSL_get_app_data(ssl));
  return self != nullptr ? self->remember(session) : 0;
}

int Session::remember(SSL_SESSION* session) {
  if (server_name_.empty() || !context_->resumption) return 0;
  const std::lock_guard<std::mutex> lock(context_->cache_mutex);
  SSL_SESSION*& slot = context_->cache[server_name_];
  if (slot != nullptr) SSL_SESSION_free(slot);
  slot = session;
  return 1;  // the reference is ours now
}

// ---- OpenSSL calls ----

Step Session::finish(int rc, std::size_t n) {
  if (rc == 1) return {Step::kDone, n, {}};
  const int reason = SSL_get_error(ssl_, rc);
  if (in_error_ && (reason == SSL_ERROR_SYSCALL || reason == SSL_ERROR_SSL)) {
    fatal_ = in_error_;  // a direct read's transport error, as the transport said it
    ERR_clear_error();
    return {Step::kError, 0, fatal_};
  }
  switch (reason) {
    case SSL_ERROR_WANT_READ:
      // Our BIO says "retry" only while the transport has not ended.
      return {Step::kInput, 0, {}, in_epoch_};
    case SSL_ERROR_ZERO_RETURN:
      return {Step::kEnd, 0, {}};
    case SSL_ERROR_SYSCALL: {
      // Nothing on the error queue: the transport ended under OpenSSL.
      const unsigned long e = ERR_get_error();
      fatal_ = e == 0 ? make_error_code(errc::unexpected_eof) : openssl_error(e);
      break;
    }
    case SSL_ERROR_SSL: {
      const unsigned long e = ERR_peek_last_error();
      const long verify = SSL_get_verify_result(ssl_);
      if (ERR_GET_LIB(e) == ERR_LIB_SSL &&
          ERR_GET_REASON(e) == SSL_R_UNEXPECTED_EOF_WHILE_READING) {
        fatal_ = make_error_code(errc::unexpected_eof);
      } else if (ERR_GET_LIB(e) == ERR_LIB_SSL &&
                 ERR_GET_REASON(e) == SSL_R_CERTIFICATE_VERIFY_FAILED && verify != X509_V_OK) {
        fatal_ = {static_cast<int>(verify), verify_category()};
      } else {
        fatal_ = e == 0 ? make_error_code(std::errc::protocol_error) : openssl_error(e);
      }
      break;
    }
    default:  // WANT_WRITE cannot happen (our BIO takes every write), nor the rest
      fatal_ = make_error_code(std::errc::protocol_error);
      break;
  }
  ERR_clear_error();
  return {Step::kError, 0, fatal_};
}

Step Session::handshake() {
  const std::lock_guard<std::mutex> lock(mutex_);
  if (fatal_) return {Step::kError, 0, fatal_};
  ERR_clear_error();
  const Step step = finish(SSL_do_handshake(ssl_), 0);
  if (step.kind == Step::kDone) established_ = true;
  return step;
}

Step Session::read(io::MutableBuffer buf) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (fatal_) return {Step::kError, 0, fatal_};
  clear_stale_errors();
  // A shutdown() or a write may be waiting for the rest of a post-handshake
  // message (close_notify(), write() with count); if this read completes the
  // message, it must hear so: on a direct transport it waits for readiness,
  // which this read may have used up. Checked only while someone waits
  // (waiting_), so a plain read pays one load.
  const bool mid_message = waiting_ > 0 && SSL_in_init(ssl_) == 1;
  std::size_t n = 0;
  const int rc = SSL_read_ex(ssl_, buf.data(), buf.size(), &n);
  const Step step = finish(rc, n);
  // Completed, or never will be (an error, the peer's close_notify): either
  // way the waiter's next call has its answer.
  if (mid_message &&
      (SSL_in_init(ssl_) == 0 || step.kind == Step::kError || step.kind == Step::kEnd))
    notify_if_waited(lock);
  return step;
}

Step Session::write(io::ConstBuffer buf, bool count) {
  const std::lock_guard<std::mutex> lock(mutex_);
  if (fatal_) return {Step::kError, 0, fatal_};
  if (close_notify_queued_) return {Step::kError, 0, make_error_code(std::errc::broken_pipe)};
  // The peer's close_notify came in the middle of its post-handshake
  // message (a read took it): SSL_write would first ask for the rest of the
  // message, which will never come. The peer has closed: as after a clean
  // close, a write has nobody to go to.
  if (peer_closed_in_init()) return {Step::kEnd, 0, {}};
  clear_stale_errors();
  std::size_t n = 0;
  const int rc = SSL_write_ex(ssl_, buf.data(), std::min(buf.size(), kMaxWrite), &n);
  const Step step = finish(rc, n);
  // As close_notify(true): counted in this critical section, so a read that
  // completes the peer's message after this look notifies (read()).
  if (step.kind == Step::kInput && count) ++waiting_;
  return step;
}

Step Session::close_notify(bool count) {
  const std::lock_guard<std::mutex> lock(mutex_);
  if (fatal_) return {Step::kError, 0, fatal_};
  if (close_notify_queued_) return {Step::kDone, 0, {}};
  if (!established_) return {Step::kError, 0, make_error_code(std::errc::not_connected)};
  ERR_clear_error();
  if (peer_closed_in_init()) return peer_closed_mid_message();
  if (SSL_in_init(ssl_)) {
    // Established, yet "in init": a post-handshake message from the peer (a
    // TLS 1.3 NewSessionTicket or KeyUpdate spanning several records) has
    // arrived in part, and a read took its first record. OpenSSL refuses
    // SSL_shutdown until it has the rest (SSL_R_SHUTDOWN_WHILE_IN_INIT),
    // which would fail a healthy connection's shutdown. So finish reading
    // the message first: the peer has begun it, so the rest is on its way,
    // and no other record may come between its pieces (RFC 8446, 5.1), so
    // this reads no application data. kInput sends Stream<S>::shutdown() to
    // the transport for more, then here again; a KeyUpdate's answer, if
    // asked for, is queued ahead of our close_notify.
    const int rc = SSL_do_handshake(ssl_);
    if (rc != 1) {
      const Step step = finish(rc, 0);
      // Counted in this critical section, as claim_input(true): a read that
      // completes the message after this look notifies (read()).
      if (step.kind == Step::kInput && count) ++waiting_;
      // kEnd: the peer's close_notify came in the middle of its own message,
      // which will now never be complete (see peer_closed_mid_message).
      if (step.kind == Step::kEnd) return peer_closed_mid_message();
      return step;
    }
  }
  // 0: ours sent, the peer's not seen yet; 1: both. Either way it is queued.
  const int rc = SSL_shutdown(ssl_);
  if (rc < 0) return finish(rc, 0);
  close_notify_queued_ = true;
  return {Step::kDone, 0, {}};
}

bool Session::peer_closed_in_init() const {
  // Established, "in init" (a post-handshake message from the peer arrived
  // in part), and the peer's close_notify came instead of the rest.
  return established_ && SSL_in_init(ssl_) == 1 &&
         (SSL_get_shutdown(ssl_) & SSL_RECEIVED_SHUTDOWN) != 0;
}

Step Session::peer_closed_mid_message() const {
  // OpenSSL refuses SSL_shutdown while it is "in init", and the message
  // that keeps it there will never be complete: no close_notify of ours
  // can be sent. Said by this call only, not made sticky: reads still see
  // the peer's clean close (0).
  return {Step::kError, 0, make_error_code(std::errc::protocol_error)};
}

// ---- BIO ----

namespace {

bool would_block(const std::error_code& e) {
  return e == std::errc::resource_unavailable_try_again || e == std::errc::operation_would_block;
}

}  // namespace

void Session::set_direct(const Direct& direct) {
  const std::lock_guard<std::mutex> lock(mutex_);
  direct_ = direct;
  // Let OpenSSL ask for as much as its buffer holds: several small records,
  // or a whole large one, per system call.
  SSL_set_read_ahead(ssl_, 1);
}

int Session::bio_read(BIO* bio, char* data, int size) {
  auto* self = static_cast<Session*>(BIO_get_data(bio));
  BIO_clear_retry_flags(bio);
  // Called by OpenSSL inside a call we made with mutex_ held.
  const std::size_t avail = self->in_tail_ - self->in_head_;
  if (avail == 0) {
    if (self->in_ended_) return 0;
    // Straight from the kernel into OpenSSL's buffer, unless a queued read
    // is in flight (its bytes come first).
    if (self->direct_.transport != nullptr && !self->in_claimed_) {
      Expected<std::size_t> n = self->direct_.try_read(
          self->direct_.transport, io::MutableBuffer(data, static_cast<std::size_t>(size)));
      if (n) {
        if (*n == 0) self->in_ended_ = true;
        return static_cast<int>(*n);
      }
      if (!would_block(n.error())) {
        self->in_error_ = n.error();  // finish() reports it
        self->in_ended_ = true;
        return -1;
      }
    }
    BIO_set_retry_read(bio);
    return -1;
  }
  const std::size_t n = std::min(avail, static_cast<std::size_t>(size));
  std::memcpy(data, self->in_.get() + self->in_head_, n);
  self->in_head_ += n;
  return static_cast<int>(n);
}

int Session::bio_write(BIO* bio, const char* data, int size) {
  auto* self = static_cast<Session*>(BIO_get_data(bio));
  BIO_clear_retry_flags(bio);
  const auto* bytes = reinterpret_cast<const std::byte*>(data);
  std::size_t done = 0;
  // Straight to the kernel when nothing is queued ahead and no sender is
  // mid-write (either would put these bytes out of order).
  if (self->direct_.transport != nullptr && !self->out_claimed_ && !self->out_error_ &&
      self->out_.empty() && self->flight_off_ == self->flight_.size()) {
    Expected<std::size_t> n = self->direct_.try_write(
        self->direct_.transport, io::ConstBuffer(data, static_cast<std::size_t>(size)));
    if (n) {
      done = *n;
    } else if (!would_block(n.error())) {
      // Kept for Stream<S>: it finds sent() < queued(), and claim_output()
      // reports the error. Nothing is queued after a failed write.
      self->out_error_ = n.error();
      done = static_cast<std::size_t>(size);
    }
  }
  if (done < static_cast<std::size_t>(size))
    self->out_.insert(self->out_.end(), bytes + done, bytes + size);
  // queued first, then sent: an unlocked reader never sees sent > queued.
  // release: pairs with the acquire in queued() / sent(); the queue's bytes
  // themselves are published by mutex_.
  self->queued_.store(self->queued_.load(std::memory_order_relaxed) + static_cast<unsigned>(size),
                      std::memory_order_release);
  if (done > 0 && !self->out_error_)
    self->sent_.store(self->sent_.load(std::memory_order_relaxed) + done,
                      std::memory_order_release);
  return size;
}

namespace {

long bio_ctrl(BIO* bio, int cmd, long, void*) {
  switch (cmd) {
    case BIO_CTRL_FLUSH:
      return 1;  // the output queue is drained by Stream<S>, not here
    case BIO_CTRL_EOF:
      return static_cast<Session*>(BIO_get_data(bio))->input_ended_locked() ? 1 : 0;
    default:
      return 0;
  }
}

BIO_METHOD* session_bio_method() {
  static BIO_METHOD* const method = [] {
    BIO_METHOD* m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "volt tls session");
    BIO_meth_set_write(m, Session::bio_write);
    BIO_meth_set_read(m, Session::bio_read);
    BIO_meth_set_ctrl(m, bio_ctrl);
    BIO_meth_set_create(m, bio_create);
    BIO_meth_set_destroy(m, bio_destroy);
    return m;
  }();
  return method;
}

}  // namespace

// ---- output queue ----

Session::Claim Session::claim_output(bool count) {
  const std::lock_guard<std::mutex> lock(mutex_);
  if (out_error_) return Claim::kFailed;
  if (out_claimed_) {
    if (count) ++waiting_;
    return Claim::kBusy;
  }
  out_claimed_ = true;
  return Claim::kTaken;
}

io::ConstBuffer Session::next_output() {
  std::unique_lock<std::mutex> lock(mutex_);
  if (flight_off_ == flight_.size()) {
    // Swapped, not copied: both keep their capacity, so a steady stream of
    // writes allocates nothing.
    flight_.clear();
    flight_off_ = 0;
    std::swap(out_, flight_);
    if (flight_.empty()) {
      out_claimed_ = false;  // see the header: released with the last look
      notify_if_waited(lock);
      return {};
    }
  }
  return {flight_.data() + flight_off_, flight_.size() - flight_off_};
}

void Session::try_flush() {
  const std::lock_guard<std::mutex> lock(mutex_);
  if (direct_.transport == nullptr || out_claimed_ || out_error_) return;
  for (;;) {
    if (flight_off_ == flight_.size()) {
      flight_.clear();
      flight_off_ = 0;
      std::swap(out_, flight_);
      if (flight_.empty()) return;
    }
    Expected<std::size_t> n = direct_.try_write(
        direct_.transport,
        io::ConstBuffer(flight_.data() + flight_off_, flight_.size() - flight_off_));
    if (!n || *n == 0)
      return;  // full (the next writer waits for room), or an error (it reports it)
    flight_off_ += *n;
    // release: pairs with the acquire in sent().
    sent_.store(sent_.load(std::memory_order_relaxed) + *n, std::memory_order_release);
  }
}

void Session::output_sent(std::size_t n) {
  const std::lock_guard<std::mutex> lock(mutex_);
  flight_off_ += n;
  // release: pairs with the acquire in sent().
  sent_.store(sent_.load(std::memory_order_relaxed) + n, std::memory_order_release);
}

void Session::release_output(std::error_code failure) {
  std::unique_lock<std::mutex> lock(mutex_);
  out_claimed_ = false;
  if (failure && !out_error_) out_error_ = failure;
  notify_if_waited(lock);
}

std::error_code Session::output_error() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  return out_error_;
}

// ---- input queue ----

Session::Claim Session::claim_input(bool count, std::uint64_t seen_epoch) {
  const std::lock_guard<std::mutex> lock(mutex_);
  // A failed transport read (release_input) made the stream fatal without
  // moving the epoch: the caller's next OpenSSL call returns that error.
  if (in_epoch_ != seen_epoch || fatal_) return Claim::kReady;
  if (in_claimed_) {
    if (count) ++waiting_;
    return Claim::kBusy;
  }
  in_claimed_ = true;
  return Claim::kTaken;
}

io::MutableBuffer Session::input_space() {
  const std::lock_guard<std::mutex> lock(mutex_);
  if (!in_) in_ = std::make_unique<std::byte[]>(kInputCapacity);
  if (in_head_ == in_tail_) {
    in_head_ = in_tail_ = 0;
  } else if (in_head_ > 0) {
    // What is left is less than one record (OpenSSL asks for more only when
    // it cannot finish the record at hand): move it to the front so a whole
    // record always fits after it.
    std::memmove(in_.get(), in_.get() + in_head_, in_tail_ - in_head_);
    in_tail_ -= in_head_;
    in_head_ = 0;
  }
  return {in_.get() + in_tail_, kInputCapacity - in_tail_};
}

void Session::input_received(std::size_t n) {
  const std::lock_guard<std::mutex> lock(mutex_);
  if (n == 0)
    in_ended_ = true;
  else
    in_tail_ += n;
  ++in_epoch_;  // the end too: a caller that saw kInput must now see it
}

void Session::release_input(std::error_code failure) {
  std::unique_lock<std::mutex> lock(mutex_);
  in_claimed_ = false;
  if (failure && !fatal_) fatal_ = failure;  // a failed transport read ends the stream
  notify_if_waited(lock);
}

bool Session::input_ended() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  return in_ended_;
}

void Session::notify_if_waited(std::unique_lock<std::mutex>& lock) {
  const bool someone = waiting_ > 0;
  lock.unlock();
  if (someone) changed_.notify_waiters();
}

Session::Waiting::~Waiting() {
  const std::lock_guard<std::mutex> lock(session_.mutex_);
  --session_.waiting_;
}

// ---- information ----

std::string Session::alpn() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  const unsigned char* data = nullptr;
  unsigned int len = 0;
  SSL_get0_alpn_selected(ssl_, &data, &len);
  return std::string(reinterpret_cast<const char*>(data), data != nullptr ? len : 0);
}

Version Session::version() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  return SSL_version(ssl_) == TLS1_3_VERSION ? Version::tls1_3 : Version::tls1_2;
}

std::optional<CertificateInfo> Session::peer_certificate() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  X509* cert = SSL_get0_peer_certificate(ssl_);
  if (cert == nullptr) return std::nullopt;
  CertificateInfo info;
  info.subject = name_string(X509_get_subject_name(cert));
  info.issuer = name_string(X509_get_issuer_name(cert));
  if (BIGNUM* serial = ASN1_INTEGER_to_BN(X509_get0_serialNumber(cert), nullptr)) {
    if (char* hex = BN_bn2hex(serial)) {
      info.serial = hex;
      OPENSSL_free(hex);
    }
    BN_free(serial);
  }
  info.not_before = to_time_point(X509_get0_notBefore(cert));
  info.not_after = to_time_point(X509_get0_notAfter(cert));
  if (auto* names = static_cast<GENERAL_NAMES*>(
          X509_get_ext_d2i(cert, NID_subject_alt_name, nullptr, nullptr))) {
    for (int i = 0; i < sk_GENERAL_NAME_num(names); ++i) {
      const GENERAL_NAME* name = sk_GENERAL_NAME_value(names, i);
      if (name->type == GEN_DNS) {
        const ASN1_IA5STRING* dns = name->d.dNSName;
        info.dns_names.emplace_back(reinterpret_cast<const char*>(ASN1_STRING_get0_data(dns)),
                                    static_cast<std::size_t>(ASN1_STRING_length(dns)));
      } else if (name->type == GEN_IPADD) {
        const ASN1_OCTET_STRING* ip = name->d.iPAddress;
        char text[INET6_ADDRSTRLEN] = {};
        const int len = ASN1_STRING_length(ip);
        if ((len == 4 || len == 16) &&
            ::inet_ntop(len == 4 ? AF_INET : AF_INET6, ASN1_STRING_get0_data(ip), text,
                        sizeof text) != nullptr)
          info.ip_addresses.emplace_back(text);
      }
    }
    GENERAL_NAMES_free(names);
  }
  const int der_len = i2d_X509(cert, nullptr);
  if (der_len > 0) {
    info.der.resize(static_cast<std::size_t>(der_len));
    unsigned char* p = info.der.data();
    i2d_X509(cert, &p);
  }
  return info;
}

}  // namespace volt::tls::detail
