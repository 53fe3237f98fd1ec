// volt/expected.hpp: Expected<T>, a value or the std::error_code saying why
// there is none (C++23's std::expected<T, std::error_code>, for C++20).
//
// Returned where failure is an ordinary outcome rather than a bug: a timeout
// that elapsed, a semaphore that was closed, a try_recv on an empty channel.
// Codes are volt::errc values (category "volt") or std::errc / system errors.
//
//   volt::Expected<int> r = co_await volt::timeout(100ms, handle);  // a JoinHandle<int>
//   int n = r.value_or(0);  // 0 if it timed out
//   volt::Expected<std::string> s = r.transform([](int v) { return std::to_string(v); });
//   // with Expected<Reply> lookup(int) and Expected<Reply> cached(std::error_code):
//   volt::Expected<Reply> reply = r.and_then(lookup).or_else(cached);
//
//   // An operation that itself returns an Expected, under a timeout, gives a
//   // nested result; flatten() makes it one (the outer error first):
//   volt::Expected<volt::SemaphorePermit> p =
//       (co_await volt::timeout(10ms, sem.acquire())).flatten();
//   if (!p) {
//     // p.error(): errc::timed_out, or errc::closed from the semaphore
//   }
//
// Guarantees:
//  - Holds exactly one of a T or an error code. Construct the error form from
//    a non-zero code (a zero std::error_code gives an Expected<T> that has no
//    value but reports a zero error(); Expected<void> treats it as success).
//  - value() on an error throws std::system_error carrying the code (catch it
//    as std::system_error; e.code() == volt::errc::timed_out works), so
//    `co_await timeout(d, op)` can be used as `(co_await timeout(d, op)).value()`
//    where a timeout is exceptional. operator* and operator-> do not check.
//  - value() && and operator* && return T by value (moved out), so
//    `(co_await op).value()` and `*rx.try_recv()` never dangle (std::expected
//    returns T&& there). value() & / const& return references.
//  - T may be void, move-only, or an lvalue reference (held as a pointer, so the
//    Expected stays assignable; constness of the Expected does not reach the
//    referent, as with a pointer).
//  - The members of std::expected, with its semantics (error type fixed to
//    std::error_code); each has &, const&, && and const&& overloads, and the
//    value reaches f as an rvalue from an rvalue Expected (as a reference, for
//    T a reference). Expected<void>'s are single const members (no payload).
//      value_or(d)        the value, or T(d) on an error.
//      error_or(d)        error() on an error, else std::error_code(d) (d may be
//                         an errc).
//      and_then(f)        f(value) -> Expected<U> (checked at compile time); on
//                         an error, Expected<U> holding the same error; f not
//                         called. Expected<void>: f().
//      transform(f)       Expected<U> holding f(value), U the result of f with
//                         cv removed (an lvalue reference stays one: Expected<U&>;
//                         an rvalue reference becomes a value); f returning void
//                         gives Expected<void>. On an error, that error.
//      or_else(f)         on an error, f(error()) -> Expected<T> (checked); with
//                         a value, a copy (moved from an rvalue) of this.
//      transform_error(f) on an error, Expected<T> holding the code f(error())
//                         (anything convertible to std::error_code, e.g. an
//                         errc; it should not be zero); with a value, a copy.
//  - flatten(): Expected<Expected<U>> -> Expected<U>: the outer error if there
//    is one, else the inner Expected (its value or its error). One level only.
//    Also as the free function volt::flatten(e). The same as and_then with
//    the identity function.
//  - Expected(std::in_place, args...) constructs the value from args, even where
//    T is itself constructible from an error code (Expected<Expected<U>>).
//  - A function passed to and_then / transform / or_else / transform_error that
//    throws: the exception propagates; this Expected is unchanged (except that
//    an rvalue's value may have been moved into f).
#pragma once

#include <concepts>
#include <functional>
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
class Expected;
template <>
class Expected<void>;

