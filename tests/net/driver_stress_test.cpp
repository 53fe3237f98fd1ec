// Stress of the I/O driver (src/io/driver.cpp, io_source.cpp), run under
// ThreadSanitizer in CI: many sockets becoming ready while workers park and
// unpark, tokens passed around a ring of connections (every hop a
// readiness wake-up, often on another worker), sockets closed while the
// driver may be dispatching their events, and readers cancelled by timeouts
// mid-wait. A lost wake-up hangs (caught by the not-hung bound); a stale
// readiness used after a clear, or a freed registration touched, shows up
// under the sanitizers.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <random>
#include <vector>

#include "runtime/runtime_support.hpp"
#include "volt/net/tcp.hpp"
#include "volt/task/join_handle.hpp"
#include "volt/time/sleep.hpp"
#include "volt/time/timeout.hpp"

namespace volt::test {
namespace {

using namespace std::chrono_literals;
using net::SocketAddr;
using net::TcpListener;
using net::TcpStream;

// A ring of kLinks connections: link i's client end sends to link i's server
// end, whose task forwards to link i+1's client end. kTokens tokens circle
// the ring kLaps times; each token is a 4-byte counter that every hop
// increments, so the final sum checks that no token was lost or duplicated.
TEST(DriverStress, TokensAroundARingOfConnections) {
  constexpr std::size_t kLinks = 16;
  constexpr std::uint32_t kTokens = 8;
  const std::uint32_t kLaps = static_cast<std::uint32_t>(scale(300));
  Runtime rt = make_runtime(kMultiThread4);  // more workers than cores: parking
  const bool ok = rt.block_on([](std::uint32_t laps) -> Task<bool> {
    auto listener = TcpListener::bind(SocketAddr(net::IpAddr::v4_loopback(), 0), 256);
    const SocketAddr addr = *listener->local_addr();
    std::vector<TcpStream> clients;
    std::vector<TcpStream> servers;
    for (std::size_t i = 0; i < kLinks; ++i) {
      auto c = co_await TcpStream::connect(addr);
      auto s = co_await listener->accept();
      if (!c || !s) co_return false;
      EXPECT_TRUE(c->set_nodelay(true));
      EXPECT_TRUE(s->first.set_nodelay(true));
      clients.push_back(std::move(*c));
      servers.push_back(std::move(s->first));
    }
    const std::uint64_t hops_per_link = static_cast<std::uint64_t>(kTokens) * laps;
    std::vector<JoinHandle<std::uint64_t>> forwarders;
    for (std::size_t i = 0; i < kLinks; ++i) {
      // Link kLinks-1 forwards back to link 0: the ring.
      forwarders.push_back(spawn([](TcpStream& in, TcpStream& out, std::uint64_t hops,
                                    std::uint32_t seed) -> Task<std::uint64_t> {
        std::minstd_rand rng(seed);
        std::uint64_t sum = 0;
        for (std::uint64_t h = 0; h < hops; ++h) {
          std::uint32_t token = 0;
          // Now and then a readiness wait is raced by a short timeout
          // first: the cancelled wait must leave the token to the read.
          if (rng() % 8 == 0) {
            auto early =
                co_await volt::timeout(std::chrono::microseconds(rng() % 200), in.readable());
            (void)early;
          }
          if (!co_await in.read_exact(io::MutableBuffer(&token, 4))) co_return 0;
          ++token;
          sum += token;
          if (!co_await out.write_all(io::ConstBuffer(&token, 4))) co_return 0;
        }
        co_return sum;
      }(servers[i], clients[(i + 1) % kLinks], hops_per_link, static_cast<std::uint32_t>(i))));
    }
    // Inject the tokens at link 0.
    for (std::uint32_t t = 0; t < kTokens; ++t) {
      std::uint32_t zero = 0;
      if (!co_await clients[0].write_all(io::ConstBuffer(&zero, 4))) co_return false;
    }
    std::uint64_t total = 0;
    for (auto& f : forwarders)
      total += co_await f;
    // Every hop added one to a token and the sum of the values written.
    // A token makes kLinks * laps hops with values 1..kLinks*laps.
    const std::uint64_t per_token_hops = static_cast<std::uint64_t>(kLinks) * laps;
    const std::uint64_t expected = kTokens * per_token_hops * (per_token_hops + 1) / 2;
    EXPECT_EQ(total, expected);
    co_return total == expected;
  }(kLaps));
  EXPECT_TRUE(ok);
}

// Connections opened and closed from many tasks at once while the driver
// dispatches their events: registrations retired while an event for them
// may be in flight, descriptor numbers reused at once.
TEST(DriverStress, ChurnWhileEventsAreDispatched) {
  Runtime rt = make_runtime(kMultiThread4);
  const std::size_t kTasks = 8;
  const std::size_t kRounds = scale(400);
  rt.block_on([](std::size_t tasks, std::size_t rounds) -> Task<void> {
    auto listener = TcpListener::bind(SocketAddr(net::IpAddr::v4_loopback(), 0), 1024);
    const SocketAddr addr = *listener->local_addr();
    std::atomic<std::size_t> served{0};
    auto server =
        spawn([](TcpListener& l, std::size_t total, std::atomic<std::size_t>& n) -> Task<void> {
          for (std::size_t i = 0; i < total; ++i) {
            auto s = co_await l.accept();
            if (!s) continue;
            // Detached: `served` counts them instead.
            (void)spawn([](TcpStream st, std::atomic<std::size_t>& count) -> Task<void> {
              char b[8];
              auto r = co_await st.read(b);
              if (r && *r > 0) (void)co_await st.write_all(io::ConstBuffer(b, *r));
              count.fetch_add(1, std::memory_order_relaxed);
            }(std::move(s->first), n));
          }
        }(*listener, tasks * rounds, served));
    std::vector<JoinHandle<std::size_t>> clients;
    for (std::size_t t = 0; t < tasks; ++t) {
      clients.push_back(spawn([](SocketAddr a, std::size_t n) -> Task<std::size_t> {
        std::size_t good = 0;
        for (std::size_t i = 0; i < n; ++i) {
          auto c = co_await TcpStream::connect(a);
          if (!c) continue;
          if (i % 2 == 0) {
            // Closed at once: the server's read sees end of stream.
            continue;
          }
          char b[4] = {'p', 'i', 'n', 'g'};
          if (!co_await c->write_all(b)) continue;
          if (co_await c->read_exact(b)) ++good;
        }
        co_return good;
      }(addr, rounds)));
    }
    std::size_t good = 0;
    for (auto& c : clients)
      good += co_await c;
    EXPECT_EQ(good, tasks * (rounds / 2));
    co_await server;
    const auto deadline = std::chrono::steady_clock::now() + kNotHung;
    while (served.load() != tasks * rounds && std::chrono::steady_clock::now() < deadline)
      co_await sleep(1ms);
    EXPECT_EQ(served.load(), tasks * rounds);
  }(kTasks, kRounds));
}

}  // namespace
}  // namespace volt::test
