// Tests of Unix-domain sockets (include/volt/net/unix.hpp): stream echo over
// a path in a temporary directory on every runtime flavour and over an
// abstract name, pair() and owned halves from two tasks, half-close, datagram
// round trips (bound paths, pair, an unbound sender's unnamed address), a
// datagram sender that waits for room instead of dropping, the address
// errors (missing path, refused, in use, too long, unnamed), the socket file
// left in place, accept cancelled by a timeout, and no descriptor leaked over
// 1,000 socket lifetimes of each kind.
#include "volt/net/unix.hpp"

#include <dirent.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/runtime_support.hpp"
#include "volt/task/join_handle.hpp"
#include "volt/time/sleep.hpp"
#include "volt/time/timeout.hpp"

namespace volt::test {
namespace {

using namespace std::chrono_literals;
using net::UnixAddr;
using net::UnixDatagram;
using net::UnixListener;
using net::UnixStream;

// prefix + the decimal i (appended: GCC 12's -Wrestrict misfires on
// `"literal" + std::string`).
std::string numbered(std::string_view prefix, long i) {
  std::string s(prefix);
  s += std::to_string(i);
  return s;
}

// A fresh directory under /tmp, removed with its contents at scope exit.
class TempDir {
 public:
  TempDir() {
    char pattern[] = "/tmp/volt-unix-XXXXXX";
    const char* made = ::mkdtemp(pattern);
    EXPECT_NE(made, nullptr);
    path_ = made ? made : "/tmp";
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  std::string file(std::string_view name) const { return path_ + "/" + std::string(name); }

 private:
  std::string path_;
};

// A Linux abstract name no other test process uses.
std::string abstract_name(std::string_view tag) {
  static int counter = 0;
  return numbered(numbered("@volt-test-", ::getpid()) + "-" + std::string(tag) + "-", ++counter);
}

std::size_t open_fd_count() {
  std::size_t n = 0;
  DIR* dir = ::opendir("/proc/self/fd");
  if (!dir) return 0;
  while (::readdir(dir))
    ++n;
  ::closedir(dir);
  return n;
}

Task<std::size_t> echo(UnixStream s) {
  char buf[4096];
  std::size_t total = 0;
  for (;;) {
    Expected<std::size_t> n = co_await s.read(buf);
    if (!n || *n == 0) co_return total;
    Expected<void> w = co_await s.write_all(io::ConstBuffer(buf, *n));
    if (!w) co_return total;
    total += *n;
  }
}

// A listener at `addr` serving `clients` echo connections, each making 20
// round trips and checking the addresses on both sides.
Task<void> echo_through(UnixAddr addr, int clients) {
  auto listener = UnixListener::bind(addr);
  EXPECT_TRUE(listener) << listener.error().message();
  EXPECT_EQ(*listener->local_addr(), addr);
  auto server = spawn([](const UnixListener& l, int n) -> Task<std::size_t> {
    std::vector<JoinHandle<std::size_t>> echoes;
    for (int i = 0; i < n; ++i) {
      auto accepted = co_await l.accept();
      EXPECT_TRUE(accepted) << accepted.error().message();
      if (!accepted) break;
      EXPECT_TRUE(accepted->second.is_unnamed());  // the client did not bind
      echoes.push_back(spawn(echo(std::move(accepted->first))));
    }
    std::size_t total = 0;
    for (auto& e : echoes)
      total += co_await e;
    co_return total;
  }(*listener, clients));
  std::vector<JoinHandle<std::size_t>> client_tasks;
  for (int c = 0; c < clients; ++c) {
    client_tasks.push_back(spawn([](UnixAddr to, int id) -> Task<std::size_t> {
      Expected<UnixStream> s = co_await UnixStream::connect(to);
      EXPECT_TRUE(s) << s.error().message();
      if (!s) co_return 0;
      EXPECT_EQ(*s->peer_addr(), to);
      EXPECT_TRUE(s->local_addr()->is_unnamed());
      std::size_t sent = 0;
      for (int i = 0; i < 20; ++i) {
        const std::string msg = numbered(numbered("client ", id) + " line ", i);
        if (!co_await s->write_all(msg)) co_return 0;
        std::string reply(msg.size(), '\0');
        if (!co_await s->read_exact(reply)) co_return 0;
        EXPECT_EQ(reply, msg);
        sent += msg.size();
      }
      co_return sent;
    }(addr, c)));
  }
  std::size_t sent = 0;
  for (auto& c : client_tasks)
    sent += co_await c;  // each closes its stream
  EXPECT_EQ(co_await server, sent);
  EXPECT_GT(sent, 0u);
}

class UnixFlavours : public ::testing::TestWithParam<Flavour> {};

TEST_P(UnixFlavours, StreamEchoThroughAPath) {
  TempDir dir;
  const std::string path = dir.file("echo.sock");
  Runtime rt = make_runtime(GetParam());
  rt.block_on(echo_through(*UnixAddr::from_path(path), 50));
  // volt never removes the socket file.
  EXPECT_TRUE(std::filesystem::exists(path));
}

INSTANTIATE_TEST_SUITE_P(Flavours, UnixFlavours,
                         ::testing::Values(kCurrentThread, kMultiThread1, kMultiThread2,
                                           kMultiThread4),
                         FlavourName());

TEST(Unix, StreamEchoThroughAnAbstractName) {
  Runtime rt = make_runtime(kMultiThread2);
  const UnixAddr addr = *UnixAddr::from_path(abstract_name("echo"));
  EXPECT_TRUE(addr.is_abstract());
  rt.block_on(echo_through(addr, 20));
}

TEST(Unix, ConnectByPathText) {
  TempDir dir;
  const std::string path = dir.file("text.sock");
  Runtime rt = make_runtime(kMultiThread2);
  rt.block_on([](std::string p) -> Task<void> {
    auto listener = UnixListener::bind(p);
    EXPECT_TRUE(listener);
    auto client = co_await UnixStream::connect(p);
    EXPECT_TRUE(client) << client.error().message();
    auto accepted = listener->try_accept();  // queued already
    EXPECT_TRUE(accepted);
    EXPECT_TRUE(co_await client->write_all(std::string_view("hi")));
    char buf[2];
    EXPECT_TRUE(co_await accepted->first.read_exact(buf));
    EXPECT_EQ(std::string_view(buf, 2), "hi");
    EXPECT_EQ(listener->try_accept().error(), std::errc::resource_unavailable_try_again);
  }(path));
}

TEST(Unix, PairWithOwnedHalvesFromTwoTasks) {
  Runtime rt = make_runtime(kMultiThread2);
  rt.block_on([]() -> Task<void> {
    auto pair = UnixStream::pair();
    EXPECT_TRUE(pair) << pair.error().message();
    auto echo_task = spawn(echo(std::move(pair->second)));
    EXPECT_TRUE(pair->first.peer_addr()->is_unnamed());
    auto [reader, writer] = std::move(pair->first).into_split();
    constexpr std::size_t kBytes = 1 << 20;  // more than the socket buffers
    auto write_task = spawn([](UnixStream::OwnedWriteHalf w) -> Task<bool> {
      std::vector<char> chunk(4096);
      for (std::size_t sent = 0; sent < kBytes; sent += chunk.size()) {
        for (std::size_t i = 0; i < chunk.size(); ++i)
          chunk[i] = static_cast<char>(sent + i);
        if (!co_await w.write_all(chunk)) co_return false;
      }
      co_return static_cast<bool>(co_await w.shutdown());
    }(std::move(writer)));
    std::size_t received = 0;
    bool in_order = true;
    char buf[3000];
    for (;;) {
      auto n = co_await reader.read(buf);
      EXPECT_TRUE(n);
      if (!n || *n == 0) break;
      for (std::size_t i = 0; i < *n; ++i)
        in_order = in_order && buf[i] == static_cast<char>(received + i);
      received += *n;
    }
    EXPECT_TRUE(co_await write_task);
    EXPECT_EQ(received, kBytes);
    EXPECT_TRUE(in_order);
    EXPECT_EQ(co_await echo_task, kBytes);
  }());
}

TEST(Unix, BorrowedHalvesAndReunite) {
  Runtime rt = make_runtime(kCurrentThread);
  rt.block_on([]() -> Task<void> {
    auto p = UnixStream::pair();
    auto q = UnixStream::pair();
    {
      auto [r, w] = p->first.split();
      EXPECT_TRUE(co_await w.write_all(std::string_view("abc")));
      char buf[3];
      EXPECT_TRUE(co_await p->second.read_exact(buf));
      EXPECT_TRUE(co_await p->second.write_all(std::string_view("xyz")));
      EXPECT_TRUE(co_await r.read_exact(buf));
      EXPECT_EQ(std::string_view(buf, 3), "xyz");
    }
    auto [pr, pw] = std::move(p->first).into_split();
    auto [qr, qw] = std::move(q->first).into_split();
    EXPECT_EQ(pr.reunite(qw).error(), make_error_code(errc::invalid_argument));
    Expected<UnixStream> whole = pr.reunite(pw);
    EXPECT_TRUE(whole);
    EXPECT_TRUE(static_cast<bool>(*whole));
    EXPECT_TRUE(co_await whole->write_all(std::string_view("!")));
  }());
}

TEST(Unix, HalfCloseLetsTheOtherDirectionContinue) {
  Runtime rt = make_runtime(kMultiThread2);
  rt.block_on([]() -> Task<void> {
    auto pair = UnixStream::pair();
    UnixStream& client = pair->first;
    UnixStream& server = pair->second;
    EXPECT_TRUE(co_await client.write_all(std::string_view("request")));
    EXPECT_TRUE(co_await client.shutdown());
    std::string request;
    char buf[16];
    for (;;) {
      auto n = co_await server.read(buf);
      EXPECT_TRUE(n);
      if (!n || *n == 0) break;
      request.append(buf, *n);
    }
    EXPECT_EQ(request, "request");
    EXPECT_TRUE(co_await server.write_all(std::string_view("response")));
    server.close();
    std::string response;
    for (;;) {
      auto n = co_await client.read(buf);
      EXPECT_TRUE(n);
      if (!n || *n == 0) break;
      response.append(buf, *n);
    }
    EXPECT_EQ(response, "response");
    auto w = co_await client.write(std::string_view("late"));
    EXPECT_EQ(w.error(), std::errc::broken_pipe);  // and no SIGPIPE
  }());
}

TEST(Unix, DatagramRoundTripBetweenBoundPaths) {
  TempDir dir;
  const std::string a_path = dir.file("a.sock");
  const std::string b_path = dir.file("b.sock");
  Runtime rt = make_runtime(kMultiThread2);
  rt.block_on([](std::string ap, std::string bp) -> Task<void> {
    auto a = UnixDatagram::bind(ap);
    auto b = UnixDatagram::bind(bp);
    EXPECT_TRUE(a) << a.error().message();
    EXPECT_EQ(a->local_addr()->path(), ap);
    auto server = spawn([](const UnixDatagram& s) -> Task<int> {
      char buf[64];
      for (int i = 0;; ++i) {
        auto got = co_await s.recv_from(buf);
        if (!got) co_return -1;
        if (std::string_view(buf, got->first) == "stop") co_return i;
        if (!co_await s.send_to(io::ConstBuffer(buf, got->first), got->second)) co_return -1;
      }
    }(*b));
    const UnixAddr to = *UnixAddr::from_path(bp);
    for (int i = 0; i < 50; ++i) {
      const std::string msg = numbered("datagram ", i);
      EXPECT_EQ(*(co_await a->send_to(msg, to)), msg.size());
      char buf[64];
      auto got = co_await a->recv_from(buf);
      EXPECT_TRUE(got);
      EXPECT_EQ(std::string_view(buf, got->first), msg);
      EXPECT_EQ(got->second.path(), bp);
    }
    EXPECT_TRUE(co_await a->send_to(std::string_view("stop"), to));
    EXPECT_EQ(co_await server, 50);
  }(a_path, b_path));
}

TEST(Unix, DatagramPairUnboundSenderAndAbstractConnect) {
  Runtime rt = make_runtime(kMultiThread2);
  rt.block_on([]() -> Task<void> {
    auto pair = UnixDatagram::pair();
    EXPECT_TRUE(pair);
    EXPECT_TRUE(co_await pair->first.send(std::string_view("ping")));
    char buf[16];
    auto n = co_await pair->second.recv(buf);
    EXPECT_EQ(std::string_view(buf, *n), "ping");
    EXPECT_EQ(*pair->second.try_send(std::string_view("pong")), 4u);
    EXPECT_TRUE(co_await pair->first.readable());
    auto m = pair->first.try_recv(buf);
    EXPECT_EQ(std::string_view(buf, *m), "pong");

    // An unbound socket's datagrams come from an unnamed address.
    const std::string name = abstract_name("dgram");
    auto bound = UnixDatagram::bind(name);
    EXPECT_TRUE(bound) << bound.error().message();
    EXPECT_TRUE(bound->local_addr()->is_abstract());
    auto unbound = UnixDatagram::unbound();
    EXPECT_TRUE(co_await unbound->send_to(std::string_view("anon"), *UnixAddr::from_path(name)));
    auto got = co_await bound->recv_from(buf);
    EXPECT_EQ(std::string_view(buf, got->first), "anon");
    EXPECT_TRUE(got->second.is_unnamed());
    // connect by text, then send/recv; peek gives the full length.
    EXPECT_EQ(unbound->peer_addr().error(), std::errc::not_connected);
    EXPECT_TRUE(unbound->connect(name));
    EXPECT_EQ(*unbound->peer_addr(), *UnixAddr::from_path(name));
    EXPECT_TRUE(co_await unbound->send(std::string_view("0123456789")));
    char small[4];
    auto peeked = co_await bound->peek_from(small);
    EXPECT_EQ(peeked->first, 10u);
    auto taken = co_await bound->recv_from(small);
    EXPECT_EQ(taken->first, 4u);
    EXPECT_EQ(std::string_view(small, 4), "0123");
    EXPECT_EQ(bound->try_recv_from(small).error(), std::errc::resource_unavailable_try_again);
  }());
}

// Unix datagrams are never dropped: a sender facing a full receive queue
// (net.unix.max_dgram_qlen, 10 by default) waits for room.
TEST(Unix, DatagramSenderWaitsForRoomAndNothingIsLost) {
  Runtime rt = make_runtime(kMultiThread2);
  rt.block_on([]() -> Task<void> {
    auto pair = UnixDatagram::pair();
    const int count = static_cast<int>(scale(5000));
    auto sender = spawn([](UnixDatagram s, int n) -> Task<bool> {
      for (int i = 0; i < n; ++i) {
        const std::string msg = std::to_string(i);
        auto sent = co_await s.send(msg);
        if (!sent || *sent != msg.size()) co_return false;
      }
      co_return true;
    }(std::move(pair->first), count));
    int expected = 0;
    bool in_order = true;
    char buf[16];
    while (expected < count) {
      if (expected % 500 == 0) co_await volt::sleep(1ms);  // let the queue fill
      auto n = co_await volt::timeout(kNotHung, pair->second.recv(buf));
      EXPECT_TRUE(n);
      if (!n || !*n) break;
      in_order = in_order && std::string_view(buf, **n) == std::to_string(expected);
      ++expected;
    }
    EXPECT_EQ(expected, count);
    EXPECT_TRUE(in_order);
    EXPECT_TRUE(co_await sender);
  }());
}

TEST(Unix, AddressErrors) {
  TempDir dir;
  const std::string existing = dir.file("taken.sock");
  const std::string missing = dir.file("missing.sock");
  const std::string plain_file = dir.file("plain");
  std::ofstream(plain_file) << "not a socket";
  const std::string too_long = dir.file(std::string(UnixAddr::kMaxPathLen, 'x'));
  Runtime rt = make_runtime(kMultiThread2);
  rt.block_on([](std::string taken, std::string absent, std::string plain,
                 std::string long_path) -> Task<void> {
    auto first = UnixListener::bind(taken);
    EXPECT_TRUE(first);
    // Binding an existing path: address_in_use (the file is never removed).
    EXPECT_EQ(UnixListener::bind(taken).error(), std::errc::address_in_use);
    EXPECT_EQ(UnixDatagram::bind(taken).error(), std::errc::address_in_use);
    // Connecting to nothing.
    auto no_file = co_await UnixStream::connect(absent);
    EXPECT_EQ(no_file.error(), std::errc::no_such_file_or_directory);
    auto not_socket = co_await UnixStream::connect(plain);
    EXPECT_EQ(not_socket.error(), std::errc::connection_refused);
    first->close();  // the file stays, nobody listens
    auto stale = co_await UnixStream::connect(taken);
    EXPECT_EQ(stale.error(), std::errc::connection_refused);
    EXPECT_EQ(UnixListener::bind(taken).error(), std::errc::address_in_use);
    auto dgram = UnixDatagram::unbound();
    EXPECT_EQ(dgram->connect(absent).error(), std::errc::no_such_file_or_directory);
    // Paths that cannot be addresses.
    const auto invalid = make_error_code(errc::invalid_argument);
    EXPECT_EQ(UnixListener::bind(long_path).error(), invalid);
    EXPECT_EQ(UnixDatagram::bind(long_path).error(), invalid);
    EXPECT_EQ((co_await UnixStream::connect(long_path)).error(), invalid);
    EXPECT_EQ(dgram->connect(long_path).error(), invalid);
    EXPECT_EQ(UnixListener::bind(std::string_view("")).error(), invalid);
    EXPECT_EQ(UnixListener::bind(UnixAddr()).error(), invalid);  // unnamed
    EXPECT_EQ(UnixListener::bind(std::string_view("@x"), 0).error(), invalid);
    // The abstract namespace has "in use" too.
    const std::string name = abstract_name("taken");
    auto abstract = UnixListener::bind(name);
    EXPECT_TRUE(abstract);
    EXPECT_EQ(UnixListener::bind(name).error(), std::errc::address_in_use);
  }(existing, missing, plain_file, too_long));
  EXPECT_FALSE(std::filesystem::exists(missing));  // nothing was created
  EXPECT_EQ(UnixDatagram::unbound().error(), make_error_code(errc::no_runtime));
}

TEST(Unix, AcceptCancelledByTimeoutLosesNoConnection) {
  Runtime rt = make_runtime(kMultiThread2);
  rt.block_on([]() -> Task<void> {
    const UnixAddr addr = *UnixAddr::from_path(abstract_name("accept"));
    auto listener = UnixListener::bind(addr);
    auto timed_out = co_await volt::timeout(20ms, listener->accept());
    EXPECT_EQ(timed_out.error(), make_error_code(errc::timed_out));
    auto client = co_await UnixStream::connect(addr);
    EXPECT_TRUE(client);
    auto accepted = co_await volt::timeout(kNotHung, listener->accept());
    EXPECT_TRUE(accepted);
    EXPECT_TRUE(*accepted);
  }());
}

TEST(Unix, MovedFromSocketsReportClosed) {
  Runtime rt = make_runtime(kCurrentThread);
  rt.block_on([]() -> Task<void> {
    UnixStream empty;
    char buf[4];
    EXPECT_EQ((co_await empty.read(buf)).error(), make_error_code(errc::closed));
    EXPECT_EQ(empty.try_write(buf).error(), make_error_code(errc::closed));
    EXPECT_EQ(empty.peer_addr().error(), make_error_code(errc::closed));
    UnixListener none;
    EXPECT_EQ((co_await none.accept()).error(), make_error_code(errc::closed));
    UnixDatagram nothing;
    EXPECT_EQ((co_await nothing.recv_from(buf)).error(), make_error_code(errc::closed));
    EXPECT_EQ(nothing.connect(std::string_view("@x")).error(), make_error_code(errc::closed));
  }());
}

TEST(Unix, NoDescriptorLeakOverManySockets) {
  TempDir dir;
  const std::string path = dir.file("leak.sock");
  Runtime rt = make_runtime(kMultiThread2);
  const std::size_t before = open_fd_count();
  rt.block_on([](std::string p) -> Task<void> {
    auto listener = UnixListener::bind(p);
    for (int i = 0; i < 1000; ++i) {
      auto client = co_await UnixStream::connect(p);
      EXPECT_TRUE(client);
      auto accepted = co_await listener->accept();
      EXPECT_TRUE(accepted);
      auto spair = UnixStream::pair();
      EXPECT_TRUE(spair);
      auto dpair = UnixDatagram::pair();
      EXPECT_TRUE(dpair);
      auto lone = UnixDatagram::unbound();
      EXPECT_TRUE(lone);
      if (i % 10 == 0) {
        EXPECT_TRUE(co_await client->write_all(std::string_view("x")));
        char buf[1];
        EXPECT_TRUE(co_await accepted->first.read_exact(buf));
      }
    }
  }(path));
  EXPECT_EQ(open_fd_count(), before);
}

// An operation left waiting by a timeout (an lvalue operand) and then
// awaited by another task: the wake-up must reach the task that waits now.
// Before, the registration kept the first task's waker, and the second task
// slept through the data.
TEST(Unix, OperationReawaitedByAnotherTaskIsWokenThere) {
  for (const Flavour& f : {kCurrentThread, kMultiThread2}) {
    Runtime rt = make_runtime(f);
    rt.block_on([]() -> Task<void> {
      auto pair = UnixStream::pair();
      EXPECT_TRUE(pair);
      char drain[4];
      (void)pair->first.try_read(drain);  // a new socket starts "ready"
      char buf[8];
      auto op = pair->first.read(buf);
      EXPECT_FALSE(co_await volt::timeout(2ms, op));  // leaves its waiter linked
      auto other = spawn([](decltype(op)& o) -> Task<std::size_t> {
        Expected<std::size_t> n = co_await o;
        co_return n ? *n : 0;
      }(op));
      co_await volt::sleep(5ms);  // the other task waits on `op` now
      EXPECT_TRUE(pair->second.try_write(std::string_view("data")));
      auto got = co_await volt::timeout(kNotHung, other);
      EXPECT_TRUE(got) << "the waiting task was never woken";
      if (got) {
        EXPECT_EQ(*got, 4u);
      }
    }());
  }
}

}  // namespace
}  // namespace volt::test
