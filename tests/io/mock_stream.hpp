// tests/io/mock_stream.hpp: in-memory streams for the io utility tests
// (volt_io_tests), so that BufReader, BufWriter, copy and the rest are tested
// without sockets.
//
//  - ScriptedReader: an AsyncRead that is always ready and serves a fixed
//    script: chunks of bytes (a read returns at most the rest of the current
//    chunk, so the script controls where reads split the data), error steps
//    (that read returns the error), then end of stream. Records the size of
//    every read() it was asked for.
//  - RecordingWriter: an AsyncWrite that is always ready and records what it
//    accepted, every call in order ("w:<bytes>", "flush", "shutdown"), with
//    controls: at most N bytes per write, a failing call, zero-byte writes.
//  - duplex_pipe(): two PipeEnds joined by two volt unbounded channels of
//    chunks; each end is an AsyncRead + AsyncWrite. A read waits for the
//    peer's next chunk (a real suspension, woken across threads); a write
//    sends one chunk of at most max_write bytes; shutdown() drops the
//    sending half, so the peer reads the rest and then 0; send_error() makes
//    the peer's next read fail; fail_writes() makes this end's writes fail.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "volt/channel/unbounded.hpp"
#include "volt/error.hpp"
#include "volt/expected.hpp"
#include "volt/io/async_io.hpp"
#include "volt/io/buffer.hpp"
#include "volt/runtime/runtime.hpp"
#include "volt/task/task.hpp"

namespace volt::test {

inline std::string_view as_view(io::ConstBuffer b) {
  return std::string_view(reinterpret_cast<const char*>(b.data()), b.size());
}

class ScriptedReader {
 public:
  struct Step {
    std::string data;
    std::error_code error;  // set: this step is a failing read
  };

  ScriptedReader() = default;
  explicit ScriptedReader(std::vector<Step> steps) : steps_(std::move(steps)) {}
  // Just data chunks.
  static ScriptedReader chunks(std::vector<std::string> chunks) {
    std::vector<Step> steps;
    for (std::string& c : chunks)
      steps.push_back(Step{std::move(c), {}});
    return ScriptedReader(std::move(steps));
  }

  io::Ready<Expected<std::size_t>> read(io::MutableBuffer dst) {
    asked.push_back(dst.size());
    if (dst.empty()) return io::Ready<Expected<std::size_t>>(std::size_t{0});
    if (next_ == steps_.size()) return io::Ready<Expected<std::size_t>>(std::size_t{0});
    Step& step = steps_[next_];
    if (step.error) {
      ++next_;
      return io::Ready<Expected<std::size_t>>(step.error);
    }
    const std::size_t n = std::min(dst.size(), step.data.size() - offset_);
    std::memcpy(dst.data(), step.data.data() + offset_, n);
    offset_ += n;
    if (offset_ == step.data.size()) {
      ++next_;
      offset_ = 0;
    }
    return io::Ready<Expected<std::size_t>>(n);
  }

  std::vector<std::size_t> asked;  // the size of every read() buffer, in order

 private:
  std::vector<Step> steps_;
  std::size_t next_ = 0;    // current step
  std::size_t offset_ = 0;  // bytes of it already read
};

class RecordingWriter {
 public:
  io::Ready<Expected<std::size_t>> write(io::ConstBuffer src) {
    ++calls;
    if (fail_at_call == calls) return io::Ready<Expected<std::size_t>>(fail_code);
    if (accept_zero) return io::Ready<Expected<std::size_t>>(std::size_t{0});
    const std::size_t n = std::min(src.size(), max_per_write);
    std::string_view taken = as_view(src.first(n));
    data.append(taken);
    events.push_back("w:" + std::string(taken));
    return io::Ready<Expected<std::size_t>>(n);
  }
  io::Ready<Expected<void>> flush() {
    events.push_back("flush");
    ++flushes;
    return io::Ready<Expected<void>>(Expected<void>());
  }
  io::Ready<Expected<void>> shutdown() {
    events.push_back("shutdown");
    ++shutdowns;
    return io::Ready<Expected<void>>(Expected<void>());
  }

  // Controls.
  std::size_t max_per_write = std::numeric_limits<std::size_t>::max();
  std::size_t fail_at_call = 0;  // 1-based; 0: never
  std::error_code fail_code = std::make_error_code(std::errc::broken_pipe);
  bool accept_zero = false;

  // Observations.
  std::string data;                 // every byte accepted, in order
  std::vector<std::string> events;  // "w:<bytes>", "flush", "shutdown"
  std::size_t calls = 0;            // write() calls, including failed ones
  int flushes = 0;
  int shutdowns = 0;
};

struct Chunk {
  std::string data;
  std::error_code error;  // set: the reader's read() fails with it
};

class PipeEnd {
 public:
  PipeEnd(mpsc::UnboundedSender<Chunk> tx, mpsc::UnboundedReceiver<Chunk> rx)
      : tx_(std::move(tx)), rx_(std::move(rx)) {}
  PipeEnd(PipeEnd&&) = default;
  PipeEnd& operator=(PipeEnd&&) = default;

