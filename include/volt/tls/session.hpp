// volt/tls/session.hpp: one TLS connection's OpenSSL state and the two byte
// queues between it and the transport. Not for direct use: tls::Stream<S>
// (stream.hpp) drives it; this is its non-template half, compiled once in
// src/tls/session.cpp, so no user translation unit sees OpenSSL.
//
// The design (docs/design.md, "TLS"):
//  - OpenSSL never touches a descriptor. Its BIO reads ciphertext from
//    `input` (filled by the transport's read) and appends ciphertext to
//    `output` (drained by the transport's write). An OpenSSL call therefore
//    never waits: it returns what it could do with the bytes at hand, and
//    Stream<S> awaits the transport between calls. A cancelled operation is
//    cancelled between two calls, never inside one: the SSL object is never
//    left half-driven.
//  - Every OpenSSL call and every change of the queues' bookkeeping happens
//    under one mutex, held for the call only (never across an await): one
//    SSL object allows one user at a time, and a read half and a write half
//    in two tasks on two workers take turns at it.
//  - The transport's read side has one user at a time (the input claim),
//    and so has its write side (the output claim). A read never waits for
//    the write side: bytes it queues (a TLS 1.3 KeyUpdate answer, an alert)
//    go straight to a socket when the queues are idle, else the task
//    holding the output claim sends them (it releases the claim only in the
//    same critical section that finds the queue empty), else the next
//    write, flush or shutdown does. So a writer blocked on a full transport
//    cannot stall the reads that would drain its peer.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "volt/expected.hpp"
#include "volt/io/buffer.hpp"
#include "volt/sync/notify.hpp"
#include "volt/tls/context.hpp"

struct ssl_st;          // OpenSSL's SSL
struct bio_st;          // OpenSSL's BIO
struct ssl_session_st;  // OpenSSL's SSL_SESSION

namespace volt::tls {

// What a peer's certificate says, for logs and authorisation decisions
// (verification itself is OpenSSL's, during the handshake).
struct CertificateInfo {
  std::string subject;  // RFC 2253, e.g. "CN=localhost,O=Example"
  std::string issuer;
  std::string serial;  // hexadecimal
  std::vector<std::string> dns_names;
  std::vector<std::string> ip_addresses;
  std::chrono::system_clock::time_point not_before;
  std::chrono::system_clock::time_point not_after;
  std::vector<unsigned char> der;  // the whole certificate, DER-encoded
};

namespace detail {

// The outcome of one OpenSSL call.
struct Step {
  enum Kind : std::uint8_t {
    kDone,   // n bytes read or written (handshake: complete)
    kInput,  // OpenSSL needs more bytes from the peer
    kEnd,    // the peer sent close_notify: end of stream
    kError,  // error says why; the session is unusable for this direction
  };
  Kind kind = kDone;
  std::size_t n = 0;
  std::error_code error;
  // kInput: the input queue's epoch when OpenSSL found it short (see
  // Session::claim_input): hand it to claim_input, so that bytes another
  // task delivered between this call and the claim are not waited past.
  std::uint64_t input_epoch = 0;
};

class Session {
 public:
  static Expected<std::unique_ptr<Session>> client(const Context& context,
                                                   std::string_view server_name);
  static Expected<std::unique_ptr<Session>> server(const Context& context);
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;
  ~Session();

  // ---- OpenSSL calls (each under the lock; none waits) ----
  Step handshake();
  Step read(io::MutableBuffer buf);
  // At most kMaxWrite bytes of buf are encrypted and queued per call. With
  // count, a kInput (a post-handshake message from the peer arrived in
  // part) counts the caller as waiting, as close_notify(true) does.
  Step write(io::ConstBuffer buf, bool count = false);
  // Queues close_notify (once; later calls do nothing). kInput: a
  // post-handshake message from the peer has arrived in part, and OpenSSL
  // sends no close_notify before it has the rest (the caller fetches more
  // input and calls again). With count, a kInput counts the caller as
  // waiting (adopt it with Waiting), in the same critical section: a read()
  // that completes the message later notifies changed(), since it may have
  // taken the readiness the caller waits for.
  Step close_notify(bool count = false);
  static constexpr std::size_t kMaxWrite = 64 * 1024;

  // ---- the output queue (ciphertext for the transport) ----
  // Total bytes ever queued / ever written to the transport: a caller that
  // queued bytes waits until sent() reaches the queued() it saw.
  std::uint64_t queued() const noexcept { return queued_.load(std::memory_order_acquire); }
  std::uint64_t sent() const noexcept { return sent_.load(std::memory_order_acquire); }
  // Becomes the one sender (kTaken); kBusy if another task is (then, with
  // count, the caller is counted as waiting, in the same critical section,
  // so the release cannot slip between its look and its wait: it must
  // adopt the count with Waiting); kFailed after a transport write error. A
  // sender takes next_output() until it comes back empty, which releases
  // the claim in the same critical section (so bytes a read queues while a
  // sender holds the claim are always the sender's to send: no hand-off can
  // fall between its last look and its release), reporting output_sent()
  // after each transport write; a sender that stops early (an error, a
  // cancellation) calls release_output().
  enum class Claim : std::uint8_t { kTaken, kBusy, kFailed, kReady /* claim_input only */ };
  Claim claim_output(bool count);
  io::ConstBuffer next_output();
  // Without waiting and without a claim: hands what is queued to the
  // transport's try_write (direct transports only) while nobody holds the
  // claim, as far as the kernel takes it. For a reader, which never waits
  // for the transport's write side. Errors are left for the writers.
  void try_flush();
  void output_sent(std::size_t n);
  // failure: the transport's write error, kept for every later write.
  void release_output(std::error_code failure);
  std::error_code output_error() const;

