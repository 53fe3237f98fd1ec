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
// Design: one broadcast channel is the room (volt::broadcast, capacity 256).
// Each connection is split into its read half, read line by line
// (io::BufReader::lines) by a task that sends each line to the room, and its
// write half, written by the connection's own task, which receives from the
// room and forwards what others said. A client too slow to keep up with the
// room misses lines (the broadcast channel's lag), and is told how many;
// it never holds up the others. Lines are not length-limited: this is an
// example, not a hardened server.
#include <chrono>
#include <cstdio>
#include <string>

#include "volt/net/tcp.hpp"
#include "volt/volt.hpp"

namespace {

using namespace std::chrono_literals;
using volt::net::SocketAddr;
using volt::net::TcpStream;

struct ChatLine {
  SocketAddr from;
  std::string text;  // without the line end; "***..." for a notice
};
using Room = volt::broadcast::Sender<ChatLine>;

// Sends each line the client writes to the room, until it disconnects.
volt::Task<void> read_lines(TcpStream::OwnedReadHalf input, Room room, SocketAddr me) {
  auto lines = volt::io::BufReader(std::move(input)).lines();
  for (;;) {
    volt::Expected<std::optional<std::string>> line = co_await lines.next_line();
    if (!line || !*line) co_return;  // error or end of stream: the client left
    (void)room.send(ChatLine{me, std::move(**line)});
  }
}

volt::Task<void> client(TcpStream stream, SocketAddr me, Room room) {
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
  for (;;) {
    // Whichever comes first: something said in the room, or the reader
    // ending (the client closed its side or reset the connection).
    auto next = co_await volt::select(heard.recv(), reader);
    if (next.index() == 1) break;
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
  // The channel's own receiver is dropped: each client subscribes its own.
  Room room = volt::broadcast::channel<ChatLine>(256).first;
  for (;;) {
    auto accepted = co_await listener->accept();
    if (!accepted) {
      std::fprintf(stderr, "accept: %s (retrying)\n", accepted.error().message().c_str());
      co_await volt::sleep(50ms);  // out of descriptors: the connection waits in the backlog
      continue;
    }
    (void)volt::spawn(client(std::move(accepted->first), accepted->second, room));
  }
}

}  // namespace

int main(int argc, char** argv) {
  const std::string address = argc > 1 ? argv[1] : "127.0.0.1:8081";
  volt::Runtime rt = volt::Runtime::Builder().thread_name("chat").build();
  return rt.block_on(serve(address));
}
