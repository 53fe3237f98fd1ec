// Cancellation and errors in the generic I/O utilities, judged against what
// tokio::io promises:
//
//  - cancellation (by volt::timeout) in the middle of BufWriter::flush with a
//    partially written buffer, of BufReader::read waiting for its refill, of
//    Lines::next_line with a CRLF split across the cancellation;
//  - copy_bidirectional: a writer accepting 0 bytes is write_zero and ends
//    the other direction; the counts and shutdowns of a normal run.
//
// Deterministic: the in-memory transports of mock_stream.hpp and a gated
// writer below. No timing assertions (a short timeout only cancels
// operations that can never complete).
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

// ---- a writer that accepts bytes only against credits ----

// write() accepts at most `per_write` bytes and only while it has credit;
// with none it waits (a real suspension on a channel) until grant() adds
// some. Cancel-safe: a write cancelled while waiting accepted nothing.
class GatedWriter {
 public:
  GatedWriter() {
    auto [tx, rx] = mpsc::unbounded_channel<std::size_t>();
    tx_ = std::move(tx);
    rx_ = std::move(rx);
  }
  Task<Expected<std::size_t>> write(io::ConstBuffer src) {
    if (src.empty()) co_return std::size_t{0};
    while (credit_ == 0) {
      std::optional<std::size_t> more = co_await rx_.recv();
      if (!more) co_return std::make_error_code(std::errc::broken_pipe);
      credit_ += *more;
    }
    const std::size_t n = std::min({src.size(), per_write, credit_});
    credit_ -= n;
    data.append(as_view(src.first(n)));
    co_return n;
  }
  io::Ready<Expected<void>> flush() { return io::Ready<Expected<void>>(Expected<void>()); }
  io::Ready<Expected<void>> shutdown() { return io::Ready<Expected<void>>(Expected<void>()); }

  void grant(std::size_t n) { (void)tx_.send(n); }

  std::size_t per_write = 3;
  std::string data;  // every byte accepted, in order

 private:
  mpsc::UnboundedSender<std::size_t> tx_;
  mpsc::UnboundedReceiver<std::size_t> rx_;
  std::size_t credit_ = 0;
};
static_assert(io::AsyncWrite<GatedWriter>);

// ---- BufWriter: a flush cancelled half-way ----

TEST(BufWriterCancel, AFlushCancelledHalfWayKeepsExactlyTheUnwrittenBytes) {
  GatedWriter inner;
  io::BufWriter<GatedWriter&> w(inner, 32);
  auto body = [](GatedWriter& inner, io::BufWriter<GatedWriter&>& w) -> Task<void> {
    EXPECT_EQ((co_await w.write(std::string_view("abcdefghij"))).value(), 10u);
    // Credit for 4 bytes: "abc", "d", then the flush waits for more.
    inner.grant(4);
    auto first = co_await volt::timeout(20ms, w.flush());
    EXPECT_FALSE(first) << "the flush cannot finish without credit";
    EXPECT_EQ(inner.data, "abcd");
    EXPECT_EQ(as_view(w.buffer()), "efghij") << "exactly the unwritten bytes stay";
    // More bytes behind the remainder, then a flush with enough credit.
    EXPECT_EQ((co_await w.write(std::string_view("KL"))).value(), 2u);
    inner.grant(100);
    EXPECT_TRUE(co_await w.flush());
    EXPECT_TRUE(w.buffer().empty());
  };
  run(body(inner, w));
  EXPECT_EQ(inner.data, "abcdefghijKL") << "no byte lost or written twice";
}

TEST(BufWriterCancel, ALargeWriteCancelledWhileTheBufferDrainsAcceptedNoneOfItsBytes) {
  GatedWriter inner;
  inner.per_write = 100;
  io::BufWriter<GatedWriter&> w(inner, 8);
  auto body = [](GatedWriter& inner, io::BufWriter<GatedWriter&>& w) -> Task<void> {
    EXPECT_EQ((co_await w.write(std::string_view("xyz"))).value(), 3u);
    inner.grant(2);  // "xy" leaves; the write of "0123456789" then waits
    auto r = co_await volt::timeout(20ms, w.write(std::string_view("0123456789")));
    EXPECT_FALSE(r);
    EXPECT_EQ(as_view(w.buffer()), "z");
    inner.grant(100);
    EXPECT_TRUE(co_await w.flush());
  };
  run(body(inner, w));
  EXPECT_EQ(inner.data, "xyz");
}

