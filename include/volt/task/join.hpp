// volt/task/join.hpp: wait on several operations inside one task until all
// of them complete (join), or until the first error (try_join).
//
//   auto [rows, user] = co_await volt::join(count_rows(db), load_user(id));
//
//   // Both halves of one stream at once, borrowed (no spawn, no 'static):
//   auto [rd, wr] = stream.split();
//   volt::Expected<std::tuple<std::uint64_t, std::uint64_t>> copied =
//       co_await volt::try_join(volt::io::copy(rd, out), volt::io::copy(in, wr));
//   if (!copied) log(copied.error());   // the first error; the other copy was cancelled
//
// `join(op...)` is Tokio's join!, `try_join(op...)` its try_join!: the
// operations run concurrently inside the awaiting task (as select's
// operands: each as a branch of the task, volt/detail/branch.hpp), never
// spawned, so they may refer to the caller's locals and borrowed halves.
// Nothing runs in parallel: while one operation waits, the others run.
//
// Guarantees:
//  - Operands: anything awaitable, as for select and timeout (a Task, a
//    JoinHandle, any volt operation, a select, a timeout, another join). One
//    or more. Lvalue operands are held by reference (and left to the caller
//    afterwards, as with select), the rest are moved in and destroyed when
//    the co_await completes, so a result must not refer into them.
//  - join: std::tuple<R0, R1, ...>, Ri being what `co_await op_i` returns,
//    with void given as std::monostate, `T&` as std::reference_wrapper<T> and
//    `T&&` as T (select's mapping). It completes when every operation has.
//  - try_join: every operation must return a volt::Expected<Ui>; the result
//    is Expected<std::tuple<U0, U1, ...>> (the same mapping for the Ui). The
//    first operation to complete with an error (in the order they complete;
//    in argument order among those ready at once) ends it: that error is the
//    result, and every operation still running is cancelled by destruction
//    (a Task operand's frame is destroyed where it is suspended, a waiting
//    recv or acquire is withdrawn, as select's losers), and operations not yet
//    started are never started. The values of those that succeeded are
//    dropped.
//  - An exception from any operation ends either the same way (the others
//    cancelled) and propagates out of the co_await.
//  - Order: every operand's await_ready is asked in argument order (a ready
//    one's value is taken at once); then the others start as branches in
//    argument order; then, each time the task is polled, the branches whose
//    leaf is ready are stepped in argument order.
//  - Cooperative budget: as select, join spends none of its own; each
//    operand spends what its own co_await would.
//  - Allocation: one branch frame per operand that was not ready at once,
//    from the recycling frame allocator (none in steady state); the operands,
//    their awaiters, branches and values live in the Join object (in the
//    awaiting frame).
//  - A join may be moved only before it is awaited, and awaited once; if that
//    wait is interrupted (an outer timeout or select cancelled the co_await
//    of a join held by reference) the same task may await it again and it
//    carries on with the same branches. Otherwise re-awaiting throws
//    errc::invalid_handle.
//  - Must be awaited inside a runtime task.
#pragma once

#include <coroutine>
#include <cstddef>
#include <exception>
#include <functional>
#include <optional>
#include <system_error>
#include <tuple>
#include <type_traits>
#include <utility>
#include <variant>

#include "volt/detail/operand.hpp"
#include "volt/detail/task_header.hpp"
#include "volt/error.hpp"
#include "volt/expected.hpp"
#include "volt/task/select.hpp"

