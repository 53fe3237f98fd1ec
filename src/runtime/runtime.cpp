#include "volt/runtime/runtime.hpp"

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <thread>

#include "fs/engine.hpp"
#include "runtime/available_parallelism.hpp"
#include "runtime/runtime_core.hpp"

namespace volt {

namespace detail {
Scheduler* core_scheduler(RuntimeCore& core) noexcept {
  return &core;
}

Scheduler* blocking_scheduler(RuntimeCore& core) noexcept {
  return &core.blocking();
}

Scheduler* current_blocking_scheduler() {
  RuntimeCore* core = RuntimeCore::current();
  if (!core) throw Error(errc::no_runtime, "volt::spawn_blocking outside a runtime");
  return &core->blocking();
}

RuntimeCore::RuntimeCore(RuntimeConfig config)
    : config_(std::move(config)), driver_(config_.start_paused) {
  BlockingPoolConfig pool;
  pool.max_threads = config_.max_blocking_threads;
  pool.keep_alive = config_.blocking_keep_alive;
  pool.thread_name = config_.thread_name;
  pool.on_thread_start = config_.on_thread_start;
  pool.on_thread_stop = config_.on_thread_stop;
  pool.on_unhandled_exception = config_.on_unhandled_exception;
  blocking_ = new BlockingPool(std::move(pool), this, driver_);
  files_ = fs::detail::make_engine(driver_, *blocking_, config_.io_uring);
}

RuntimeCore::~RuntimeCore() {
  delete files_;
  blocking_->release_reference();
}

void RuntimeCore::hand_off_worker() {
  throw Error(errc::blocking_in_runtime,
              "block_in_place on the current-thread runtime (it would block every task)");
}

void RuntimeCore::shutdown_blocking(std::chrono::steady_clock::time_point deadline) noexcept {
  // File operations in flight first: the io_uring engine's completions may
  // hand work to the pool (the rest of a large read).
  files_->shutdown(deadline);
  // What is left of the one bound, measured after the engine's wait: taken
  // before it, a read parked in the ring (a pipe, which never completes)
  // spent the whole bound there and the pool then waited it again, twice
  // the shutdown_timeout in all.
  const std::chrono::nanoseconds left =
      deadline == std::chrono::steady_clock::time_point::max()
          ? std::chrono::nanoseconds::max()
          : std::max(std::chrono::nanoseconds::zero(),
                     std::chrono::duration_cast<std::chrono::nanoseconds>(
                         deadline - std::chrono::steady_clock::now()));
  blocking_->shutdown(left);
}

namespace {
// what() of the exception `e` holds, copied while the handler keeps the object
// alive.
std::string describe(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    return x.what();
  } catch (...) {
    return "unknown exception";
  }
}
}  // namespace

void deliver_unhandled_exception(const UnhandledExceptionHook* hook, std::uint64_t task_id,
                                 bool blocking, std::exception_ptr e) noexcept {
  const char* kind = blocking ? "spawn_blocking task" : "task";
  const auto id = static_cast<unsigned long long>(task_id);
  if (!hook || !*hook) {
    try {
      std::string what = describe(e);
      // One call: stdio locks the stream for it, so concurrent lines do not mix.
      std::fprintf(stderr, "volt: unhandled exception in detached %s %llu: %s\n", kind, id,
                   what.c_str());
    } catch (...) {
      std::fprintf(stderr, "volt: unhandled exception in detached %s %llu\n", kind, id);
    }
    return;
  }
  UnhandledException report{e, task_id, blocking};
  try {
    (*hook)(report);
  } catch (...) {
    std::exception_ptr thrown = std::current_exception();
    try {
      std::string hook_what = describe(thrown);
      std::string what = describe(e);
      std::fprintf(stderr,
                   "volt: the on_unhandled_exception hook threw (%s) while reporting detached %s "
                   "%llu: %s\n",
                   hook_what.c_str(), kind, id, what.c_str());
    } catch (...) {
      std::fprintf(stderr,
                   "volt: the on_unhandled_exception hook threw while reporting detached %s %llu\n",
                   kind, id);
    }
  }
}

void Scheduler::unhandled_exception(TaskHeader* task, std::exception_ptr e) noexcept {
  deliver_unhandled_exception(nullptr, task->id, false, std::move(e));
}

void RuntimeCore::fill_stats(RuntimeStats& s) const {
  BlockingPoolStats pool = blocking_->stats();
  s.blocking_threads = pool.threads;
  s.idle_blocking_threads = pool.idle_threads;
  s.blocking_queue_depth = pool.queue_depth;
  // const_cast: reading counters only; the driver's accessors are not const.
  TimeDriver& time = const_cast<Driver&>(driver_).time();
  s.active_timers = time.active_timers();
  s.timers_fired = time.fired_timers();
}
}  // namespace detail

