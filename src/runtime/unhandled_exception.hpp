// Reporting the exception of a spawned task that no JoinHandle can observe
// any more (Runtime::Builder::on_unhandled_exception; the rule is in
// include/volt/runtime/runtime.hpp). Implemented in src/runtime/runtime.cpp.
#pragma once

#include <cstdint>
#include <exception>
#include <functional>
#include <memory>

namespace volt {
struct UnhandledException;  // volt/runtime/runtime.hpp
}

namespace volt::detail {

using UnhandledExceptionHook = std::function<void(const UnhandledException&)>;
// One hook object, shared by a runtime's core and its blocking pool (which
// may outlive the core: its task cells hold it). Null when none was set.
using SharedUnhandledExceptionHook = std::shared_ptr<const UnhandledExceptionHook>;

// Calls `hook` with the exception, or, if there is no hook, prints
//   volt: unhandled exception in detached task <id>: <what()>
// ("spawn_blocking task" for a blocking job, "unknown exception" for one not
// derived from std::exception) to stderr in one write. What the hook throws
// is caught and printed. Never throws; callable from any thread at once.
void deliver_unhandled_exception(const UnhandledExceptionHook* hook, std::uint64_t task_id,
                                 bool blocking, std::exception_ptr e) noexcept;

}  // namespace volt::detail
