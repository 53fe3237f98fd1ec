// volt/task/select.hpp: wait on several operations, complete with the first.
//
//   volt::Notify wake;
//   auto r = co_await volt::select(rx.recv(), wake.notified(), volt::sleep(100ms));
//   switch (r.index()) {
//     case 0: handle(std::get<0>(r)); break;   // rx.recv() won: its value
//     case 1: break;                           // notified (void: std::monostate)
//     case 2: break;                           // timed out
//   }
//   // or: std::visit([](auto& v) { ... }, r);
//
// `select(op...)` starts checking at a random operand (fairness between
// operations that are ready together); `select_biased(op...)` always checks
// in the order written.
//
// Guarantees:
//  - Operands: anything awaitable (await_ready/await_suspend/await_resume, or
//    operator co_await): a Task, a JoinHandle, a Sleep, any volt operation
//    (recv/send, lock, acquire, notified, cancelled, ...), another select or a
//    timeout: the same set volt::timeout accepts. One or more.
//  - Result: std::variant<R0, R1, ...>, Ri being what `co_await op_i`
//    returns, with void given as std::monostate, `T&` as
//    std::reference_wrapper<T> and `T&&` as T. The alternative is constructed
//    by index, so r.index() names the winner even when two types coincide.
//    An exception from the winning operation propagates out of the co_await.
//  - Order: first every operand's await_ready is asked, in check order; the
//    first that is ready wins and the rest are never started. Otherwise each
//    operand is started as a branch of the awaiting task (volt/detail/
//    branch.hpp; a Task operand runs inside the awaiting task, it is not
//    spawned), in check order; one that finishes while being started wins and
//    the rest are not started. Then, each time the task is polled, the
//    branches whose leaf is ready are stepped in check order (select: from a
//    new random branch at each poll; select_biased: in order) and the first
//    that finishes wins.
//  - The losers are cancelled by destruction before the co_await returns:
//    an operand moved in is destroyed (a waiting recv/acquire/notified is
//    withdrawn, and what it had been handed is passed on or given back: a
//    Notified chosen by notify_one passes the notification on, an Acquire
//    granted permits gives them back). Nothing registered by a loser outlives
//    the co_await.
//  - An lvalue operand is the caller's and is left as it is when it loses
//    (as with timeout, Tokio's `&mut fut` in a select loop): a queued
//    Semaphore::Acquire or Notified keeps its place and the same task may
//    await it again; a oneshot receiver keeps its value for the next await;
//    a JoinHandle's wait is withdrawn (the handle stays usable); a Sleep stays
//    registered. Two exceptions: a Task that lost while running is destroyed
//    (awaiting it again throws errc::invalid_handle: its frame was suspended
//    inside the select and cannot be resumed elsewhere), and an operation
//    with an `interrupted()` member (OnceCell::get_or_init) is told. Operands
//    moved in are destroyed when the co_await completes (so the result must
//    not refer into them).
//  - Cooperative budget: as timeout, select spends none of its own; each
//    operand spends what its own co_await would. But no operand is asked or
//    started while the poll's budget is spent: select then yields first and
//    carries on when the task runs again (an operation that took a value and
//    then yielded for the budget would otherwise be cancelled holding it).
//  - Allocation: one branch frame per started operand, from the recycling
//    frame allocator (none in steady state); the operands, their awaiters and
//    branches live in the Select object (in the awaiting frame). The random
//    start is a per-thread generator: no allocation, no system call.
//  - A Select may be moved only before it is awaited, and awaited once; if
//    that wait is interrupted (the co_await itself cancelled, e.g. by an outer
//    timeout, with the Select held by reference) the same task may await it
//    again and it carries on with the same branches. Otherwise re-awaiting
//    throws errc::invalid_handle.
//  - Must be awaited inside a runtime task (an operand that is ready at once
//    may complete outside one).
#pragma once

#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <tuple>
#include <type_traits>
#include <utility>
#include <variant>

#include "volt/detail/operand.hpp"
#include "volt/detail/task_header.hpp"
#include "volt/error.hpp"
#include "volt/task/join_handle.hpp"