namespace volt {

namespace detail {

enum class JoinMode { kAll, kTry };

// What a join keeps of an operand whose co_await returns V: the value with
// select's mapping (kAll), or the value inside V = Expected<U> (kTry).
template <JoinMode Mode, class V>
struct JoinSlot {
  using type = typename SelectAlternative<V>::type;
};
template <class V>
struct JoinSlot<JoinMode::kTry, V> {
  static_assert(is_expected_v<std::remove_cvref_t<V>>,
                "try_join: every operation must return a volt::Expected");
  using type = typename SelectAlternative<typename std::remove_cvref_t<V>::value_type>::type;
};

}  // namespace detail

// The state machine (phase_), run only by the awaiting task (its
// await_ready/await_suspend/await_resume and its slot check `poll`):
//
//   kFresh    -> kProbing   await_ready asks every operand in order; a ready
//                           one's value is collected at once.
//   kProbing  -> kWaiting   await_suspend starts the others as branches (one
//                           finishing while started is collected then).
//   kWaiting                poll steps the running branches; each finished
//                           one is collected.
//   any       -> kDone      every operand collected, or the first error
//                           (try_join) or exception: the task resumes.
//   kDone     -> kFinished  await_resume (or destruction): every operand
//                           finished (running branches cancelled) in order.
template <detail::JoinMode Mode, class... Ops>
class [[nodiscard]] JoinOperation {
  static_assert(sizeof...(Ops) >= 1, "join needs at least one operand");
  static constexpr std::size_t kCount = sizeof...(Ops);
  static constexpr bool kTry = Mode == detail::JoinMode::kTry;
  using Operands = std::tuple<detail::HeldOperand<Ops>...>;
  using Values = std::tuple<std::optional<
      typename detail::JoinSlot<Mode, typename detail::HeldOperand<Ops>::Value>::type>...>;
  using Tuple = std::tuple<
      typename detail::JoinSlot<Mode, typename detail::HeldOperand<Ops>::Value>::type...>;

 public:
  using Result = std::conditional_t<kTry, Expected<Tuple>, Tuple>;

  explicit JoinOperation(Ops&&... ops) : operands_(std::forward<Ops>(ops)...) {}
  // Only before it is awaited (as when a join is the operand of a timeout or
  // a select); moving an awaited join is a contract violation.
  JoinOperation(JoinOperation&& other) noexcept(
      std::is_nothrow_move_constructible_v<
          Operands>) requires(std::is_move_constructible_v<Operands>)
      : operands_(std::move(other.operands_)) {
    if (other.phase_ != kFresh) std::terminate();
  }
  JoinOperation(const JoinOperation&) = delete;
  JoinOperation& operator=(const JoinOperation&) = delete;
  JoinOperation& operator=(JoinOperation&&) = delete;
  ~JoinOperation() { finish(); }

  bool await_ready() {
    if (phase_ == kFinished) throw Error(errc::invalid_handle, "a join can be awaited once");
    if (phase_ != kFresh) {
      // Awaited again after an interrupted wait: carry on with the same
      // branches. Only the task that started them may: their wakers are
      // that task's.
      if (detail::current_task_or_throw() != owner_)
        throw Error(errc::invalid_handle, "an interrupted join resumed by another task");
      return phase_ == kDone;
    }
    phase_ = kProbing;
    for (std::size_t i = 0; i < kCount && phase_ != kDone; ++i) {
      if (dispatch(kProbe, i)) collect(i);
    }
    if (collected_ == kCount) phase_ = kDone;
    return phase_ == kDone;
  }

  bool await_suspend(std::coroutine_handle<> self) {
    if (!owner_) owner_ = detail::current_task_or_throw();
    if (phase_ == kProbing) {
      for (std::size_t i = 0; i < kCount && phase_ != kDone; ++i) {
        if (!collected_at_[i] && dispatch(kStart, i)) collect(i);
      }
      if (phase_ != kDone) phase_ = collected_ == kCount ? kDone : kWaiting;
    } else if (phase_ == kWaiting) {
      // Re-awaited after an interruption: a branch may have finished meanwhile.
      step_all();
    }
    if (phase_ == kDone) return false;
    detail::suspend_current(self, &poll, this);
    return true;
  }

  Result await_resume() {
    // Whatever happens, every operand and everything it registered are gone
    // when the co_await completes.
    struct Finish {
      JoinOperation* j;
      ~Finish() { j->finish(); }
    } finish_after{this};
    if (error_) std::rethrow_exception(error_);
    if constexpr (kTry) {
      if (failure_) return Result(failure_);
      return Result(std::in_place, take_all(std::make_index_sequence<kCount>()));
    } else {
      return take_all(std::make_index_sequence<kCount>());
    }
  }

 private:
  enum Phase : std::uint8_t { kFresh, kProbing, kWaiting, kDone, kFinished };

  // The task's readiness check: steps the running branches; resume once
  // every operand is collected or one ended the join.
  static bool poll(void* context) noexcept {
    auto* j = static_cast<JoinOperation*>(context);
    if (j->phase_ != kDone) j->step_all();
    return j->phase_ == kDone;
  }

