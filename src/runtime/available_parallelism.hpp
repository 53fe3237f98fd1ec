// The pieces behind volt::available_parallelism(), exposed for tests (which
// point them at fixture trees and strings instead of /proc and /sys).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace volt::detail {

// The CPU bandwidth the cgroups of this process allow, in CPUs
// (quota / period), or nullopt when no cgroup limits it.
//
// Reads cgroup v2 (`cpu.max`: "max 100000" or "<quota> <period>") and v1
// (`cpu.cfs_quota_us`, -1 for none, and `cpu.cfs_period_us`), both: a hybrid
// host mounts the v2 hierarchy without the cpu controller and v1's cpu
// hierarchy beside it. Each hierarchy is located through `mountinfo` (its
// mount point and the part of the tree mounted there, which in a container is
// usually the container's own cgroup) and this process's path in it through
// `proc_self_cgroup`. Every cgroup from this process's up to the mount's root
// is read, because a parent's quota bounds its children's; the tightest wins.
// A missing, unreadable or malformed file limits nothing (so does a quota
// of 0 or below, which the kernel does not accept).
//
// `root` is prefixed to every path read ("" on a live system).
std::optional<double> cgroup_cpu_quota(std::string_view proc_self_cgroup,
                                       std::string_view mountinfo, const std::string& root);

// The above on a live system: /proc/self/cgroup and /proc/self/mountinfo.
std::optional<double> cgroup_cpu_quota();

// CPUs in the calling thread's affinity mask (sched_getaffinity), or
// std::thread::hardware_concurrency() if the call fails; at least 1.
std::size_t affinity_cpus() noexcept;

// min(affinity_cpus, floor(quota)), at least 1. Rounding down, as Rust's
// std::thread::available_parallelism does (and so Tokio's default): a worker
// more than the quota pays for itself in throttled periods, where the whole
// process stops until the next one.
std::size_t parallelism_from(std::size_t affinity_cpus, std::optional<double> quota) noexcept;

// VOLT_WORKER_THREADS, parsed: nullopt for an absent or empty value, the
// count for a decimal integer 1..4096, and an Error(errc::invalid_argument)
// otherwise (so a typo in a deployment fails at start, not silently).
std::optional<std::size_t> worker_threads_from_env(const char* value);

}  // namespace volt::detail