namespace detail {
template <class T>
inline constexpr bool is_expected_v = false;
template <class T>
inline constexpr bool is_expected_v<Expected<T>> = true;

// The value type of transform(f): what f returns, cv removed; an rvalue
// reference becomes the referenced type (held by value), an lvalue reference
// stays one.
template <class R>
using TransformValue =
    std::conditional_t<std::is_rvalue_reference_v<R>, std::remove_cvref_t<R>, std::remove_cv_t<R>>;
}  // namespace detail

template <class T>
class [[nodiscard]] Expected {
  // References are held as pointers so that the object stays assignable.
  using Stored = std::conditional_t<std::is_reference_v<T>, std::remove_reference_t<T>*, T>;
  // What the accessors return: a reference T is itself, whatever the
  // constness of the Expected (as a pointer's referent).
  using Ref = std::remove_reference_t<T>&;
  using ConstRef = std::conditional_t<std::is_reference_v<T>, T, const T&>;

 public:
  using value_type = T;

  template <class U = T>
  requires(!std::is_reference_v<T> && !std::is_same_v<std::remove_cvref_t<U>, std::in_place_t> &&
           !std::is_same_v<std::remove_cvref_t<U>, Expected> && std::is_constructible_v<T, U&&>)
      Expected(U&& value)
      : value_(std::in_place, std::forward<U>(value)) {}
  template <class U = T>
  requires std::is_reference_v<T> Expected(T value) : value_(std::in_place, &value) {}
  template <class... Args>
  requires(!std::is_reference_v<T> &&
           std::is_constructible_v<T, Args&&...>) explicit Expected(std::in_place_t, Args&&... args)
      : value_(std::in_place, std::forward<Args>(args)...) {}
  template <class U = T>
  requires std::is_reference_v<T>
  explicit Expected(std::in_place_t, T value) : value_(std::in_place, &value) {}
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
  ConstRef value() const& {
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
  ConstRef operator*() const& noexcept { return get(); }
  // By value, as value() &&: `*rx.try_recv()` never dangles.
  T operator*() && noexcept(std::is_nothrow_move_constructible_v<T>) {
    if constexpr (std::is_reference_v<T>) {
      return get();
    } else {
      return std::move(get());
    }
  }
  std::remove_reference_t<T>* operator->() noexcept { return &get(); }
  std::remove_reference_t<ConstRef>* operator->() const noexcept { return &get(); }

  // The value, or `fallback` converted to T.
  template <std::convertible_to<T> U = std::remove_cv_t<T>>
  T value_or(U&& fallback) const& {
    if (has_value()) return get();
    return static_cast<T>(std::forward<U>(fallback));
  }
  template <std::convertible_to<T> U = std::remove_cv_t<T>>
  T value_or(U&& fallback) && {
    if (has_value()) return pass(std::move(*this));
    return static_cast<T>(std::forward<U>(fallback));
  }

  // error(), or `fallback` (anything convertible to std::error_code) when
  // there is a value.
  template <std::convertible_to<std::error_code> G = std::error_code>
  std::error_code error_or(G&& fallback) const {
    if (has_value()) return std::error_code(std::forward<G>(fallback));
    return error();
  }

  // f(value), which must return an Expected; the error passes through.
  template <class F>
  auto and_then(F&& f) & {
    return and_then_impl(*this, std::forward<F>(f));
  }
  template <class F>
  auto and_then(F&& f) const& {
    return and_then_impl(*this, std::forward<F>(f));
  }
  template <class F>
  auto and_then(F&& f) && {
    return and_then_impl(std::move(*this), std::forward<F>(f));
  }
  template <class F>
  auto and_then(F&& f) const&& {
    return and_then_impl(std::move(*this), std::forward<F>(f));
  }

  // Expected<U> holding f(value) (Expected<void> if f returns void); the
  // error passes through.
  template <class F>
  auto transform(F&& f) & {
    return transform_impl(*this, std::forward<F>(f));
  }
  template <class F>
  auto transform(F&& f) const& {
    return transform_impl(*this, std::forward<F>(f));
  }
  template <class F>
  auto transform(F&& f) && {
    return transform_impl(std::move(*this), std::forward<F>(f));
  }
  template <class F>
  auto transform(F&& f) const&& {
    return transform_impl(std::move(*this), std::forward<F>(f));
  }

  // On an error, f(error()), which must return Expected<T>; the value passes
  // through.
  template <class F>
  Expected or_else(F&& f) & {
    return or_else_impl(*this, std::forward<F>(f));
  }
  template <class F>
  Expected or_else(F&& f) const& {
    return or_else_impl(*this, std::forward<F>(f));
  }
  template <class F>
  Expected or_else(F&& f) && {
    return or_else_impl(std::move(*this), std::forward<F>(f));
  }
  template <class F>
  Expected or_else(F&& f) const&& {
    return or_else_impl(std::move(*this), std::forward<F>(f));
  }

  // On an error, the error f(error()) returns (convertible to
  // std::error_code); the value passes through.
  template <class F>
  Expected transform_error(F&& f) & {
    return transform_error_impl(*this, std::forward<F>(f));
  }
  template <class F>
  Expected transform_error(F&& f) const& {
    return transform_error_impl(*this, std::forward<F>(f));
  }
  template <class F>
  Expected transform_error(F&& f) && {
    return transform_error_impl(std::move(*this), std::forward<F>(f));
  }
  template <class F>
  Expected transform_error(F&& f) const&& {
    return transform_error_impl(std::move(*this), std::forward<F>(f));
  }

  // Expected<Expected<U>> -> Expected<U>: the outer error first, else the
  // inner result (copied, or moved from an rvalue).
  T flatten() const& requires detail::is_expected_v<T> {
    if (!has_value()) return T(error());
    return get();
  }
  T flatten() && requires detail::is_expected_v<T> {
    if (!has_value()) return T(error());
    return std::move(get());
  }

 private:
  void check() const {
    if (!value_) throw std::system_error(error_.get());
  }
  Ref get() noexcept {
    if constexpr (std::is_reference_v<T>) {
      return **value_;
    } else {
      return *value_;
    }
  }
  ConstRef get() const noexcept {
    if constexpr (std::is_reference_v<T>) {
      return **value_;
    } else {
      return *value_;
    }
  }

  // The value as the monadic members hand it to f: an lvalue from an lvalue
  // Expected, an rvalue from an rvalue one; a reference T as that reference.
  template <class Self>
  static decltype(auto) pass(Self&& self) noexcept {
    if constexpr (std::is_reference_v<T> || std::is_lvalue_reference_v<Self>) {
      return self.get();
    } else {
      return std::move(self.get());
    }
  }
  template <class Self>
  using Passed = decltype(pass(std::declval<Self>()));

  template <class Self, class F>
  static auto and_then_impl(Self&& self, F&& f) {
    using R = std::remove_cvref_t<std::invoke_result_t<F, Passed<Self>>>;
    static_assert(detail::is_expected_v<R>, "Expected::and_then: f must return a volt::Expected");
    if (self.has_value()) return R(std::invoke(std::forward<F>(f), pass(std::forward<Self>(self))));
    return R(self.error());
  }

  template <class Self, class F>
  static auto transform_impl(Self&& self, F&& f) {
    using U = detail::TransformValue<std::invoke_result_t<F, Passed<Self>>>;
    if (!self.has_value()) return Expected<U>(self.error());
    if constexpr (std::is_void_v<U>) {
      std::invoke(std::forward<F>(f), pass(std::forward<Self>(self)));
      return Expected<U>();
    } else {
      return Expected<U>(std::in_place,
                         std::invoke(std::forward<F>(f), pass(std::forward<Self>(self))));
    }
  }

  template <class Self, class F>
  static Expected or_else_impl(Self&& self, F&& f) {
    using R = std::remove_cvref_t<std::invoke_result_t<F, std::error_code>>;
    static_assert(std::is_same_v<R, Expected>, "Expected<T>::or_else: f must return Expected<T>");
    if (self.has_value()) return Expected(std::in_place, pass(std::forward<Self>(self)));
    return std::invoke(std::forward<F>(f), self.error());
  }

  template <class Self, class F>
  static Expected transform_error_impl(Self&& self, F&& f) {
    using G = std::invoke_result_t<F, std::error_code>;
    static_assert(std::is_convertible_v<G, std::error_code>,
                  "Expected::transform_error: f must return a std::error_code (or an errc)");
    if (self.has_value()) return Expected(std::in_place, pass(std::forward<Self>(self)));
    return Expected(std::error_code(std::invoke(std::forward<F>(f), self.error())));
  }

  std::optional<Stored> value_;
  detail::ErrorSlot error_;
};

template <>
class [[nodiscard]] Expected<void> {
 public:
  using value_type = void;
  Expected() noexcept = default;
  explicit Expected(std::in_place_t) noexcept {}
  Expected(std::error_code error) noexcept : error_(error) {}
  Expected(errc error) noexcept : error_(make_error_code(error)) {}

