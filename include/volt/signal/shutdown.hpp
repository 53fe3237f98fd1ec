// volt/signal/shutdown.hpp: Shutdown, a server's graceful-shutdown kit (the
// reference design's Shutdown and WorkGuard): a trigger (the process's
// SIGINT/SIGTERM, or trigger()), a token every loop watches, and a count of
// the work in flight, to drain with a bound.
//
//   volt::Shutdown shutdown = volt::Shutdown::on_signals();  // SIGINT, SIGTERM
//   for (;;) {
//     auto next = co_await volt::select(listener.accept(), shutdown.triggered());
//     if (next.index() == 1) break;                   // signalled: stop accepting
//     if (!std::get<0>(next)) continue;
//     volt::spawn(serve(std::move(std::get<0>(next)->first), shutdown.start_work()));
//   }
//   bool drained = co_await shutdown.wait_pending(std::chrono::seconds(5));
//   // each serve() holds its WorkGuard until it ends
//
// Guarantees:
//  - Shutdown is a handle: copies share one state (as a CancellationToken's
//    copies), which lives while any copy does; every operation may be called
//    from any thread.
//  - trigger() (or the first of the signals, for on_signals) cancels token():
//    is_triggered() becomes true and every triggered() wait completes.
//    Idempotent. A signal that arrives after the trigger sets forced(), which
//    ends a wait_pending() at once (the operator's "stop now").
//  - start_work() returns a WorkGuard counted in pending() until it is
//    destroyed (moved-from guards count nothing). Guards may be taken before
//    or after the trigger, and outlive the Shutdown.
//  - wait_pending(limit) completes once pending() is 0, or after `limit`, or
//    when forced() is set, whichever is first; it returns whether pending()
//    was 0. Waiting allocates nothing beyond its coroutine frame; cancelling
//    it is destroying it. It does not trigger the shutdown by itself.
//  - on_signals(signals) installs volt's handlers for the signals at the call
//    (volt/signal/signal.hpp: from then on these signals no longer end the
//    process), and listens on tasks of the calling runtime that end with the
//    last copy of the Shutdown (or the runtime).
//
// Bad input: on_signals outside a runtime throws volt::Error(errc::no_runtime);
// a signal that cannot be caught throws what volt::signal::signal throws
// (errc::invalid_argument), with nothing installed for the later ones.
#pragma once

#include <chrono>
#include <csignal>
#include <cstddef>
#include <initializer_list>
#include <memory>
#include <vector>

#include "volt/sync/cancellation_token.hpp"
#include "volt/task/task.hpp"
#include "volt/task/task_tracker.hpp"

namespace volt {

// One unit of work in flight, for Shutdown::wait_pending (see there).
class WorkGuard {
 public:
  WorkGuard(WorkGuard&&) noexcept = default;
  WorkGuard& operator=(WorkGuard&&) noexcept = default;

 private:
  friend class Shutdown;
  explicit WorkGuard(TaskTrackerToken token) noexcept : token_(std::move(token)) {}
  TaskTrackerToken token_;
};

class Shutdown {
 public:
  // Triggered only by trigger().
  Shutdown();
  // Triggered by trigger() or any of `signals` (see above).
  static Shutdown on_signals(std::initializer_list<int> signals = {SIGINT, SIGTERM});

  void trigger() const;
  bool is_triggered() const;
  // Cancelled by the trigger: hand it (or child tokens) to whatever must stop.
  const CancellationToken& token() const noexcept;
  // An operation that completes once triggered (token().cancelled()).
  CancellationToken::Cancelled triggered() const;
  // A signal came after the trigger.
  bool forced() const;

  [[nodiscard]] WorkGuard start_work() const;
  std::size_t pending() const noexcept;
  Task<bool> wait_pending(std::chrono::nanoseconds limit) const;

 private:
  struct State;
  std::shared_ptr<State> state_;
};

struct Shutdown::State {
  CancellationToken triggered;
  CancellationToken forced;
  TaskTracker work;  // closed: its wait() completes whenever it is empty
  // The signal listeners (on_signals), aborted with the last copy.
  std::vector<JoinHandle<void>> listeners;
  State() { work.close(); }
  ~State() {
    for (JoinHandle<void>& listener : listeners)
      listener.abort();
  }
};

inline void Shutdown::trigger() const {
  state_->triggered.cancel();
}
inline bool Shutdown::is_triggered() const {
  return state_->triggered.is_cancelled();
}
inline const CancellationToken& Shutdown::token() const noexcept {
  return state_->triggered;
}
inline CancellationToken::Cancelled Shutdown::triggered() const {
  return state_->triggered.cancelled();
}
inline bool Shutdown::forced() const {
  return state_->forced.is_cancelled();
}
inline WorkGuard Shutdown::start_work() const {
  return WorkGuard(state_->work.token());
}
inline std::size_t Shutdown::pending() const noexcept {
  return state_->work.len();
}

}  // namespace volt
