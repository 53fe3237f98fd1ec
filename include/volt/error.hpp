// volt/error.hpp: the runtime's error codes and the exception that carries them.
//
// Operational failures are values of `volt::errc` wrapped in a `std::error_code`
// (category "volt"). Where an API cannot return a value (awaiting a join handle
// whose task was cancelled, building a runtime with bad settings) it throws
// `volt::Error`, a `std::system_error` carrying the same code, so callers can
// test `e.code() == volt::errc::cancelled`.
#pragma once

#include <string>
#include <system_error>

namespace volt {

enum class errc {
  // The task was aborted through its JoinHandle before it completed.
  cancelled = 1,
  // The runtime shut down before the task completed, or refused it because it
  // was already shutting down (spawn after shutdown).
  runtime_shutdown,
  // The JoinHandle is empty: moved from, or its result was already taken.
  invalid_handle,
  // A blocking call (block_on, JoinHandle::join) was made on a runtime thread,
  // where it would block the worker that the awaited task may need.
  blocking_in_runtime,
  // An operation that needs a runtime (spawn, Handle::current, yield_now) was
  // used outside of one.
  no_runtime,
  // A Builder setting or argument is out of range (zero worker threads, ...).
  invalid_argument,
  // volt::timeout: the deadline passed before the wrapped operation completed.
  timed_out,
  // The primitive (semaphore, channel) was closed: no more permits or values.
  closed,
  // A channel's try_recv found no value (the channel is open).
  empty,
  // A bounded channel's try_send found no room (the channel is open).
  full,
  // A broadcast receiver fell behind by more than the capacity: the oldest
  // values it had not read were overwritten (it continues from the oldest kept).
  lagged,
  // read_exact (and the buffered readers' exact forms) met the end of the
  // stream before the requested bytes arrived. A plain read() reports the end
  // of stream as 0 bytes instead, never as this error.
  unexpected_eof,
  // write_all: the stream accepted 0 bytes of a non-empty write.
  write_zero,
  // A name could not be resolved (lookup_host); the message says why.
  host_not_found,
};

const std::error_category& volt_category() noexcept;

inline std::error_code make_error_code(errc e) noexcept {
  return {static_cast<int>(e), volt_category()};
}

// Thrown where an error cannot be returned as a value. `code()` is a volt::errc.
class Error : public std::system_error {
 public:
  explicit Error(errc e) : std::system_error(make_error_code(e)) {}
  Error(errc e, const std::string& what) : std::system_error(make_error_code(e), what) {}
};

}  // namespace volt

template <>
struct std::is_error_code_enum<volt::errc> : std::true_type {};
