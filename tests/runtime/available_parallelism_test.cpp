// available_parallelism(): the affinity mask bounded by the cgroup CPU quota,
// and the multi-thread runtime's default worker count built on it. The quota
// is read from fixture trees (v2, v1, hybrid, a container's mount, malformed
// files); the affinity from this thread's own mask, narrowed with
// sched_setaffinity, and (tests/CMakeLists.txt) from a run under `taskset`.
#include <gtest/gtest.h>
#include <sched.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <thread>

#include "fs/fs_support.hpp"
#include "runtime/available_parallelism.hpp"
#include "volt/runtime/runtime.hpp"

namespace volt {
namespace {

using detail::cgroup_cpu_quota;
using detail::parallelism_from;
using detail::worker_threads_from_env;

// A fixture tree standing in for "/" (TempDir: removed at the end).
class FixtureRoot {
 public:
  // Writes `text` to root + path (an absolute path on the live system).
  void write(const std::string& path, const std::string& text) const {
    std::filesystem::path p = dir_.path().string() + path;
    std::filesystem::create_directories(p.parent_path());
    std::ofstream(p) << text;
  }
  std::string root() const { return dir_.path().string(); }

 private:
  test::TempDir dir_;
};

// The mountinfo lines of a pure cgroup v2 host and of a hybrid one (v2
// without controllers at /sys/fs/cgroup/unified, v1's cpu hierarchy beside).
constexpr const char* kV2Mounts =
    "24 30 0:22 / /proc rw,nosuid - proc proc rw\n"
    "30 1 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime - cgroup2 cgroup2 "
    "rw,nsdelegate\n";
constexpr const char* kHybridMounts =
    "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
    "32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct\n"
    "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"
    "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";

TEST(CgroupQuota, V2QuotaOfTheProcessesCgroup) {
  FixtureRoot fx;
  fx.write("/sys/fs/cgroup/svc/app/cpu.max", "150000 100000\n");
  fx.write("/sys/fs/cgroup/svc/cpu.max", "max 100000\n");
  std::optional<double> q = cgroup_cpu_quota("0::/svc/app\n", kV2Mounts, fx.root());
  ASSERT_TRUE(q);
  EXPECT_DOUBLE_EQ(*q, 1.5);
}

TEST(CgroupQuota, V2ParentsTighterQuotaWins) {
  FixtureRoot fx;
  fx.write("/sys/fs/cgroup/svc/app/cpu.max", "400000 100000\n");
  fx.write("/sys/fs/cgroup/svc/cpu.max", "50000 100000\n");
  std::optional<double> q = cgroup_cpu_quota("0::/svc/app\n", kV2Mounts, fx.root());
  ASSERT_TRUE(q);
  EXPECT_DOUBLE_EQ(*q, 0.5);
}

TEST(CgroupQuota, V2WithoutAnyLimitIsNone) {
  FixtureRoot fx;
  fx.write("/sys/fs/cgroup/svc/app/cpu.max", "max 100000\n");
  EXPECT_FALSE(cgroup_cpu_quota("0::/svc/app\n", kV2Mounts, fx.root()));
  // No cpu.max anywhere (the cpu controller not enabled for the subtree).
  FixtureRoot empty;
  empty.write("/sys/fs/cgroup/svc/app/cgroup.procs", "1\n");
  EXPECT_FALSE(cgroup_cpu_quota("0::/svc/app\n", kV2Mounts, empty.root()));
}

TEST(CgroupQuota, V1CpuHierarchyOnAHybridHost) {
  FixtureRoot fx;
  fx.write("/sys/fs/cgroup/cpu,cpuacct/job/cpu.cfs_quota_us", "300000\n");
  fx.write("/sys/fs/cgroup/cpu,cpuacct/job/cpu.cfs_period_us", "100000\n");
  // The unified hierarchy has no cpu.max (no controllers on a hybrid host).
  const char* cgroup = "4:memory:/job\n3:cpu,cpuacct:/job\n0::/job\n";
  std::optional<double> q = cgroup_cpu_quota(cgroup, kHybridMounts, fx.root());
  ASSERT_TRUE(q);
  EXPECT_DOUBLE_EQ(*q, 3.0);
}

TEST(CgroupQuota, V1MinusOneIsNoLimitButAnAncestorsQuotaCounts) {
  FixtureRoot fx;
  fx.write("/sys/fs/cgroup/cpu,cpuacct/job/task/cpu.cfs_quota_us", "-1\n");
  fx.write("/sys/fs/cgroup/cpu,cpuacct/job/task/cpu.cfs_period_us", "100000\n");
  const char* cgroup = "3:cpu,cpuacct:/job/task\n";
  EXPECT_FALSE(cgroup_cpu_quota(cgroup, kHybridMounts, fx.root()));
  fx.write("/sys/fs/cgroup/cpu,cpuacct/job/cpu.cfs_quota_us", "250000\n");
  fx.write("/sys/fs/cgroup/cpu,cpuacct/job/cpu.cfs_period_us", "100000\n");
  std::optional<double> q = cgroup_cpu_quota(cgroup, kHybridMounts, fx.root());
  ASSERT_TRUE(q);
  EXPECT_DOUBLE_EQ(*q, 2.5);
}

// In a container the mount's root field is the container's own cgroup, and
// the quota file sits at the mount point itself.
TEST(CgroupQuota, ContainerMountsItsOwnCgroupAtTheMountPoint) {
  FixtureRoot fx;
  fx.write("/sys/fs/cgroup/cpu/cpu.cfs_quota_us", "200000\n");
  fx.write("/sys/fs/cgroup/cpu/cpu.cfs_period_us", "100000\n");
  const char* mounts =
      "700 699 0:40 /docker/abc /sys/fs/cgroup/cpu ro,nosuid - cgroup cgroup rw,cpu\n";
  std::optional<double> q = cgroup_cpu_quota("5:cpu:/docker/abc\n", mounts, fx.root());
  ASSERT_TRUE(q);
  EXPECT_DOUBLE_EQ(*q, 2.0);
  // A path outside what is mounted (a sibling whose name shares the prefix)
  // cannot be located: no limit, rather than a wrong file.
  EXPECT_FALSE(cgroup_cpu_quota("5:cpu:/docker/abcdef\n", mounts, fx.root()));
}

TEST(CgroupQuota, EscapedMountPointIsUnescaped) {
  FixtureRoot fx;
  fx.write("/sys/fs/my cgroup/a/cpu.max", "100000 100000\n");
  const char* mounts = "30 1 0:26 / /sys/fs/my\\040cgroup rw - cgroup2 cgroup2 rw\n";
  std::optional<double> q = cgroup_cpu_quota("0::/a\n", mounts, fx.root());
  ASSERT_TRUE(q);
  EXPECT_DOUBLE_EQ(*q, 1.0);
}

TEST(CgroupQuota, MalformedFilesLimitNothing) {
  FixtureRoot fx;
  fx.write("/sys/fs/cgroup/a/cpu.max", "lots 100000\n");
  fx.write("/sys/fs/cgroup/b/cpu.max", "100000\n");
  fx.write("/sys/fs/cgroup/c/cpu.max", "0 100000\n");
  fx.write("/sys/fs/cgroup/d/cpu.max", "100000 0\n");
  fx.write("/sys/fs/cgroup/e/cpu.max", "");
  for (const char* cg : {"0::/a\n", "0::/b\n", "0::/c\n", "0::/d\n", "0::/e\n"})
    EXPECT_FALSE(cgroup_cpu_quota(cg, kV2Mounts, fx.root())) << cg;
  // Garbage in /proc/self/cgroup and mountinfo themselves.
  EXPECT_FALSE(cgroup_cpu_quota("nonsense\n::\n0::relative\n", kV2Mounts, fx.root()));
  EXPECT_FALSE(cgroup_cpu_quota("0::/a\n", "garbage - \n - cgroup2\n", fx.root()));
}

TEST(AvailableParallelism, FloorOfTheQuotaBoundedByTheAffinity) {
  EXPECT_EQ(parallelism_from(8, std::nullopt), 8u);
  EXPECT_EQ(parallelism_from(8, 2.5), 2u);
  EXPECT_EQ(parallelism_from(8, 0.3), 1u);  // never 0
  EXPECT_EQ(parallelism_from(2, 4.0), 2u);  // the quota never adds CPUs
  EXPECT_EQ(parallelism_from(0, std::nullopt), 1u);
}

TEST(AvailableParallelism, FollowsThisThreadsAffinityMask) {
  std::size_t all = available_parallelism();
  EXPECT_GE(all, 1u);
  EXPECT_LE(all, std::max(1u, std::thread::hardware_concurrency()));
  std::size_t pinned = 0, workers = 0;
  std::thread t([&] {
    cpu_set_t one;
    CPU_ZERO(&one);
    ASSERT_EQ(sched_getaffinity(0, sizeof(one), &one), 0);
    int first = 0;
    while (!CPU_ISSET(first, &one))
      ++first;
    CPU_ZERO(&one);
    CPU_SET(first, &one);
    ASSERT_EQ(sched_setaffinity(0, sizeof(one), &one), 0);
    pinned = available_parallelism();
    // The default worker count is decided on the thread that builds.
    if (std::getenv("VOLT_WORKER_THREADS") == nullptr) {
      Runtime rt = Runtime::Builder::multi_thread().build();
      workers = rt.stats().num_workers;
    }
  });
  t.join();
  EXPECT_EQ(pinned, 1u);
  if (std::getenv("VOLT_WORKER_THREADS") == nullptr) {
    EXPECT_EQ(workers, 1u);
  }
}

// Run by ctest under `taskset -c 0` (and with VOLT_WORKER_THREADS=3), with
// VOLT_EXPECT_WORKERS naming the count a default Runtime must have.
TEST(AvailableParallelism, DefaultRuntimeMatchesTheEnvironment) {
  const char* expect = std::getenv("VOLT_EXPECT_WORKERS");
  if (expect == nullptr) GTEST_SKIP() << "run by ctest with VOLT_EXPECT_WORKERS set";
  Runtime rt = Runtime::Builder::multi_thread().build();
  EXPECT_EQ(rt.stats().num_workers, std::stoul(expect));
  if (std::getenv("VOLT_WORKER_THREADS") == nullptr) {
    EXPECT_EQ(available_parallelism(), std::stoul(expect));
  }
}

TEST(AvailableParallelism, WorkerThreadsFromTheEnvironment) {
  EXPECT_FALSE(worker_threads_from_env(nullptr));
  EXPECT_FALSE(worker_threads_from_env(""));
  EXPECT_EQ(worker_threads_from_env("3"), 3u);
  EXPECT_EQ(worker_threads_from_env("4096"), 4096u);
  for (const char* bad : {"0", "-1", "4097", "two", " 3", "1e3", "99999999999999999999"}) {
    try {
      (void)worker_threads_from_env(bad);
      ADD_FAILURE() << "accepted \"" << bad << "\"";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), make_error_code(errc::invalid_argument)) << bad;
      EXPECT_NE(std::string(e.what()).find("VOLT_WORKER_THREADS"), std::string::npos);
    }
  }
}

}  // namespace
}  // namespace volt
