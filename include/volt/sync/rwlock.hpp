// volt/sync/rwlock.hpp: an async reader-writer lock that owns the value it
// protects.
//
//   volt::RwLock<Config> config;
//   {
//     auto reader = co_await config.read();    // shared: many at once
//     use(reader->port);
//   }
//   {
//     auto writer = co_await config.write();   // exclusive
//     writer->port = 8080;
//   }                                          // unlocked here
//
// Guarantees:
//  - A Semaphore of kMaxReaders permits (the reference design's, docs/design.md): a
//    reader takes one, a writer takes all of them. So it inherits the
//    semaphore's properties: no allocation to wait, a waiting read() or
//    write() cancelled by destruction (abort, timeout, select) with nothing
//    lost, FIFO service.
//  - Writer priority, from FIFO and partial grants: a queued writer drains
//    the permits as readers return them, so a reader that arrives after it
//    waits behind it, however many readers hold the lock; a steady stream of
//    readers cannot starve a writer.
//  - The guards are the only way to the value (const for readers); destroying
//    one unlocks. WriteGuard::downgrade() turns a write lock into a read lock
//    without letting a writer in between.
//  - try_read()/try_write() never wait; read_blocking()/write_blocking() are
//    for plain threads (errc::blocking_in_runtime on a runtime thread).
//  - More than kMaxReaders simultaneous readers: the next one waits (as if a
//    writer held the lock) until one leaves.
#pragma once

#include <coroutine>
#include <cstdint>
#include <optional>
#include <utility>

#include "volt/sync/semaphore.hpp"

namespace volt {

template <class T>
class RwLock {
 public:
  // Tokio's bound (u32::MAX >> 3): far more readers than a program holds at
  // once, and a writer's acquire of all of them is one semaphore request.
  static constexpr std::uint64_t kMaxReaders = (std::uint64_t{1} << 29) - 1;

  class [[nodiscard]] ReadGuard {
   public:
    ReadGuard(ReadGuard&&) noexcept = default;
    ReadGuard& operator=(ReadGuard&&) noexcept = default;
    const T& operator*() const noexcept { return *value_; }
    const T* operator->() const noexcept { return value_; }

   private:
    friend class RwLock;
    ReadGuard(SemaphorePermit permit, const T* value) noexcept
        : permit_(std::move(permit)), value_(value) {}
    SemaphorePermit permit_;  // one permit; unlocks when destroyed
    const T* value_;
  };

  class [[nodiscard]] WriteGuard {
   public:
    WriteGuard(WriteGuard&&) noexcept = default;
    WriteGuard& operator=(WriteGuard&&) noexcept = default;
    T& operator*() const noexcept { return *value_; }
    T* operator->() const noexcept { return value_; }

    // Keeps one permit as a read lock and returns the others: readers queued
    // behind this writer may enter, a writer may not (it needs them all).
    // Consumes the guard.
    ReadGuard downgrade() && {
      SemaphorePermit read = permit_.split(1);
      permit_.reset();
      return ReadGuard(std::move(read), value_);
    }

   private:
    friend class RwLock;
    WriteGuard(SemaphorePermit permit, T* value) noexcept
        : permit_(std::move(permit)), value_(value) {}
    SemaphorePermit permit_;  // kMaxReaders permits; unlocks when destroyed
    T* value_;
  };

  template <class... Args>
  explicit RwLock(Args&&... args) : value_(std::forward<Args>(args)...) {}
  RwLock(const RwLock&) = delete;
  RwLock& operator=(const RwLock&) = delete;

  class [[nodiscard]] Read {
   public:
    explicit Read(RwLock& lock) noexcept : lock_(lock), acquire_(lock.semaphore_.acquire(1)) {}
    bool await_ready() { return acquire_.await_ready(); }
    bool await_suspend(std::coroutine_handle<> self) { return acquire_.await_suspend(self); }
    // The semaphore is never closed: the permit is always there.
    ReadGuard await_resume() { return ReadGuard(acquire_.await_resume().value(), &lock_.value_); }

   private:
    RwLock& lock_;
    Semaphore::Acquire acquire_;
  };

  class [[nodiscard]] Write {
   public:
    explicit Write(RwLock& lock) noexcept
        : lock_(lock), acquire_(lock.semaphore_.acquire(kMaxReaders)) {}
    bool await_ready() { return acquire_.await_ready(); }
    bool await_suspend(std::coroutine_handle<> self) { return acquire_.await_suspend(self); }
    WriteGuard await_resume() { return WriteGuard(acquire_.await_resume().value(), &lock_.value_); }

   private:
    RwLock& lock_;
    Semaphore::Acquire acquire_;
  };

  // Waits for a shared lock; co_await gives the ReadGuard.
  Read read() noexcept { return Read(*this); }
  // Waits for the exclusive lock; co_await gives the WriteGuard.
  Write write() noexcept { return Write(*this); }

  std::optional<ReadGuard> try_read() {
    std::optional<SemaphorePermit> permit = semaphore_.try_acquire(1);
    if (!permit) return std::nullopt;
    return ReadGuard(std::move(*permit), &value_);
  }
  std::optional<WriteGuard> try_write() {
    std::optional<SemaphorePermit> permit = semaphore_.try_acquire(kMaxReaders);
    if (!permit) return std::nullopt;
    return WriteGuard(std::move(*permit), &value_);
  }

  ReadGuard read_blocking() { return ReadGuard(semaphore_.acquire_blocking(1).value(), &value_); }
  WriteGuard write_blocking() {
    return WriteGuard(semaphore_.acquire_blocking(kMaxReaders).value(), &value_);
  }

 private:
  Semaphore semaphore_{kMaxReaders};
  T value_;
};

// Tokio's path (tokio::sync::RwLock).
namespace sync {
using volt::RwLock;
}  // namespace sync

}  // namespace volt
