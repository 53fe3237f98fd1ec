// volt/tls/stream.hpp: a TLS connection over any byte stream (TcpStream,
// UnixStream, a pipe pair...), as tokio-openssl's SslStream or Asio's
// ssl::stream.
//
//   volt::net::TcpStream tcp = (co_await volt::net::TcpStream::connect(addr)).value();
//   volt::tls::Stream<volt::net::TcpStream> tls =
//       (co_await volt::tls::connect(client_ctx, std::move(tcp), "example.com")).value();
//   (co_await tls.write_all(std::string_view("GET / HTTP/1.1\r\n..."))).value();
//   char buf[4096];
//   std::size_t n = (co_await tls.read(buf)).value();  // 0: the peer closed cleanly
//   (co_await tls.shutdown()).value();                  // close_notify, then FIN
//
//   // Server side, a task per connection:
//   auto tls = co_await volt::tls::accept(server_ctx, std::move(tcp));
//   if (!tls) log(tls.error().message());  // "certificate verify failed: ..."
//
// Guarantees:
//  - Stream<S> models io::AsyncRead and io::AsyncWrite, so BufReader,
//    lines(), io::copy and io::copy_bidirectional work over TLS. S must
//    model both too; its read and its write are called from the two sides
//    of a split at once (as sockets and pipes allow).
//  - read(): the bytes of one or more records; 0 at the peer's close_notify
//    (and on every later read); errc::unexpected_eof when the transport ends
//    without one (a truncation attack is not an end of stream).
//  - write(): returns once the ciphertext of the bytes it reports is handed
//    to the transport (at most Session::kMaxWrite per call), so nothing
//    waits in volt's buffers after it returns: flush() only finishes what a
//    cancelled write left queued.
//  - One read and one write may run at once, from two tasks on any workers
//    (split() or into_split() hand them out; the Stream itself allows it
//    too). Two reads at once, or two writes at once, are not allowed.
//  - Cancellation (timeout, select, abort) between two awaits of the
//    transport: OpenSSL is never left inside a call, so the next operation
//    continues the connection correctly. A cancelled read loses nothing
//    (ciphertext it fetched stays queued for the next read, provided S's
//    read is cancel-safe, as volt's sockets are). A cancelled write may
//    already have encrypted its bytes: they are sent, in order, before
//    anything written later (by the next write, flush or shutdown).
//  - Errors are values (Expected), never exceptions: handshake and record
//    errors carry OpenSSL's reason (tls::category(), tls::verify_category()),
//    the transport's errors pass through. An error from OpenSSL is sticky:
//    every later read and write returns it.
//  - Timeouts: wrap any call, e.g. volt::timeout(5s, tls::accept(ctx, std::move(tcp))).
//  - Cooperative budget: read() and write() take one unit of the task's
//    budget, write_all() one per call it makes into OpenSSL (each at most
//    Session::kMaxWrite bytes), as a socket operation takes one per system
//    call; so a transfer whose socket is always ready still gives its worker
//    back every kCoopBudget operations. The unit is taken before OpenSSL is
//    called: a task cancelled while it yields for it has done nothing.
//  - Allocation: a Stream allocates its queues once (32 KiB of input, the
//    output grows to the largest write's ciphertext and stays); reads and
//    writes after that allocate nothing in volt (OpenSSL keeps its own
//    record buffers).
//  - Dropping a Stream without shutdown() closes the transport without
//    close_notify: the peer sees a truncated stream.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string_view>
#include <utility>

#include "volt/expected.hpp"
#include "volt/io/async_io.hpp"
#include "volt/io/buffer.hpp"
#include "volt/net/tcp.hpp"
#include "volt/task/select.hpp"
#include "volt/task/task.hpp"
#include "volt/task/yield_now.hpp"
#include "volt/tls/context.hpp"
#include "volt/tls/session.hpp"

