// echo_client: sends lines to an echo server and checks that each comes back
// unchanged.
//
//   ./build/release/examples/echo_client [ADDRESS] [--count N]
//
// ADDRESS is "host:port" (default 127.0.0.1:8080; a name is resolved with
// lookup_host). Without --count, every line read from stdin is sent and its
// echo printed on stdout; with --count N, N numbered test messages of
// varying length are sent, each checked, and a summary printed.
//
// Exit status: 0 when every echo matched; 1 on a mismatch, a connection
// error or an early end of stream; 2 on a bad command line.
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <string>
#include <string_view>

#include "volt/net/tcp.hpp"
#include "volt/volt.hpp"

namespace {

// Sends `message` and reads back exactly as many bytes; true if they match.
volt::Task<bool> round_trip(const volt::net::TcpStream& stream, const std::string& message) {
  volt::Expected<void> sent = co_await stream.write_all(message);
  if (!sent) {
    std::fprintf(stderr, "write: %s\n", sent.error().message().c_str());
    co_return false;
  }
  std::string echo(message.size(), '\0');
  volt::Expected<void> got = co_await stream.read_exact(echo);
  if (!got) {
    std::fprintf(stderr, "read: %s\n", got.error().message().c_str());
    co_return false;
  }
  if (echo != message) {
    std::fprintf(stderr, "mismatch: sent %zu bytes, the echo differs\n", message.size());
    co_return false;
  }
  co_return true;
}

std::optional<std::string> read_stdin_line() {
  std::string line;
  if (!std::getline(std::cin, line)) return std::nullopt;
  return line;
}

// Reads one line of stdin on the blocking pool (a worker must never block).
// A named function, not a lambda written inside the co_await statement (a
// lambda with captures there is miscompiled by g++ 12: README, "Compiler
// issues").
volt::Task<std::optional<std::string>> stdin_line() {
  co_return co_await volt::spawn_blocking(read_stdin_line);
}

volt::Task<int> run(std::string address, std::optional<unsigned long> count) {
  volt::Expected<volt::net::TcpStream> stream = co_await volt::net::TcpStream::connect(address);
  if (!stream) {
    std::fprintf(stderr, "cannot connect to %s: %s\n", address.c_str(),
                 stream.error().message().c_str());
    co_return 1;
  }
  (void)stream->set_nodelay(true);

  if (count) {
    std::size_t bytes = 0;
    for (unsigned long i = 0; i < *count; ++i) {
      // "message 17: xxxx...\n", 0..99 filler bytes: messages differ in
      // content and length, so a lost, duplicated or reordered byte shows.
      std::string message = "message " + std::to_string(i) + ": ";
      message.append(i % 100, static_cast<char>('a' + i % 26));
      message += '\n';
      bool ok = co_await round_trip(*stream, message);
      if (!ok) co_return 1;
      bytes += message.size();
    }
    std::printf("%lu messages (%zu bytes) echoed correctly\n", *count, bytes);
    co_return 0;
  }

  for (;;) {
    std::optional<std::string> line = co_await stdin_line();
    if (!line) break;
    *line += '\n';
    bool ok = co_await round_trip(*stream, *line);
    if (!ok) co_return 1;
    std::fwrite(line->data(), 1, line->size(), stdout);
    std::fflush(stdout);
  }
  co_return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string address = "127.0.0.1:8080";
  std::optional<unsigned long> count;
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg == "--count" && i + 1 < argc) {
      char* end = nullptr;
      count = std::strtoul(argv[++i], &end, 10);
      if (end == argv[i] || *end != '\0') {
        std::fprintf(stderr, "--count: `%s` is not a number\n", argv[i]);
        return 2;
      }
    } else if (!arg.starts_with("-")) {
      address = arg;
    } else {
      std::fprintf(stderr, "usage: echo_client [HOST:PORT] [--count N]\n");
      return 2;
    }
  }
  volt::Runtime rt = volt::Runtime::Builder().worker_threads(1).thread_name("echo-client").build();
  return rt.block_on(run(address, count));
}
