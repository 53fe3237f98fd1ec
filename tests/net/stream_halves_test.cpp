// Stream halves (stream_halves.hpp), judged against tokio's into_split:
//
//  - owned write half: dropping it (or assigning over it) shuts the write
//    direction down (the peer reads end of stream) while the read half lives
//    on, except after reunite() or forget(); a moved-from or reunited half
//    reports errc::closed instead of dereferencing a null stream; owned
//    halves are move-only (a copy would make "dropping the write half"
//    ambiguous);
//  - halves from two tasks: shutdown() of the write half while the read half
//    waits in another task, the write half dropped while the read half waits.
//
// Socket pairs; no timing assertions.
#include <gtest/gtest.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <utility>
#include <vector>

#include "io/mock_stream.hpp"
#include "net/net_support.hpp"
#include "runtime/runtime_support.hpp"
#include "volt/channel/unbounded.hpp"
#include "volt/io/buf_reader.hpp"
#include "volt/io/buf_writer.hpp"
#include "volt/io/copy.hpp"
#include "volt/io/util.hpp"
#include "volt/net/tcp.hpp"
#include "volt/net/unix.hpp"
#include "volt/time/timeout.hpp"

namespace volt::test {
namespace {

using namespace std::chrono_literals;
using net::TcpListener;
using net::TcpStream;
using net::UnixStream;

// ---- stream halves ----

Expected<std::size_t> try_read_some(const UnixStream& s) {
  char buf[16];
  return s.try_read(buf);
}

// Tokio: "Dropping the write half will shut down the write half of the
// stream." A proxy or a writer task that ends and drops its half must let the
// peer see the end of stream, even while the read half lives on; otherwise
// the peer (e.g. reading to the end) waits for ever.
TEST(OwnedHalves, DroppingTheOwnedWriteHalfShutsDownTheWriteDirection) {
  Runtime rt = make_runtime(kCurrentThread);
  rt.block_on([]() -> Task<void> {
    auto p = UnixStream::pair();
    CO_ASSERT_TRUE(p);
    UnixStream& peer = p->second;
    auto [r, w] = std::move(p->first).into_split();
    // Before: nothing to read, no end of stream.
    EXPECT_EQ(try_read_some(peer).error(), std::errc::resource_unavailable_try_again);
    { auto gone = std::move(w); }
    Expected<std::size_t> n = try_read_some(peer);
    CO_ASSERT_TRUE(n);
    EXPECT_EQ(*n, 0u) << "the peer reads end of stream once the write half is dropped";
    // The read direction is untouched.
    EXPECT_TRUE(co_await peer.write_all(std::string_view("still")));
    char buf[5];
    EXPECT_TRUE(co_await r.read_exact(buf));
    EXPECT_EQ(std::string_view(buf, 5), "still");
  }());
}

TEST(OwnedHalves, TcpPeerReadsEndOfStreamWhenTheWriterTaskDropsItsHalf) {
  Runtime rt = make_runtime(kMultiThread2);
  rt.block_on([]() -> Task<void> {
    auto listener = TcpListener::bind(loopback());
    auto client = co_await TcpStream::connect(*listener->local_addr());
    auto accepted = co_await listener->accept();
    CO_ASSERT_TRUE(client && accepted);
    TcpStream& server = accepted->first;
    auto [reader, writer] = std::move(*client).into_split();
    // A writer task: sends its message and ends, dropping the half.
    auto sent = spawn([](TcpStream::OwnedWriteHalf w) -> Task<bool> {
      co_return static_cast<bool>(co_await w.write_all(std::string_view("bye")));
    }(std::move(writer)));
    EXPECT_TRUE(co_await sent);
    std::string got;
    auto all = co_await volt::timeout(kNotHung, io::read_to_string(server, got));
    CO_ASSERT_TRUE(all);
    EXPECT_TRUE(*all);
    EXPECT_EQ(got, "bye");
    // The client's read half still works.
    EXPECT_TRUE(co_await server.write_all(std::string_view("ok")));
    char buf[2];
    EXPECT_TRUE(co_await reader.read_exact(buf));
  }());
}

TEST(OwnedHalves, ReuniteDoesNotShutDownTheWriteDirection) {
  Runtime rt = make_runtime(kCurrentThread);
  rt.block_on([]() -> Task<void> {
    auto p = UnixStream::pair();
    CO_ASSERT_TRUE(p);
    UnixStream& peer = p->second;
    auto [r, w] = std::move(p->first).into_split();
    Expected<UnixStream> whole = r.reunite(w);
    CO_ASSERT_TRUE(whole);
    EXPECT_EQ(try_read_some(peer).error(), std::errc::resource_unavailable_try_again);
    EXPECT_TRUE(co_await whole->write_all(std::string_view("x")));
    char c;
    EXPECT_TRUE(co_await peer.read_exact(io::MutableBuffer(&c, 1)));
  }());
}

TEST(OwnedHalves, ForgetDropsTheWriteHalfWithoutShuttingDown) {
  Runtime rt = make_runtime(kCurrentThread);
  rt.block_on([]() -> Task<void> {
    auto p = UnixStream::pair();
    CO_ASSERT_TRUE(p);
    UnixStream& peer = p->second;
    auto [r, w] = std::move(p->first).into_split();
    w.forget();
    EXPECT_EQ(try_read_some(peer).error(), std::errc::resource_unavailable_try_again);
    EXPECT_EQ(w.try_write(std::string_view("x")).error(), code(errc::closed));
    {
      auto gone = std::move(r);  // the last owner: the socket closes
    }
    Expected<std::size_t> n = try_read_some(peer);
    CO_ASSERT_TRUE(n);
    EXPECT_EQ(*n, 0u);
  }());
}

TEST(OwnedHalves, AssigningOverAnOwnedWriteHalfDropsTheOldOne) {
  Runtime rt = make_runtime(kCurrentThread);
  rt.block_on([]() -> Task<void> {
    auto p = UnixStream::pair();
    auto q = UnixStream::pair();
    CO_ASSERT_TRUE(p && q);
    auto [pr, pw] = std::move(p->first).into_split();
    auto [qr, qw] = std::move(q->first).into_split();
    pw = std::move(qw);  // p's write half dropped: p's peer reads the end
    Expected<std::size_t> n = try_read_some(p->second);
    CO_ASSERT_TRUE(n);
    EXPECT_EQ(*n, 0u);
    EXPECT_EQ(try_read_some(q->second).error(), std::errc::resource_unavailable_try_again);
    EXPECT_TRUE(co_await pw.write_all(std::string_view("q")));  // now q's
    char c;
    EXPECT_TRUE(co_await q->second.read_exact(io::MutableBuffer(&c, 1)));
    EXPECT_FALSE(pr.reunite(pw));
    EXPECT_TRUE(qr.reunite(pw));
  }());
}

// Tokio's halves cannot be used once reunited or moved (the compiler stops
// it); here they can, and must fail cleanly as a moved-from socket does
// (errc::closed), not dereference a null pointer.
TEST(OwnedHalves, ReunitedAndMovedFromHalvesReportClosed) {
  Runtime rt = make_runtime(kCurrentThread);
  rt.block_on([]() -> Task<void> {
    auto p = UnixStream::pair();
    CO_ASSERT_TRUE(p);
    auto [r, w] = std::move(p->first).into_split();
    Expected<UnixStream> whole = r.reunite(w);
    CO_ASSERT_TRUE(whole);
    char buf[4];
    EXPECT_EQ((co_await r.read(buf)).error(), code(errc::closed));
    EXPECT_EQ((co_await w.write_all(std::string_view("x"))).error(), code(errc::closed));
    EXPECT_EQ((co_await w.shutdown()).error(), code(errc::closed));
    EXPECT_EQ(r.try_read(buf).error(), code(errc::closed));
    EXPECT_EQ(r.reunite(w).error(), code(errc::invalid_argument));

    auto q = UnixStream::pair();
    CO_ASSERT_TRUE(q);
    auto [qr, qw] = std::move(q->first).into_split();
    auto qr2 = std::move(qr);
    auto qw2 = std::move(qw);
    EXPECT_EQ((co_await qr.read(buf)).error(), code(errc::closed));
    EXPECT_EQ(qw.try_write(std::string_view("x")).error(), code(errc::closed));
    EXPECT_TRUE(qr2.reunite(qw2));
  }());
}

TEST(OwnedHalves, OwnedHalvesAreMoveOnly) {
  // A copy of the write half would make "dropping the write half shuts the
  // direction down" fire while another copy is still writing.
  EXPECT_FALSE(std::is_copy_constructible_v<TcpStream::OwnedWriteHalf>);
  EXPECT_FALSE(std::is_copy_assignable_v<TcpStream::OwnedWriteHalf>);
  EXPECT_FALSE(std::is_copy_constructible_v<TcpStream::OwnedReadHalf>);
  EXPECT_TRUE(std::is_nothrow_move_constructible_v<TcpStream::OwnedWriteHalf>);
  EXPECT_TRUE(std::is_nothrow_move_constructible_v<UnixStream::OwnedReadHalf>);
}

TEST(OwnedHalves, ShutdownOfTheWriteHalfWhileTheReadHalfWaitsInAnotherTask) {
  Runtime rt = make_runtime(kMultiThread2);
  rt.block_on([]() -> Task<void> {
    auto listener = TcpListener::bind(loopback());
    auto client = co_await TcpStream::connect(*listener->local_addr());
    auto accepted = co_await listener->accept();
    CO_ASSERT_TRUE(client && accepted);
    TcpStream& server = accepted->first;
    auto [reader, writer] = std::move(*client).into_split();
    auto read_task = spawn([](TcpStream::OwnedReadHalf r) -> Task<Expected<std::string>> {
      std::string got;
      Expected<std::size_t> n = co_await io::read_to_string(r, got);
      if (!n) co_return n.error();
      co_return got;
    }(std::move(reader)));
    EXPECT_TRUE(co_await writer.shutdown());
    // The server sees the end of stream, then answers: the waiting read half
    // gets the answer and the server's end of stream.
    std::string got;
    auto all = co_await volt::timeout(kNotHung, io::read_to_string(server, got));
    CO_ASSERT_TRUE(all && *all);
    EXPECT_TRUE(co_await server.write_all(std::string_view("late answer")));
    EXPECT_TRUE(co_await server.shutdown());
    auto answer = co_await volt::timeout(kNotHung, read_task);
    CO_ASSERT_TRUE(answer);
    CO_ASSERT_TRUE(*answer);
    EXPECT_EQ(**answer, "late answer");
    // A second shutdown is harmless; a write after it is broken_pipe.
    (void)co_await writer.shutdown();
    EXPECT_EQ((co_await writer.write(std::string_view("x"))).error(), std::errc::broken_pipe);
  }());
}

TEST(OwnedHalves, BorrowedHalvesFromTwoTasksAndTheirDropChangesNothing) {
  Runtime rt = make_runtime(kMultiThread2);
  rt.block_on([]() -> Task<void> {
    auto p = UnixStream::pair();
    CO_ASSERT_TRUE(p);
    UnixStream& mine = p->first;
    UnixStream& peer = p->second;
    {
      auto [r, w] = mine.split();
      auto echo = spawn([](UnixStream::WriteHalf w) -> Task<bool> {
        co_return static_cast<bool>(co_await w.write_all(std::string_view("ping")));
      }(w));
      char buf[4];
      EXPECT_TRUE(co_await peer.read_exact(buf));
      EXPECT_TRUE(co_await echo);
      EXPECT_TRUE(co_await peer.write_all(std::string_view("pong")));
      EXPECT_TRUE(co_await r.read_exact(buf));
      EXPECT_EQ(std::string_view(buf, 4), "pong");
    }
    // Borrowed halves gone (as Tokio's split): no shutdown.
    EXPECT_EQ(try_read_some(peer).error(), std::errc::resource_unavailable_try_again);
  }());
}

}  // namespace
}  // namespace volt::test
