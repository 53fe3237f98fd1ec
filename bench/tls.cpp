// bench/tls.cpp: Tier 9, TLS over loopback with OpenSSL; the same work as
// the Tokio side's tls.rs (tokio-openssl over the same OpenSSL).
//
// Both ends: TLS 1.3 only, full handshakes (no session cache, no tickets),
// the test certificate in bench/tls/ (the server presents it, the client
// trusts only it and checks the name "localhost"), TCP_NODELAY.
//
// Allocations: the harness counts operator new, which is all volt does; the
// Tokio side counts Rust's allocator, which does not see OpenSSL's mallocs
// either. OpenSSL's own allocations are counted here through
// CRYPTO_set_mem_functions and printed on stderr per benchmark, for
// information ("openssl allocs/op").
#include <openssl/crypto.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "harness.hpp"
#include "http_handler.hpp"
#include "volt/io/util.hpp"
#include "volt/net/tcp.hpp"
#include "volt/sync/notify.hpp"
#include "volt/task/join_handle.hpp"
#include "volt/tls/stream.hpp"

#ifndef VOLT_BENCH_TLS_DIR
#error "VOLT_BENCH_TLS_DIR (bench/tls) must be defined by the build"
#endif

namespace volt_bench {
namespace {

using volt::net::SocketAddr;
using volt::net::TcpListener;
using volt::net::TcpStream;
using TlsStream = volt::tls::Stream<TcpStream>;

// ---- OpenSSL's allocations ----

// One counter per thread, each on its own cache line: OpenSSL allocates a
// few times per record, and a shared counter bouncing between the workers
// measurably slowed tls_bulk (the Tokio side counts nothing of OpenSSL's).
// A slot has one writer, so it counts with a plain load and store, not a
// locked read-modify-write (about 1 % of tls_bulk's CPU); the threads past
// the first kAllocSlots share the last slot, which therefore counts with
// fetch_add.
struct alignas(64) AllocSlot {
  std::atomic<std::uint64_t> n{0};
};
constexpr std::size_t kAllocSlots = 64;
AllocSlot alloc_slots[kAllocSlots];
std::atomic<std::size_t> next_alloc_slot{0};

void count_openssl_alloc() {
  thread_local const std::size_t index =
      std::min(next_alloc_slot.fetch_add(1, std::memory_order_relaxed), kAllocSlots - 1);
  // relaxed: a statistic, read after the window by the benchmark's thread.
  std::atomic<std::uint64_t>& n = alloc_slots[index].n;
  if (index == kAllocSlots - 1)
    n.fetch_add(1, std::memory_order_relaxed);
  else
    n.store(n.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
}

std::uint64_t openssl_alloc_total() {
  std::uint64_t total = 0;
  for (const AllocSlot& s : alloc_slots)
    total += s.n.load(std::memory_order_relaxed);
  return total;
}

void* counted_malloc(std::size_t n, const char*, int) {
  count_openssl_alloc();
  return std::malloc(n);
}
void* counted_realloc(void* p, std::size_t n, const char*, int) {
  count_openssl_alloc();
  return std::realloc(p, n);
}
void counted_free(void* p, const char*, int) {
  std::free(p);
}

// Installed before main (OpenSSL refuses once it has allocated anything).
const bool openssl_counting =
    CRYPTO_set_mem_functions(counted_malloc, counted_realloc, counted_free) == 1;

struct OpensslAllocs {
  std::uint64_t start = openssl_alloc_total();
  void report(const char* name, std::uint64_t ops) const {
    if (!openssl_counting) return;
    const std::uint64_t n = openssl_alloc_total() - start;
    std::fprintf(stderr, "%s: openssl allocs/op %.2f\n", name,
                 static_cast<double>(n) / static_cast<double>(ops));
  }
};

// ---- contexts ----

volt::tls::Context server_context() {
  return expect(volt::tls::Context::server()
                    .certificate_chain_file(VOLT_BENCH_TLS_DIR "/cert.pem")
                    .private_key_file(VOLT_BENCH_TLS_DIR "/key.pem")
                    .min_version(volt::tls::Version::tls1_3)
                    .session_resumption(false)
                    .build(),
                "TLS server context (bench/tls)");
}

volt::tls::Context client_context() {
  return expect(volt::tls::Context::client()
                    .ca_file(VOLT_BENCH_TLS_DIR "/cert.pem")
                    .min_version(volt::tls::Version::tls1_3)
                    .session_resumption(false)
                    .build(),
                "TLS client context (bench/tls)");
}

volt::Task<TlsStream> accept_tls(volt::tls::Context ctx, TcpStream tcp) {
  volt::Expected<TlsStream> s = co_await volt::tls::accept(ctx, std::move(tcp));
  co_return expect(std::move(s), "TLS accept");
}

volt::Task<TlsStream> connect_tls(volt::tls::Context ctx, TcpStream tcp) {
  volt::Expected<TlsStream> s = co_await volt::tls::connect(ctx, std::move(tcp), "localhost");
  co_return expect(std::move(s), "TLS connect");
}

// ---- tls_handshake ----

// A server connection: handshake, read one byte, write it back.
volt::Task<void> handshake_server_conn(volt::tls::Context ctx, TcpStream tcp) {
  TlsStream s = co_await accept_tls(std::move(ctx), std::move(tcp));
  unsigned char b[1];
  volt::Expected<void> got = co_await volt::io::read_exact(s, b);
  expect(got, "tls_handshake: server read");
  volt::Expected<void> sent = co_await s.write_all(volt::io::ConstBuffer(b, 1));
  expect(sent, "tls_handshake: server write");
}

volt::Task<void> handshake_server(TcpListener listener, volt::tls::Context ctx, std::uint64_t ops) {
  std::vector<volt::JoinHandle<void>> conns;
  conns.reserve(ops);
  for (std::uint64_t i = 0; i < ops; ++i) {
    auto accepted = co_await listener.accept();
    auto conn = expect(std::move(accepted), "tls_handshake: accept");
    expect(conn.first.set_nodelay(true), "TCP_NODELAY");
    conns.push_back(volt::spawn(handshake_server_conn(ctx, std::move(conn.first))));
  }
  for (auto& c : conns)
    co_await c;
}

volt::Task<void> handshake_client(volt::tls::Context ctx, SocketAddr address, std::uint64_t n) {
  for (std::uint64_t i = 0; i < n; ++i) {
    volt::Expected<TcpStream> connected = co_await TcpStream::connect(address);
    TcpStream tcp = expect(std::move(connected), "tls_handshake: connect");
    expect(tcp.set_nodelay(true), "TCP_NODELAY");
    TlsStream s = co_await connect_tls(ctx, std::move(tcp));
    volt::Expected<void> sent = co_await s.write_all(std::string_view("x"));
    expect(sent, "tls_handshake: client write");
    unsigned char b[1];
    volt::Expected<void> got = co_await volt::io::read_exact(s, b);
    expect(got, "tls_handshake: client read");
  }
}

// 4 client tasks, each ops/4 times: connect, full handshake, one byte there
// and back, close. The server accepts in a loop, a task per connection.
volt::Task<Sample> tls_handshake(std::uint64_t ops) {
  constexpr std::uint64_t kClients = 4;
  TcpListener listener = loopback_listener(0);
  const SocketAddr address = expect(listener.local_addr(), "listener address");
  volt::tls::Context server_ctx = server_context();
  volt::tls::Context client_ctx = client_context();
  volt::JoinHandle<void> server =
      volt::spawn(handshake_server(std::move(listener), server_ctx, ops));
  const OpensslAllocs openssl;
  Meter meter = Meter::start();
  std::vector<volt::JoinHandle<void>> clients;
  clients.reserve(kClients);
  for (std::uint64_t c = 0; c < kClients; ++c)
    clients.push_back(volt::spawn(handshake_client(client_ctx, address, share(ops, kClients, c))));
  for (auto& c : clients)
    co_await c;
  Sample sample = meter.stop();
  openssl.report("tls_handshake", ops);
  co_await server;
  co_return sample;
}

// ---- tls_echo_rtt ----

volt::Task<void> echo_server(volt::tls::Context ctx, TcpStream tcp) {
  TlsStream s = co_await accept_tls(std::move(ctx), std::move(tcp));
  unsigned char buf[1024];
  for (;;) {
    volt::Expected<std::size_t> n = co_await s.read(buf);
    if (!n || *n == 0) co_return;
    volt::Expected<void> sent = co_await s.write_all(volt::io::ConstBuffer(buf, *n));
    expect(sent, "tls_echo_rtt: echo");
  }
}

// One connection (handshake outside the window); 64 bytes there and back,
// ops times.
volt::Task<Sample> tls_echo_rtt(std::uint64_t ops) {
  TcpListener listener = loopback_listener(0);
  std::pair<TcpStream, TcpStream> pair = co_await connected_pair(listener);
  volt::JoinHandle<void> echo = volt::spawn(echo_server(server_context(), std::move(pair.second)));
  TlsStream client = co_await connect_tls(client_context(), std::move(pair.first));
  unsigned char message[64];
  std::memset(message, 0x5a, sizeof message);
  unsigned char reply[64];
  const OpensslAllocs openssl;
  Meter meter = Meter::start();
  for (std::uint64_t i = 0; i < ops; ++i) {
    volt::Expected<void> sent = co_await client.write_all(message);
    expect(sent, "tls_echo_rtt: write");
    volt::Expected<void> got = co_await volt::io::read_exact(client, reply);
    expect(got, "tls_echo_rtt: read");
  }
  Sample sample = meter.stop();
  openssl.report("tls_echo_rtt", ops);
  volt::Expected<void> closed = co_await client.shutdown();
  (void)closed;
  co_await echo;
  co_return sample;
}

// ---- tls_bulk ----

constexpr std::size_t kChunk = 16 << 10;

volt::Task<void> bulk_writer(volt::tls::Context ctx, TcpStream tcp, volt::Notify* start,
                             std::uint64_t ops) {
  TlsStream s = co_await accept_tls(std::move(ctx), std::move(tcp));
  std::vector<unsigned char> chunk(kChunk);
  for (std::size_t i = 0; i < kChunk; ++i)
    chunk[i] = static_cast<unsigned char>(i % 251);
  co_await start->notified();
  for (std::uint64_t i = 0; i < ops; ++i) {
    volt::Expected<void> sent = co_await s.write_all(chunk);
    expect(sent, "tls_bulk: write");
  }
  volt::Expected<void> closed = co_await s.shutdown();
  (void)closed;
}

// One connection (handshake outside the window); the server writes ops
// chunks of 16 KiB, the client reads until it has them all.
volt::Task<Sample> tls_bulk(std::uint64_t ops) {
  TcpListener listener = loopback_listener(0);
  std::pair<TcpStream, TcpStream> pair = co_await connected_pair(listener);
  volt::Notify start;
  volt::JoinHandle<void> writer =
      volt::spawn(bulk_writer(server_context(), std::move(pair.second), &start, ops));
  TlsStream client = co_await connect_tls(client_context(), std::move(pair.first));
  std::vector<unsigned char> buf(64 << 10);
  const OpensslAllocs openssl;
  Meter meter = Meter::start();
  start.notify_one();
  std::uint64_t total = 0;
  while (total < ops * kChunk) {
    volt::Expected<std::size_t> n = co_await client.read(buf);
    if (expect(std::move(n), "tls_bulk: read") == 0)
      throw std::logic_error("tls_bulk: stream ended early");
    total += *n;
  }
  Sample sample = meter.stop();
  openssl.report("tls_bulk", ops);
  co_await writer;
  co_return sample;
}

// ---- https_plaintext ----

// One connection: TCP_NODELAY, the handshake, then the http_plaintext
// handler over TLS (as the Tokio side: no close_notify at the end).
volt::Task<void> serve_https_connection(volt::tls::Context ctx, TcpStream tcp) {
  if (!tcp.set_nodelay(true)) co_return;
  volt::Expected<TlsStream> tls = co_await volt::tls::accept(ctx, std::move(tcp));
  if (!tls) co_return;
  co_await http_example::serve_connection(std::move(*tls));
}

struct HttpsHandler {
  volt::tls::Context ctx;
  volt::Task<void> operator()(TcpStream tcp, http_example::ConnectionShutdown) const {
    return serve_https_connection(ctx, std::move(tcp));
  }
};

volt::Task<void> serve_https(TcpListener listener) {
  // Named, not a braced temporary in the co_await statement: g++ 12 destroys
  // such an aggregate twice when the frame is destroyed while suspended there
  // (README, "Compiler issues (GCC 12)", rule 1). Here that was the runtime's
  // shutdown: the context's reference count went one too low, a use after
  // free of the SSL_CTX's state found under ASan (and once as heap corruption
  // in a Release run).
  HttpsHandler handler{server_context()};
  co_await http_example::accept_loop(listener, {}, std::move(handler));
}

// http_plaintext's server behind TLS 1.3, driven by wrk over https.
Record https_plaintext(const Config& config) {
  return wrk_bench(config, "https_plaintext", "https", serve_https);
}

constexpr Bench kBenches[] = {
    task_bench("tls_handshake", 200, tls_handshake),
    task_bench("tls_echo_rtt", 10'000, tls_echo_rtt),
    task_bench("tls_bulk", 4'096, tls_bulk),
    http_bench("https_plaintext", https_plaintext),
};

}  // namespace

std::span<const Bench> tls_benches() {
  return kBenches;
}

}  // namespace volt_bench