  // ---- the input queue (ciphertext from the transport) ----
  // As claim_output (never kFailed), for a caller whose OpenSSL call said
  // kInput at `seen_epoch` (Step::input_epoch). kReady: input has arrived
  // since that call (another task's transport read delivered it between
  // the call and this claim), so the caller calls OpenSSL again instead of
  // reading the transport: a read now would wait for bytes the peer may
  // never send (it may be waiting for us) while what OpenSSL needs sits in
  // the queue. Nothing is claimed or counted then.
  Claim claim_input(bool count, std::uint64_t seen_epoch);
  // Where the next transport read goes; empty only if OpenSSL asked for
  // more with a full queue, which a record's bound rules out (the caller
  // reports an error rather than reading into it: a 0-byte read would look
  // like the transport's end).
  io::MutableBuffer input_space();
  void input_received(std::size_t n);  // 0: the transport ended
  void release_input(std::error_code failure);
  bool input_ended() const;

  // Completes (notify_waiters) whenever a claim is released while someone
  // waits for one: a waiter makes its Notified before the claim attempt
  // that counts it, so a release after the count always reaches it.
  Notify& changed() noexcept { return changed_; }
  // Adopts the count a kBusy claim with count = true made; uncounts on
  // destruction (a cancelled wait too), so releases notify only while
  // someone listens.
  class Waiting {
   public:
    explicit Waiting(Session& s) noexcept : session_(s) {}
    ~Waiting();
    Waiting(const Waiting&) = delete;
    Waiting& operator=(const Waiting&) = delete;

   private:
    Session& session_;
  };

  // ---- direct transport I/O ----
  // For a transport with non-blocking try_read/try_write (sockets): the BIO
  // calls them itself, inside the OpenSSL call, whenever the queues are
  // idle (nothing queued, no claim held), so records go between OpenSSL's
  // buffers and the kernel with no copy through the queues; what the
  // kernel does not take is queued as before, and a read that would block
  // makes OpenSSL report kInput (Stream<S> then awaits readable()). Still
  // non-blocking: no OpenSSL call waits. Set once, before the handshake;
  // the transport must not move afterwards (Stream<S> keeps it on the heap).
  struct Direct {
    const void* transport = nullptr;
    Expected<std::size_t> (*try_read)(const void*, io::MutableBuffer) = nullptr;
    Expected<std::size_t> (*try_write)(const void*, io::ConstBuffer) = nullptr;
  };
  void set_direct(const Direct& direct);

  // ---- information (after the handshake) ----
  std::string alpn() const;
  std::optional<CertificateInfo> peer_certificate() const;
  Version version() const;
  ::ssl_st* native_handle() const noexcept { return ssl_; }

  // Sessions alive in this process (each owns one SSL object): for leak
  // tests.
  static std::size_t live() noexcept;

  // ---- OpenSSL's callbacks (src/tls/session.cpp), called with mutex_ held ----
  static int bio_read(::bio_st* bio, char* data, int size);
  static int bio_write(::bio_st* bio, const char* data, int size);
  bool input_ended_locked() const noexcept { return in_ended_; }
  // Client resumption: takes the reference (1) or declines it (0).
  int remember(::ssl_session_st* session);

 private:
  explicit Session(const Context& context);
  Expected<void> init(bool server, std::string_view server_name);
  Step finish(int rc, std::size_t n);  // maps an OpenSSL result (lock held)
  bool peer_closed_in_init() const;    // lock held
  Step peer_closed_mid_message() const;
  void notify_if_waited(std::unique_lock<std::mutex>& lock);

  mutable std::mutex mutex_;
  std::shared_ptr<ContextState> context_;
  ::ssl_st* ssl_ = nullptr;
  std::string server_name_;  // client: the session cache key

  // Input: [in_head_, in_tail_) holds ciphertext OpenSSL has not read yet;
  // the reader's transport read fills from in_tail_ (outside the lock, so
  // only the claim holder moves in_tail_ or compacts).
  std::unique_ptr<std::byte[]> in_;
  std::size_t in_head_ = 0, in_tail_ = 0;
  // Moves with every delivery into the queue (input_received): a kInput
  // Step carries the value it saw, and claim_input compares.
  std::uint64_t in_epoch_ = 0;
  bool in_claimed_ = false;
  bool in_ended_ = false;

  // Output: OpenSSL appends to out_; the sender swaps it with flight_ and
  // writes flight_ from flight_off_ without the lock (nobody else touches
  // flight_), so appends never move bytes a transport write is reading.
  std::vector<std::byte> out_, flight_;
  std::size_t flight_off_ = 0;
  // Written under the lock, read without it by the fast paths of
  // Stream<S> as hints: both only grow, so a stale value only sends a
  // caller to the locked path (claim_output), which decides. acquire pairs
  // with the release stores in bio_write / output_sent.
  std::atomic<std::uint64_t> queued_{0}, sent_{0};
  bool out_claimed_ = false;
  bool close_notify_queued_ = false;
  // handshake() has succeeded. Not SSL_is_init_finished(): OpenSSL is "in
  // init" again while it reads a post-handshake message (close_notify()).
  bool established_ = false;
  std::error_code out_error_;
  std::error_code fatal_;  // an OpenSSL failure: every later call gets it

  std::uint32_t waiting_ = 0;
  Notify changed_;

  Direct direct_;
  std::error_code in_error_;  // a direct read's transport error

  static constexpr std::size_t kInputCapacity = 32 * 1024;
};

}  // namespace detail
}  // namespace volt::tls
