// Tests of copy and copy_bidirectional (include/volt/io/copy.hpp) over the
// in-memory streams of mock_stream.hpp. copy: byte count and content with
// chunks larger than its buffer, a writer taking one byte per call, the
// flush after each chunk and at the end (and no shutdown), an empty stream,
// read errors and write_zero. copy_bidirectional (on a multi-thread and a
// current-thread runtime): a proxy between two pipes ending in both orders
// (each side's shutdown reaching the other side's peer), large transfers
// both ways at once, a read error and a write error in one direction ending
// the other direction while it waits, and a proxy through BufReader /
// BufWriter wrappers answering line by line (the per-chunk flush).
#include "volt/io/copy.hpp"

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "io/mock_stream.hpp"
#include "runtime/runtime_support.hpp"
#include "volt/io/buf_reader.hpp"
#include "volt/io/buf_writer.hpp"
#include "volt/io/util.hpp"
#include "volt/time/timeout.hpp"

namespace volt::test {
namespace {

TEST(Copy, CountsAndContentWithChunksLargerThanItsBuffer) {
  std::vector<std::string> chunks = {pattern(3, 1), pattern(50'000, 2), pattern(8192, 3),
                                     pattern(1, 4)};
  std::string all;
  for (const std::string& c : chunks)
    all += c;
  ScriptedReader r = ScriptedReader::chunks(chunks);
  RecordingWriter w;
  Expected<std::uint64_t> n = run(io::copy(r, w));
  ASSERT_TRUE(n) << n.error().message();
  EXPECT_EQ(*n, all.size());
  EXPECT_TRUE(w.data == all);
  EXPECT_EQ(w.shutdowns, 0) << "copy does not shut the writer down";
  // Every read offered the whole 8 KiB buffer.
  for (std::size_t asked : r.asked)
    EXPECT_EQ(asked, 8192u);
  // Flushed after each chunk it read and once at the end, and the last event
  // is a flush: nothing is left unflushed.
  EXPECT_EQ(static_cast<std::size_t>(w.flushes), r.asked.size());
  EXPECT_EQ(w.events.back(), "flush");
}

TEST(Copy, AWriterTakingOneBytePerCall) {
  ScriptedReader r = ScriptedReader::chunks({"hello", " ", "world"});
  RecordingWriter w;
  w.max_per_write = 1;
  Expected<std::uint64_t> n = run(io::copy(r, w));
  ASSERT_TRUE(n);
  EXPECT_EQ(*n, 11u);
  EXPECT_EQ(w.data, "hello world");
  EXPECT_EQ(w.calls, 11u);
}

TEST(Copy, AnEmptyStreamCopiesNothingAndFlushes) {
  ScriptedReader r;
  RecordingWriter w;
  Expected<std::uint64_t> n = run(io::copy(r, w));
  ASSERT_TRUE(n);
  EXPECT_EQ(*n, 0u);
  EXPECT_EQ(w.events, std::vector<std::string>{"flush"});
}

TEST(Copy, AReadErrorEndsItAfterTheBytesBefore) {
  ScriptedReader r({{"abc", {}}, {"", kReset}, {"def", {}}});
  RecordingWriter w;
  Expected<std::uint64_t> n = run(io::copy(r, w));
  ASSERT_FALSE(n);
  EXPECT_EQ(n.error(), kReset);
  EXPECT_EQ(w.data, "abc");
}

TEST(Copy, AWriterAcceptingNothingIsWriteZero) {
  ScriptedReader r = ScriptedReader::chunks({"abc"});
  RecordingWriter w;
  w.accept_zero = true;
  Expected<std::uint64_t> n = run(io::copy(r, w));
  ASSERT_FALSE(n);
  EXPECT_EQ(n.error(), code(errc::write_zero));
}

TEST(Copy, APipeToAPipeWithTheWriterOnAnotherWorker) {
  Runtime rt = Runtime::Builder().worker_threads(2).build();
  auto [src_near, src_far] = duplex_pipe();
  auto [dst_near, dst_far] = duplex_pipe();
  const std::string payload = pattern(300'000, 7);
  auto body = [](PipeEnd& src_near, PipeEnd& src_far, PipeEnd& dst_near, PipeEnd& dst_far,
                 std::string payload) -> Task<std::pair<std::uint64_t, std::string>> {
    JoinHandle<Expected<void>> writer =
        spawn(send_chunked(src_far, payload, {5000, 3, 20000}, true));
    std::uint64_t n = (co_await io::copy(src_near, dst_near)).value();
    (co_await dst_near.shutdown()).value();
    std::string got = (co_await receive_all(dst_far)).value();
    (co_await writer).value();
    co_return std::pair<std::uint64_t, std::string>(n, std::move(got));
  };
  auto [n, got] = rt.block_on(body(src_near, src_far, dst_near, dst_far, payload));
  EXPECT_EQ(n, payload.size());
  EXPECT_TRUE(got == payload);
}

// ---- copy_bidirectional: client <-> [a  proxy  b] <-> server ----

class CopyBidirectional : public ::testing::TestWithParam<Flavour> {};

struct ProxyOutcome {
  Expected<std::pair<std::uint64_t, std::uint64_t>> counts = errc::invalid_handle;
  Expected<std::string> client_got = errc::invalid_handle;
  Expected<std::string> server_got = errc::invalid_handle;
};

// Client and server are spawned tasks (other workers, in the multi-thread
// flavour); the proxy runs in the awaiting task. `client_first`: which side
// finishes sending and shuts down first; the other side waits for the end of
// stream before sending its own data.
Task<ProxyOutcome> proxy_scenario(bool client_first, std::string to_server, std::string to_client) {
  std::pair<PipeEnd, PipeEnd> pipe_client_a = duplex_pipe();
  PipeEnd& client = pipe_client_a.first;
  PipeEnd& a = pipe_client_a.second;
  std::pair<PipeEnd, PipeEnd> pipe_b_server = duplex_pipe();
  PipeEnd& b = pipe_b_server.first;
  PipeEnd& server = pipe_b_server.second;
  auto first_sender = [](PipeEnd& end, std::string data) -> Task<Expected<std::string>> {
    // The sizes apart: GCC 12 rejects a braced list in a co_await's expression.
    std::vector<std::size_t> sizes{1, 4000, 77};
    Expected<void> sent = co_await send_chunked(end, std::move(data), std::move(sizes), true);
    if (!sent) co_return sent.error();
    Expected<std::string> got = co_await receive_all(end);
    co_return got;
  };
  auto second_sender = [](PipeEnd& end, std::string data) -> Task<Expected<std::string>> {
    Expected<std::string> got = co_await receive_all(end);
    if (!got) co_return got;
    std::vector<std::size_t> sizes{9000, 2};
    Expected<void> sent = co_await send_chunked(end, std::move(data), std::move(sizes), true);
    if (!sent) co_return sent.error();
    co_return got;
  };
  JoinHandle<Expected<std::string>> client_task =
      spawn(client_first ? first_sender(client, to_server) : second_sender(client, to_server));
  JoinHandle<Expected<std::string>> server_task =
      spawn(client_first ? second_sender(server, to_client) : first_sender(server, to_client));
  ProxyOutcome out;
  out.counts = co_await io::copy_bidirectional(a, b);
  out.client_got = co_await client_task;
  out.server_got = co_await server_task;
  EXPECT_EQ(a.shutdowns, 1);
  EXPECT_EQ(b.shutdowns, 1);
  co_return out;
}

TEST_P(CopyBidirectional, ClientEndsFirst) {
  Runtime rt = make_runtime(GetParam());
  const std::string up = pattern(100'000, 1);
  const std::string down = pattern(70'001, 2);
  ProxyOutcome out = rt.block_on(proxy_scenario(true, up, down));
  ASSERT_TRUE(out.counts) << out.counts.error().message();
  EXPECT_EQ(out.counts->first, up.size());
  EXPECT_EQ(out.counts->second, down.size());
  ASSERT_TRUE(out.server_got);
  ASSERT_TRUE(out.client_got);
  EXPECT_TRUE(*out.server_got == up);
  EXPECT_TRUE(*out.client_got == down);
}

TEST_P(CopyBidirectional, ServerEndsFirst) {
  Runtime rt = make_runtime(GetParam());
  const std::string up = pattern(12'345, 3);
  const std::string down = pattern(99'999, 4);
  ProxyOutcome out = rt.block_on(proxy_scenario(false, up, down));
  ASSERT_TRUE(out.counts) << out.counts.error().message();
  EXPECT_EQ(out.counts->first, up.size());
  EXPECT_EQ(out.counts->second, down.size());
  ASSERT_TRUE(out.server_got);
  ASSERT_TRUE(out.client_got);
  EXPECT_TRUE(*out.server_got == up);
  EXPECT_TRUE(*out.client_got == down);
}

TEST_P(CopyBidirectional, BothDirectionsAtOnceWithEmptyAndLargeSides) {
  Runtime rt = make_runtime(GetParam());
  auto body = []() -> Task<std::vector<std::string>> {
    std::pair<PipeEnd, PipeEnd> pipe_client_a = duplex_pipe();
    PipeEnd& client = pipe_client_a.first;
    PipeEnd& a = pipe_client_a.second;
    std::pair<PipeEnd, PipeEnd> pipe_b_server = duplex_pipe();
    PipeEnd& b = pipe_b_server.first;
    PipeEnd& server = pipe_b_server.second;
    const std::string up = pattern(scale(1'000'000), 5);
    // Both sides send at once and shut down; the client sends nothing.
    JoinHandle<Expected<void>> c_send = spawn(send_chunked(client, std::string(), {1}, true));
    JoinHandle<Expected<void>> s_send = spawn(send_chunked(server, up, {65536, 1, 999}, true));
    auto counts = (co_await io::copy_bidirectional(a, b)).value();
    (co_await c_send).value();
    (co_await s_send).value();
    std::string at_client = (co_await receive_all(client)).value();
    std::string at_server = (co_await receive_all(server)).value();
    co_return std::vector<std::string>{std::to_string(counts.first), std::to_string(counts.second),
                                       at_server, at_client == up ? "up ok" : "up differs"};
  };
  std::vector<std::string> got = rt.block_on(body());
  EXPECT_EQ(got, (std::vector<std::string>{"0", std::to_string(scale(1'000'000)), "", "up ok"}));
}

TEST_P(CopyBidirectional, AReadErrorEndsTheOtherDirectionWhileItWaits) {
  Runtime rt = make_runtime(GetParam());
  auto body = []() -> Task<std::vector<std::string>> {
    std::pair<PipeEnd, PipeEnd> pipe_client_a = duplex_pipe();
    PipeEnd& client = pipe_client_a.first;
    PipeEnd& a = pipe_client_a.second;
    std::pair<PipeEnd, PipeEnd> pipe_b_server = duplex_pipe();
    PipeEnd& b = pipe_b_server.first;
    PipeEnd& server = pipe_b_server.second;
    // The client sends a little and then nothing: a -> b waits in a read.
    (co_await client.write(std::string_view("hi"))).value();
    JoinHandle<void> reset = spawn([](PipeEnd& server) -> Task<void> {
      char buf[2];
      (co_await io::read_exact(server, buf)).value();  // "hi" went through
      server.send_error(std::make_error_code(std::errc::connection_reset));
    }(server));
    // Bounded, so that a direction left waiting shows up as a failure.
    Expected<Expected<std::pair<std::uint64_t, std::uint64_t>>> bounded =
        co_await volt::timeout(kNotHung, io::copy_bidirectional(a, b));
    co_await reset;
    if (!bounded) co_return std::vector<std::string>{"the other direction kept waiting"};
    Expected<std::pair<std::uint64_t, std::uint64_t>> counts = *bounded;
    co_return std::vector<std::string>{counts ? "ok" : counts.error().message(),
                                       std::to_string(a.shutdowns), std::to_string(b.shutdowns)};
  };
  std::vector<std::string> got = rt.block_on(body());
  EXPECT_EQ(got, (std::vector<std::string>{kReset.message(), "0", "0"}));
}

TEST_P(CopyBidirectional, AWriteErrorIsReturned) {
  Runtime rt = make_runtime(GetParam());
  auto body = []() -> Task<std::string> {
    std::pair<PipeEnd, PipeEnd> pipe_client_a = duplex_pipe();  // the client stays silent
    PipeEnd& a = pipe_client_a.second;
    std::pair<PipeEnd, PipeEnd> pipe_b_server = duplex_pipe();
    PipeEnd& b = pipe_b_server.first;
    PipeEnd& server = pipe_b_server.second;
    a.fail_writes(std::make_error_code(std::errc::broken_pipe));
    // server -> b -> a fails writing to a; a -> b waits on a silent client.
    (co_await server.write(std::string_view("data"))).value();
    Expected<Expected<std::pair<std::uint64_t, std::uint64_t>>> bounded =
        co_await volt::timeout(kNotHung, io::copy_bidirectional(a, b));
    if (!bounded) co_return "the other direction kept waiting";
    co_return *bounded ? "ok" : bounded->error().message();
  };
  EXPECT_EQ(rt.block_on(body()), std::make_error_code(std::errc::broken_pipe).message());
}

TEST_P(CopyBidirectional, ThroughBufferedWrappersALineProtocolDoesNotStall) {
  // An echo-like exchange where each side waits for the other's line before
  // sending the next: it completes only if the proxy flushes its BufWriter
  // after each chunk instead of waiting to fill it.
  Runtime rt = make_runtime(GetParam());
  auto body = []() -> Task<std::vector<std::string>> {
    std::pair<PipeEnd, PipeEnd> pipe_client_a = duplex_pipe();
    PipeEnd& client = pipe_client_a.first;
    PipeEnd& a = pipe_client_a.second;
    std::pair<PipeEnd, PipeEnd> pipe_b_server = duplex_pipe();
    PipeEnd& b = pipe_b_server.first;
    PipeEnd& server = pipe_b_server.second;
    io::BufReader<io::BufWriter<PipeEnd&>> wrapped_a(io::BufWriter<PipeEnd&>(a, 4096), 4096);
    io::BufReader<io::BufWriter<PipeEnd&>> wrapped_b(io::BufWriter<PipeEnd&>(b, 4096), 4096);
    JoinHandle<Expected<std::string>> server_task =
        spawn([](PipeEnd& server) -> Task<Expected<std::string>> {
          io::BufReader<PipeEnd&> in(server);
          std::string seen;
          for (;;) {
            std::string line;
            Expected<std::size_t> n = co_await in.read_line(line);
            if (!n) co_return n.error();
            if (*n == 0) break;
            seen += line;
            (co_await io::write_all(server, "re:" + line)).value();
          }
          (co_await server.shutdown()).value();
          co_return seen;
        }(server));
    JoinHandle<Expected<std::string>> client_task =
        spawn([](PipeEnd& client) -> Task<Expected<std::string>> {
          io::BufReader<PipeEnd&> in(client);
          std::string replies;
          for (int i = 0; i < 20; ++i) {
            (co_await io::write_all(client, "line " + std::to_string(i) + "\n")).value();
            std::string line;
            Expected<std::size_t> n = co_await in.read_line(line);
            if (!n) co_return n.error();
            replies += line;
          }
          (co_await client.shutdown()).value();
          std::string rest;
          (co_await io::read_to_string(in, rest)).value();
          co_return replies + rest;
        }(client));
    auto bounded = co_await volt::timeout(kNotHung, io::copy_bidirectional(wrapped_a, wrapped_b));
    if (!bounded) {
      // Stalled: end both sides' input so that the client and server finish.
      (void)co_await a.shutdown();
      (void)co_await b.shutdown();
      (void)co_await server_task;
      (void)co_await client_task;
      co_return std::vector<std::string>{"stalled"};
    }
    auto counts = std::move(*bounded).value();
    std::string seen = (co_await server_task).value();
    std::string replies = (co_await client_task).value();
    co_return std::vector<std::string>{std::to_string(counts.first), std::to_string(counts.second),
                                       seen, replies};
  };
  std::string sent;
  std::string replied;
  for (int i = 0; i < 20; ++i) {
    sent += "line " + std::to_string(i) + "\n";
    replied += "re:line " + std::to_string(i) + "\n";
  }
  EXPECT_EQ(rt.block_on(body()),
            (std::vector<std::string>{std::to_string(sent.size()), std::to_string(replied.size()),
                                      sent, replied}));
}

INSTANTIATE_TEST_SUITE_P(Flavours, CopyBidirectional,
                         ::testing::Values(kMultiThread2, kCurrentThread), FlavourName());

}  // namespace
}  // namespace volt::test
