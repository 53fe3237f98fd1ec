// volt/volt.hpp: the whole public API.
#pragma once

#include "volt/channel/oneshot.hpp"
#include "volt/error.hpp"
#include "volt/expected.hpp"
#include "volt/runtime/runtime.hpp"
#include "volt/runtime/stats.hpp"
#include "volt/sync/mutex.hpp"
#include "volt/sync/semaphore.hpp"
#include "volt/task/join_all.hpp"
#include "volt/task/join_handle.hpp"
#include "volt/task/spawn_blocking.hpp"
#include "volt/task/task.hpp"
#include "volt/task/yield_now.hpp"
#include "volt/time/clock.hpp"
#include "volt/time/interval.hpp"
#include "volt/time/sleep.hpp"
#include "volt/time/timeout.hpp"