  // The peer's bytes: what is left of its last chunk, else its next chunk
  // (waiting for it); 0 once the peer shut down (or was dropped) and
  // everything it sent was read. Cancel-safe (as the channel's recv).
  Task<Expected<std::size_t>> read(io::MutableBuffer dst) {
    if (dst.empty()) co_return std::size_t{0};
    if (pos_ == pending_.size()) {
      std::optional<Chunk> chunk = co_await rx_.recv();
      if (!chunk) co_return std::size_t{0};
      if (chunk->error) co_return chunk->error;
      pending_ = std::move(chunk->data);
      pos_ = 0;
    }
    const std::size_t n = std::min(dst.size(), pending_.size() - pos_);
    std::memcpy(dst.data(), pending_.data() + pos_, n);
    pos_ += n;
    co_return n;
  }

  // One chunk of at most max_write bytes to the peer. broken_pipe after
  // shutdown() or once the peer is gone; the fail_writes() code if set.
  io::Ready<Expected<std::size_t>> write(io::ConstBuffer src) {
    using R = io::Ready<Expected<std::size_t>>;
    if (write_error_) return R(write_error_);
    if (src.empty()) return R(std::size_t{0});
    const std::size_t n = std::min(src.size(), max_write);
    if (!tx_.send(Chunk{std::string(as_view(src.first(n))), {}}))
      return R(std::make_error_code(std::errc::broken_pipe));
    written += n;
    return R(n);
  }
  io::Ready<Expected<void>> flush() {
    ++flushes;
    return io::Ready<Expected<void>>(Expected<void>());
  }
  // Ends the write direction: the peer reads what was sent, then 0.
  io::Ready<Expected<void>> shutdown() {
    ++shutdowns;
    tx_ = mpsc::UnboundedSender<Chunk>();
    return io::Ready<Expected<void>>(Expected<void>());
  }

  // Test controls.
  void send_error(std::error_code e) { (void)tx_.send(Chunk{{}, e}); }
  void fail_writes(std::error_code e) { write_error_ = e; }
  std::size_t max_write = std::numeric_limits<std::size_t>::max();

  // Observations (read them after the task that uses this end finished).
  std::size_t written = 0;
  int flushes = 0;
  int shutdowns = 0;

 private:
  mpsc::UnboundedSender<Chunk> tx_;
  mpsc::UnboundedReceiver<Chunk> rx_;
  std::string pending_;  // the chunk being read
  std::size_t pos_ = 0;  // bytes of it already read
  std::error_code write_error_;
};

inline std::pair<PipeEnd, PipeEnd> duplex_pipe() {
  auto [tx_ab, rx_ab] = mpsc::unbounded_channel<Chunk>();
  auto [tx_ba, rx_ba] = mpsc::unbounded_channel<Chunk>();
  return {PipeEnd(std::move(tx_ab), std::move(rx_ba)), PipeEnd(std::move(tx_ba), std::move(rx_ab))};
}

// Writes `data` to `end` in chunks of the given sizes (cycled), then shuts it
// down if asked.
inline Task<Expected<void>> send_chunked(PipeEnd& end, std::string data,
                                         std::vector<std::size_t> sizes, bool shutdown_after) {
  std::size_t pos = 0;
  std::size_t k = 0;
  while (pos < data.size()) {
    const std::size_t n = std::min(sizes[k++ % sizes.size()], data.size() - pos);
    Expected<std::size_t> put = co_await end.write(std::string_view(data).substr(pos, n));
    if (!put) co_return put.error();
    pos += *put;
  }
  if (shutdown_after) {
    Expected<void> shut = co_await end.shutdown();
    co_return shut;
  }
  co_return Expected<void>();
}

// Reads `end` to its end of stream.
inline Task<Expected<std::string>> receive_all(PipeEnd& end) {
  std::string out;
  char buf[1000];
  for (;;) {
    Expected<std::size_t> n = co_await end.read(buf);
    if (!n) co_return n.error();
    if (*n == 0) co_return out;
    out.append(buf, *n);
  }
}

// Runs `body` to completion on a fresh current-thread runtime.
template <class T>
T run(Task<T> body) {
  Runtime rt = Runtime::Builder::current_thread().build();
  return rt.block_on(std::move(body));
}

inline const std::error_code kReset = std::make_error_code(std::errc::connection_reset);

// n printable bytes, a different sequence per seed (test data for copies).
inline std::string pattern(std::size_t n, std::size_t seed) {
  std::string s(n, '\0');
  for (std::size_t i = 0; i < n; ++i)
    s[i] = static_cast<char>('!' + (i * 13 + seed) % 90);
  return s;
}

}  // namespace volt::test
