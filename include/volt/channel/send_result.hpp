// volt/channel/send_result.hpp: the outcome of a send that may fail, with the
// value handed back when it does (Tokio's Result<(), SendError<T>>).
//
//   volt::SendResult<Job> r = tx.try_send(std::move(job));
//   if (!r) {
//     if (r.error() == volt::errc::full) retry_later(r.take_back());
//     else /* errc::closed: nobody will ever receive it */ drop(r.take_back());
//   }
//
// Guarantees:
//  - A failed send loses nothing: the value it was given is inside the result
//    until take_back() moves it out (or the result is destroyed).
//  - error() says why: errc::closed (the channel was closed, or every receiver
//    is gone) for every kind of send; errc::full only from a bounded
//    channel's try_send.
//  - value() throws std::system_error(error()) on failure, for callers to
//    whom a failed send is exceptional: `tx.try_send(v).value();`.
#pragma once

#include <optional>
#include <system_error>
#include <utility>

#include "volt/error.hpp"

namespace volt {

template <class T>
class [[nodiscard("a failed send hands the value back")]] SendResult {
 public:
  // Delivered.
  SendResult() noexcept = default;
  // Not delivered, for the reason `why`; `value` is handed back.
  SendResult(errc why, T && value) : error_(why), value_(std::in_place, std::move(value)) {}

  bool has_value() const noexcept {
    return !value_.has_value();
  }
  explicit operator bool() const noexcept {
    return has_value();
  }
  // Why the send failed; a zero code when it was delivered.
  std::error_code error() const noexcept {
    return value_ ? make_error_code(error_) : std::error_code();
  }
  void value() const {
    if (value_) throw std::system_error(make_error_code(error_));
  }

  // The value that was not delivered. Precondition: !has_value().
  T& value_back()& noexcept {
    return *value_;
  }
  T take_back() {
    return std::move(*value_);
  }

 private:
  errc error_ = errc::closed;
  std::optional<T> value_;  // engaged iff the send failed
};

}  // namespace volt