  bool has_value() const noexcept { return !error_.is_set(); }
  explicit operator bool() const noexcept { return has_value(); }
  std::error_code error() const noexcept { return error_.get(); }
  void value() const {
    if (error_.is_set()) throw std::system_error(error_.get());
  }
  void operator*() const noexcept {}

  // As Expected<T>'s, with no value to pass: and_then and transform call f().
  template <std::convertible_to<std::error_code> G = std::error_code>
  std::error_code error_or(G&& fallback) const {
    if (has_value()) return std::error_code(std::forward<G>(fallback));
    return error();
  }
  template <class F>
  auto and_then(F&& f) const {
    using R = std::remove_cvref_t<std::invoke_result_t<F>>;
    static_assert(detail::is_expected_v<R>, "Expected::and_then: f must return a volt::Expected");
    if (has_value()) return R(std::invoke(std::forward<F>(f)));
    return R(error());
  }
  template <class F>
  auto transform(F&& f) const {
    using U = detail::TransformValue<std::invoke_result_t<F>>;
    if (!has_value()) return Expected<U>(error());
    if constexpr (std::is_void_v<U>) {
      std::invoke(std::forward<F>(f));
      return Expected<void>();
    } else {
      return Expected<U>(std::in_place, std::invoke(std::forward<F>(f)));
    }
  }
  template <class F>
  Expected or_else(F&& f) const {
    using R = std::remove_cvref_t<std::invoke_result_t<F, std::error_code>>;
    static_assert(std::is_same_v<R, Expected>,
                  "Expected<void>::or_else: f must return Expected<void>");
    if (has_value()) return Expected();
    return std::invoke(std::forward<F>(f), error());
  }
  template <class F>
  Expected transform_error(F&& f) const {
    using G = std::invoke_result_t<F, std::error_code>;
    static_assert(std::is_convertible_v<G, std::error_code>,
                  "Expected::transform_error: f must return a std::error_code (or an errc)");
    if (has_value()) return Expected();
    return Expected(std::error_code(std::invoke(std::forward<F>(f), error())));
  }

 private:
  detail::ErrorSlot error_;
};

// flatten(e) == e.flatten(): Expected<Expected<U>> -> Expected<U>, the outer
// error first.
template <class E>
requires(detail::is_expected_v<std::remove_cvref_t<E>>&& detail::is_expected_v<
         typename std::remove_cvref_t<E>::value_type>) auto flatten(E&& e) {
  return std::forward<E>(e).flatten();
}

}  // namespace volt
