// examples/http_handler.hpp: the minimal HTTP/1.1 keep-alive server of the
// http_plaintext workload (docs/benchmarks.md, Tier 6), in one place for
// the programs that serve it: examples/http_server.cpp,
// examples/showcase.cpp, the benchmark (bench/net.cpp), and, over TLS,
// examples/https_server.cpp.
//
//   volt::Shutdown shutdown = volt::Shutdown::on_signals();  // SIGINT, SIGTERM
//   auto listener = volt::net::TcpListener::bind("127.0.0.1:8080");
//   bool drained = co_await http_example::serve(*listener, shutdown, std::chrono::seconds(5));
//
// What it answers (byte for byte what the Tokio side of the benchmark
// answers, the Tokio side's net.rs):
//  - `GET /` gets 200 "Hello, World!" (Content-Type and Content-Length only);
//  - another GET path gets 404 (empty body);
//  - another method gets 405 and the connection is closed (request bodies are
//    not parsed);
//  - a request head longer than kMaxHead bytes gets 431 and the connection is
//    closed (the buffer never grows: a peer cannot make the server allocate);
//  - connections are kept alive; pipelined requests are answered in order, all
//    the answers to what one read brought in one write.
//
// Graceful shutdown (serve() with a volt::Shutdown): when it is triggered
// the accept loop stops (the listener is left open but unused, so
// new connections wait in the backlog and are reset when it closes), every
// idle keep-alive connection is closed (one whose next request has already
// arrived answers it first), a connection holding part of a request reads
// the rest, answers it and closes, and serve() waits for the
// last connection (each holds a WorkGuard), at most `drain` long or until a
// second signal (then it gives up on the stragglers, which the runtime's
// shutdown destroys).
//
// Any byte stream: serve_connection() is written against io::AsyncRead and
// io::AsyncWrite (a TcpStream, or a tls::Stream<TcpStream> in
// examples/https_server.cpp), and accept_loop() / serve() /
// serve_until_signalled() take a connection handler (PlainHttp by default:
// serve_connection on the accepted TcpStream; https_server's does the TLS
// handshake first). The plain TCP instantiation is the code it always was.
//
// Errors: a failed read or write ends that connection only (the peer reset
// it, or went away). A failed accept (EMFILE, ENFILE, ENOBUFS: out of
// descriptors or memory) is reported on stderr at most once a second, then
// the loop sleeps 10 ms and tries again: the connection stays in the backlog
// and is served once descriptors are freed, never a busy loop, never an exit.
#pragma once

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "volt/io/async_io.hpp"
#include "volt/net/tcp.hpp"
#include "volt/volt.hpp"