namespace volt::tls {

template <class S>
class Stream;

// A transport whose non-blocking calls the session may make itself (see
// Session::Direct): volt's sockets and pipes.
template <class S>
concept DirectTransport = requires(const S& s, io::MutableBuffer m, io::ConstBuffer c) {
  { s.try_read(m) } -> std::same_as<Expected<std::size_t>>;
  { s.try_write(c) } -> std::same_as<Expected<std::size_t>>;
  s.readable();
};

// Neither keeps a reference to `context` or `server_name`: the session
// (which copies the name and shares the context's state) is made in the
// call, so the returned task may outlive both, as in
// spawn(tls::connect(make_context(), std::move(tcp), std::string(host))).
template <class S>
Task<Expected<Stream<S>>> connect(const Context& context, S transport,
                                  std::string_view server_name);
template <class S>
Task<Expected<Stream<S>>> accept(const Context& context, S transport);

namespace detail {
template <class S>
Task<Expected<Stream<S>>> start_session(Expected<std::unique_ptr<Session>> session, S transport);
}  // namespace detail

template <class S>
class ReadHalf;
template <class S>
class WriteHalf;

template <class S>
class Stream {
 public:
  Stream(Stream&&) noexcept = default;
  Stream& operator=(Stream&&) noexcept = default;

  Task<Expected<std::size_t>> read(io::MutableBuffer buf);
  Task<Expected<std::size_t>> write(io::ConstBuffer buf);
  Task<Expected<void>> write_all(io::ConstBuffer buf);
  Task<Expected<void>> flush();
  // Sends close_notify (once), then shuts the transport's write direction.
  // It does not wait for the peer's close_notify: read() to 0 for that. If
  // a post-handshake message from the peer (a TLS 1.3 NewSessionTicket or
  // KeyUpdate) has arrived only in part, it first waits for the rest
  // (OpenSSL sends no close_notify in the middle of one); a peer that never
  // sends it is an error (unexpected_eof) or a hang: wrap shutdown() in a
  // timeout if the peer is not trusted to finish. A peer that sends its own
  // close_notify in the middle of it instead (RFC 8446 forbids this) makes
  // shutdown() fail with std::errc::protocol_error: no close_notify can be
  // sent then.
  Task<Expected<void>> shutdown();

  // The protocol ALPN chose ("" if none).
  std::string alpn_protocol() const { return session_->alpn(); }
  std::optional<CertificateInfo> peer_certificate() const { return session_->peer_certificate(); }
  Version version() const { return session_->version(); }
  // The SSL*, for what is not wrapped (SSL_key_update, SSL_session_reused,
  // ex_data...). Use it only while no read or write of this stream is in
  // progress: the stream's own calls hold a lock this cannot take.
  ::ssl_st* native_handle() const noexcept { return session_->native_handle(); }
  S& get_ref() noexcept { return *transport_; }
  const S& get_ref() const noexcept { return *transport_; }

  // Halves for two tasks: borrowed (the Stream must outlive them) or owned
  // (they share the Stream; it is destroyed with the last of them).
  std::pair<ReadHalf<S>, WriteHalf<S>> split() noexcept;
  std::pair<ReadHalf<S>, WriteHalf<S>> into_split() &&;

 private:
  template <class T>
  friend Task<Expected<Stream<T>>> detail::start_session(
      Expected<std::unique_ptr<detail::Session>> session, T transport);

  Stream(S transport, std::unique_ptr<detail::Session> session)
      : transport_(std::make_unique<S>(std::move(transport))), session_(std::move(session)) {
    if constexpr (DirectTransport<S>) {
      detail::Session::Direct direct;
      direct.transport = transport_.get();
      direct.try_read = [](const void* t, io::MutableBuffer b) {
        return static_cast<const S*>(t)->try_read(b);
      };
      direct.try_write = [](const void* t, io::ConstBuffer b) {
        return static_cast<const S*>(t)->try_write(b);
      };
      session_->set_direct(direct);
    }
  }

