// echo_server: sends back every byte it receives, a task per connection.
//
//   ./build/release/examples/echo_server [ADDRESS]     # default 127.0.0.1:8080
//   ./build/release/examples/echo_client 127.0.0.1:8080 --count 1000
//
// "ADDRESS" is "ip:port" ("[::1]:8080" for IPv6; port 0 picks a free port,
// printed on the first line of stdout). Ctrl-C stops it.
//
// Each connection is echoed until the client closes it (or resets it: the
// error ends that connection only). Running out of file descriptors while
// accepting (EMFILE) does not stop the server: the connection waits in the
// listen backlog and the loop retries after a short sleep.
#include <chrono>
#include <cstdio>
#include <string>

#include "volt/net/tcp.hpp"
#include "volt/volt.hpp"

namespace {

using namespace std::chrono_literals;

volt::Task<void> echo(volt::net::TcpStream stream, volt::net::SocketAddr peer) {
  (void)stream.set_nodelay(true);  // a small echo should not wait for Nagle
  char buf[16 * 1024];
  std::size_t total = 0;
  for (;;) {
    volt::Expected<std::size_t> n = co_await stream.read(buf);
    if (!n) {
      std::fprintf(stderr, "%s: read: %s\n", peer.to_string().c_str(), n.error().message().c_str());
      break;
    }
    if (*n == 0) break;  // the client closed its side
    volt::Expected<void> sent = co_await stream.write_all(volt::io::ConstBuffer(buf, *n));
    if (!sent) {
      std::fprintf(stderr, "%s: write: %s\n", peer.to_string().c_str(),
                   sent.error().message().c_str());
      break;
    }
    total += *n;
  }
  std::fprintf(stderr, "%s: closed after %zu bytes\n", peer.to_string().c_str(), total);
}

volt::Task<int> serve(std::string address) {
  volt::Expected<volt::net::TcpListener> listener = volt::net::TcpListener::bind(address);
  if (!listener) {
    std::fprintf(stderr, "cannot listen on %s: %s\n", address.c_str(),
                 listener.error().message().c_str());
    co_return 1;
  }
  std::printf("listening on %s\n", listener->local_addr()->to_string().c_str());
  std::fflush(stdout);
  for (;;) {
    auto accepted = co_await listener->accept();
    if (!accepted) {
      // EMFILE/ENFILE: back off, the pending connection stays queued.
      std::fprintf(stderr, "accept: %s (retrying)\n", accepted.error().message().c_str());
      co_await volt::sleep(50ms);
      continue;
    }
    (void)volt::spawn(echo(std::move(accepted->first), accepted->second));
  }
}

}  // namespace

int main(int argc, char** argv) {
  const std::string address = argc > 1 ? argv[1] : "127.0.0.1:8080";
  volt::Runtime rt = volt::Runtime::Builder().thread_name("echo").build();
  return rt.block_on(serve(address));
}
