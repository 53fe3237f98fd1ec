#include "io/driver.hpp"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <system_error>

namespace volt::detail {

Driver::Driver(bool start_paused) : time_(start_paused) {
  epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
  if (epoll_fd_ < 0) throw std::system_error(errno, std::system_category(), "epoll_create1");
  event_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (event_fd_ < 0) {
    int err = errno;
    ::close(epoll_fd_);
    throw std::system_error(err, std::system_category(), "eventfd");
  }
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.ptr = nullptr;  // nullptr tags the wake-up eventfd
  if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, event_fd_, &ev) < 0) {
    int err = errno;
    ::close(event_fd_);
    ::close(epoll_fd_);
    throw std::system_error(err, std::system_category(), "epoll_ctl");
  }
}

Driver::~Driver() {
  ::close(event_fd_);
  ::close(epoll_fd_);
}

void Driver::park(bool block) noexcept {
  const int timeout_ms = block ? time_.park_timeout_ms() : 0;
  epoll_event events[64];
  int n = ::epoll_wait(epoll_fd_, events, 64, timeout_ms);
  if (block) time_.unparked();
  for (int i = 0; i < n; ++i) {
    if (events[i].data.ptr == nullptr) {
      std::uint64_t value;
      // Drain the counter; EAGAIN means another park already did.
      [[maybe_unused]] ssize_t r = ::read(event_fd_, &value, sizeof value);
    }
  }
  time_.process();
}

void Driver::unpark() noexcept {
  std::uint64_t one = 1;
  // EAGAIN only when the counter is near overflow: it is readable either way.
  [[maybe_unused]] ssize_t r = ::write(event_fd_, &one, sizeof one);
}

}  // namespace volt::detail
