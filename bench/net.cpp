// bench/net.cpp: Tier 6, loopback networking; the same work as
// the Tokio side's net.rs.
//
// The TCP benchmarks make their connections (bind, connect, accept, spawn the
// echo handlers, TCP_NODELAY on both ends) before the timer starts; the
// window covers the round trips only (for tcp_echo_conns: spawning the 50
// client tasks and awaiting them).
//
// http_plaintext runs the HTTP server of examples/http_handler.hpp (the one
// examples/http_server serves) on a runtime in this process, on a free
// loopback port (or --port), and drives it with `wrk -t1 -c64 -d5s` (-d1s
// with --quick) as a child process: the figure is wrk's Requests/sec, ops is
// wrk's request count, and the allocation figures are this process's
// allocations while wrk ran divided by that count. It runs once.
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "harness.hpp"
#include "http_handler.hpp"
#include "volt/net/tcp.hpp"

extern char** environ;

namespace volt_bench {

using volt::net::SocketAddr;
using volt::net::TcpListener;
using volt::net::TcpStream;

TcpListener loopback_listener(std::uint16_t port) {
  return expect(TcpListener::bind(SocketAddr(volt::net::IpAddr::v4_loopback(), port)),
                "cannot listen on 127.0.0.1");
}

// A client stream and the server's end of the same connection. On loopback
// the kernel completes the handshake from the listen backlog, so connecting
// first and accepting second does not stall.
volt::Task<std::pair<TcpStream, TcpStream>> connected_pair(const TcpListener& listener) {
  const SocketAddr address = expect(listener.local_addr(), "listener address");
  // (co_await results are bound to locals before use: GCC 12 mishandles
  // some co_awaits nested in a larger expression.)
  volt::Expected<TcpStream> connected = co_await TcpStream::connect(address);
  TcpStream client = expect(std::move(connected), "connect to the server");
  auto accept_result = co_await listener.accept();
  auto accepted = expect(std::move(accept_result), "accept the client");
  expect(client.set_nodelay(true), "TCP_NODELAY");
  expect(accepted.first.set_nodelay(true), "TCP_NODELAY");
  co_return std::pair<TcpStream, TcpStream>(std::move(client), std::move(accepted.first));
}

namespace {

constexpr std::size_t kMessageLen = 64;

// Writes 64 bytes and reads the 64 echoed bytes back, `rounds` times.
volt::Task<void> round_trips(const TcpStream& stream, std::uint64_t rounds) {
  unsigned char message[kMessageLen];
  std::memset(message, 0x5a, sizeof message);
  unsigned char reply[kMessageLen];
  for (std::uint64_t i = 0; i < rounds; ++i) {
    volt::Expected<void> sent = co_await stream.write_all(message);
    expect(sent, "write to the echo server");
    volt::Expected<void> received = co_await stream.read_exact(reply);
    expect(received, "read the echo back");
  }
}

// A client task of tcp_echo_conns: owns its connection, closed when it ends
// (its echo handler then sees end of stream and ends).
volt::Task<void> client_round_trips(TcpStream stream, std::uint64_t rounds) {
  co_await round_trips(stream, rounds);
}

// Echoes whatever arrives until the peer closes the connection.
volt::Task<void> echo(TcpStream stream) {
  unsigned char buffer[1024];
  for (;;) {
    volt::Expected<std::size_t> n = co_await stream.read(buffer);
    if (expect(n, "read from the client") == 0) co_return;
    volt::Expected<void> sent = co_await stream.write_all(volt::io::ConstBuffer(buffer, *n));
    expect(sent, "write to the client");
  }
}

// One connection; the client writes 64 bytes and reads 64 bytes back, `ops`
// times in sequence.
volt::Task<Sample> tcp_echo_rtt(std::uint64_t ops) {
  TcpListener listener = loopback_listener(0);
  std::pair<TcpStream, TcpStream> pair = co_await connected_pair(listener);
  volt::JoinHandle<void> echoer = volt::spawn(echo(std::move(pair.second)));

  Meter meter = Meter::start();
  co_await round_trips(pair.first, ops);
  Sample sample = meter.stop();

  pair.first.close();  // the echo handler sees end of stream and ends
  co_await echoer;
  co_return sample;
}

// 50 connections at once, each ops / 50 round trips of 64 bytes (200 in a
// full run); ns_per_op = wall time / ops.
volt::Task<Sample> tcp_echo_conns(std::uint64_t ops) {
  constexpr std::uint64_t kConnections = 50;
  const std::uint64_t rounds = ops / kConnections;
  TcpListener listener = loopback_listener(0);
  std::vector<TcpStream> clients;
  std::vector<volt::JoinHandle<void>> echoes;
  clients.reserve(kConnections);
  echoes.reserve(kConnections);
  for (std::uint64_t i = 0; i < kConnections; ++i) {
    std::pair<TcpStream, TcpStream> pair = co_await connected_pair(listener);
    clients.push_back(std::move(pair.first));
    echoes.push_back(volt::spawn(echo(std::move(pair.second))));
  }

  Meter meter = Meter::start();
  std::vector<volt::JoinHandle<void>> tasks;
  tasks.reserve(kConnections);
  for (TcpStream& client : clients)
    tasks.push_back(volt::spawn(client_round_trips(std::move(client), rounds)));
  for (auto& task : tasks)
    co_await task;
  Sample sample = meter.stop();

  for (auto& e : echoes)
    co_await e;
  co_return sample;
}

// ---- http_plaintext ----

// The listener lives in the task's frame, so it is closed on a runtime
// thread when the task is aborted or the runtime shuts down.
volt::Task<void> serve_forever(TcpListener listener) {
  co_await http_example::accept_loop(listener);
}

volt::Runtime build_runtime(std::size_t workers) {
  return volt::Runtime::Builder::multi_thread().worker_threads(workers).build();
}

// Binding needs the runtime (its I/O driver): done inside block_on.
volt::Task<TcpListener> bind_on_runtime(std::uint16_t port) {
  co_return loopback_listener(port);
}

// Reads a pipe to its end.
std::string drain(int fd) {
  std::string out;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n > 0) {
      out.append(buf, static_cast<std::size_t>(n));
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      return out;
    }
  }
}

