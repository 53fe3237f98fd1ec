// RuntimeCore: what a Runtime and its Handles share, whatever the flavour.
//
// Held by shared_ptr: the Runtime, every Handle, and every worker thread hold
// it, so a worker that outlives shutdown_timeout() (stuck in a long poll) keeps
// the scheduler alive until it exits.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "io/driver.hpp"
#include "runtime/blocking/blocking_pool.hpp"
#include "runtime/unhandled_exception.hpp"
#include "volt/detail/task_header.hpp"
#include "volt/runtime/stats.hpp"

namespace volt::fs::detail {
class FileEngine;
}  // namespace volt::fs::detail

namespace volt::detail {

struct RuntimeConfig {
  bool current_thread = false;
  bool start_paused = false;
  std::uint32_t worker_threads = 1;
  std::uint32_t max_blocking_threads = 512;
  std::chrono::nanoseconds blocking_keep_alive = std::chrono::seconds(10);
  std::string thread_name;
  std::function<void()> on_thread_start;
  std::function<void()> on_thread_stop;
  SharedUnhandledExceptionHook on_unhandled_exception;  // null: print to stderr
  bool io_uring = true;  // Builder::io_uring (VOLT_IO_URING=0 also turns it off)
};

class RuntimeCore : public Scheduler, public std::enable_shared_from_this<RuntimeCore> {
 public:
  explicit RuntimeCore(RuntimeConfig config);
  ~RuntimeCore() override;

  // Wraps a new core in the shared_ptr its owners share; the deleter drops
  // the owners' lifetime reference (Scheduler::release_reference) instead of
  // deleting, so task cells can keep the core alive after the owners left.
  static std::shared_ptr<RuntimeCore> share(RuntimeCore* core) {
    return std::shared_ptr<RuntimeCore>(core, [](RuntimeCore* c) { c->release_reference(); });
  }

  // Starts the threads (needs shared_from_this, so not in the constructor).
  virtual void start() = 0;
  // Idempotent. Stops the threads (waiting at most `timeout` for each) and
  // cancels every remaining task.
  virtual void shutdown(std::chrono::nanoseconds timeout) noexcept = 0;
  virtual RuntimeStats stats() const = 0;
  // A timer was registered while nobody holds the driver (TimeDriver's
  // kUnattended): make sure somebody will. The current-thread flavour's core
  // holder always returns to the driver, so the default does nothing.
  virtual void on_unattended_timer() noexcept {}
  // block_in_place on a thread whose tls_context.scheduler is this: passes
  // the calling worker's role to a fresh thread (the multi-thread flavour),
  // or does nothing when the thread is not a worker. The current-thread
  // flavour has no one to pass it to: throws Error(errc::blocking_in_runtime).
  virtual void hand_off_worker();
  // Scheduler: the runtime's hook (Builder::on_unhandled_exception).
  void unhandled_exception(TaskHeader* task, std::exception_ptr e) noexcept override {
    deliver_unhandled_exception(config_.on_unhandled_exception.get(), task->id, false,
                                std::move(e));
  }

  const RuntimeConfig& config() const noexcept { return config_; }
  // The I/O driver, and through it the timers (driver().time()).
  Driver& driver() noexcept { return driver_; }
  BlockingPool& blocking() noexcept { return *blocking_; }
  // The file engine (src/fs/engine.hpp): io_uring or the blocking pool.
  fs::detail::FileEngine* files() noexcept { return files_; }

  // The runtime the calling thread runs tasks for or has entered (a
  // blocking-pool thread); nullptr elsewhere.
  static RuntimeCore* current() noexcept {
    Scheduler* s = tls_context.scheduler ? tls_context.scheduler : tls_context.entered;
    return static_cast<RuntimeCore*>(s);  // every Scheduler in the TLS is a RuntimeCore
  }

 protected:
  // Blocking-pool part of shutdown, after the workers stopped: bounded by
  // what is left of the caller's timeout.
  void shutdown_blocking(std::chrono::steady_clock::time_point deadline) noexcept;
  void fill_stats(RuntimeStats& s) const;

  RuntimeConfig config_;
  Driver driver_;

 private:
  BlockingPool* blocking_;         // holds the pool's owner reference
  fs::detail::FileEngine* files_;  // owned; uses the driver and the pool
};

std::shared_ptr<RuntimeCore> make_multi_thread_core(RuntimeConfig config);
std::shared_ptr<RuntimeCore> make_current_thread_core(RuntimeConfig config);

}  // namespace volt::detail
