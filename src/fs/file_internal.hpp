// What the fs sources share (not part of the API).
#pragma once

#include <cstddef>
#include <cstdint>
#include <system_error>

#include "volt/fs/file.hpp"

namespace volt::fs::detail {

// -errno as a std::system_category code.
std::error_code errno_code(std::int64_t negative_errno) noexcept;
// One unit of the task's cooperative budget for an operation that completes
// on the calling thread; false: yield before making it. Out of line: it reads
// a thread_local, which a coroutine body must not (README, GCC 12).
bool spend_budget() noexcept;
// pwritev2 with RWF_NOWAIT; -EAGAIN: use the engine (see nowait.hpp).
std::int64_t write_nowait(int fd, const void* buf, std::size_t len, std::int64_t offset) noexcept;
// A File owning `fd` (>= 0), opened with `open_flags` (O_DIRECT is read).
File make_file(int fd, int open_flags);

}  // namespace volt::fs::detail
