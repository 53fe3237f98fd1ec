// http_server: a minimal HTTP/1.1 keep-alive server (the http_plaintext
// workload of docs/benchmarks.md) with graceful shutdown.
//
//   ./build/release/examples/http_server [ADDRESS]     # default 127.0.0.1:8080
//   curl http://127.0.0.1:8080/                         # Hello, World!
//   wrk -t2 -c256 -d10s http://127.0.0.1:8080/
//
// `GET /` answers "Hello, World!", another GET path 404, another method 405
// (and the connection is closed); connections are kept alive and pipelined
// requests answered in order. "ADDRESS" is "ip:port" ("[::1]:8080" for IPv6;
// port 0 picks a free port, printed on the first line of stdout).
//
// SIGTERM or SIGINT (Ctrl-C): the server stops accepting, closes the idle
// keep-alive connections, lets a connection in the middle of a request
// receive its answer, waits at most 5 seconds for them, and exits with
// status 0. A second signal exits at once. Running out of file descriptors
// (EMFILE) while accepting is reported, and the server keeps serving once
// descriptors are freed (see http_handler.hpp).
#include <chrono>
#include <string>

#include "http_handler.hpp"

int main(int argc, char** argv) {
  const std::string address = argc > 1 ? argv[1] : "127.0.0.1:8080";
  volt::Runtime rt = volt::Runtime::Builder().thread_name("http").build();
  return rt.block_on(http_example::serve_until_signalled(address, std::chrono::seconds(5)));
}
