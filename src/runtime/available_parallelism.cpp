#include "runtime/available_parallelism.hpp"

#include <sched.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "volt/error.hpp"
#include "volt/runtime/runtime.hpp"

namespace volt {
namespace detail {
namespace {

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  while (true) {
    std::size_t at = s.find(sep);
    out.push_back(s.substr(0, at));
    if (at == std::string_view::npos) return out;
    s.remove_prefix(at + 1);
  }
}

template <class Items>
bool contains(const Items& items, std::string_view item) {
  return std::find(items.begin(), items.end(), item) != items.end();
}

// mountinfo escapes a space, tab, newline and backslash in a path as \ooo.
std::string unescape(std::string_view s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 3 < s.size() && s[i + 1] >= '0' && s[i + 1] <= '7' && s[i + 2] >= '0' &&
        s[i + 2] <= '7' && s[i + 3] >= '0' && s[i + 3] <= '7') {
      out.push_back(
          static_cast<char>((s[i + 1] - '0') * 64 + (s[i + 2] - '0') * 8 + (s[i + 3] - '0')));
      i += 3;
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

std::optional<std::string> read_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// A whole, non-negative decimal number (trailing newline allowed).
std::optional<double> parse_number(std::string_view s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' '))
    s.remove_suffix(1);
  if (s.empty() || s.size() > 18) return std::nullopt;
  double v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + (c - '0');
  }
  return v;
}

// cpu.max: "max <period>" (no limit) or "<quota> <period>".
std::optional<double> quota_v2(const std::string& dir) {
  std::optional<std::string> text = read_file(dir + "/cpu.max");
  if (!text) return std::nullopt;
  std::string_view line(*text);
  std::size_t space = line.find(' ');
  if (space == std::string_view::npos) return std::nullopt;
  std::optional<double> quota = parse_number(line.substr(0, space));
  std::optional<double> period = parse_number(line.substr(space + 1));
  if (!quota || !period || *quota <= 0 || *period <= 0) return std::nullopt;
  return *quota / *period;
}

// cpu.cfs_quota_us ("-1": no limit) over cpu.cfs_period_us.
std::optional<double> quota_v1(const std::string& dir) {
  std::optional<std::string> quota_text = read_file(dir + "/cpu.cfs_quota_us");
  std::optional<std::string> period_text = read_file(dir + "/cpu.cfs_period_us");
  if (!quota_text || !period_text) return std::nullopt;
  std::optional<double> quota = parse_number(*quota_text);  // "-1" does not parse: no limit
  std::optional<double> period = parse_number(*period_text);
  if (!quota || !period || *quota <= 0 || *period <= 0) return std::nullopt;
  return *quota / *period;
}

std::optional<double> tighter(std::optional<double> a, std::optional<double> b) {
  if (!a) return b;
  if (!b) return a;
  return std::min(*a, *b);
}

// The tightest quota from `root + mount_point + relative` up to the mount
// point itself.
template <typename ReadQuota>
std::optional<double> walk_up(const std::string& root, const std::string& mount_point,
                              std::string relative, ReadQuota read_quota) {
  std::optional<double> best;
  while (true) {
    best = tighter(best, read_quota(root + mount_point + relative));
    if (relative.empty() || relative == "/") return best;
    std::size_t slash = relative.rfind('/');
    relative.resize(slash == std::string::npos ? 0 : slash);
  }
}

struct Mount {
  std::string root;         // the part of the hierarchy mounted (field 4)
  std::string mount_point;  // where (field 5)
  std::string fstype;
  std::vector<std::string> super_options;
};

std::vector<Mount> cgroup_mounts(std::string_view mountinfo) {
  std::vector<Mount> mounts;
  for (std::string_view line : split(mountinfo, '\n')) {
    std::size_t dash = line.find(" - ");
    if (dash == std::string_view::npos) continue;
    std::vector<std::string_view> before = split(line.substr(0, dash), ' ');
    std::vector<std::string_view> after = split(line.substr(dash + 3), ' ');
    if (before.size() < 5 || after.size() < 3) continue;
    if (after[0] != "cgroup" && after[0] != "cgroup2") continue;
    Mount m;
    m.root = unescape(before[3]);
    m.mount_point = unescape(before[4]);
    m.fstype = std::string(after[0]);
    for (std::string_view o : split(after[2], ','))
      m.super_options.emplace_back(o);
    mounts.push_back(std::move(m));
  }
  return mounts;
}

