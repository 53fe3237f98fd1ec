#include "volt/signal/shutdown.hpp"

#include <utility>
#include <vector>

#include "volt/runtime/runtime.hpp"
#include "volt/signal/signal.hpp"
#include "volt/task/select.hpp"
#include "volt/time/sleep.hpp"

namespace volt {
namespace {

// One signal's listener: the first delivery triggers, the next one forces.
// Holds the tokens, not the Shutdown's state, so that the state (whose
// destructor aborts this task) is not kept alive by it.
Task<void> listen(signal::Signal signal, CancellationToken triggered, CancellationToken forced) {
  for (;;) {
    auto first = co_await select(signal.recv(), forced.cancelled());
    if (first.index() == 1) co_return;  // another listener forced: nothing left to do
    if (!triggered.is_cancelled()) {
      triggered.cancel();
    } else {
      forced.cancel();
      co_return;
    }
  }
}

}  // namespace

Shutdown::Shutdown() : state_(std::make_shared<State>()) {}

Shutdown Shutdown::on_signals(std::initializer_list<int> signals) {
  Handle runtime = Handle::current();  // no_runtime outside one, before installing anything
  Shutdown shutdown;
  // Every Signal before any listener runs: a delivery from here on counts.
  std::vector<signal::Signal> streams;
  streams.reserve(signals.size());
  for (int signum : signals)
    streams.push_back(signal::signal(signum));
  for (signal::Signal& stream : streams)
    shutdown.state_->listeners.push_back(runtime.spawn(
        listen(std::move(stream), shutdown.state_->triggered, shutdown.state_->forced)));
  return shutdown;
}

Task<bool> Shutdown::wait_pending(std::chrono::nanoseconds limit) const {
  std::shared_ptr<State> state = state_;  // the frame's own reference
  if (state->work.is_empty()) co_return true;
  (void)co_await select(state->work.wait(), sleep(limit), state->forced.cancelled());
  co_return state->work.is_empty();
}

}  // namespace volt
