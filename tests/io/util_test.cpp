// Tests of the generic stream loops (include/volt/io/util.hpp) over the
// in-memory streams of mock_stream.hpp: read_exact across chunks, its
// unexpected_eof and passed-through errors; write_all against a writer that
// takes one byte per call, write_zero and errors; read_to_end /
// read_to_string appending, counting, keeping bytes read before an error,
// and leaving no padding behind when cancelled while waiting.
#include "volt/io/util.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <cstddef>
#include <string>
#include <system_error>
#include <vector>

#include "io/mock_stream.hpp"
#include "runtime/runtime_support.hpp"
#include "volt/time/sleep.hpp"
#include "volt/time/timeout.hpp"

namespace volt::test {
namespace {

using namespace std::chrono_literals;

static_assert(io::AsyncRead<ScriptedReader>);
static_assert(io::AsyncWrite<RecordingWriter>);
static_assert(io::AsyncRead<PipeEnd> && io::AsyncWrite<PipeEnd>);

// Runs `body` on a fresh current-thread runtime.
TEST(ReadExact, FillsTheBufferAcrossChunks) {
  ScriptedReader r = ScriptedReader::chunks({"ab", "cde", "f", "gh"});
  char buf[6] = {};
  Expected<void> got = run(io::read_exact(r, buf));
  ASSERT_TRUE(got) << got.error().message();
  EXPECT_EQ(std::string(buf, 6), "abcdef");
  // It asked only for what was still missing each time.
  EXPECT_EQ(r.asked, (std::vector<std::size_t>{6, 4, 1}));
  // The rest is still in the stream.
  char rest[2];
  ASSERT_TRUE(run(io::read_exact(r, rest)));
  EXPECT_EQ(std::string(rest, 2), "gh");
}

TEST(ReadExact, EndOfStreamFirstIsUnexpectedEof) {
  ScriptedReader r = ScriptedReader::chunks({"ab", "c"});
  char buf[5] = {};
  Expected<void> got = run(io::read_exact(r, buf));
  ASSERT_FALSE(got);
  EXPECT_EQ(got.error(), code(errc::unexpected_eof));
  EXPECT_EQ(std::string(buf, 3), "abc") << "the bytes that arrived are at the front";
}

TEST(ReadExact, AnEmptyBufferSucceedsWithoutReading) {
  ScriptedReader r;  // empty stream: a read would give 0
  Expected<void> got = run(io::read_exact(r, io::MutableBuffer()));
  EXPECT_TRUE(got);
  EXPECT_TRUE(r.asked.empty());
}

TEST(ReadExact, AReadErrorIsReturnedAsItIs) {
  ScriptedReader r({{"ab", {}}, {"", kReset}, {"cd", {}}});
  char buf[4];
  Expected<void> got = run(io::read_exact(r, buf));
  ASSERT_FALSE(got);
  EXPECT_EQ(got.error(), kReset);
}

TEST(WriteAll, AWriterTakingOneBytePerCallGetsEverything) {
  RecordingWriter w;
  w.max_per_write = 1;
  std::string payload;
  for (int i = 0; i < 300; ++i)
    payload.push_back(static_cast<char>('a' + i % 26));
  Expected<void> got = run(io::write_all(w, payload));
  ASSERT_TRUE(got) << got.error().message();
  EXPECT_EQ(w.data, payload);
  EXPECT_EQ(w.calls, payload.size());
  EXPECT_EQ(w.flushes, 0) << "write_all does not flush";
}

TEST(WriteAll, AWriteOfZeroBytesIsWriteZero) {
  RecordingWriter w;
  w.accept_zero = true;
  Expected<void> got = run(io::write_all(w, std::string_view("abc")));
  ASSERT_FALSE(got);
  EXPECT_EQ(got.error(), code(errc::write_zero));
  EXPECT_EQ(w.calls, 1u) << "no busy loop on a stream that takes nothing";
}

TEST(WriteAll, AWriteErrorIsReturnedAfterTheBytesBeforeIt) {
  RecordingWriter w;
  w.max_per_write = 2;
  w.fail_at_call = 3;
  Expected<void> got = run(io::write_all(w, std::string_view("abcdefgh")));
  ASSERT_FALSE(got);
  EXPECT_EQ(got.error(), std::make_error_code(std::errc::broken_pipe));
  EXPECT_EQ(w.data, "abcd");
}

TEST(WriteAll, AnEmptyBufferWritesNothing) {
  RecordingWriter w;
  EXPECT_TRUE(run(io::write_all(w, io::ConstBuffer())));
  EXPECT_EQ(w.calls, 0u);
}

TEST(ReadToEnd, AppendsEverythingAndCountsIt) {
  // Chunks larger and smaller than the growth step.
  std::vector<std::string> chunks = {pattern(10, 1), pattern(20'000, 2), pattern(1, 3),
                                     pattern(5'000, 4)};
  std::string expected = "kept:";
  for (const std::string& c : chunks)
    expected += c;
  ScriptedReader r = ScriptedReader::chunks(chunks);
  std::string out = "kept:";
  Expected<std::size_t> n = run(io::read_to_end(r, out));
  ASSERT_TRUE(n) << n.error().message();
  EXPECT_EQ(*n, expected.size() - 5);
  EXPECT_EQ(out, expected);
}

TEST(ReadToEnd, IntoAVectorOfBytes) {
  ScriptedReader r = ScriptedReader::chunks({"xy", "z"});
  std::vector<std::byte> out;
  Expected<std::size_t> n = run(io::read_to_end(r, out));
  ASSERT_TRUE(n);
  ASSERT_EQ(*n, 3u);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0], std::byte{'x'});
  EXPECT_EQ(out[2], std::byte{'z'});
}

TEST(ReadToEnd, AnEmptyStreamAppendsNothing) {
  ScriptedReader r;
  std::string out = "same";
  Expected<std::size_t> n = run(io::read_to_string(r, out));
  ASSERT_TRUE(n);
  EXPECT_EQ(*n, 0u);
  EXPECT_EQ(out, "same");
}

TEST(ReadToEnd, AnErrorKeepsTheBytesReadBeforeItAndNothingElse) {
  ScriptedReader r({{"hello ", {}}, {"world", {}}, {"", kReset}, {"never", {}}});
  std::string out = ">";
  Expected<std::size_t> n = run(io::read_to_string(r, out));
  ASSERT_FALSE(n);
  EXPECT_EQ(n.error(), kReset);
  EXPECT_EQ(out, ">hello world") << "no padding from the spare room it read into";
}

TEST(ReadToEnd, CancelledWhileWaitingLeavesExactlyTheBytesRead) {
  auto [near, far] = duplex_pipe();
  std::string out = "<";
  Expected<Expected<std::size_t>> r = run(
      [](PipeEnd& near, PipeEnd& far, std::string& out) -> Task<Expected<Expected<std::size_t>>> {
        (void)co_await far.write(std::string_view("partial"));
        // read_to_end reads "partial", then waits for more: the timeout cancels
        // it there (destroying its frame).
        co_return co_await volt::timeout(20ms, io::read_to_end(near, out));
      }(near, far, out));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error(), code(errc::timed_out));
  EXPECT_EQ(out, "<partial");
}

TEST(ReadToEnd, ThroughAPipeWithTheWriterOnAnotherTask) {
  Runtime rt = Runtime::Builder().worker_threads(2).build();
  auto [near, far] = duplex_pipe();
  const std::string payload = pattern(200'000, 9);
  std::string out;
  Expected<std::size_t> n = rt.block_on([](PipeEnd& near, PipeEnd& far, const std::string& payload,
                                           std::string& out) -> Task<Expected<std::size_t>> {
    JoinHandle<Expected<void>> writer = spawn(send_chunked(far, payload, {1, 700, 13, 9000}, true));
    Expected<std::size_t> got = co_await io::read_to_end(near, out);
    (co_await writer).value();
    co_return got;
  }(near, far, payload, out));
  ASSERT_TRUE(n) << n.error().message();
  EXPECT_EQ(*n, payload.size());
  EXPECT_TRUE(out == payload);
}

}  // namespace
}  // namespace volt::test
