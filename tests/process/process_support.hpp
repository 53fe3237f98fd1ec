// Helpers shared by the process tests: errno checks and what the process
// leaves behind (zombie children, open descriptors), read from /proc.
#pragma once

#include <dirent.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <set>
#include <string>
#include <system_error>

namespace volt::test {

inline bool is_errno(const std::error_code& ec, int err) {
  return ec.value() == err && &ec.category() == &std::system_category();
}

// Zombie children of this process (state Z, parent us), from /proc.
inline int count_zombies() {
  const pid_t self = ::getpid();
  int zombies = 0;
  DIR* proc = ::opendir("/proc");
  if (proc == nullptr) return -1;
  while (dirent* e = ::readdir(proc)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    std::string path = "/proc/";
    path += e->d_name;
    path += "/stat";
    std::ifstream in(path);
    std::string line;
    if (!std::getline(in, line)) continue;
    // pid (comm) state ppid ...: comm may hold spaces and parentheses.
    const std::size_t close = line.rfind(')');
    if (close == std::string::npos || close + 4 >= line.size()) continue;
    const char state = line[close + 2];
    const long ppid = std::strtol(line.c_str() + close + 4, nullptr, 10);
    if (ppid == self && state == 'Z') ++zombies;
  }
  ::closedir(proc);
  return zombies;
}

// Descriptors open in this process.
inline std::set<int> open_fd_set() {
  std::set<int> fds;
  DIR* d = ::opendir("/proc/self/fd");
  const int own = ::dirfd(d);
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] == '.') continue;
    const int fd = std::atoi(e->d_name);
    if (fd != own) fds.insert(fd);
  }
  ::closedir(d);
  return fds;
}

}  // namespace volt::test
