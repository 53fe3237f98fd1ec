// volt/detail/result.hpp: the outcome slot of a Task<T> or a spawned task.
//
// Holds nothing yet, a value, an exception, or (spawned tasks only) the error
// code of a cancellation. T may be void, a reference (stored as a pointer) or a
// move-only type.
#pragma once

#include <exception>
#include <memory>
#include <new>
#include <system_error>
#include <type_traits>
#include <utility>

#include "volt/error.hpp"

namespace volt::detail {

template <class T>
struct StoredType {
  using type = T;
};
template <class T>
struct StoredType<T&> {
  using type = T*;
};
template <>
struct StoredType<void> {
  struct Unit {};
  using type = Unit;
};

template <class T>
class Result {
  using Stored = typename StoredType<T>::type;

 public:
  enum class Kind : unsigned char { kEmpty, kValue, kException, kError };

  Result() noexcept {}
  Result(const Result&) = delete;
  Result& operator=(const Result&) = delete;
  ~Result() { reset(); }

  Kind kind() const noexcept { return kind_; }

  template <class... Args>
  void set_value(Args&&... args) {
    reset();
    if constexpr (std::is_reference_v<T>) {
      static_assert(sizeof...(Args) == 1);
      ((value_ = std::addressof(args)), ...);
    } else {
      ::new (static_cast<void*>(std::addressof(value_))) Stored(std::forward<Args>(args)...);
    }
    kind_ = Kind::kValue;
  }
  void set_exception(std::exception_ptr e) noexcept {
    reset();
    ::new (static_cast<void*>(std::addressof(exception_))) std::exception_ptr(std::move(e));
    kind_ = Kind::kException;
  }
  void set_error(std::error_code ec) noexcept {
    reset();
    error_ = ec;
    kind_ = Kind::kError;
  }

  // Moves the outcome from `other`, leaving it empty.
  void take_from(Result& other) noexcept(std::is_nothrow_move_constructible_v<Stored>) {
    switch (other.kind_) {
      case Kind::kEmpty:
        reset();
        break;
      case Kind::kValue:
        if constexpr (std::is_reference_v<T>) {
          set_value(*other.value_);
        } else if constexpr (std::is_void_v<T>) {
          set_value();
        } else {
          set_value(std::move(other.value_));
        }
        break;
      case Kind::kException:
        set_exception(std::move(other.exception_));
        break;
      case Kind::kError:
        set_error(other.error_);
        break;
    }
    other.reset();
  }

  // Precondition: kind() == kError. The code of the cancellation.
  std::error_code error() const noexcept { return error_; }

  // Precondition: kind() == kException. Moves the exception out, leaving the
  // slot empty.
  std::exception_ptr take_exception() noexcept {
    std::exception_ptr e = std::move(exception_);
    reset();
    return e;
  }

  // Returns the value (moved out) or throws the stored exception / volt::Error.
  T get() {
    switch (kind_) {
      case Kind::kValue:
        if constexpr (std::is_reference_v<T>) {
          return *value_;
        } else if constexpr (std::is_void_v<T>) {
          return;
        } else {
          return std::move(value_);
        }
      case Kind::kException:
        std::rethrow_exception(exception_);
      case Kind::kError:
        throw Error(static_cast<errc>(error_.value()));
      case Kind::kEmpty:
        break;
    }
    throw Error(errc::invalid_handle, "result already taken");
  }

  void reset() noexcept {
    switch (kind_) {
      case Kind::kValue:
        if constexpr (!std::is_trivially_destructible_v<Stored>) value_.~Stored();
        break;
      case Kind::kException:
        exception_.~exception_ptr();
        break;
      default:
        break;
    }
    kind_ = Kind::kEmpty;
  }

 private:
  union {
    Stored value_;
    std::exception_ptr exception_;
    std::error_code error_;
  };
  Kind kind_ = Kind::kEmpty;
};

}  // namespace volt::detail
