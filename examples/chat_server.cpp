// chat_server: a line-based chat room over TCP. Every line a client sends is
// delivered to every other client, prefixed with the sender's address:
//
//   ./build/release/examples/chat_server [ADDRESS]     # default 127.0.0.1:8081
//   nc 127.0.0.1 8081        (in two or more terminals; type lines)
//
//   [127.0.0.1:50312] hello
//
// Joins and departures are announced as lines beginning with "***"; a new
// client first receives "*** welcome, you are <its address>" (once it has
// that line, it sees every later message). Ctrl-C stops the server.
//
// With --tls CERT.pem KEY.pem (when volt was built with volt::tls) clients
// connect with TLS instead, the same chat inside it:
//
//   ./build/release/examples/chat_server 127.0.0.1:8081 --tls cert.pem key.pem
//   openssl s_client -quiet -CAfile ca.pem -connect localhost:8081
//
// Each connection's handshake (at most 10 s; a failure is reported on
// stderr and ends that connection only) comes before its welcome line; a
// client that leaves cleanly gets close_notify back.
//
// Design: one broadcast channel is the room (volt::broadcast, capacity 256).
// Each connection is split into its read half, read line by line
// (io::BufReader::lines) by a task that sends each line to the room, and its
// write half, written by the connection's own task, which receives from the
// room and forwards what others said. A client too slow to keep up with the
// room misses lines (the broadcast channel's lag), and is told how many;
// it never holds up the others. Lines are not length-limited: this is an
// example, not a hardened server. The connection code is a template over the
// stream (a TcpStream, or a tls::Stream<TcpStream> split the same way).
#include <chrono>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>

#include "volt/net/tcp.hpp"
#include "volt/volt.hpp"
#if VOLT_EXAMPLES_TLS
#include "volt/tls/context.hpp"
#include "volt/tls/stream.hpp"
#endif