// ---- BufReader / Lines: reads cancelled while waiting ----

TEST(BufReaderCancel, AReadCancelledWhileRefillingLosesNothing) {
  auto [near, far] = duplex_pipe();
  io::BufReader<PipeEnd&> reader(near, 16);
  auto body = [](PipeEnd& far, io::BufReader<PipeEnd&>& reader) -> Task<std::string> {
    char buf[4];
    auto r = co_await volt::timeout(20ms, reader.read(buf));
    EXPECT_FALSE(r);
    (void)co_await far.write(std::string_view("hello"));
    (void)co_await far.shutdown();
    std::string got;
    for (;;) {
      std::size_t n = (co_await reader.read(buf)).value();
      if (n == 0) break;
      got.append(buf, n);
    }
    co_return got;
  };
  EXPECT_EQ(run(body(far, reader)), "hello");
}

TEST(LinesCancel, ACrLfSplitByACancellationAndAFinalLineWithoutNewline) {
  auto [near, far] = duplex_pipe();
  auto lines = io::BufReader<PipeEnd&>(near, 4).lines();
  using L = decltype(lines);
  auto body = [](PipeEnd& far, L& lines) -> Task<std::vector<std::string>> {
    std::vector<std::string> out;
    (void)co_await far.write(std::string_view("one\r"));
    auto first = co_await volt::timeout(20ms, lines.next_line());
    EXPECT_FALSE(first) << "the line is not complete yet";
    (void)co_await far.write(std::string_view("\ntwo\r\n\r\nlast\r"));
    (void)co_await far.shutdown();
    for (;;) {
      std::optional<std::string> line = (co_await lines.next_line()).value();
      if (!line) break;
      out.push_back(*line);
    }
    co_return out;
  };
  // A lone '\r' ending an unterminated last line is kept (as Tokio).
  EXPECT_EQ(run(body(far, lines)), (std::vector<std::string>{"one", "two", "", "last\r"}));
}

// ---- copy_bidirectional ----

TEST(CopyBidirectionalEdge, AWriterAcceptingZeroIsWriteZeroAndEndsTheOtherDirection) {
  auto [client, a] = duplex_pipe();
  auto [b, server] = duplex_pipe();
  b.max_write = 0;  // every write to b accepts 0 bytes (of a non-empty buffer)
  auto body = [](PipeEnd& client, PipeEnd& a, PipeEnd& b) -> Task<void> {
    (void)co_await client.write(std::string_view("request"));
    // b -> a waits for the server (which never sends); a -> b fails.
    auto r = co_await volt::timeout(kNotHung, io::copy_bidirectional(a, b));
    CO_ASSERT_TRUE(r);
    CO_ASSERT_TRUE(!*r);
    EXPECT_EQ(r->error(), code(errc::write_zero));
  };
  run(body(client, a, b));
}

TEST(CopyBidirectionalEdge, CountsAndShutdownsBothWays) {
  auto [client, a] = duplex_pipe();
  auto [b, server] = duplex_pipe();
  a.max_write = 2;  // short writes on the way back
  auto body = [](PipeEnd& client, PipeEnd& a, PipeEnd& b,
                 PipeEnd& server) -> Task<std::pair<std::uint64_t, std::uint64_t>> {
    (void)co_await client.write(std::string_view("12345"));
    (void)co_await client.shutdown();
    (void)co_await server.write(std::string_view("abcdefg"));
    (void)co_await server.shutdown();
    auto counts = (co_await io::copy_bidirectional(a, b)).value();
    EXPECT_EQ((co_await receive_all(server)).value(), "12345");
    EXPECT_EQ((co_await receive_all(client)).value(), "abcdefg");
    co_return counts;
  };
  auto counts = run(body(client, a, b, server));
  EXPECT_EQ(counts, (std::pair<std::uint64_t, std::uint64_t>(5, 7)));
  EXPECT_EQ(a.shutdowns, 1);
  EXPECT_EQ(b.shutdowns, 1);
}

}  // namespace
}  // namespace volt::test
