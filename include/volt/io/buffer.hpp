// volt/io/buffer.hpp: the byte ranges that reads fill and writes drain.
//
// MutableBuffer (what a read fills) and ConstBuffer (what a write sends) are
// a pointer and a length, built implicitly from whatever already names bytes:
// a std::span or array of char, unsigned char or std::byte, a std::string,
// a std::vector of those, a std::string_view (ConstBuffer only). They do not
// own the bytes; the caller keeps them alive until the operation completes.
//
//   char line[512];
//   std::size_t n = (co_await stream.read(line)).value();
//   (co_await stream.write_all(std::string_view("pong\n"))).value();
//
// Guarantees: constructing one never allocates or copies; a MutableBuffer
// converts to a ConstBuffer; first(n) / after(n) clamp n to the size (never
// out of range).
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace volt::io {

namespace detail {
template <class T>
concept ByteLike = std::is_same_v < std::remove_const_t<T>,
char > || std::is_same_v<std::remove_const_t<T>, unsigned char> ||
    std::is_same_v<std::remove_const_t<T>, signed char> ||
    std::is_same_v<std::remove_const_t<T>, std::byte>;
}  // namespace detail

class MutableBuffer {
 public:
  constexpr MutableBuffer() noexcept = default;
  constexpr MutableBuffer(void* data, std::size_t size) noexcept : data_(data), size_(size) {}
  template <detail::ByteLike T, std::size_t E>
  requires(!std::is_const_v<T>) constexpr MutableBuffer(std::span<T, E> bytes) noexcept
      : data_(bytes.data()), size_(bytes.size()) {}
  template <detail::ByteLike T, std::size_t N>
  requires(!std::is_const_v<T>) constexpr MutableBuffer(T (&bytes)[N]) noexcept
      : data_(bytes), size_(N) {}
  template <detail::ByteLike T, class A>
  MutableBuffer(std::vector<T, A>& bytes) noexcept : data_(bytes.data()), size_(bytes.size()) {}
  MutableBuffer(std::string& bytes) noexcept : data_(bytes.data()), size_(bytes.size()) {}

  constexpr std::byte* data() const noexcept { return static_cast<std::byte*>(data_); }
  constexpr std::size_t size() const noexcept { return size_; }
  constexpr bool empty() const noexcept { return size_ == 0; }
  // The first n bytes (all of them if n exceeds the size).
  constexpr MutableBuffer first(std::size_t n) const noexcept {
    return {data_, n < size_ ? n : size_};
  }
  // What follows the first n bytes (empty if n exceeds the size).
  constexpr MutableBuffer after(std::size_t n) const noexcept {
    return n < size_ ? MutableBuffer(data() + n, size_ - n) : MutableBuffer(data() + size_, 0);
  }

 private:
  void* data_ = nullptr;
  std::size_t size_ = 0;
};

class ConstBuffer {
 public:
  constexpr ConstBuffer() noexcept = default;
  constexpr ConstBuffer(const void* data, std::size_t size) noexcept : data_(data), size_(size) {}
  constexpr ConstBuffer(MutableBuffer b) noexcept : data_(b.data()), size_(b.size()) {}
  template <detail::ByteLike T, std::size_t E>
  constexpr ConstBuffer(std::span<T, E> bytes) noexcept
      : data_(bytes.data()), size_(bytes.size()) {}
  // Arrays of bytes, but not string literals: "abc" would send its '\0' too;
  // pass std::string_view("abc") (or "abc"sv) for those.
  template <detail::ByteLike T, std::size_t N>
  requires(!std::is_same_v<T, const char>) constexpr ConstBuffer(T (&bytes)[N]) noexcept
      : data_(bytes), size_(N) {}
  template <detail::ByteLike T, class A>
  ConstBuffer(const std::vector<T, A>& bytes) noexcept : data_(bytes.data()), size_(bytes.size()) {}
  ConstBuffer(const std::string& bytes) noexcept : data_(bytes.data()), size_(bytes.size()) {}
  constexpr ConstBuffer(std::string_view bytes) noexcept
      : data_(bytes.data()), size_(bytes.size()) {}

  constexpr const std::byte* data() const noexcept { return static_cast<const std::byte*>(data_); }
  constexpr std::size_t size() const noexcept { return size_; }
  constexpr bool empty() const noexcept { return size_ == 0; }
  constexpr ConstBuffer first(std::size_t n) const noexcept {
    return {data_, n < size_ ? n : size_};
  }
  constexpr ConstBuffer after(std::size_t n) const noexcept {
    return n < size_ ? ConstBuffer(data() + n, size_ - n) : ConstBuffer(data() + size_, 0);
  }

 private:
  const void* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace volt::io
