// volt/net/syscall_op.hpp: what every socket operation (stream_ops.hpp,
// datagram_ops.hpp) has in common: the descriptor, the error of its system
// call, the EINTR/EAGAIN handling, and the await_resume outcome; and the
// same for the try_ forms.
#pragma once

#include <sys/types.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <system_error>
#include <utility>

#include "volt/detail/io_operation.hpp"
#include "volt/expected.hpp"

namespace volt::net::detail {

class SyscallOp : public volt::detail::IoOperation {
 protected:
  SyscallOp(const volt::detail::IoHandle& h, volt::detail::Interest interest, StepFn step) noexcept
      : IoOperation(h, interest, step) {}

  // Makes the system call `call` (ssize_t; -1 and errno on failure),
  // retrying EINTR. True with its result in `n`. False with `step` set:
  // kWouldBlock for EAGAIN (the caller waits for readiness), kDone with
  // error_ recorded for any other error (the operation ends with it).
  template <class Call>
  bool syscall(Call call, std::size_t& n, Step& step) noexcept {
    for (;;) {
      const ssize_t r = call();
      if (r >= 0) {
        n = static_cast<std::size_t>(r);
        return true;
      }
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        step = Step::kWouldBlock;
      } else {
        error_ = errno;
        step = Step::kDone;
      }
      return false;
    }
  }

  // For await_resume: errc::closed (the socket was closed, or the handle is
  // empty), the system call's error, or `value`.
  template <class T>
  Expected<T> outcome(T value) noexcept {
    if (std::error_code ec = failure()) return ec;
    return Expected<T>(std::move(value));
  }
  Expected<void> outcome() noexcept {
    if (std::error_code ec = failure()) return ec;
    return {};
  }

  int error_ = 0;

 private:
  std::error_code failure() noexcept {
    finish();
    if (closed()) return make_error_code(errc::closed);
    if (error_ != 0) return {error_, std::system_category()};
    return {};
  }
};

// SO_ERROR: the pending error (nullopt if none), cleared by reading it.
Expected<std::optional<std::error_code>> take_error(const volt::detail::IoHandle& h) noexcept;

// A try_ form: one system call `call(fd)` (EINTR retried), no waiting,
// made while holding a use of the descriptor (errc::closed if the socket is
// closed or empty). EAGAIN gives std::errc::resource_unavailable_try_again
// and clears the registration's readiness for `interest` (tick-checked
// against the readiness seen before the call), so a following
// readable()/writable() really waits.
template <class Call>
Expected<std::size_t> try_syscall(const volt::detail::IoHandle& h, volt::detail::Interest interest,
                                  Call call) noexcept {
  const volt::detail::IoUse use(h);
  if (use.fd() < 0) return errc::closed;
  const std::uint64_t seen = use.readiness();
  for (;;) {
    const ssize_t n = call(use.fd());
    if (n >= 0) return static_cast<std::size_t>(n);
    if (errno == EINTR) continue;
    const int err = errno;
    if (err == EAGAIN || err == EWOULDBLOCK) use.clear_readiness(seen, interest);
    return std::error_code(err, std::system_category());
  }
}

}  // namespace volt::net::detail