// This process's path in the hierarchy, made relative to what `m` mounts;
// nullopt when the mount does not reach it.
std::optional<std::string> relative_to(const Mount& m, const std::string& path) {
  if (m.root == "/") return path == "/" ? std::string() : path;
  if (path.compare(0, m.root.size(), m.root) != 0) return std::nullopt;
  std::string rest = path.substr(m.root.size());
  if (!rest.empty() && rest[0] != '/') return std::nullopt;  // "/a" is not under "/ab"
  return rest;
}

}  // namespace

std::optional<double> cgroup_cpu_quota(std::string_view proc_self_cgroup,
                                       std::string_view mountinfo, const std::string& root) {
  std::vector<Mount> mounts = cgroup_mounts(mountinfo);
  std::optional<double> best;
  // Lines are "<id>:<controllers>:<path>"; v2's is "0::<path>".
  for (std::string_view line : split(proc_self_cgroup, '\n')) {
    std::size_t first = line.find(':');
    std::size_t second = first == std::string_view::npos ? first : line.find(':', first + 1);
    if (second == std::string_view::npos) continue;
    std::string_view controllers = line.substr(first + 1, second - first - 1);
    std::string path(line.substr(second + 1));
    if (path.empty() || path[0] != '/') continue;
    bool v2 = line.substr(0, first) == "0" && controllers.empty();
    if (!v2 && !contains(split(controllers, ','), "cpu")) continue;
    for (const Mount& m : mounts) {
      bool match =
          v2 ? m.fstype == "cgroup2" : m.fstype == "cgroup" && contains(m.super_options, "cpu");
      if (!match) continue;
      std::optional<std::string> relative = relative_to(m, path);
      if (!relative) continue;
      best = tighter(best, v2 ? walk_up(root, m.mount_point, *relative, quota_v2)
                              : walk_up(root, m.mount_point, *relative, quota_v1));
    }
  }
  return best;
}

std::optional<double> cgroup_cpu_quota() {
  std::optional<std::string> cgroup = read_file("/proc/self/cgroup");
  std::optional<std::string> mountinfo = read_file("/proc/self/mountinfo");
  if (!cgroup || !mountinfo) return std::nullopt;
  return cgroup_cpu_quota(*cgroup, *mountinfo, "");
}

std::size_t affinity_cpus() noexcept {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    int n = CPU_COUNT(&set);
    if (n > 0) return static_cast<std::size_t>(n);
  }
  // More than CPU_SETSIZE (1024) CPUs, or no answer: the machine's count.
  unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : n;
}

std::size_t parallelism_from(std::size_t affinity, std::optional<double> quota) noexcept {
  std::size_t n = std::max<std::size_t>(affinity, 1);
  if (quota && *quota > 0) {
    double whole = std::floor(*quota);
    std::size_t q = whole < 1 ? 1 : static_cast<std::size_t>(std::min(whole, 1e9));
    n = std::min(n, q);
  }
  return n;
}

std::optional<std::size_t> worker_threads_from_env(const char* value) {
  if (value == nullptr || *value == '\0') return std::nullopt;
  std::optional<double> n = parse_number(value);
  if (!n || *n < 1 || *n > 4096)
    throw Error(errc::invalid_argument,
                std::string("VOLT_WORKER_THREADS must be a whole number from 1 to 4096, not \"") +
                    value + "\"");
  return static_cast<std::size_t>(*n);
}

}  // namespace detail

std::size_t available_parallelism() noexcept {
  std::optional<double> quota;
  try {
    quota = detail::cgroup_cpu_quota();
  } catch (...) {  // std::bad_alloc reading the files: no limit known
  }
  return detail::parallelism_from(detail::affinity_cpus(), quota);
}

}  // namespace volt