// The text after `label` on the line that starts with it (leading blanks
// ignored), trimmed.
std::optional<std::string_view> wrk_field(std::string_view report, std::string_view label) {
  while (!report.empty()) {
    const std::size_t nl = report.find('\n');
    std::string_view line = report.substr(0, nl);
    report = nl == std::string_view::npos ? std::string_view() : report.substr(nl + 1);
    line.remove_prefix(std::min(line.find_first_not_of(" \t"), line.size()));
    if (!line.starts_with(label)) continue;
    line.remove_prefix(label.size());
    line.remove_prefix(std::min(line.find_first_not_of(" \t"), line.size()));
    line = line.substr(0, line.find_last_not_of(" \t\r") + 1);
    return line;
  }
  return std::nullopt;
}

// One run of wrk: its wait status, its stdout and stderr, and what this
// process allocated while it ran.
struct WrkRun {
  int status = 0;
  std::string report;
  std::string errors;
  Sample sample;
};

// Runs wrk with `args`; the measurement window covers exactly its run.
WrkRun run_wrk(std::vector<std::string> args) {
  int out[2], err[2];
  if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0)
    throw std::runtime_error("pipe: " + std::string(std::strerror(errno)));
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, err[1], STDERR_FILENO);
  std::vector<char*> argv;
  for (auto& a : args)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  const int spawned = ::posix_spawnp(&pid, "wrk", &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(out[1]);
  ::close(err[1]);
  if (spawned != 0) {
    ::close(out[0]);
    ::close(err[0]);
    throw std::runtime_error("cannot start wrk (Debian package `wrk`; scripts/install-deps wrk): " +
                             std::string(std::strerror(spawned)));
  }

  WrkRun run;
  Meter meter = Meter::start();
  // wrk writes a few hundred bytes: it cannot fill a pipe, so waiting first
  // and reading afterwards (as the Tokio side does) cannot deadlock.
  while (::waitpid(pid, &run.status, 0) < 0 && errno == EINTR) {
  }
  run.sample = meter.stop();
  run.report = drain(out[0]);
  run.errors = drain(err[0]);
  ::close(out[0]);
  ::close(err[0]);
  return run;
}

}  // namespace

