// Tests of UDP on loopback (include/volt/net/udp.hpp): round trips over IPv4
// on every runtime flavour and over IPv6, connected send/recv (and the peer
// filter), many datagrams from several tasks counted exactly (acknowledged,
// so loopback never drops) with several tasks receiving on one socket,
// recv_from under a timeout losing nothing, truncation and peek_from, try_
// forms and readiness, close while a receive waits, bind errors, broadcast,
// and no descriptor leaked over 1,000 socket lifetimes.
#include "volt/net/udp.hpp"

#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <set>
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
using net::IpAddr;
using net::SocketAddr;
using net::UdpSocket;

// prefix + the decimal i (appended: GCC 12's -Wrestrict misfires on
// `"literal" + std::string`).
std::string numbered(std::string_view prefix, long i) {
  std::string s(prefix);
  s += std::to_string(i);
  return s;
}

SocketAddr v4_loopback() {
  return SocketAddr(IpAddr::v4_loopback(), 0);
}

// Whether this host lets a socket bind [::1] (IPv6 may be disabled in a
// container).
bool ipv6_loopback_available() {
  const int fd = ::socket(AF_INET6, SOCK_DGRAM, 0);
  if (fd < 0) return false;
  const SocketAddr addr(IpAddr::v6_loopback(), 0);
  const bool ok = ::bind(fd, addr.as_sockaddr(), addr.sockaddr_len()) == 0;
  ::close(fd);
  return ok;
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

// Sends "ping <i>" from a fresh socket to a server that echoes, checks each
// reply and its sender.
Task<void> round_trips(SocketAddr bind_addr) {
  auto server = UdpSocket::bind(bind_addr);
  EXPECT_TRUE(server) << server.error().message();
  auto client = UdpSocket::bind(bind_addr);
  EXPECT_TRUE(client);
  const SocketAddr server_addr = *server->local_addr();
  const SocketAddr client_addr = *client->local_addr();
  EXPECT_NE(server_addr.port(), 0);
  EXPECT_EQ(server_addr.ip(), bind_addr.ip());
  auto echo = spawn([](UdpSocket s) -> Task<int> {
    char buf[128];
    int served = 0;
    for (;;) {
      auto got = co_await s.recv_from(buf);
      EXPECT_TRUE(got);
      if (!got) co_return served;
      const std::string_view msg(buf, got->first);
      if (msg == "stop") co_return served;
      auto sent = co_await s.send_to(io::ConstBuffer(buf, got->first), got->second);
      EXPECT_EQ(*sent, got->first);
      ++served;
    }
  }(std::move(*server)));
  for (int i = 0; i < 50; ++i) {
    const std::string msg = numbered("ping ", i);
    auto sent = co_await client->send_to(msg, server_addr);
    EXPECT_TRUE(sent) << sent.error().message();
    EXPECT_EQ(*sent, msg.size());
    char buf[128];
    auto got = co_await client->recv_from(buf);
    EXPECT_TRUE(got);
    EXPECT_EQ(std::string_view(buf, got->first), msg);
    EXPECT_EQ(got->second, server_addr);
  }
  EXPECT_TRUE(co_await client->send_to(std::string_view("stop"), server_addr));
  EXPECT_EQ(co_await echo, 50);
  EXPECT_EQ(*client->local_addr(), client_addr);
}

class UdpFlavours : public ::testing::TestWithParam<Flavour> {};

TEST_P(UdpFlavours, RoundTripV4) {
  Runtime rt = make_runtime(GetParam());
  rt.block_on(round_trips(v4_loopback()));
}

INSTANTIATE_TEST_SUITE_P(Flavours, UdpFlavours,
                         ::testing::Values(kCurrentThread, kMultiThread1, kMultiThread2,
                                           kMultiThread4),
                         FlavourName());

TEST(Udp, RoundTripV6) {
  if (!ipv6_loopback_available()) GTEST_SKIP() << "[::1] cannot be bound on this host";
  Runtime rt = make_runtime(kMultiThread2);
  rt.block_on(round_trips(SocketAddr(IpAddr::v6_loopback(), 0)));
}

TEST(Udp, ConnectedSendRecvTakesOnlyThePeersDatagrams) {
  Runtime rt = make_runtime(kMultiThread2);
  rt.block_on([]() -> Task<void> {
    auto a = UdpSocket::bind(v4_loopback());
    auto b = UdpSocket::bind(v4_loopback());
    auto stranger = UdpSocket::bind(v4_loopback());
    // Before connect: no peer, and send has no destination.
    EXPECT_EQ(a->peer_addr().error(), std::errc::not_connected);
    EXPECT_EQ((co_await a->send(std::string_view("x"))).error(),
              std::errc::destination_address_required);
    EXPECT_TRUE(a->connect(*b->local_addr()));
    EXPECT_TRUE(b->connect(*a->local_addr()));
    EXPECT_EQ(*a->peer_addr(), *b->local_addr());
    // The stranger's datagram is not from a's peer: a never receives it.
    EXPECT_TRUE(co_await stranger->send_to(std::string_view("intruder"), *a->local_addr()));
    for (int i = 0; i < 20; ++i) {
      const std::string msg = numbered("m", i);
      EXPECT_EQ(*(co_await b->send(msg)), msg.size());
      char buf[32];
      auto n = co_await a->recv(buf);
      EXPECT_TRUE(n);
      EXPECT_EQ(std::string_view(buf, *n), msg);
      EXPECT_TRUE(co_await a->send(std::string_view("ack")));
      auto m = co_await b->recv(buf);
      EXPECT_EQ(std::string_view(buf, *m), "ack");
    }
    // A zero-length datagram is a datagram, not an end of stream.
    EXPECT_EQ(*(co_await b->send(std::string_view())), 0u);
    EXPECT_TRUE(co_await b->send(std::string_view("after")));
    char buf[32];
    EXPECT_EQ(*(co_await a->recv(buf)), 0u);
    auto n = co_await a->recv(buf);
    EXPECT_EQ(std::string_view(buf, *n), "after");
  }());
}

// Several sender tasks (own sockets, one datagram in flight each: the
// receiver's queue can never overflow, so the count is exact) to one socket
// on which several receiver tasks wait and answer at once.
TEST(Udp, ManySendersOneSocketWithSeveralReceivingTasks) {
  Runtime rt = make_runtime(kMultiThread4);
  rt.block_on([]() -> Task<void> {
    constexpr int kSenders = 8;
    constexpr int kReceivers = 4;
    const int per_sender = static_cast<int>(scale(300));
    auto hub = UdpSocket::bind(v4_loopback());
    const SocketAddr hub_addr = *hub->local_addr();
    std::vector<JoinHandle<std::vector<std::string>>> receivers;
    for (int r = 0; r < kReceivers; ++r) {
      receivers.push_back(spawn([](const UdpSocket& s) -> Task<std::vector<std::string>> {
        std::vector<std::string> seen;
        char buf[64];
        for (;;) {
          auto got = co_await s.recv_from(buf);
          EXPECT_TRUE(got);
          if (!got) co_return seen;
          std::string msg(buf, got->first);
          if (msg == "stop") co_return seen;
          // The ack echoes the message back to its sender.
          auto acked = co_await s.send_to(msg, got->second);
          EXPECT_TRUE(acked);
          seen.push_back(std::move(msg));
        }
      }(*hub)));
    }
    std::vector<JoinHandle<int>> senders;
    for (int i = 0; i < kSenders; ++i) {
      senders.push_back(spawn([](SocketAddr to, int id, int count) -> Task<int> {
        auto s = UdpSocket::bind(v4_loopback());
        if (!s) co_return -1;
        int acked = 0;
        for (int seq = 0; seq < count; ++seq) {
          const std::string msg = numbered(numbered("", id) + ":", seq);
          auto sent = co_await s->send_to(msg, to);
          if (!sent) co_return -1;
          char buf[64];
          auto got = co_await volt::timeout(kNotHung, s->recv_from(buf));
          if (!got || !*got) co_return -1;
          if (std::string_view(buf, (*got)->first) == msg) ++acked;
        }
        co_return acked;
      }(hub_addr, i, per_sender)));
    }
    for (auto& s : senders)
      EXPECT_EQ(co_await s, per_sender);
    // One stop per receiver (each exits on the first it takes).
    auto stopper = UdpSocket::bind(v4_loopback());
    for (int r = 0; r < kReceivers; ++r)
      EXPECT_TRUE(co_await stopper->send_to(std::string_view("stop"), hub_addr));
    std::multiset<std::string> all;
    for (auto& r : receivers) {
      std::vector<std::string> seen = co_await r;
      for (std::string& m : seen)
        all.insert(std::move(m));
    }
    EXPECT_EQ(all.size(), static_cast<std::size_t>(kSenders * per_sender));
    for (int id = 0; id < kSenders; ++id)
      for (int seq = 0; seq < per_sender; ++seq)
        EXPECT_EQ(all.count(numbered(numbered("", id) + ":", seq)), 1u);
  }());
}

TEST(Udp, RecvFromTimesOutThenStillReceives) {
  Runtime rt = make_runtime(kMultiThread2);
  rt.block_on([]() -> Task<void> {
    auto a = UdpSocket::bind(v4_loopback());
    char buf[16];
    auto timed_out = co_await volt::timeout(20ms, a->recv_from(buf));
    EXPECT_EQ(timed_out.error(), make_error_code(errc::timed_out));
    // The cancelled receive withdrew its waiter and took nothing: the next
    // datagram goes to the next receive.
    auto sender = spawn([](SocketAddr to) -> Task<bool> {
      co_await volt::sleep(10ms);
      auto s = UdpSocket::bind(v4_loopback());
      co_return static_cast<bool>(co_await s->send_to(std::string_view("late"), to));
    }(*a->local_addr()));
    auto got = co_await volt::timeout(kNotHung, a->recv_from(buf));
    EXPECT_TRUE(got);
    EXPECT_TRUE(*got);
    EXPECT_EQ(std::string_view(buf, (*got)->first), "late");
    EXPECT_TRUE(co_await sender);
  }());
}

TEST(Udp, TruncationKeepsThePrefixAndPeekGivesTheFullLength) {
  Runtime rt = make_runtime(kCurrentThread);
  rt.block_on([]() -> Task<void> {
    auto a = UdpSocket::bind(v4_loopback());
    auto b = UdpSocket::bind(v4_loopback());
    std::string big(100, '\0');
    for (std::size_t i = 0; i < big.size(); ++i)
      big[i] = static_cast<char>('a' + i % 26);
    EXPECT_TRUE(co_await b->send_to(big, *a->local_addr()));
    EXPECT_TRUE(co_await b->send_to(std::string_view("next"), *a->local_addr()));
    char small[10];
    // peek: the full length, what fits copied, the datagram left queued.
    auto peeked = co_await a->peek_from(small);
    EXPECT_EQ(peeked->first, 100u);
    EXPECT_EQ(peeked->second, *b->local_addr());
    EXPECT_EQ(std::string_view(small, 10), big.substr(0, 10));
    // recv: the bytes stored (never more than the buffer); the rest of that
    // datagram is discarded and the next receive gets the next datagram.
    auto got = co_await a->recv_from(small);
    EXPECT_EQ(got->first, 10u);
    EXPECT_EQ(std::string_view(small, 10), big.substr(0, 10));
    auto next = co_await a->recv_from(small);
    EXPECT_EQ(std::string_view(small, next->first), "next");
  }());
}

TEST(Udp, TryFormsAndReadiness) {
  Runtime rt = make_runtime(kMultiThread2);
  rt.block_on([]() -> Task<void> {
    auto a = UdpSocket::bind(v4_loopback());
    auto b = UdpSocket::bind(v4_loopback());
    char buf[16];
    EXPECT_EQ(a->try_recv_from(buf).error(), std::errc::resource_unavailable_try_again);
    EXPECT_EQ(a->try_recv(buf).error(), std::errc::resource_unavailable_try_again);
    EXPECT_TRUE(co_await b->writable());
    EXPECT_EQ(*b->try_send_to(std::string_view("one"), *a->local_addr()), 3u);
    EXPECT_TRUE(co_await a->readable());
    auto got = a->try_recv_from(buf);
    EXPECT_TRUE(got);
    EXPECT_EQ(std::string_view(buf, got->first), "one");
    EXPECT_EQ(got->second, *b->local_addr());
    EXPECT_TRUE(b->connect(*a->local_addr()));
    EXPECT_EQ(*b->try_send(std::string_view("two")), 3u);
    EXPECT_TRUE(co_await a->readable());
    auto n = a->try_recv(buf);
    EXPECT_EQ(std::string_view(buf, *n), "two");
  }());
}

TEST(Udp, CloseWhileAReceiveWaitsGivesClosed) {
  Runtime rt = make_runtime(kCurrentThread);
  rt.block_on([]() -> Task<void> {
    auto a = UdpSocket::bind(v4_loopback());
    auto waiting = spawn([](const UdpSocket& s) -> Task<std::error_code> {
      char buf[8];
      auto got = co_await s.recv_from(buf);
      co_return got ? std::error_code() : got.error();
    }(*a));
    co_await volt::sleep(10ms);  // the receive is waiting
    a->close();
    EXPECT_EQ(co_await waiting, make_error_code(errc::closed));
    char buf[8];
    EXPECT_EQ((co_await a->recv_from(buf)).error(), make_error_code(errc::closed));
    EXPECT_EQ(a->try_send_to(buf, v4_loopback()).error(), make_error_code(errc::closed));
    EXPECT_EQ(a->local_addr().error(), make_error_code(errc::closed));
    UdpSocket empty;
    EXPECT_EQ((co_await empty.send(buf)).error(), make_error_code(errc::closed));
    EXPECT_EQ(empty.connect(v4_loopback()).error(), make_error_code(errc::closed));
  }());
}

TEST(Udp, BindErrorsAndBroadcastFlag) {
  Runtime rt = make_runtime(kCurrentThread);
  rt.block_on([]() -> Task<void> {
    auto first = UdpSocket::bind(v4_loopback());
    EXPECT_EQ(UdpSocket::bind(*first->local_addr()).error(), std::errc::address_in_use);
    EXPECT_EQ(UdpSocket::bind(std::string_view("nonsense")).error(),
              make_error_code(errc::invalid_argument));
    auto parsed = UdpSocket::bind(std::string_view("127.0.0.1:0"));
    EXPECT_TRUE(parsed);
    EXPECT_FALSE(*first->broadcast());
    EXPECT_TRUE(first->set_broadcast(true));
    EXPECT_TRUE(*first->broadcast());
    EXPECT_EQ(*first->take_error(), std::nullopt);
    co_return;
  }());
  EXPECT_EQ(UdpSocket::bind(v4_loopback()).error(), make_error_code(errc::no_runtime));
}

TEST(Udp, NoDescriptorLeakOverManySockets) {
  Runtime rt = make_runtime(kMultiThread2);
  const std::size_t before = open_fd_count();
  rt.block_on([]() -> Task<void> {
    for (int i = 0; i < 1000; ++i) {
      auto a = UdpSocket::bind(v4_loopback());
      EXPECT_TRUE(a);
      if (i % 10 == 0) {
        // Some of them do a round trip first.
        auto b = UdpSocket::bind(v4_loopback());
        EXPECT_TRUE(co_await b->send_to(std::string_view("x"), *a->local_addr()));
        char buf[4];
        EXPECT_TRUE(co_await a->recv_from(buf));
      }
    }
  }());
  // Let the driver free retired registrations (they hold no descriptor).
  EXPECT_EQ(open_fd_count(), before);
}

}  // namespace
}  // namespace volt::test