  void step_all() noexcept {
    for (std::size_t i = 0; i < kCount && phase_ != kDone; ++i) {
      if (!collected_at_[i] && dispatch_noexcept(kStep, i)) collect(i);
    }
    if (phase_ != kDone && collected_ == kCount) phase_ = kDone;
  }

  // Takes the outcome of operand i, which has completed: its value into
  // values_, or (try_join) its error, or its exception, ending the join.
  void collect(std::size_t i) noexcept {
    collected_at_[i] = true;
    ++collected_;
    try {
      collect_in(i, std::make_index_sequence<kCount>());
    } catch (...) {
      error_ = std::current_exception();
      phase_ = kDone;
    }
  }
  template <std::size_t... I>
  void collect_in(std::size_t i, std::index_sequence<I...>) {
    static constexpr void (*kCollect[])(JoinOperation&) = {&collect_at<I>...};
    kCollect[i](*this);
  }
  template <std::size_t I>
  static void collect_at(JoinOperation& j) {
    auto& op = std::get<I>(j.operands_);
    auto& slot = std::get<I>(j.values_);
    using Value = typename std::tuple_element_t<I, Operands>::Value;
    if constexpr (kTry) {
      std::remove_cvref_t<Value> outcome = op.take();
      if (!outcome) {
        j.failure_ = outcome.error();
        j.phase_ = kDone;
        return;
      }
      using U = typename std::remove_cvref_t<Value>::value_type;
      if constexpr (std::is_void_v<U>) {
        slot.emplace();
      } else if constexpr (std::is_lvalue_reference_v<U>) {
        slot.emplace(std::ref(*outcome));
      } else {
        slot.emplace(*std::move(outcome));
      }
    } else if constexpr (std::is_void_v<Value>) {
      op.take();
      slot.emplace();
    } else if constexpr (std::is_lvalue_reference_v<Value>) {
      slot.emplace(std::ref(op.take()));
    } else {
      slot.emplace(op.take());
    }
  }

  template <std::size_t... I>
  Tuple take_all(std::index_sequence<I...>) {
    return Tuple(std::move(*std::get<I>(values_))...);
  }

  void finish() noexcept {
    if (phase_ == kFinished) return;
    phase_ = kFinished;
    std::apply([](auto&... op) { (op.finish(), ...); }, operands_);
  }

  // Per-operand entry points, called through a table indexed by operand
  // number (as select's).
  enum Action { kProbe, kStart, kStep };
  template <std::size_t I>
  static bool act(JoinOperation& j, Action a) {
    auto& op = std::get<I>(j.operands_);
    switch (a) {
      case kProbe:
        return op.probe();
      case kStart:
        return op.start();
      case kStep:
        return op.step();
    }
    return false;
  }
  bool dispatch(Action a, std::size_t i) {
    return dispatch_in(a, i, std::make_index_sequence<kCount>());
  }
  // kStep never throws (HeldOperand::step is noexcept).
  bool dispatch_noexcept(Action a, std::size_t i) noexcept {
    return dispatch_in(a, i, std::make_index_sequence<kCount>());
  }
  template <std::size_t... I>
  bool dispatch_in(Action a, std::size_t i, std::index_sequence<I...>) {
    static constexpr bool (*kTable[])(JoinOperation&, Action) = {&act<I>...};
    return kTable[i](*this, a);
  }

  Operands operands_;
  Values values_;
  std::exception_ptr error_;
  std::error_code failure_;              // try_join: the first error
  detail::TaskHeader* owner_ = nullptr;  // the task that started the branches
  bool collected_at_[kCount] = {};
  std::size_t collected_ = 0;
  Phase phase_ = kFresh;
};

template <class... Ops>
using Join = JoinOperation<detail::JoinMode::kAll, Ops...>;
template <class... Ops>
using TryJoin = JoinOperation<detail::JoinMode::kTry, Ops...>;

// Completes when every one of `ops` has; a tuple of their results. Lvalue
// operands are held by reference, the rest moved in.
template <class... Ops>
Join<Ops...> join(Ops&&... ops) {
  return Join<Ops...>(std::forward<Ops>(ops)...);
}

// Completes when every one of `ops` has succeeded (an Expected of the tuple
// of their values), or at the first error (that error; the rest cancelled).
template <class... Ops>
TryJoin<Ops...> try_join(Ops&&... ops) {
  return TryJoin<Ops...>(std::forward<Ops>(ops)...);
}

}  // namespace volt
