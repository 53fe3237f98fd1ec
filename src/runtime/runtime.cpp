#include "volt/runtime/runtime.hpp"

#include <thread>

#include "runtime/runtime_core.hpp"

namespace volt {

namespace detail {
Scheduler* core_scheduler(RuntimeCore& core) noexcept {
  return &core;
}
}  // namespace detail

Runtime Runtime::Builder::build() const {
  detail::RuntimeConfig config;
  config.current_thread = current_thread_;
  std::size_t workers = worker_threads_;
  if (!worker_threads_set_) {
    workers = std::thread::hardware_concurrency();
    if (workers == 0) workers = 1;
  }
  if (!current_thread_) {
    if (workers == 0) throw Error(errc::invalid_argument, "worker_threads must be at least 1");
    // The idle set's counters are 32-bit; far above any real machine.
    if (workers > 4096) throw Error(errc::invalid_argument, "worker_threads must be at most 4096");
  }
  config.worker_threads = static_cast<std::uint32_t>(current_thread_ ? 1 : workers);
  config.thread_name = thread_name_;
  config.on_thread_start = on_thread_start_;
  config.on_thread_stop = on_thread_stop_;
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
  detail::Scheduler* scheduler = detail::tls_context.scheduler;
  if (!scheduler) throw Error(errc::no_runtime, "Handle::current outside a runtime");
  // Every Scheduler volt creates is a RuntimeCore.
  return Handle(static_cast<detail::RuntimeCore*>(scheduler)->shared_from_this());
}

RuntimeStats Handle::stats() const {
  return core_->stats();
}

}  // namespace volt
