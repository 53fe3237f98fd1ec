// volt/task/join_all.hpp: run several tasks concurrently and wait for all.
//
// `co_await volt::join_all(a(), b(), c())` spawns each task on the current
// runtime (so they run in parallel across workers), waits for every one of
// them, and returns a std::tuple of their values (std::monostate for void).
// `join_all(std::vector<Task<T>>)` returns a std::vector<T> in input order.
//
// Errors: every task is waited for even if one fails; then the exception of
// the first failing task (in argument order) is rethrown. If the join_all
// itself is cancelled (its task aborted), the tasks it spawned are aborted.
// Must run inside a runtime task (spawn needs one).
#pragma once

#include <exception>
#include <optional>
#include <tuple>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "volt/runtime/runtime.hpp"
#include "volt/task/join_handle.hpp"
#include "volt/task/task.hpp"

namespace volt {

namespace detail {

template <class T>
using JoinValue = std::conditional_t<std::is_void_v<T>, std::monostate, T>;

// Aborts the handles it still holds when destroyed (join_all cancelled).
template <class T>
struct AbortOnDrop {
  explicit AbortOnDrop(JoinHandle<T>* h) noexcept : handle(h) {}
  AbortOnDrop(const AbortOnDrop&) = delete;
  AbortOnDrop& operator=(const AbortOnDrop&) = delete;
  JoinHandle<T>* handle;
  ~AbortOnDrop() {
    if (handle && handle->valid()) handle->abort();
  }
};

template <class T>
Task<JoinValue<T>> join_one(JoinHandle<T>& handle, std::exception_ptr& first_error) {
  try {
    if constexpr (std::is_void_v<T>) {
      co_await handle;
      co_return std::monostate{};
    } else {
      co_return co_await handle;
    }
  } catch (...) {
    if (!first_error) first_error = std::current_exception();
  }
  co_return JoinValue<T>{};
}

template <class... Ts, std::size_t... Is>
Task<std::tuple<JoinValue<Ts>...>> join_all_indexed(std::index_sequence<Is...>, Task<Ts>... tasks) {
  std::tuple<JoinHandle<Ts>...> handles{volt::spawn(std::move(tasks))...};
  [[maybe_unused]] std::tuple<AbortOnDrop<Ts>...> guards{&std::get<Is>(handles)...};
  std::exception_ptr first_error;
  // Braced initialisation evaluates left to right: handles are awaited in order.
  std::tuple<JoinValue<Ts>...> values{co_await join_one(std::get<Is>(handles), first_error)...};
  if (first_error) std::rethrow_exception(first_error);
  co_return values;
}

}  // namespace detail

template <class... Ts>
requires(std::is_default_constructible_v<detail::JoinValue<Ts>>&&...)
    Task<std::tuple<detail::JoinValue<Ts>...>> join_all(Task<Ts>... tasks) {
  return detail::join_all_indexed(std::index_sequence_for<Ts...>{}, std::move(tasks)...);
}

template <class T>
requires std::is_default_constructible_v<detail::JoinValue<T>>
    Task<std::vector<detail::JoinValue<T>>> join_all(std::vector<Task<T>> tasks) {
  std::vector<JoinHandle<T>> handles;
  handles.reserve(tasks.size());
  struct AbortAll {
    std::vector<JoinHandle<T>>& handles;
    ~AbortAll() {
      for (auto& h : handles)
        if (h.valid()) h.abort();
    }
  } guard{handles};
  for (auto& task : tasks)
    handles.push_back(volt::spawn(std::move(task)));
  std::exception_ptr first_error;
  std::vector<detail::JoinValue<T>> values;
  values.reserve(handles.size());
  for (auto& handle : handles)
    values.push_back(co_await detail::join_one(handle, first_error));
  if (first_error) std::rethrow_exception(first_error);
  co_return values;
}

}  // namespace volt
