// The close race (src/io/io_source.hpp, "Lifetime"): a socket closed by one
// task while another waits in, or is about to start, an operation on it.
//
// What must hold, for every socket type and both halves of split streams:
// the operation completes with errc::closed, never reads freed memory (ASan
// and TSan run this binary in CI), and never makes a system call on the
// descriptor NUMBER after the close: the kernel hands the lowest free number
// to the next socket, so a stale call would reach another connection.
//
// Each case forces driver turns between the close and the moment the
// waiting task is polled (before the fix, a turn freed the registration
// there), then opens new sockets that would reuse the number and writes into
// them. On the current-thread runtime the interleaving is exact (the closing
// task runs on until it awaits); on two workers the waiting task may run at
// any point in between, which is the "at every point" variant.
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "io/driver.hpp"
#include "runtime/runtime_core.hpp"
#include "runtime/runtime_support.hpp"
#include "volt/net/tcp.hpp"
#include "volt/net/udp.hpp"
#include "volt/net/unix.hpp"
#include "volt/task/join_handle.hpp"
#include "volt/task/yield_now.hpp"
#include "volt/time/sleep.hpp"
#include "volt/time/timeout.hpp"

namespace volt::test {
namespace {

using namespace std::chrono_literals;
using net::SocketAddr;
using net::TcpListener;
using net::TcpStream;
using net::UdpSocket;
using net::UnixStream;

// One non-blocking driver turn, now, from inside a task: what a worker that
// runs dry, or the current-thread runtime every 61 polls, does. Before the
// fix this freed the registrations closed since the last turn.
void driver_turn(bool current_thread) {
  volt::detail::Driver& driver = volt::detail::RuntimeCore::current()->driver();
  if (current_thread) {
    driver.park(false);  // the only thread: nobody else holds the driver
    return;
  }
  // A worker asleep in epoll_wait holds the driver: wake it so it lets go.
  while (!driver.try_acquire()) {
    driver.unpark();
    std::this_thread::yield();
  }
  driver.park(false);
  if (driver.release()) driver.unpark();
}

void driver_turns(bool current_thread) {
  for (int i = 0; i < 3; ++i)
    driver_turn(current_thread);
}

// Opens `count` connected Unix stream pairs (they take the lowest free
// descriptor numbers, a just-closed socket's among them) and writes a
// marker into every end, so that a stale read of any reused number would
// return bytes. Returns the pairs, to be checked by expect_markers_intact.
std::vector<std::pair<UnixStream, UnixStream>> reuse_numbers(int count) {
  std::vector<std::pair<UnixStream, UnixStream>> pairs;
  for (int i = 0; i < count; ++i) {
    auto p = UnixStream::pair();
    EXPECT_TRUE(p) << p.error().message();
    if (!p) break;
    EXPECT_TRUE(p->first.try_write(std::string_view("MARK")));
    EXPECT_TRUE(p->second.try_write(std::string_view("MARK")));
    pairs.push_back(std::move(*p));
  }
  return pairs;
}

// Every marker is still where it was written: no stale reader took bytes.
Task<void> expect_markers_intact(std::vector<std::pair<UnixStream, UnixStream>>& pairs) {
  for (auto& [a, b] : pairs) {
    for (UnixStream* s : {&a, &b}) {
      char buf[4];
      Expected<void> r = co_await s->read_exact(buf);
      EXPECT_TRUE(r) << r.error().message();
      EXPECT_EQ(std::string_view(buf, 4), "MARK");
    }
  }
}

class CloseRace : public ::testing::TestWithParam<Flavour> {};

// A read waiting on a stream; the stream closed by another task. Covers the
// read half of a split stream (the halves read through the stream).
TEST_P(CloseRace, WaitingStreamReadGivesClosedAndNeverReadsAnotherSocket) {
  Runtime rt = make_runtime(GetParam());
  const bool ct = GetParam().current_thread;
  rt.block_on([](bool ct) -> Task<void> {
    for (int trial = 0; trial < 20; ++trial) {
      auto pair = UnixStream::pair();
      EXPECT_TRUE(pair);
      auto [reader, writer] = pair->first.split();
      std::atomic<bool> waiting{false};
      auto read_task = spawn([](UnixStream::ReadHalf r, std::atomic<bool>& w) -> Task<std::string> {
        char buf[16];
        w.store(true);
        Expected<std::size_t> n = co_await r.read(buf);
        if (!n)
          co_return n.error() == make_error_code(errc::closed) ? "closed" : n.error().message();
        co_return "read: " + std::string(buf, *n);
      }(reader, waiting));
      while (!waiting.load())
        co_await volt::sleep(1ms);
      co_await volt::sleep(1ms);  // the read is registered
      pair->first.close();
      driver_turns(ct);
      auto pairs = reuse_numbers(4);
      driver_turns(ct);
      EXPECT_EQ(co_await read_task, "closed") << "trial " << trial;
      co_await expect_markers_intact(pairs);
    }
  }(ct));
}

// The write half waiting for room while the stream is closed.
TEST_P(CloseRace, WaitingWriteGivesClosed) {
  Runtime rt = make_runtime(GetParam());
  const bool ct = GetParam().current_thread;
  rt.block_on([](bool ct) -> Task<void> {
    auto pair = UnixStream::pair();
    EXPECT_TRUE(pair);
    // Fill the send buffer so the next write waits.
    std::vector<char> chunk(65536, 'x');
    while (pair->first.try_write(io::ConstBuffer(chunk.data(), chunk.size()))) {
    }
    auto [reader, writer] = pair->first.split();
    auto write_task =
        spawn([](UnixStream::WriteHalf w, std::vector<char>& c) -> Task<std::error_code> {
          Expected<void> r = co_await w.write_all(io::ConstBuffer(c.data(), c.size()));
          co_return r ? std::error_code() : r.error();
        }(writer, chunk));
    co_await volt::sleep(5ms);
    pair->first.close();
    driver_turns(ct);
    auto pairs = reuse_numbers(4);
    EXPECT_EQ(co_await write_task, make_error_code(errc::closed));
    co_await expect_markers_intact(pairs);
  }(ct));
}

// accept() waiting on a listener closed by another task.
TEST_P(CloseRace, WaitingAcceptGivesClosed) {
  Runtime rt = make_runtime(GetParam());
  const bool ct = GetParam().current_thread;
  rt.block_on([](bool ct) -> Task<void> {
    auto listener = TcpListener::bind(SocketAddr(net::IpAddr::v4_loopback(), 0));
    EXPECT_TRUE(listener);
    auto accept_task = spawn([](const TcpListener& l) -> Task<std::error_code> {
      auto r = co_await l.accept();
      co_return r ? std::error_code() : r.error();
    }(*listener));
    co_await volt::sleep(5ms);
    listener->close();
    driver_turns(ct);
    auto pairs = reuse_numbers(4);
    EXPECT_EQ(co_await accept_task, make_error_code(errc::closed));
    co_await expect_markers_intact(pairs);
  }(ct));
}

// recv_from and readable() waiting on a UDP socket closed under them.
TEST_P(CloseRace, WaitingDatagramReceiveAndReadinessGiveClosed) {
  Runtime rt = make_runtime(GetParam());
  const bool ct = GetParam().current_thread;
  rt.block_on([](bool ct) -> Task<void> {
    auto socket = UdpSocket::bind(SocketAddr(net::IpAddr::v4_loopback(), 0));
    EXPECT_TRUE(socket);
    char drain[8];
    // A new socket starts "ready"; the EAGAIN clears it, so readable() waits.
    EXPECT_EQ(socket->try_recv_from(drain).error(), std::errc::resource_unavailable_try_again);
    auto recv_task = spawn([](const UdpSocket& s) -> Task<std::error_code> {
      char buf[8];
      auto r = co_await s.recv_from(buf);
      co_return r ? std::error_code() : r.error();
    }(*socket));
    // readable() may report readiness spuriously (a driver event for the
    // write direction between the EAGAIN above and its clear keeps the read
    // bit): the user's loop, readable() then a try_ that clears it, is what
    // must end with errc::closed.
    auto ready_task = spawn([](const UdpSocket& s) -> Task<std::error_code> {
      char buf[8];
      for (;;) {
        auto r = co_await s.readable();
        if (!r) co_return r.error();
        auto got = s.try_recv_from(buf);
        if (got) co_return std::make_error_code(std::errc::bad_message);  // nobody sends
        if (got.error() != std::errc::resource_unavailable_try_again) co_return got.error();
      }
    }(*socket));
    co_await volt::sleep(5ms);
    socket->close();
    driver_turns(ct);
    auto pairs = reuse_numbers(4);
    EXPECT_EQ(co_await recv_task, make_error_code(errc::closed));
    EXPECT_EQ(co_await ready_task, make_error_code(errc::closed));
    co_await expect_markers_intact(pairs);
  }(ct));
}

// An operation woken by readiness (data arrived) but not yet polled when
// the close comes: it must see the close, not the data.
TEST_P(CloseRace, ReadWokenByDataThenClosedGivesClosed) {
  Runtime rt = make_runtime(GetParam());
  const bool ct = GetParam().current_thread;
  if (!ct) GTEST_SKIP() << "the interleaving is exact only on the current-thread runtime";
  rt.block_on([](bool ct) -> Task<void> {
    auto pair = UnixStream::pair();
    EXPECT_TRUE(pair);
    auto read_task = spawn([](const UnixStream& s) -> Task<std::string> {
      char buf[16];
      Expected<std::size_t> n = co_await s.read(buf);
      if (!n) co_return n.error() == make_error_code(errc::closed) ? "closed" : n.error().message();
      co_return "read: " + std::string(buf, *n);
    }(pair->first));
    co_await volt::sleep(5ms);
    EXPECT_TRUE(pair->second.try_write(std::string_view("data")));
    driver_turn(ct);  // dispatches the edge: the reader is woken, not yet polled
    pair->first.close();
    driver_turns(ct);
    auto pairs = reuse_numbers(4);
    EXPECT_EQ(co_await read_task, "closed");
    co_await expect_markers_intact(pairs);
  }(ct));
}

// An operation constructed (not yet awaited), and one left registered by a
// timeout (an lvalue operand re-awaited later): closed in between.
TEST_P(CloseRace, OperationsConstructedOrInterruptedBeforeTheCloseGiveClosed) {
  Runtime rt = make_runtime(GetParam());
  const bool ct = GetParam().current_thread;
  rt.block_on([](bool ct) -> Task<void> {
    auto pair = UnixStream::pair();
    EXPECT_TRUE(pair);
    char buf[16];
    auto not_started = pair->first.read(buf);
    auto interrupted = pair->first.read(buf);
    auto timed_out = co_await volt::timeout(2ms, interrupted);
    EXPECT_FALSE(timed_out);
    pair->first.close();
    driver_turns(ct);
    auto pairs = reuse_numbers(4);
    EXPECT_EQ((co_await not_started).error(), make_error_code(errc::closed));
    EXPECT_EQ((co_await interrupted).error(), make_error_code(errc::closed));
    co_await expect_markers_intact(pairs);
  }(ct));
}

// With nothing in flight the descriptor is closed at once (the peer sees end
// of stream), and every later call on the closed socket reports
// errc::closed without touching the number, which another socket now has.
TEST_P(CloseRace, ClosedSocketNeverTouchesItsFormerNumber) {
  Runtime rt = make_runtime(GetParam());
  rt.block_on([]() -> Task<void> {
    auto pair = UnixStream::pair();
    EXPECT_TRUE(pair);
    const int number = pair->first.native_handle();
    pair->first.close();
    EXPECT_EQ(pair->first.native_handle(), -1);
    EXPECT_FALSE(pair->first);
    char buf[8];
    EXPECT_EQ(*co_await pair->second.read(buf), 0u);  // end of stream: closed now
    auto pairs = reuse_numbers(2);
    bool reused = false;
    for (auto& [a, b] : pairs)
      reused |= a.native_handle() == number || b.native_handle() == number;
    EXPECT_TRUE(reused) << "the lowest free number should have been reused";
    EXPECT_EQ(pair->first.try_read(buf).error(), make_error_code(errc::closed));
    EXPECT_EQ(pair->first.try_write(std::string_view("x")).error(), make_error_code(errc::closed));
    EXPECT_EQ(pair->first.local_addr().error(), make_error_code(errc::closed));
    EXPECT_EQ(pair->first.take_error().error(), make_error_code(errc::closed));
    EXPECT_EQ((co_await pair->first.shutdown()).error(), make_error_code(errc::closed));
    EXPECT_EQ((co_await pair->first.read(buf)).error(), make_error_code(errc::closed));
    EXPECT_EQ((co_await pair->first.write(std::string_view("x"))).error(),
              make_error_code(errc::closed));
    pair->first.close();  // idempotent
    co_await expect_markers_intact(pairs);
  }());
}

// A use in flight keeps the number: the descriptor is closed by the last
// operation's end, not by close() (else the number could be reused under it).
TEST_P(CloseRace, DescriptorStaysOpenUntilTheLastOperationEnds) {
  Runtime rt = make_runtime(GetParam());
  rt.block_on([]() -> Task<void> {
    auto pair = UnixStream::pair();
    EXPECT_TRUE(pair);
    const int number = pair->first.native_handle();
    char buf[8];
    {
      auto pending = pair->first.read(buf);  // holds a use
      pair->first.close();
      EXPECT_EQ(::fcntl(number, F_GETFD), FD_CLOEXEC) << "closed under a use in flight";
      EXPECT_EQ((co_await pending).error(), make_error_code(errc::closed));
    }
    EXPECT_EQ(::fcntl(number, F_GETFD), -1) << "not closed by the last use";
    EXPECT_EQ(*co_await pair->second.read(buf), 0u);
  }());
}

// Destroying the socket (not just closing it) while an operation waits: the
// operation's use keeps the registration alive.
TEST_P(CloseRace, SocketDestroyedWhileAnOperationWaits) {
  Runtime rt = make_runtime(GetParam());
  const bool ct = GetParam().current_thread;
  rt.block_on([](bool ct) -> Task<void> {
    auto bound = TcpListener::bind(SocketAddr(net::IpAddr::v4_loopback(), 0));
    EXPECT_TRUE(bound);
    auto listener = std::make_unique<TcpListener>(std::move(*bound));
    auto accept_task = spawn([](TcpListener* l) -> Task<std::error_code> {
      auto r = co_await l->accept();
      co_return r ? std::error_code() : r.error();
    }(listener.get()));
    co_await volt::sleep(5ms);
    listener.reset();
    driver_turns(ct);
    auto pairs = reuse_numbers(4);
    EXPECT_EQ(co_await accept_task, make_error_code(errc::closed));
    co_await expect_markers_intact(pairs);
  }(ct));
}

// Stress, run under both sanitizers in CI: readers loop on borrowed read
// halves while other tasks close their sockets and open new connections that
// reuse the numbers; every byte a reader gets must be its own connection's.
TEST_P(CloseRace, StressNoByteCrossesConnections) {
  Runtime rt = make_runtime(GetParam());
  const bool ct = GetParam().current_thread;
  rt.block_on([](bool ct) -> Task<void> {
    const int rounds = static_cast<int>(scale(300));
    std::atomic<int> crossed{0};
    std::atomic<int> closed_seen{0};
    for (int round = 0; round < rounds; ++round) {
      auto pair = UnixStream::pair();
      EXPECT_TRUE(pair);
      if (!pair) co_return;
      const char tag = static_cast<char>('a' + round % 26);
      auto reader = spawn([](const UnixStream& s, char tag, std::atomic<int>& crossed,
                             std::atomic<int>& closed) -> Task<void> {
        char buf[64];
        for (;;) {
          Expected<std::size_t> n = co_await s.read(buf);
          if (!n) {
            if (n.error() == make_error_code(errc::closed)) closed.fetch_add(1);
            co_return;
          }
          if (*n == 0) co_return;
          for (std::size_t i = 0; i < *n; ++i)
            if (buf[i] != tag) crossed.fetch_add(1);
        }
      }(pair->first, tag, crossed, closed_seen));
      EXPECT_TRUE(pair->second.try_write(std::string_view(std::string(8, tag))));
      if (round % 2) co_await volt::yield_now();
      pair->first.close();
      if (round % 3 == 0) driver_turn(ct);
      // Fresh connections carrying another tag, on the numbers just freed.
      auto other = UnixStream::pair();
      EXPECT_TRUE(other);
      EXPECT_TRUE(other->first.try_write(std::string_view("########")));
      EXPECT_TRUE(other->second.try_write(std::string_view("########")));
      co_await reader;
    }
    EXPECT_EQ(crossed.load(), 0);
    EXPECT_GT(closed_seen.load(), 0);
  }(ct));
}

INSTANTIATE_TEST_SUITE_P(Flavours, CloseRace, ::testing::Values(kCurrentThread, kMultiThread2),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace volt::test