Runtime Runtime::Builder::build() const {
  detail::RuntimeConfig config;
  config.current_thread = current_thread_;
  std::size_t workers = worker_threads_;
  if (!worker_threads_set_ && !current_thread_) {
    std::optional<std::size_t> from_env =
        detail::worker_threads_from_env(std::getenv("VOLT_WORKER_THREADS"));
    workers = from_env ? *from_env : available_parallelism();
  }
  if (max_blocking_threads_ == 0)
    throw Error(errc::invalid_argument, "max_blocking_threads must be at least 1");
  if (max_blocking_threads_ > 65536)
    throw Error(errc::invalid_argument, "max_blocking_threads must be at most 65536");
  if (keep_alive_ < std::chrono::nanoseconds::zero())
    throw Error(errc::invalid_argument, "thread_keep_alive must not be negative");
  if (start_paused_ && !current_thread_)
    throw Error(errc::invalid_argument, "start_paused needs the current-thread flavour");
  if (!current_thread_) {
    if (workers == 0) throw Error(errc::invalid_argument, "worker_threads must be at least 1");
    // The idle set's counters are 32-bit; far above any real machine.
    if (workers > 4096) throw Error(errc::invalid_argument, "worker_threads must be at most 4096");
  }
  config.worker_threads = static_cast<std::uint32_t>(current_thread_ ? 1 : workers);
  config.thread_name = thread_name_;
  config.start_paused = start_paused_;
  config.io_uring = io_uring_;
  config.max_blocking_threads = static_cast<std::uint32_t>(max_blocking_threads_);
  config.blocking_keep_alive = keep_alive_;
  config.on_thread_start = on_thread_start_;
  config.on_thread_stop = on_thread_stop_;
  if (on_unhandled_exception_)
    config.on_unhandled_exception =
        std::make_shared<const detail::UnhandledExceptionHook>(on_unhandled_exception_);
  std::shared_ptr<detail::RuntimeCore> core = current_thread_
                                                  ? detail::make_current_thread_core(config)
                                                  : detail::make_multi_thread_core(config);
  core->start();
  return Runtime(std::move(core));
}

Runtime::Runtime(std::shared_ptr<detail::RuntimeCore> core) : handle_(std::move(core)) {}

Runtime& Runtime::operator=(Runtime&& other) noexcept {
  if (this != &other) {
    shutdown_timeout(std::chrono::nanoseconds::max());
    handle_ = std::move(other.handle_);
  }
  return *this;
}

Runtime::~Runtime() {
  shutdown_timeout(std::chrono::nanoseconds::max());
}

void Runtime::shutdown_timeout(std::chrono::nanoseconds timeout) {
  if (handle_.core_) handle_.core_->shutdown(timeout);
}

Handle Handle::current() {
  detail::RuntimeCore* core = detail::RuntimeCore::current();
  if (!core) throw Error(errc::no_runtime, "Handle::current outside a runtime");
  // A blocking-pool thread may outlive its Runtime (shutdown_timeout), and a
  // worker that outlived the timeout may still hold the core: once shutdown
  // began the answer is runtime_shutdown either way, not a Handle whose
  // spawns would all be refused (or not, depending on which thread left last).
  std::shared_ptr<detail::RuntimeCore> shared = core->weak_from_this().lock();
  if (!shared || shared->is_shutting_down())
    throw Error(errc::runtime_shutdown, "Handle::current: the runtime is shut down");
  return Handle(std::move(shared));
}

Handle::EnterGuard Handle::enter() const {
  return EnterGuard(*this);
}

Handle::EnterGuard::EnterGuard(Handle handle)
    : handle_(std::move(handle)), previous_(detail::tls_context.entered) {
  detail::tls_context.entered = detail::core_scheduler(*handle_.core_);
}

Handle::EnterGuard::~EnterGuard() {
  detail::tls_context.entered = previous_;
}

RuntimeStats Handle::stats() const {
  return core_->stats();
}

bool Handle::uses_io_uring() const noexcept {
  return core_->files()->uses_io_uring();
}

}  // namespace volt