  Task<Expected<void>> handshake();
  // Sends queued ciphertext up to `upto` (queued() seen by the caller); if
  // another task is sending, waits until it has sent past upto. For writers
  // (and the handshake) only: a read never waits for the write side.
  Task<Expected<void>> send(std::uint64_t upto);
  // One transport read into the input queue (or, if another task holds the
  // input claim, waits for it to finish one); nothing if input arrived
  // since the OpenSSL call that said kInput at `epoch` (Step::input_epoch).
  Task<Expected<void>> receive(std::uint64_t epoch);
  // Direct transports: a write or shutdown that OpenSSL answered kInput
  // after the handshake (a post-handshake message from the peer, a TLS 1.3
  // NewSessionTicket or KeyUpdate, has arrived in part and a read took its
  // first record) waits for the rest. A read pending in another task may
  // take it first, and a woken readiness wait re-checks readiness: once that
  // read has drained the socket, a plain readable() would sleep until the
  // peer's next bytes, which a peer waiting for our write never sends. So
  // this also waits for the read's word that it completed the message:
  // `progressed` was made before the session call that returned kInput with
  // count = true, which counted us under the session's lock (adopted here).
  Task<Expected<void>> wait_for_message_rest(Notify::Notified progressed);

  // On the heap: the session's direct I/O points at it, and a Stream moves.
  std::unique_ptr<S> transport_;
  std::unique_ptr<detail::Session> session_;
};

template <class S>
class ReadHalf {
 public:
  // An owned half's operation keeps the Stream alive while it runs (it may
  // be spawned, and the halves dropped, before it ends).
  Task<Expected<std::size_t>> read(io::MutableBuffer buf) const {
    return owner_ ? kept_read(owner_, buf) : stream_->read(buf);
  }

 private:
  friend class Stream<S>;
  ReadHalf(Stream<S>* s, std::shared_ptr<Stream<S>> owner) noexcept
      : stream_(s), owner_(std::move(owner)) {}
  static Task<Expected<std::size_t>> kept_read(std::shared_ptr<Stream<S>> keep,
                                               io::MutableBuffer buf) {
    co_return co_await keep->read(buf);
  }
  Stream<S>* stream_;
  std::shared_ptr<Stream<S>> owner_;  // null for borrowed halves
};

template <class S>
class WriteHalf {
 public:
  // As ReadHalf: an owned half's operation keeps the Stream alive.
  Task<Expected<std::size_t>> write(io::ConstBuffer buf) const {
    return owner_ ? kept_write(owner_, buf) : stream_->write(buf);
  }
  Task<Expected<void>> write_all(io::ConstBuffer buf) const {
    return owner_ ? kept_write_all(owner_, buf) : stream_->write_all(buf);
  }
  Task<Expected<void>> flush() const { return owner_ ? kept_flush(owner_) : stream_->flush(); }
  Task<Expected<void>> shutdown() const {
    return owner_ ? kept_shutdown(owner_) : stream_->shutdown();
  }

