// Tests of BufWriter (include/volt/io/buf_writer.hpp) over the in-memory
// streams of mock_stream.hpp: small writes held until flush (then written in
// one call, before the inner flush), the buffer written out first when a
// write does not fit, large writes passed straight through in order, partial
// inner writes while flushing, an error while flushing keeping exactly the
// unwritten bytes (no duplicate after a retry), write_zero, shutdown
// flushing first, the read side passed through, and write_all through it.
#include "volt/io/buf_writer.hpp"

#include <gtest/gtest.h>

#include <cstddef>
#include <string>
#include <system_error>
#include <vector>

#include "io/mock_stream.hpp"
#include "runtime/runtime_support.hpp"
#include "volt/io/util.hpp"

namespace volt::test {
namespace {

static_assert(io::AsyncWrite<io::BufWriter<RecordingWriter>>);
static_assert(io::AsyncWrite<io::BufWriter<RecordingWriter&>>);
static_assert(!io::AsyncRead<io::BufWriter<RecordingWriter>>);
static_assert(io::AsyncRead<io::BufWriter<PipeEnd>> && io::AsyncWrite<io::BufWriter<PipeEnd>>);

using Strings = std::vector<std::string>;
using Writer = io::BufWriter<RecordingWriter&>;

// Each write's accepted count, or -1 for an error; "flush" as 0/-1 too.
Task<std::vector<long>> write_each(Writer& w, Strings parts) {
  std::vector<long> out;
  for (const std::string& p : parts) {
    Expected<std::size_t> n = co_await w.write(p);
    out.push_back(n ? static_cast<long>(*n) : -1);
  }
  co_return out;
}

TEST(BufWriter, SmallWritesWaitForFlushThenGoOutInOneWriteBeforeTheInnerFlush) {
  RecordingWriter inner;
  Writer w(inner, 16);
  EXPECT_EQ(run(write_each(w, {"abc", "def", "g"})), (std::vector<long>{3, 3, 1}));
  EXPECT_TRUE(inner.events.empty()) << "nothing written before a flush";
  EXPECT_EQ(as_view(w.buffer()), "abcdefg");
  ASSERT_TRUE(run(w.flush()));
  EXPECT_EQ(inner.events, (Strings{"w:abcdefg", "flush"}));
  EXPECT_TRUE(w.buffer().empty());
  // A flush with nothing buffered still flushes the inner stream.
  ASSERT_TRUE(run(w.flush()));
  EXPECT_EQ(inner.events, (Strings{"w:abcdefg", "flush", "flush"}));
}

TEST(BufWriter, AWriteThatDoesNotFitWritesTheBufferOutFirst) {
  RecordingWriter inner;
  Writer w(inner, 8);
  EXPECT_EQ(run(write_each(w, {"abcde", "fghij", "kl"})), (std::vector<long>{5, 5, 2}));
  EXPECT_EQ(inner.events, (Strings{"w:abcde"}));
  EXPECT_EQ(as_view(w.buffer()), "fghijkl");
  // Exactly full is not "does not fit".
  EXPECT_EQ(run(write_each(w, {"m"})), (std::vector<long>{1}));
  EXPECT_EQ(inner.events, (Strings{"w:abcde"}));
  ASSERT_TRUE(run(w.flush()));
  EXPECT_EQ(inner.data, "abcdefghijklm");
}

TEST(BufWriter, LargeWritesGoStraightThroughAfterWhatWasBuffered) {
  RecordingWriter inner;
  Writer w(inner, 8);
  const std::string big(20, 'Z');
  const std::string exact(8, 'E');
  EXPECT_EQ(run(write_each(w, {"ab", big, exact, "c"})), (std::vector<long>{2, 20, 8, 1}));
  // The buffered "ab" first, then each large write in one call of its own.
  EXPECT_EQ(inner.events, (Strings{"w:ab", "w:" + big, "w:" + exact}));
  EXPECT_EQ(as_view(w.buffer()), "c");
  ASSERT_TRUE(run(w.flush()));
  EXPECT_EQ(inner.data, "ab" + big + exact + "c");
}

TEST(BufWriter, APassedThroughWriteMayBePartialAndWriteAllFinishesIt) {
  RecordingWriter inner;
  inner.max_per_write = 6;
  Writer w(inner, 4);
  const std::string payload = "0123456789abcdefghij";
  ASSERT_TRUE(run(io::write_all(w, payload)));
  ASSERT_TRUE(run(w.flush()));
  EXPECT_EQ(inner.data, payload);
}

TEST(BufWriter, PartialInnerWritesWhileFlushing) {
  RecordingWriter inner;
  inner.max_per_write = 3;
  Writer w(inner, 64);
  EXPECT_EQ(run(write_each(w, {"abcdefgh"})), (std::vector<long>{8}));
  ASSERT_TRUE(run(w.flush()));
  EXPECT_EQ(inner.events, (Strings{"w:abc", "w:def", "w:gh", "flush"}));
}

TEST(BufWriter, AnErrorWhileFlushingKeepsExactlyTheUnwrittenBytes) {
  RecordingWriter inner;
  inner.max_per_write = 2;
  inner.fail_at_call = 2;
  Writer w(inner, 64);
  EXPECT_EQ(run(write_each(w, {"abcdef"})), (std::vector<long>{6}));
  Expected<void> first = run(w.flush());
  ASSERT_FALSE(first);
  EXPECT_EQ(first.error(), std::make_error_code(std::errc::broken_pipe));
  EXPECT_EQ(inner.data, "ab");
  EXPECT_EQ(inner.flushes, 0) << "the inner flush is not reached after an error";
  EXPECT_EQ(as_view(w.buffer()), "cdef");
  // The stream recovers (say, the error was transient): nothing is written twice.
  ASSERT_TRUE(run(w.flush()));
  EXPECT_EQ(inner.data, "abcdef");
  EXPECT_TRUE(w.buffer().empty());
}

TEST(BufWriter, AFailedWriteOutFailsTheWriteThatNeededRoom) {
  RecordingWriter inner;
  inner.fail_at_call = 1;
  Writer w(inner, 4);
  EXPECT_EQ(run(write_each(w, {"abc", "de"})), (std::vector<long>{3, -1}));
  EXPECT_EQ(as_view(w.buffer()), "abc") << "the failed write accepted none of its bytes";
}

TEST(BufWriter, AnInnerWriteOfZeroIsWriteZero) {
  RecordingWriter inner;
  inner.accept_zero = true;
  Writer w(inner, 16);
  EXPECT_EQ(run(write_each(w, {"abc"})), (std::vector<long>{3}));
  Expected<void> flushed = run(w.flush());
  ASSERT_FALSE(flushed);
  EXPECT_EQ(flushed.error(), code(errc::write_zero));
  EXPECT_EQ(as_view(w.buffer()), "abc");
}

TEST(BufWriter, ShutdownWritesTheBufferOutThenShutsTheInnerDown) {
  RecordingWriter inner;
  Writer w(inner, 16);
  EXPECT_EQ(run(write_each(w, {"bye"})), (std::vector<long>{3}));
  ASSERT_TRUE(run(w.shutdown()));
  EXPECT_EQ(inner.events, (Strings{"w:bye", "shutdown"}));
}

TEST(BufWriter, EmptyWritesAcceptNothingAndWriteNothing) {
  RecordingWriter inner;
  Writer w(inner, 4);
  EXPECT_EQ(run(write_each(w, {"", "ab", ""})), (std::vector<long>{0, 2, 0}));
  EXPECT_TRUE(inner.events.empty());
}

TEST(BufWriter, ZeroCapacityIsInvalid) {
  RecordingWriter inner;
  EXPECT_EQ(volt_error_of([&inner] { Writer w(inner, 0); }), code(errc::invalid_argument));
}

TEST(BufWriter, OwningFormOverAPipeReadsThroughAndTheBytesArriveOnFlush) {
  auto [near, far] = duplex_pipe();
  io::BufWriter<PipeEnd> w(std::move(near), 32);
  auto body = [](io::BufWriter<PipeEnd>& w, PipeEnd& far) -> Task<Strings> {
    Strings out;
    (co_await io::write_all(w, std::string_view("hello "))).value();
    (co_await io::write_all(w, std::string_view("world"))).value();
    out.push_back(std::to_string(w.get_ref().written));  // nothing sent yet
    (co_await w.shutdown()).value();
    out.push_back(std::to_string(w.get_ref().written));
    std::string got;
    (co_await io::read_to_string(far, got)).value();
    out.push_back(got);
    (void)co_await far.write(std::string_view("reply"));
    char buf[16];
    std::size_t n = (co_await w.read(buf)).value();  // the read side, through
    out.emplace_back(buf, n);
    co_return out;
  };
  EXPECT_EQ(run(body(w, far)), (Strings{"0", "11", "hello world", "reply"}));
  EXPECT_EQ(w.get_ref().shutdowns, 1);
}

}  // namespace
}  // namespace volt::test