// Starts `serve` on a runtime, runs `wrk -t1 -c64 -d5s` (-d1s with --quick)
// against it (SCHEME://127.0.0.1:PORT/) and reports wrk's Requests/sec.
Record wrk_bench(const Config& config, std::string_view name, std::string_view scheme,
                 ServeFn serve) {
  const int seconds = config.quick ? 1 : 5;
  std::optional<volt::Runtime> runtime(build_runtime(config.workers));
  TcpListener listener =
      runtime->block_on(bind_on_runtime(static_cast<std::uint16_t>(std::max(config.port, 0))));
  const std::uint16_t port = expect(listener.local_addr(), "listener address").port();
  volt::JoinHandle<void> server = runtime->spawn(serve(std::move(listener)));

  std::string url(scheme);
  url += "://127.0.0.1:";
  url += std::to_string(port);
  url += '/';
  WrkRun wrk = run_wrk({"wrk", "-t1", "-c64", "-d" + std::to_string(seconds) + "s", url});
  server.abort();
  runtime.reset();  // closes the connections and the listener

  if (!WIFEXITED(wrk.status) || WEXITSTATUS(wrk.status) != 0)
    throw std::runtime_error("wrk failed (status " + std::to_string(wrk.status) + "):\n" +
                             wrk.report + wrk.errors);
  for (std::string_view label : {"Non-2xx", "Socket errors"})
    if (auto found = wrk_field(wrk.report, label))
      std::fprintf(stderr, "warning: wrk reported: %.*s %.*s\n", static_cast<int>(label.size()),
                   label.data(), static_cast<int>(found->size()), found->data());

  std::optional<std::string_view> rps_text = wrk_field(wrk.report, "Requests/sec:");
  char* end = nullptr;
  const std::string rps_string(rps_text.value_or(""));
  const double rps = std::strtod(rps_string.c_str(), &end);
  if (!rps_text || end == rps_string.c_str())
    throw std::runtime_error("no Requests/sec in wrk's output:\n" + wrk.report);
  // "  123456 requests in 5.00s, 15.89MB read"
  std::uint64_t requests = 0;
  const std::size_t in = wrk.report.find(" requests in ");
  if (in != std::string::npos) {
    const std::size_t line = wrk.report.rfind('\n', in);
    requests =
        std::strtoull(wrk.report.c_str() + (line == std::string::npos ? 0 : line + 1), nullptr, 10);
  }
  if (requests == 0) throw std::runtime_error("no request count in wrk's output:\n" + wrk.report);

  Record record;
  record.name = name;
  record.rps = true;
  record.figure = rps;
  record.allocs_per_op = static_cast<double>(wrk.sample.allocs) / static_cast<double>(requests);
  record.bytes_per_op = static_cast<double>(wrk.sample.bytes) / static_cast<double>(requests);
  record.ops = requests;
  return record;
}

namespace {

Record http_plaintext(const Config& config) {
  return wrk_bench(config, "http_plaintext", "http", serve_forever);
}

volt::Task<void> serve_http_task(std::uint16_t port, std::size_t workers) {
  TcpListener listener = loopback_listener(port);
  std::fprintf(stderr, "serving http://%s/ with %zu worker(s)\n",
               expect(listener.local_addr(), "listener address").to_string().c_str(), workers);
  co_await http_example::accept_loop(listener);
}

constexpr Bench kBenches[] = {
    task_bench("tcp_echo_rtt", 10'000, tcp_echo_rtt),
    task_bench("tcp_echo_conns", 50 * 200, tcp_echo_conns),
    http_bench("http_plaintext", http_plaintext),
};

}  // namespace

std::span<const Bench> net_benches() {
  return kBenches;
}

int serve_http(const Config& config) {
  volt::Runtime runtime = build_runtime(config.workers);
  runtime.block_on(serve_http_task(static_cast<std::uint16_t>(config.serve_http), config.workers));
  return 0;
}

}  // namespace volt_bench