namespace {

using namespace std::chrono_literals;
using volt::net::SocketAddr;
using volt::net::TcpStream;

// Whether a client that left cleanly is sent a shutdown() (TLS: close_notify)
// before the connection closes; a plain TCP connection just closes.
template <class Stream>
constexpr bool kShutdownWhenLeft = false;
#if VOLT_EXAMPLES_TLS
using TlsStream = volt::tls::Stream<TcpStream>;
template <>
constexpr bool kShutdownWhenLeft<TlsStream> = true;
#endif

struct ChatLine {
  SocketAddr from;
  std::string text;  // without the line end; "***..." for a notice
};
using Room = volt::broadcast::Sender<ChatLine>;

// Sends each line the client writes to the room, until it disconnects.
template <class ReadHalf>
volt::Task<void> read_lines(ReadHalf input, Room room, SocketAddr me) {
  auto lines = volt::io::BufReader(std::move(input)).lines();
  for (;;) {
    volt::Expected<std::optional<std::string>> line = co_await lines.next_line();
    if (!line || !*line) co_return;  // error or end of stream: the client left
    (void)room.send(ChatLine{me, std::move(**line)});
  }
}

template <class Stream>
volt::Task<void> client(Stream stream, SocketAddr me, Room room) {
  // Subscribed before the welcome: a client that has read its welcome line
  // receives everything sent afterwards.
  volt::broadcast::Receiver<ChatLine> heard = room.subscribe();
  auto [input, output] = std::move(stream).into_split();
  volt::Expected<void> greeted =
      co_await output.write_all("*** welcome, you are " + me.to_string() + "\n");
  if (!greeted) co_return;
  (void)room.send(ChatLine{me, "*** " + me.to_string() + " joined"});
  std::fprintf(stderr, "%s joined\n", me.to_string().c_str());

  volt::JoinHandle<void> reader = volt::spawn(read_lines(std::move(input), room, me));
  [[maybe_unused]] bool reader_ended = false;
  for (;;) {
    // Whichever comes first: something said in the room, or the reader
    // ending (the client closed its side or reset the connection).
    auto next = co_await volt::select(heard.recv(), reader);
    if (next.index() == 1) {
      reader_ended = true;
      break;
    }
    volt::broadcast::RecvResult<ChatLine>& said = std::get<0>(next);
    std::string out;
    if (said) {
      if (said->from == me) continue;  // not echoed to its author
      out = said->text.starts_with("***") ? said->text + "\n"
                                          : "[" + said->from.to_string() + "] " + said->text + "\n";
    } else if (said.error() == volt::errc::lagged) {
      out = "*** you missed " + std::to_string(said.missed()) + " lines\n";
    } else {
      break;  // the room closed
    }
    volt::Expected<void> sent = co_await output.write_all(out);
    if (!sent) break;
  }
  reader.abort();  // if the write side failed first; the socket closes with both halves
  (void)room.send(ChatLine{me, "*** " + me.to_string() + " left"});
  std::fprintf(stderr, "%s left\n", me.to_string().c_str());
  if constexpr (kShutdownWhenLeft<Stream>) {
    if (reader_ended) (void)co_await output.shutdown();
  }
}

#if VOLT_EXAMPLES_TLS
// A TLS client: the handshake, then the chat over the tls::Stream.
volt::Task<void> tls_client(volt::tls::Context context, TcpStream tcp, SocketAddr me, Room room) {
  volt::Expected<TlsStream> tls =
      (co_await volt::timeout(10s, volt::tls::accept(context, std::move(tcp)))).flatten();
  if (!tls) {
    std::fprintf(stderr, "%s: TLS handshake failed: %s\n", me.to_string().c_str(),
                 tls.error().message().c_str());
    co_return;
  }
  co_await client(std::move(*tls), me, std::move(room));
}
#else
// Without volt::tls there is no Context: --tls is refused in main().
struct NoTls {};
#endif

#if VOLT_EXAMPLES_TLS
using TlsContext = volt::tls::Context;
#else
using TlsContext = NoTls;
#endif

// Serves plain TCP clients, or TLS clients when `tls` holds a context.
volt::Task<int> serve(std::string address, [[maybe_unused]] std::optional<TlsContext> tls) {
  volt::Expected<volt::net::TcpListener> listener = volt::net::TcpListener::bind(address);
  if (!listener) {
    std::fprintf(stderr, "cannot listen on %s: %s\n", address.c_str(),
                 listener.error().message().c_str());
    co_return 1;
  }
  std::printf("listening on %s\n", listener->local_addr()->to_string().c_str());
  std::fflush(stdout);
  // The channel's own receiver is dropped: each client subscribes its own.
  Room room = volt::broadcast::channel<ChatLine>(256).first;
  for (;;) {
    auto accepted = co_await listener->accept();
    if (!accepted) {
      std::fprintf(stderr, "accept: %s (retrying)\n", accepted.error().message().c_str());
      co_await volt::sleep(50ms);  // out of descriptors: the connection waits in the backlog
      continue;
    }
#if VOLT_EXAMPLES_TLS
    if (tls) {
      (void)volt::spawn(tls_client(*tls, std::move(accepted->first), accepted->second, room));
      continue;
    }
#endif
    (void)volt::spawn(client(std::move(accepted->first), accepted->second, room));
  }
}

int usage(const char* argv0) {
  std::fprintf(stderr, "usage: %s [ADDRESS] [--tls CERT.pem KEY.pem]\n", argv0);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string address = "127.0.0.1:8081";
  bool have_address = false;
  const char* cert = nullptr;
  const char* key = nullptr;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--tls") {
      if (i + 2 >= argc) return usage(argv[0]);
      cert = argv[i + 1];
      key = argv[i + 2];
      i += 2;
    } else if (arg.starts_with("-") || have_address) {
      return usage(argv[0]);
    } else {
      address = arg;
      have_address = true;
    }
  }
  std::optional<TlsContext> tls;
  if (cert != nullptr) {
#if VOLT_EXAMPLES_TLS
    volt::Expected<volt::tls::Context> context =
        volt::tls::Context::server().certificate_chain_file(cert).private_key_file(key).build();
    if (!context) {
      std::fprintf(stderr, "cannot use %s and %s: %s\n", cert, key,
                   context.error().message().c_str());
      return 1;
    }
    tls = std::move(*context);
#else
    (void)key;
    std::fprintf(stderr, "--tls: this chat_server was built without volt::tls (OpenSSL 3)\n");
    return 2;
#endif
  }
  volt::Runtime rt = volt::Runtime::Builder().thread_name("chat").build();
  return rt.block_on(serve(address, std::move(tls)));
}