namespace http_example {

inline constexpr std::string_view kHello =
    "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 13\r\n\r\nHello, World!";
inline constexpr std::string_view kNotFound = "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n";
inline constexpr std::string_view kNotAllowed =
    "HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
inline constexpr std::string_view kTooLarge =
    "HTTP/1.1 431 Request Header Fields Too Large\r\nContent-Length: 0\r\nConnection: "
    "close\r\n\r\n";
// The longest request head accepted (the input buffer's size).
inline constexpr std::size_t kMaxHead = 8192;

// What answer() did with the bytes it was given.
struct Answered {
  std::size_t consumed = 0;  // bytes of complete requests (or up to the 405)
  bool close = false;        // the connection must be closed after the write
};

// Appends to `output` the answers to the complete request heads at the start
// of `input` (each through its blank line), in order; stops after a 405.
inline Answered answer(std::string_view input, std::string& output) {
  Answered a;
  for (;;) {
    const std::string_view rest = input.substr(a.consumed);
    const std::size_t blank = rest.find("\r\n\r\n");
    if (blank == std::string_view::npos) return a;
    const std::string_view request = rest.substr(0, blank + 4);
    a.consumed += request.size();
    if (request.starts_with("GET / ")) {
      output += kHello;
    } else if (request.starts_with("GET ")) {
      output += kNotFound;
    } else {
      output += kNotAllowed;
      a.close = true;
      return a;
    }
  }
}

// Whether a connection on a Stream ends with an awaited stream.shutdown()
// when it ends cleanly (the peer closed, a 405/431, the server's shutdown)
// rather than by just closing the descriptor. False for a TcpStream (the
// benchmark's behaviour: no extra system call); a TLS stream sets it true
// (examples/https_server.cpp) so that the peer receives close_notify instead
// of a truncated stream.
template <class Stream>
inline constexpr bool kShutdownWhenDone = false;

// One connection, until the peer closes it, an error, a 405/431, or (with a
// `shutdown` token) the shutdown: idle, it closes at once; holding part of a
// request, it answers that request first. Without a token (the benchmark)
// each read is a plain read, as on the Tokio side. `guard` counts the
// connection as the server's work in flight until the task ends. A stream with
// set_nodelay() (a TcpStream) gets TCP_NODELAY first; a wrapper (TLS) is
// expected to have set it on its transport already.
template <class Stream>
requires volt::io::AsyncRead<Stream> && volt::io::AsyncWrite<Stream> volt::Task<void>
serve_connection(Stream stream, std::optional<volt::CancellationToken> shutdown = {},
                 [[maybe_unused]] std::optional<volt::WorkGuard> guard = {}) {
  if constexpr (requires { stream.set_nodelay(true); }) {
    if (!stream.set_nodelay(true)) co_return;
  }
  char input[kMaxHead];
  std::size_t filled = 0;
  std::string output;
  output.reserve(4 * kHello.size());
  for (;;) {
    volt::io::MutableBuffer free_space(input + filled, kMaxHead - filled);
    volt::Expected<std::size_t> n = volt::errc::closed;  // set by one of the reads below
    if (shutdown && filled == 0) {
      // Idle between requests: the shutdown may end the wait. Biased: a
      // request that has already arrived is read (and answered) first. The
      // read that loses has taken nothing (read is cancel-safe).
      auto first = co_await volt::select_biased(stream.read(free_space), shutdown->cancelled());
      if (first.index() == 1) break;
      n = std::move(std::get<0>(first));
    } else {
      // In the middle of a request (or no shutdown to watch): read the rest.
      n = co_await stream.read(free_space);
    }
    if (!n) co_return;  // reset, or a TLS error: nothing more to say to the peer
    if (*n == 0) break;
    filled += *n;

    const Answered a = answer(std::string_view(input, filled), output);
    bool close = a.close;
    std::memmove(input, input + a.consumed, filled - a.consumed);
    filled -= a.consumed;
    if (!close && filled == kMaxHead) {
      output += kTooLarge;
      close = true;
    }
    if (!output.empty()) {
      volt::Expected<void> sent = co_await stream.write_all(output);
      if (!sent) co_return;
      output.clear();
    }
    // Shutting down: the request in flight is answered; close unless the
    // next one has already begun to arrive.
    if (close || (shutdown && shutdown->is_cancelled() && filled == 0)) break;
  }
  // A clean end (see kShutdownWhenDone); for a TcpStream, the close below.
  if constexpr (kShutdownWhenDone<Stream>) (void)co_await stream.shutdown();
}

// A connection's share of a graceful shutdown: the token to watch and the
// WorkGuard that counts it as in flight (both empty for a server that is
// never shut down, the benchmark's).
struct ConnectionShutdown {
  std::optional<volt::CancellationToken> token;
  std::optional<volt::WorkGuard> guard;
};

// The default connection handler of accept_loop(): plain HTTP on the
// accepted TcpStream. A handler is called as handler(stream, shutdown) and
// returns the connection's task (spawned by accept_loop), which keeps
// `shutdown` (its guard) until it ends; its kScheme is what
// serve_until_signalled() prints ("http://...").
struct PlainHttp {
  static constexpr std::string_view kScheme = "http";
  volt::Task<void> operator()(volt::net::TcpStream stream, ConnectionShutdown shutdown) const {
    return serve_connection(std::move(stream), std::move(shutdown.token),
                            std::move(shutdown.guard));
  }
};

// Accepts until `shutdown` is triggered (forever without one), a task per
// connection (the one `handler` makes); each task gets the shutdown's token
// and a WorkGuard, so it may outlive the loop and still be drained.
template <class Handler = PlainHttp>
volt::Task<void> accept_loop(const volt::net::TcpListener& listener,
                             std::optional<volt::Shutdown> shutdown = {}, Handler handler = {}) {
  using namespace std::chrono_literals;
  std::chrono::steady_clock::time_point last_report{};
  for (;;) {
    volt::Expected<std::pair<volt::net::TcpStream, volt::net::SocketAddr>> accepted =
        volt::errc::closed;  // set by one of the accepts below
    if (shutdown) {
      // accept is cancel-safe: the losing accept has taken no connection.
      auto first = co_await volt::select(listener.accept(), shutdown->triggered());
      if (first.index() == 1) co_return;
      accepted = std::move(std::get<0>(first));
    } else {
      accepted = co_await listener.accept();
    }
    if (accepted) {
      // The guard is taken here, before the task first runs, so that a drain
      // starting meanwhile still counts the connection.
      ConnectionShutdown share;
      if (shutdown) share = {shutdown->token(), shutdown->start_work()};
      (void)volt::spawn(handler(std::move(accepted->first), std::move(share)));
      continue;
    }
    // Out of descriptors (EMFILE/ENFILE) or memory: the connection waits in
    // the backlog; back off so that the open connections can finish and free
    // descriptors, and report it without flooding stderr.
    const auto now = std::chrono::steady_clock::now();
    if (now - last_report >= 1s) {
      std::fprintf(stderr, "accept failed: %s (retrying)\n", accepted.error().message().c_str());
      last_report = now;
    }
    if (shutdown) {
      auto woke = co_await volt::select(volt::sleep(10ms), shutdown->triggered());
      if (woke.index() == 1) co_return;
    } else {
      co_await volt::sleep(10ms);
    }
  }
}

// Serves on `listener` until `shutdown` is triggered, then drains (see the
// header comment). True if every connection finished within `drain` (a
// forced shutdown, a second signal, ends the drain at once: false).
template <class Handler = PlainHttp>
volt::Task<bool> serve(const volt::net::TcpListener& listener, volt::Shutdown shutdown,
                       std::chrono::nanoseconds drain, Handler handler = {}) {
  co_await accept_loop(listener, shutdown, std::move(handler));
  co_return co_await shutdown.wait_pending(drain);
}

// The whole program of examples/http_server (and of the showcase's last
// part, and of examples/https_server with a TLS handler): listens on
// `address` ("ip:port"), prints "listening on http://ADDRESS/" (the
// handler's kScheme) on stdout, serves until SIGTERM or SIGINT, then shuts
// down gracefully (at most `drain`; a second signal ends the drain at once).
// Returns the process's exit status: 0 after a shutdown, 1 if it cannot
// listen.
template <class Handler = PlainHttp>
volt::Task<int> serve_until_signalled(std::string address, std::chrono::nanoseconds drain,
                                      Handler handler = {}) {
  // The handlers go in before the listener exists: from the moment a client
  // can connect, SIGTERM and SIGINT are counted instead of killing the
  // process (the first triggers the shutdown, a second forces its end).
  volt::Shutdown shutdown = volt::Shutdown::on_signals({SIGTERM, SIGINT});
  volt::Expected<volt::net::TcpListener> listener = volt::net::TcpListener::bind(address);
  if (!listener) {
    std::fprintf(stderr, "cannot listen on %s: %s\n", address.c_str(),
                 listener.error().message().c_str());
    co_return 1;
  }
  volt::Expected<volt::net::SocketAddr> local = listener->local_addr();
  const std::string scheme(Handler::kScheme);
  std::printf("listening on %s://%s/ (stop with Ctrl-C or SIGTERM)\n", scheme.c_str(),
              local ? local->to_string().c_str() : address.c_str());
  std::fflush(stdout);

  volt::JoinHandle<bool> server =
      volt::spawn(serve(*listener, shutdown, drain, std::move(handler)));
  co_await shutdown.triggered();
  std::fprintf(stderr, "stopping: no new connections, finishing the requests in flight\n");
  if (!co_await server)
    std::fprintf(stderr, "stopped without waiting for the last connections\n");
  else
    std::fprintf(stderr, "stopped: every connection finished\n");
  co_return 0;
}

}  // namespace http_example