namespace volt {

namespace detail {

// The variant alternative for an operand whose co_await returns T.
template <class T>
struct SelectAlternative {
  using type = T;
};
template <>
struct SelectAlternative<void> {
  using type = std::monostate;
};
template <class T>
struct SelectAlternative<T&> {
  using type = std::reference_wrapper<T>;
};
template <class T>
struct SelectAlternative<T&&> {
  using type = T;
};

// A number in [0, n) from a per-thread splitmix64 sequence: fair enough to
// spread wins, costs a few multiplications, and its state is a trivially
// constructed thread_local (no guard, no allocation). Seeded from the
// state's own address, which differs between threads (no system call).
inline std::uint32_t select_random(std::uint32_t n) noexcept {
  thread_local std::uint64_t state = 0;
  if (state == 0) state = reinterpret_cast<std::uintptr_t>(&state);
  std::uint64_t z = (state += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  z ^= z >> 31;
  // Multiply-shift: the high half of a 32x32 product, no division.
  return static_cast<std::uint32_t>(((z >> 32) * n) >> 32);
}

}  // namespace detail

// The state machine (phase_), run only by the awaiting task (its
// await_ready/await_suspend/await_resume and its slot check `poll`, all under
// the task's kRunning), so it needs no atomics; the operands' own leaves do
// the cross-thread work. Check position p is operand (start_ + p) mod N.
//
//   kFresh    -> kProbing  first await_ready picks start_.
//   kProbing  positions [0, next_) said not ready. A ready one -> kWon. All
//             asked -> kStarting with next_ = 0.
//   kStarting positions [0, next_) run as branches. One finishing while
//             started -> kWon. All started -> kWaiting.
//   kWaiting  every branch runs; poll steps them; the first finished -> kWon.
//   kWon      winner_ (or error_) decided; the awaiting coroutine resumes at
//             once, and await_resume -> kFinished.
//
// Invariants: at most one operand ever completes (probing stops at the first
// ready one, starting and stepping at the first finished one), so a loser is
// never cancelled after taking anything through its own completion; nothing
// is probed or started with the poll's budget spent (the phase is left as it
// is, the task yields, and poll carries on from there).
template <class... Ops>
class [[nodiscard]] Select {
  static_assert(sizeof...(Ops) >= 1, "select needs at least one operand");
  static constexpr std::size_t kCount = sizeof...(Ops);
  using Operands = std::tuple<detail::HeldOperand<Ops>...>;

 public:
  using Result = std::variant<
      typename detail::SelectAlternative<typename detail::HeldOperand<Ops>::Value>::type...>;

  Select(bool biased, Ops&&... ops) : operands_(std::forward<Ops>(ops)...), biased_(biased) {}
  // Only before it is awaited (as when a Select is the operand of a timeout
  // or of another select); moving an awaited Select is a contract violation.
  Select(Select&& other) noexcept(std::is_nothrow_move_constructible_v<Operands>) requires(
      std::is_move_constructible_v<Operands>)
      : operands_(std::move(other.operands_)), biased_(other.biased_) {
    if (other.phase_ != kFresh) std::terminate();
  }
  Select(const Select&) = delete;
  Select& operator=(const Select&) = delete;
  Select& operator=(Select&&) = delete;
  ~Select() { finish(); }

  bool await_ready() {
    if (phase_ == kFinished) throw Error(errc::invalid_handle, "a Select can be awaited once");
    if (phase_ != kFresh) {
      // Awaited again after an interrupted wait: carry on with the same
      // branches. Only the task that started them may: their wakers are
      // that task's.
      if (detail::current_task_or_throw() != owner_)
        throw Error(errc::invalid_handle, "an interrupted Select resumed by another task");
      return false;
    }
    start_ = biased_ ? 0 : detail::select_random(static_cast<std::uint32_t>(kCount));
    phase_ = kProbing;
    return advance_probing() == Progress::kWon;
  }

  bool await_suspend(std::coroutine_handle<> self) {
    if (!owner_) owner_ = detail::current_task_or_throw();
    // Re-awaited after an interruption: a branch may have finished meanwhile.
    if (step_started()) return false;
    switch (advance()) {
      case Progress::kWon:
        return false;
      case Progress::kYield:
        // The budget is spent: go round the queue once; poll carries on.
        detail::yield_current(self, &poll, this);
        return true;
      case Progress::kWait:
        break;
    }
    detail::suspend_current(self, &poll, this);
    return true;
  }

  Result await_resume() {
    // Whatever happens (a value, an exception), every operand and everything
    // it registered are gone when the co_await completes: the winner's
    // outcome is taken, then the losers are cancelled, then the winner's
    // operation is destroyed (Finish).
    struct Finish {
      Select* s;
      ~Finish() { s->finish(); }
    } finish_after{this};
    if (error_) std::rethrow_exception(error_);
    return take_winner(std::make_index_sequence<kCount>());
  }

 private:
  enum Phase : std::uint8_t {
    kFresh,     // not awaited yet
    kProbing,   // asking await_ready, positions [0, next_) said no
    kStarting,  // starting branches, positions [0, next_) are running
    kWaiting,   // every branch runs
    kWon,       // winner_ (or error_) is decided
    kFinished,  // await_resume ran (or the Select is being destroyed)
  };
  enum class Progress { kWon, kYield, kWait };

  // Operand index of check position `pos`.
  std::size_t at(std::size_t pos) const noexcept {
    const std::size_t i = start_ + pos;
    return i < kCount ? i : i - kCount;
  }

  Progress advance_probing() {
    while (next_ < kCount) {
      // Nothing is asked with the budget spent (see the header contract).
      if (detail::coop_budget_spent()) return Progress::kYield;
      const std::size_t i = at(next_);
      if (dispatch(kProbe, i)) return won(i);
      ++next_;
    }
    phase_ = kStarting;
    next_ = 0;
    return Progress::kWait;
  }

