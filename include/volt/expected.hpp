// volt/expected.hpp: Expected<T>, a value or the std::error_code saying why
// there is none (C++23's std::expected<T, std::error_code>, for C++20).
//
// Returned where failure is an ordinary outcome rather than a bug: a timeout
// that elapsed, later an I/O operation that hit end of stream. Codes are
// volt::errc values (category "volt") or std::errc / system errors.
//
// Guarantees:
//  - Holds exactly one of a T or a non-zero error code.
//  - value() on an error throws volt::Error-compatible std::system_error
//    carrying the code, so `co_await timeout(d, op)` can be used as
//    `(co_await timeout(d, op)).value()` where a timeout is exceptional.
//  - T may be void or an lvalue reference.
//
// Example:
//
//   volt::Expected<int> r = co_await volt::timeout(100ms, rx);
//   if (!r) assert(r.error() == volt::errc::timed_out);
#pragma once

#include <optional>
#include <system_error>
#include <type_traits>
#include <utility>

#include "volt/error.hpp"

namespace volt {

namespace detail {
// A std::error_code that costs nothing when empty: std::error_code's default
// constructor calls the out-of-line std::system_category() (measured at ~5%
// of timeout_ready), so the success path stores a null category instead.
class ErrorSlot {
 public:
  ErrorSlot() noexcept = default;
  ErrorSlot(std::error_code code) noexcept
      : value_(code.value()), category_(code ? &code.category() : nullptr) {}
  bool is_set() const noexcept { return category_ != nullptr; }
  std::error_code get() const noexcept {
    return category_ ? std::error_code(value_, *category_) : std::error_code();
  }

 private:
  int value_ = 0;
  const std::error_category* category_ = nullptr;
};
}  // namespace detail

template <class T>
class [[nodiscard]] Expected {
  // References are held as pointers so that the object stays assignable.
  using Stored = std::conditional_t<std::is_reference_v<T>, std::remove_reference_t<T>*, T>;

 public:
  using value_type = T;

  template <class U = T>
  requires(!std::is_reference_v<T> && std::is_constructible_v<T, U&&>) Expected(U&& value)
      : value_(std::in_place, std::forward<U>(value)) {}
  template <class U = T>
  requires std::is_reference_v<T> Expected(T value) : value_(std::in_place, &value) {}
  Expected(std::error_code error) noexcept : error_(error) {}
  Expected(errc error) noexcept : error_(make_error_code(error)) {}

  bool has_value() const noexcept { return value_.has_value(); }
  explicit operator bool() const noexcept { return has_value(); }
  // The error; a default (zero) code when there is a value.
  std::error_code error() const noexcept { return error_.get(); }

  T& value() & {
    check();
    return get();
  }
  // By value from an rvalue (the usual `(co_await op).value()`), so the result
  // never dangles; a reference T is returned as that reference.
  T value() && {
    check();
    if constexpr (std::is_reference_v<T>) {
      return get();
    } else {
      return std::move(get());
    }
  }
  T& operator*() & noexcept { return get(); }
  // By value, as value() &&: `*rx.try_recv()` never dangles.
  T operator*() && noexcept(std::is_nothrow_move_constructible_v<T>) {
    if constexpr (std::is_reference_v<T>) {
      return get();
    } else {
      return std::move(get());
    }
  }
  std::remove_reference_t<T>* operator->() noexcept { return &get(); }

 private:
  void check() const {
    if (!value_) throw std::system_error(error_.get());
  }
  std::remove_reference_t<T>& get() noexcept {
    if constexpr (std::is_reference_v<T>) {
      return **value_;
    } else {
      return *value_;
    }
  }

  std::optional<Stored> value_;
  detail::ErrorSlot error_;
};

template <>
class [[nodiscard]] Expected<void> {
 public:
  using value_type = void;
  Expected() noexcept = default;
  Expected(std::error_code error) noexcept : error_(error) {}
  Expected(errc error) noexcept : error_(make_error_code(error)) {}

  bool has_value() const noexcept { return !error_.is_set(); }
  explicit operator bool() const noexcept { return has_value(); }
  std::error_code error() const noexcept { return error_.get(); }
  void value() const {
    if (error_.is_set()) throw std::system_error(error_.get());
  }

 private:
  detail::ErrorSlot error_;
};

}  // namespace volt
