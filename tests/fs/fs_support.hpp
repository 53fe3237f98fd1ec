// tests/fs/fs_support.hpp: helpers for the file tests.
//
//  - FsMode: which runtime (flavour), which engine (io_uring or the blocking
//    pool) and whether operations may complete on the calling thread first
//    (inline) or must all go to the engine (what a cold page cache does).
//    Every file test runs under each of kFsModes.
//  - FsModeScope: applies a mode's inline switch for a test's duration.
//  - TempDir: a fresh directory under the system's temporary directory,
//    removed with everything in it at the end of the test.
//  - open_fds(): the number of descriptors this process has open (leak checks).
#pragma once

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "fs/nowait.hpp"
#include "runtime/runtime_support.hpp"

namespace volt::test {

struct FsMode {
  const char* name;
  Flavour flavour;
  bool io_uring;
  bool inline_ops;
};

inline constexpr FsMode kFsModes[] = {
    {"MT2_Uring_Inline", kMultiThread2, true, true},
    {"MT2_Uring_Engine", kMultiThread2, true, false},
    {"MT2_Pool_Engine", kMultiThread2, false, false},
    {"CT_Uring_Engine", kCurrentThread, true, false},
    {"CT_Pool_Inline", kCurrentThread, false, true},
};

inline void PrintTo(const FsMode& m, std::ostream* os) {
  *os << m.name;
}

struct FsModeName {
  template <class ParamInfo>
  std::string operator()(const ParamInfo& info) const {
    return info.param.name;
  }
};

// Builds the mode's runtime. Skips the test (returns false) if the mode asks
// for io_uring and this kernel or environment refuses it.
inline bool make_fs_runtime(const FsMode& m, std::optional<Runtime>& out) {
  Runtime::Builder b = make_builder(m.flavour);
  b.io_uring(m.io_uring);
  out.emplace(b.build());
  return out->uses_io_uring() == m.io_uring;
}

class FsModeScope {
 public:
  explicit FsModeScope(const FsMode& m) { fs::detail::set_inline_enabled(m.inline_ops); }
  ~FsModeScope() { fs::detail::set_inline_enabled(true); }
  FsModeScope(const FsModeScope&) = delete;
  FsModeScope& operator=(const FsModeScope&) = delete;
};

class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "volt-fs-test-XXXXXX").string();
    if (!::mkdtemp(pattern.data())) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

// Byte i of the test pattern.
inline std::byte pattern_byte(std::size_t i) {
  return static_cast<std::byte>(i % 251);
}

inline std::vector<std::byte> pattern_bytes(std::size_t n, std::size_t from = 0) {
  std::vector<std::byte> v(n);
  for (std::size_t i = 0; i < n; ++i)
    v[i] = pattern_byte(from + i);
  return v;
}

// Writes a file synchronously (fixtures, outside the code under test).
inline void write_fixture(const std::filesystem::path& p, const std::vector<std::byte>& bytes) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
  if (!out) throw std::runtime_error("write_fixture failed");
}

inline std::vector<std::byte> read_fixture(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::vector<char> chars((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::byte> out(chars.size());
  std::memcpy(out.data(), chars.data(), chars.size());
  return out;
}

// Drops the file's pages from the page cache, so that reads must wait for
// the disk (RWF_NOWAIT gives EAGAIN): the engine's path.
inline void evict_from_page_cache(const std::filesystem::path& p) {
  int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  ::fdatasync(fd);
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::close(fd);
}

inline int open_fds() {
  int n = 0;
  DIR* d = ::opendir("/proc/self/fd");
  if (!d) return -1;
  while (dirent* e = ::readdir(d))
    if (e->d_name[0] != '.') ++n;
  ::closedir(d);
  return n - 1;  // the listing's own
}

}  // namespace volt::test