  // Carries on probing, then starting, from where it stopped.
  Progress advance() {
    if (phase_ == kProbing) {
      const Progress p = advance_probing();
      if (p != Progress::kWait) return p;
    }
    if (phase_ == kStarting) {
      while (next_ < kCount) {
        if (detail::coop_budget_spent()) return Progress::kYield;
        const std::size_t i = at(next_);
        ++next_;  // running from here on (a throwing start leaves no branch)
        if (dispatch(kStart, i)) return won(i);
      }
      phase_ = kWaiting;
    }
    return phase_ == kWon ? Progress::kWon : Progress::kWait;
  }

  Progress won(std::size_t i) noexcept {
    winner_ = i;
    phase_ = kWon;
    return Progress::kWon;
  }

  // Steps the running branches in check order (select: from a random one of
  // them); true once one has finished (the winner).
  bool step_started() noexcept {
    const std::size_t running = phase_ == kWaiting ? kCount : phase_ == kStarting ? next_ : 0;
    if (running == 0) return false;
    const std::size_t first =
        biased_ ? 0 : detail::select_random(static_cast<std::uint32_t>(running));
    for (std::size_t k = 0; k < running; ++k) {
      std::size_t pos = first + k;
      if (pos >= running) pos -= running;
      const std::size_t i = at(pos);
      if (dispatch(kStep, i)) {
        won(i);
        return true;
      }
    }
    return false;
  }

  // The task's readiness check: resume once a branch has finished (stepping
  // those whose leaf is ready), after carrying on with probing and starting
  // if the budget interrupted them.
  static bool poll(void* context) noexcept {
    auto* s = static_cast<Select*>(context);
    if (s->phase_ == kWon) return true;
    if (s->step_started()) return true;
    if (s->phase_ == kWaiting) return false;
    Progress p = Progress::kWait;
    try {
      p = s->advance();
    } catch (...) {
      // An operand's await_ready (or its awaiter's construction, or a branch
      // frame's allocation) threw: the co_await rethrows it.
      s->error_ = std::current_exception();
      s->phase_ = kWon;
      return true;
    }
    if (p == Progress::kYield) {
      // Spent again (a long chain of operands): one more trip through the
      // queue. We hold the task's kRunning, so this only marks it notified.
      detail::tls_context.current_task->wake_by_ref();
      return false;
    }
    return p == Progress::kWon;
  }

  void finish() noexcept {
    if (phase_ == kFinished) return;
    phase_ = kFinished;
    finish_all(std::make_index_sequence<kCount>());
  }
  template <std::size_t... I>
  void finish_all(std::index_sequence<I...>) noexcept {
    // Losers first, so that the winner's operation is the last to go.
    ((I != winner_ ? std::get<I>(operands_).finish() : void()), ...);
    (std::get<I>(operands_).finish(), ...);
  }

  template <std::size_t... I>
  Result take_winner(std::index_sequence<I...>) {
    static constexpr Result (*kTake[])(Select&) = {&take_at<I>...};
    return kTake[winner_](*this);
  }
  template <std::size_t I>
  static Result take_at(Select& s) {
    auto& op = std::get<I>(s.operands_);
    using Value = typename std::tuple_element_t<I, Operands>::Value;
    if constexpr (std::is_void_v<Value>) {
      op.take();
      return Result(std::in_place_index<I>);
    } else if constexpr (std::is_lvalue_reference_v<Value>) {
      return Result(std::in_place_index<I>, std::ref(op.take()));
    } else {
      return Result(std::in_place_index<I>, op.take());
    }
  }

  // Per-operand entry points, called through tables indexed by operand
  // number (one indirect call instead of a chain of comparisons).
  enum Action { kProbe, kStart, kStep };
  template <std::size_t I>
  static bool act(Select& s, Action a) {
    auto& op = std::get<I>(s.operands_);
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
  template <std::size_t... I>
  bool dispatch_in(Action a, std::size_t i, std::index_sequence<I...>) {
    static constexpr bool (*kTable[])(Select&, Action) = {&act<I>...};
    return kTable[i](*this, a);
  }

  Operands operands_;
  std::exception_ptr error_;
  detail::TaskHeader* owner_ = nullptr;  // the task that started the branches
  std::size_t start_ = 0;                // operand checked first
  std::size_t next_ = 0;                 // progress of the current phase
  std::size_t winner_ = kCount;
  bool biased_;
  Phase phase_ = kFresh;
};

// Completes with the first of `ops` to complete; starts checking at a random
// operand. Lvalue operands are held by reference, the rest moved in.
template <class... Ops>
Select<Ops...> select(Ops&&... ops) {
  return Select<Ops...>(/*biased=*/false, std::forward<Ops>(ops)...);
}

// The same, always checking in the order written (the first ready operand
// wins).
template <class... Ops>
Select<Ops...> select_biased(Ops&&... ops) {
  return Select<Ops...>(/*biased=*/true, std::forward<Ops>(ops)...);
}

}  // namespace volt
