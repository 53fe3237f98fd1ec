// volt/volt.hpp: the whole public API.
#pragma once

#include "volt/channel/oneshot.hpp"
#include "volt/error.hpp"
#include "volt/runtime/runtime.hpp"
#include "volt/runtime/stats.hpp"
#include "volt/task/join_all.hpp"
#include "volt/task/join_handle.hpp"
#include "volt/task/task.hpp"
#include "volt/task/yield_now.hpp"
