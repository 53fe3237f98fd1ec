// Tests of BufReader and Lines (include/volt/io/buf_reader.hpp) over the
// in-memory streams of mock_stream.hpp: lines split across reads and across
// the buffer's capacity, "\r\n" (also split between two reads), a last line
// without newline, an empty stream, read_line keeping its '\n', read_until,
// small reads served from the buffer, large reads bypassing it, fill_buf /
// consume, an error in the middle of a line losing nothing, cancellation of
// next_line losing nothing, the borrowed and owning forms, the write side
// passed through, and many lines from a writer on another worker.
#include "volt/io/buf_reader.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <cstddef>
#include <optional>
#include <random>
#include <string>
#include <system_error>
#include <vector>

#include "io/mock_stream.hpp"
#include "runtime/runtime_support.hpp"
#include "volt/io/buf_writer.hpp"
#include "volt/io/util.hpp"
#include "volt/time/timeout.hpp"

namespace volt::test {
namespace {

using namespace std::chrono_literals;

static_assert(io::AsyncRead<io::BufReader<ScriptedReader>>);
static_assert(io::AsyncRead<io::BufReader<PipeEnd&>> && io::AsyncWrite<io::BufReader<PipeEnd&>>);
static_assert(!io::AsyncWrite<io::BufReader<ScriptedReader>>);
// The two wrappers stack into a full-duplex buffered stream.
static_assert(io::AsyncRead<io::BufReader<io::BufWriter<PipeEnd>>> &&
              io::AsyncWrite<io::BufReader<io::BufWriter<PipeEnd>>>);

// Every line of `lines` until the end of the stream (or an error: "<error>").
template <class B>
Task<std::vector<std::string>> collect(io::Lines<B>& lines) {
  std::vector<std::string> out;
  for (;;) {
    Expected<std::optional<std::string>> line = co_await lines.next_line();
    if (!line) {
      out.push_back("<error>");
      co_return out;
    }
    if (!*line) co_return out;
    out.push_back(std::move(**line));
  }
}

using Strings = std::vector<std::string>;

TEST(Lines, LinesSplitAcrossReadsAndAcrossTheCapacity) {
  for (std::size_t capacity : {1u, 2u, 3u, 4u, 7u, 8192u}) {
    SCOPED_TRACE(capacity);
    io::BufReader reader(
        ScriptedReader::chunks({"he", "llo\nwor", "ld\n\nlong line", " here\nla", "st"}), capacity);
    auto lines = reader.lines();
    EXPECT_EQ(run(collect(lines)), (Strings{"hello", "world", "", "long line here", "last"}));
    // The end of stream is sticky.
    Expected<std::optional<std::string>> again = run(lines.next_line());
    ASSERT_TRUE(again);
    EXPECT_FALSE(*again);
  }
}

TEST(Lines, CrLfIsStrippedEvenWhenSplitBetweenReads) {
  io::BufReader reader(ScriptedReader::chunks({"a\r\nb\r", "\nc\n\r\n", "d\r"}), 4);
  auto lines = std::move(reader).lines();  // the owning form
  // A lone '\r' at the end of an unterminated last line is kept, as Tokio.
  EXPECT_EQ(run(collect(lines)), (Strings{"a", "b", "c", "", "d\r"}));
}

TEST(Lines, AnEmptyStreamHasNoLines) {
  io::BufReader reader{ScriptedReader()};
  auto lines = reader.lines();
  EXPECT_EQ(run(collect(lines)), Strings{});
}

TEST(Lines, ATrailingNewlineMakesNoExtraEmptyLine) {
  io::BufReader reader(ScriptedReader::chunks({"one\ntwo\n"}));
  auto lines = reader.lines();
  EXPECT_EQ(run(collect(lines)), (Strings{"one", "two"}));
}

TEST(Lines, AnErrorInTheMiddleOfALineLosesNothing) {
  io::BufReader reader(ScriptedReader({{"first\nsec", {}}, {"", kReset}, {"ond\nthird", {}}}), 16);
  auto lines = reader.lines();
  auto body = [](io::Lines<io::BufReader<ScriptedReader>&>& lines) -> Task<Strings> {
    Strings out;
    for (int i = 0; i < 5; ++i) {
      Expected<std::optional<std::string>> line = co_await lines.next_line();
      if (!line)
        out.push_back(line.error() == std::make_error_code(std::errc::connection_reset)
                          ? "<reset>"
                          : "<other>");
      else
        out.push_back(*line ? **line : "<end>");
    }
    co_return out;
  };
  EXPECT_EQ(run(body(lines)), (Strings{"first", "<reset>", "second", "third", "<end>"}));
}

TEST(Lines, ACancelledNextLineLosesNothing) {
  auto [near, far] = duplex_pipe();
  io::BufReader<PipeEnd&> reader(near, 4);
  auto lines = reader.lines();
  auto body = [](PipeEnd& far, io::Lines<io::BufReader<PipeEnd&>&>& lines) -> Task<Strings> {
    Strings out;
    (void)co_await far.write(std::string_view("par"));
    // Reads "par", waits for the rest: cancelled there.
    auto first = co_await volt::timeout(20ms, lines.next_line());
    out.push_back(first ? "<not cancelled>" : "<timed out>");
    (void)co_await far.write(std::string_view("tial line\nnext"));
    (void)co_await far.shutdown();
    Strings rest = co_await collect(lines);
    out.insert(out.end(), rest.begin(), rest.end());
    co_return out;
  };
  EXPECT_EQ(run(body(far, lines)), (Strings{"<timed out>", "partial line", "next"}));
}

TEST(BufReader, ReadLineKeepsTheNewlineAndReturnsZeroAtTheEnd) {
  io::BufReader reader(ScriptedReader::chunks({"x\r\n", "y\nz"}));
  auto body = [](io::BufReader<ScriptedReader>& reader) -> Task<Strings> {
    Strings out;
    for (;;) {
      std::string line = "[";
      Expected<std::size_t> n = co_await reader.read_line(line);
      if (n.value() == 0) {
        out.push_back(line + "] end");
        co_return out;
      }
      out.push_back(line + "] " + std::to_string(*n));
    }
  };
  EXPECT_EQ(run(body(reader)), (Strings{"[x\r\n] 3", "[y\n] 2", "[z] 1", "[] end"}));
}

TEST(BufReader, ReadUntilAnyDelimiter) {
  io::BufReader reader(ScriptedReader::chunks({"k=v;", "a", "b;;tail"}), 3);
  auto body = [](io::BufReader<ScriptedReader>& reader) -> Task<Strings> {
    Strings out;
    for (;;) {
      std::string field;
      Expected<std::size_t> n = co_await reader.read_until(';', field);
      if (n.value() == 0) co_return out;
      EXPECT_EQ(*n, field.size());
      out.push_back(field);
    }
  };
  EXPECT_EQ(run(body(reader)), (Strings{"k=v;", "ab;", ";", "tail"}));
}

TEST(BufReader, SmallReadsAreServedFromTheBuffer) {
  io::BufReader reader(ScriptedReader::chunks({std::string(100, 'q')}), 64);
  auto body = [](io::BufReader<ScriptedReader>& reader) -> Task<std::size_t> {
    std::size_t total = 0;
    char buf[10];
    for (;;) {
      std::size_t n = (co_await reader.read(buf)).value();
      if (n == 0) co_return total;
      EXPECT_LE(n, 10u);
      total += n;
    }
  };
  EXPECT_EQ(run(body(reader)), 100u);
  // 100 bytes in reads of 10 reached the inner stream as: 64, 36, then the
  // end of stream.
  EXPECT_EQ(reader.get_ref().asked, (std::vector<std::size_t>{64, 64, 64}));
}

TEST(BufReader, ALargeReadWithAnEmptyBufferGoesStraightThrough) {
  io::BufReader reader(ScriptedReader::chunks({"abcdefgh", std::string(100, 'z')}), 16);
  auto body = [](io::BufReader<ScriptedReader>& reader) -> Task<Strings> {
    Strings out;
    char small[3];
    char big[200];
    std::size_t n = (co_await reader.read(small)).value();  // buffers "abcdefgh"
    out.emplace_back(small, n);
    n = (co_await reader.read(big)).value();  // the buffered rest first, only
    out.emplace_back(big, n);
    n = (co_await reader.read(big)).value();  // empty buffer: straight through
    out.emplace_back(big, n);
    co_return out;
  };
  EXPECT_EQ(run(body(reader)), (Strings{"abc", "defgh", std::string(100, 'z')}));
  EXPECT_EQ(reader.get_ref().asked, (std::vector<std::size_t>{16, 200}));
}

TEST(BufReader, FillBufAndConsume) {
  io::BufReader reader(ScriptedReader::chunks({"abcdef", "gh"}), 4);
  auto body = [](io::BufReader<ScriptedReader>& reader) -> Task<Strings> {
    Strings out;
    out.emplace_back(as_view(reader.buffer()));  // nothing read yet
    io::ConstBuffer b = (co_await reader.fill_buf()).value();
    out.emplace_back(as_view(b));
    reader.consume(1);
    out.emplace_back(as_view(reader.buffer()));
    b = (co_await reader.fill_buf()).value();  // still buffered: no read
    out.emplace_back(as_view(b));
    reader.consume(100);  // clamped
    b = (co_await reader.fill_buf()).value();
    out.emplace_back(as_view(b));
    reader.consume(2);
    b = (co_await reader.fill_buf()).value();
    out.emplace_back(as_view(b));
    reader.consume(2);
    b = (co_await reader.fill_buf()).value();  // end of stream
    out.push_back(b.empty() ? "<end>" : "<more>");
    co_return out;
  };
  EXPECT_EQ(run(body(reader)), (Strings{"", "abcd", "bcd", "bcd", "ef", "gh", "<end>"}));
}

TEST(BufReader, ReadExactThroughTheBuffer) {
  io::BufReader reader(ScriptedReader::chunks({"12", "345", "6789"}), 4);
  char buf[8];
  ASSERT_TRUE(run(io::read_exact(reader, buf)));
  EXPECT_EQ(std::string(buf, 8), "12345678");
  char more[2];
  EXPECT_EQ(run(io::read_exact(reader, more)).error(), code(errc::unexpected_eof));
}

TEST(BufReader, ZeroCapacityIsInvalid) {
  EXPECT_EQ(volt_error_of([] { io::BufReader reader(ScriptedReader(), 0); }),
            code(errc::invalid_argument));
}

TEST(BufReader, BorrowedFormForwardsWritesAndGivesBackTheReference) {
  auto [near, far] = duplex_pipe();
  io::BufReader<PipeEnd&> reader(near);
  auto body = [](io::BufReader<PipeEnd&>& reader, PipeEnd& far) -> Task<Strings> {
    Strings out;
    (void)co_await io::write_all(reader, std::string_view("ping\n"));  // to far
    (void)co_await reader.flush();
    (void)co_await reader.shutdown();
    std::string got;
    (co_await io::read_to_string(far, got)).value();
    out.push_back(got);
    (void)co_await far.write(std::string_view("pong\n"));
    std::string line;
    (co_await reader.read_line(line)).value();
    out.push_back(line);
    co_return out;
  };
  EXPECT_EQ(run(body(reader, far)), (Strings{"ping\n", "pong\n"}));
  EXPECT_EQ(near.flushes, 1);
  EXPECT_EQ(near.shutdowns, 1);
  PipeEnd& inner = std::move(reader).into_inner();
  EXPECT_EQ(&inner, &near);
}

TEST(BufReader, ManyLinesFromAWriterOnAnotherWorker) {
  Runtime rt = Runtime::Builder().worker_threads(2).build();
  auto [near, far] = duplex_pipe();
  std::string text;
  Strings expected;
  std::minstd_rand rng(5);
  for (int i = 0; i < static_cast<int>(scale(5000)); ++i) {
    std::string line(rng() % 40, static_cast<char>('a' + i % 26));
    line += std::to_string(i);
    expected.push_back(line);
    text += line + (i % 3 == 0 ? "\r\n" : "\n");
  }
  auto body = [](PipeEnd& near, PipeEnd& far, std::string text) -> Task<Strings> {
    JoinHandle<Expected<void>> writer =
        spawn(send_chunked(far, std::move(text), {1, 5, 17, 300, 2}, true));
    io::BufReader<PipeEnd&> reader(near, 64);
    auto lines = reader.lines();
    Strings got = co_await collect(lines);
    (co_await writer).value();
    co_return got;
  };
  Strings got = rt.block_on(body(near, far, text));
  EXPECT_EQ(got.size(), expected.size());
  EXPECT_TRUE(got == expected);
}

}  // namespace
}  // namespace volt::test
