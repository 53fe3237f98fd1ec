// volt/io/async_io.hpp: what an asynchronous byte stream is (Tokio's
// AsyncRead / AsyncWrite), as concepts the sockets model and the generic
// utilities (BufReader, BufWriter, copy) are written against.
//
//   AsyncRead   co_await s.read(MutableBuffer) -> Expected<std::size_t>
//               0 bytes means the end of the stream (for a non-empty buffer).
//   AsyncWrite  co_await s.write(ConstBuffer)  -> Expected<std::size_t>
//               (at least one byte for a non-empty buffer, or an error)
//               co_await s.flush()             -> Expected<void>
//               co_await s.shutdown()          -> Expected<void>
//               (flushes, then ends the write direction: the peer reads
//               end of stream)
//
// Errors are std::error_codes: std::errc::connection_reset,
// std::errc::broken_pipe (never a SIGPIPE), volt::errc::unexpected_eof...
//
// Example, a function that works on any stream:
//
//   template <volt::io::AsyncRead R>
//   volt::Task<std::size_t> count_bytes(R& r) {
//     char buf[4096];
//     std::size_t total = 0;
//     for (;;) {
//       std::size_t n = (co_await r.read(buf)).value();
//       if (n == 0) co_return total;
//       total += n;
//     }
//   }
#pragma once

#include <concepts>
#include <cstddef>
#include <utility>

#include "volt/detail/operand.hpp"
#include "volt/expected.hpp"
#include "volt/io/buffer.hpp"

namespace volt::io {

// The type `co_await a` gives.
template <class A>
using await_result_t = decltype(volt::detail::get_awaiter(std::declval<A>()).await_resume());

template <class S>
concept AsyncRead = requires(S& s, MutableBuffer b) {
  {s.read(b)};
}
&&std::same_as<await_result_t<decltype(std::declval<S&>().read(std::declval<MutableBuffer>()))>,
               Expected<std::size_t>>;

template <class S>
concept AsyncWrite = requires(S& s, ConstBuffer b) {
  {s.write(b)};
  {s.flush()};
  {s.shutdown()};
}
&&std::same_as<await_result_t<decltype(std::declval<S&>().write(std::declval<ConstBuffer>()))>,
               Expected<std::size_t>>&&
    std::same_as<await_result_t<decltype(std::declval<S&>().flush())>, Expected<void>>&&
        std::same_as<await_result_t<decltype(std::declval<S&>().shutdown())>, Expected<void>>;

// An awaitable that is ready at once with a value: what a stream returns for
// an operation that never waits (flush() on a socket).
template <class T>
class [[nodiscard]] Ready {
 public:
  explicit Ready(T value) noexcept(std::is_nothrow_move_constructible_v<T>)
      : value_(std::move(value)) {}
  bool await_ready() const noexcept { return true; }
  void await_suspend(std::coroutine_handle<>) const noexcept {}
  T await_resume() noexcept(std::is_nothrow_move_constructible_v<T>) { return std::move(value_); }

 private:
  T value_;
};

}  // namespace volt::io