 private:
  friend class Stream<S>;
  WriteHalf(Stream<S>* s, std::shared_ptr<Stream<S>> owner) noexcept
      : stream_(s), owner_(std::move(owner)) {}
  static Task<Expected<std::size_t>> kept_write(std::shared_ptr<Stream<S>> keep,
                                                io::ConstBuffer buf) {
    co_return co_await keep->write(buf);
  }
  static Task<Expected<void>> kept_write_all(std::shared_ptr<Stream<S>> keep, io::ConstBuffer buf) {
    co_return co_await keep->write_all(buf);
  }
  static Task<Expected<void>> kept_flush(std::shared_ptr<Stream<S>> keep) {
    co_return co_await keep->flush();
  }
  static Task<Expected<void>> kept_shutdown(std::shared_ptr<Stream<S>> keep) {
    co_return co_await keep->shutdown();
  }
  Stream<S>* stream_;
  std::shared_ptr<Stream<S>> owner_;
};

// ---- implementation ----

namespace detail {

// Releases a claim when the operation holding it ends, cancelled or not.
struct OutputClaim {
  Session* s;
  std::error_code failure;
  bool held = true;  // false once next_output() released it
  ~OutputClaim() {
    if (held) s->release_output(failure);
  }
};
struct InputClaim {
  Session* s;
  std::error_code failure;
  ~InputClaim() { s->release_input(failure); }
};

}  // namespace detail

namespace detail {
template <class S>
Task<Expected<Stream<S>>> start_session(Expected<std::unique_ptr<Session>> session, S transport) {
  if (!session) co_return session.error();
  Stream<S> stream(std::move(transport), std::move(*session));
  if (Expected<void> done = co_await stream.handshake(); !done) co_return done.error();
  co_return std::move(stream);
}
}  // namespace detail

// Not coroutines (see their declarations): the session is made here.
template <class S>
Task<Expected<Stream<S>>> connect(const Context& context, S transport,
                                  std::string_view server_name) {
  return detail::start_session<S>(detail::Session::client(context, server_name),
                                  std::move(transport));
}

template <class S>
Task<Expected<Stream<S>>> accept(const Context& context, S transport) {
  return detail::start_session<S>(detail::Session::server(context), std::move(transport));
}

template <class S>
Task<Expected<void>> Stream<S>::handshake() {
  for (;;) {
    const detail::Step step = session_->handshake();
    // Flights (ClientHello, the server's answer, Finished) go out before we
    // wait for the peer's: it is waiting for them. After a failure, the
    // alert telling the peer why goes out if it can; the failure is ours to
    // report either way (not a broken pipe from sending that alert).
    if (session_->sent() < session_->queued()) {
      Expected<void> sent = co_await send(session_->queued());
      if (!sent && step.kind != detail::Step::kError) co_return sent.error();
    }
    switch (step.kind) {
      case detail::Step::kDone:
        co_return Expected<void>();
      case detail::Step::kInput:
        if (Expected<void> got = co_await receive(step.input_epoch); !got) co_return got.error();
        break;
      case detail::Step::kEnd:  // close_notify during the handshake
        co_return Expected<void>(make_error_code(errc::unexpected_eof));
      case detail::Step::kError:
        co_return Expected<void>(step.error);
    }
  }
}

template <class S>
Task<Expected<void>> Stream<S>::send(std::uint64_t upto) {
  for (;;) {
    if (session_->sent() >= upto) co_return Expected<void>();
    // Made before the claim is tried: a release between the try and the
    // await still completes it (notify_waiters covers every Notified made
    // before the call).
    Notify::Notified released = session_->changed().notified();
    const detail::Session::Claim claim = session_->claim_output(true);
    if (claim == detail::Session::Claim::kFailed) co_return session_->output_error();
    if (claim == detail::Session::Claim::kBusy) {
      const detail::Session::Waiting counted(*session_);
      co_await std::move(released);
      continue;
    }
    detail::OutputClaim held{session_.get(), {}};
    for (;;) {
      const io::ConstBuffer chunk = session_->next_output();
      if (chunk.empty()) {
        held.held = false;  // released by next_output()
        break;
      }
      Expected<std::size_t> n = co_await transport_->write(chunk);
      if (!n) {
        held.failure = n.error();
        co_return n.error();
      }
      if (*n == 0) {
        held.failure = make_error_code(errc::write_zero);
        co_return held.failure;
      }
      session_->output_sent(*n);
    }
    // sent() has reached everything queued when next_output() came back
    // empty, which includes upto: the loop's test ends it.
  }
}

template <class S>
Task<Expected<void>> Stream<S>::receive(std::uint64_t epoch) {
  if constexpr (DirectTransport<S>) {
    // OpenSSL's last read found the socket empty (the try_read cleared its
    // readiness): wait for the next bytes, which its next call reads.
    Expected<void> ready = co_await transport_->readable();
    co_return ready;
  }
  Notify::Notified released = session_->changed().notified();
  switch (session_->claim_input(true, epoch)) {
    case detail::Session::Claim::kReady:
      // The other task's transport read delivered bytes after our OpenSSL
      // call looked: they may be all it needs (the rest of a post-handshake
      // message, our data behind it), and the peer may send nothing more
      // until we answer. Call OpenSSL again instead of reading.
      co_return Expected<void>();
    case detail::Session::Claim::kBusy: {
      // Another task is reading the transport (a read, and a write or a
      // shutdown finishing a post-handshake message): what it brings is
      // ours too.
      const detail::Session::Waiting counted(*session_);
      co_await std::move(released);
      co_return Expected<void>();
    }
    default:
      break;
  }
  detail::InputClaim claim{session_.get(), {}};
  const io::MutableBuffer space = session_->input_space();
  if (space.empty()) {  // see input_space(): never read 0 bytes and call it the end
    claim.failure = make_error_code(std::errc::protocol_error);
    co_return claim.failure;
  }
  Expected<std::size_t> n = co_await transport_->read(space);
  if (!n) {
    claim.failure = n.error();
    co_return n.error();
  }
  session_->input_received(*n);
  co_return Expected<void>();
}

template <class S>
Task<Expected<void>> Stream<S>::wait_for_message_rest(Notify::Notified progressed) {
  const detail::Session::Waiting counted(*session_);  // adopts the session call's count
  auto r = co_await select(transport_->readable(), std::move(progressed));
  if (r.index() == 0 && !std::get<0>(r)) co_return std::get<0>(r).error();
  co_return Expected<void>();
}

template <class S>
Task<Expected<std::size_t>> Stream<S>::read(io::MutableBuffer buf) {
  if (buf.empty()) co_return std::size_t{0};
  // One unit of the task's cooperative budget per OpenSSL call that moves
  // application data, as a socket operation takes one per system call. With
  // direct I/O a record usually goes to or from the kernel inside the call,
  // with no await on the transport, so without this a stream whose socket is
  // always ready (a bulk transfer) never gave its worker back: it starved the
  // tasks queued behind it, and a reader and a writer that had met on one
  // worker stayed there, taking turns while another worker slept. Taken
  // before the call, so a task cancelled while it yields has done nothing.
  if (!volt::detail::coop_try_consume()) co_await yield_now();
  for (;;) {
    const detail::Step step = session_->read(buf);
    switch (step.kind) {
      case detail::Step::kDone:
        // Returned at once: bytes in buf are the caller's, and no await may
        // follow that a cancellation could lose them in. Anything the read
        // queued (a KeyUpdate answer) goes out with the next operation.
        co_return step.n;
      case detail::Step::kEnd:
        co_return std::size_t{0};
      case detail::Step::kError:
        // The alert OpenSSL queued about it went out directly if the socket
        // took it; a read does not wait to send it (nor report its failure).
        co_return step.error;
      case detail::Step::kInput:
        break;
    }
    // What a read queued (a KeyUpdate answer, an alert) went straight to
    // the socket if it could; otherwise a writer holding the output claim
    // sends it, or the next write, flush or shutdown. A read never waits
    // for the write side (a writer stuck on a full transport must not stop
    // the reads that drain the peer), so at most it tries once more here,
    // without waiting.
    if (session_->sent() < session_->queued()) session_->try_flush();
    if constexpr (DirectTransport<S>) {
      // receive()'s direct case, inlined (one frame fewer per wait).
      if (Expected<void> ready = co_await transport_->readable(); !ready) co_return ready.error();
    } else {
      if (Expected<void> got = co_await receive(step.input_epoch); !got) co_return got.error();
    }
  }
}

template <class S>
Task<Expected<std::size_t>> Stream<S>::write(io::ConstBuffer buf) {
  if (buf.empty()) co_return std::size_t{0};
  // What an earlier, cancelled write left queued goes first.
  if (session_->sent() < session_->queued()) {
    if (Expected<void> sent = co_await send(session_->queued()); !sent) co_return sent.error();
  }
  if (!volt::detail::coop_try_consume()) co_await yield_now();  // as read()
  std::optional<Notify::Notified> progressed;                   // see kInput
  for (;;) {
    const detail::Step step = session_->write(buf, progressed.has_value());
    switch (step.kind) {
      case detail::Step::kDone:
        // Usually the kernel took it all inside the call (direct I/O).
        if (session_->sent() < session_->queued()) {
          if (Expected<void> sent = co_await send(session_->queued()); !sent)
            co_return sent.error();
        }
        co_return step.n;
      case detail::Step::kInput:
        // A post-handshake message from the peer that a read has taken only
        // the first record of (renegotiation is refused): OpenSSL finishes
        // reading it before it writes.
        if constexpr (DirectTransport<S>) {
          if (!progressed) {
            progressed.emplace(session_->changed().notified());
            break;  // asked again, counted (wait_for_message_rest)
          }
          if (Expected<void> got = co_await wait_for_message_rest(std::move(*progressed)); !got)
            co_return got.error();
          progressed.reset();
        } else {
          if (Expected<void> got = co_await receive(step.input_epoch); !got) co_return got.error();
        }
        break;
      case detail::Step::kEnd:
        co_return make_error_code(std::errc::broken_pipe);
      case detail::Step::kError:
        co_return step.error;
    }
  }
}

template <class S>
Task<Expected<void>> Stream<S>::write_all(io::ConstBuffer buf) {
  // write()'s loop, inlined: one coroutine frame per call, not one per
  // record (the 64-byte echo path is dominated by such costs).
  if (session_->sent() < session_->queued()) {
    if (Expected<void> sent = co_await send(session_->queued()); !sent) co_return sent.error();
  }
  std::optional<Notify::Notified> progressed;  // as write()
  while (!buf.empty()) {
    if (!progressed && !volt::detail::coop_try_consume()) co_await yield_now();  // as read()
    const detail::Step step = session_->write(buf, progressed.has_value());
    switch (step.kind) {
      case detail::Step::kDone:
        progressed.reset();
        buf = buf.after(step.n);
        if (session_->sent() < session_->queued()) {
          if (Expected<void> sent = co_await send(session_->queued()); !sent)
            co_return sent.error();
        }
        break;
      case detail::Step::kInput:  // as write()
        if constexpr (DirectTransport<S>) {
          if (!progressed) {
            progressed.emplace(session_->changed().notified());
            break;
          }
          if (Expected<void> got = co_await wait_for_message_rest(std::move(*progressed)); !got)
            co_return got.error();
          progressed.reset();
        } else {
          if (Expected<void> got = co_await receive(step.input_epoch); !got) co_return got.error();
        }
        break;
      case detail::Step::kEnd:
        co_return make_error_code(std::errc::broken_pipe);
      case detail::Step::kError:
        co_return step.error;
    }
  }
  co_return Expected<void>();
}

template <class S>
Task<Expected<void>> Stream<S>::flush() {
  if (session_->sent() < session_->queued()) {
    if (Expected<void> sent = co_await send(session_->queued()); !sent) co_return sent.error();
  }
  co_return co_await transport_->flush();
}

template <class S>
Task<Expected<void>> Stream<S>::shutdown() {
  for (;;) {
    Notify::Notified progressed = session_->changed().notified();
    const detail::Step step = session_->close_notify(DirectTransport<S>);
    if (step.kind == detail::Step::kError) co_return step.error;
    if (step.kind != detail::Step::kInput) break;
    // The peer's post-handshake message (a TLS 1.3 NewSessionTicket or
    // KeyUpdate) has arrived in part, and OpenSSL sends close_notify only
    // once it has all of it: wait for the rest, which the peer is sending.
    // A pending read may take it first. On the queued path receive() shares
    // the transport's read side with that read (its release wakes us); on a
    // direct transport, see wait_for_message_rest (close_notify(true)
    // counted us after `progressed` was made).
    if constexpr (DirectTransport<S>) {
      if (Expected<void> got = co_await wait_for_message_rest(std::move(progressed)); !got)
        co_return got.error();
    } else {
      if (Expected<void> got = co_await receive(step.input_epoch); !got) co_return got.error();
    }
  }
  if (Expected<void> sent = co_await send(session_->queued()); !sent) co_return sent.error();
  co_return co_await transport_->shutdown();
}

template <class S>
std::pair<ReadHalf<S>, WriteHalf<S>> Stream<S>::split() noexcept {
  return {ReadHalf<S>(this, nullptr), WriteHalf<S>(this, nullptr)};
}

template <class S>
std::pair<ReadHalf<S>, WriteHalf<S>> Stream<S>::into_split() && {
  auto owner = std::make_shared<Stream<S>>(std::move(*this));
  Stream<S>* s = owner.get();
  return {ReadHalf<S>(s, owner), WriteHalf<S>(s, std::move(owner))};
}

// Compiled once in the library for TCP (src/tls/stream_tcp.cpp).
extern template class Stream<net::TcpStream>;
extern template Task<Expected<Stream<net::TcpStream>>> connect(const Context&, net::TcpStream,
                                                               std::string_view);
extern template Task<Expected<Stream<net::TcpStream>>> accept(const Context&, net::TcpStream);

}  // namespace volt::tls
