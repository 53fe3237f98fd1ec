// Tests of volt::fs's calls on names and directories (include/volt/fs/fs.hpp)
// and of Metadata::from_statx (metadata.hpp), on both runtime flavours:
// create_dir / create_dir_all / DirBuilder (modes, EEXIST, ENOENT, ENOTDIR),
// remove_file / remove_dir (ENOTEMPTY) / remove_dir_all (never through a
// symbolic link), rename, hard_link, symlink + read_link (a target longer
// than the first buffer), canonicalize (".." and a link), set_permissions,
// copy (3 MiB byte for byte with its permission bits, a shorter copy over a
// longer file, onto itself, a procfs file whose size is 0), read_dir (1,000
// names exactly, entry kinds without a system call, ENOENT, ENOTDIR), a
// listing cancelled or dropped halfway leaking no descriptor and losing no
// entry, and EACCES for an unprivileged user (a child process as nobody).
#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "runtime/blocking_support.hpp"
#include "runtime/runtime_support.hpp"
#include "volt/channel/oneshot.hpp"
#include "volt/fs/fs.hpp"
#include "volt/time/timeout.hpp"

namespace volt::test {
namespace {

using namespace std::chrono_literals;
namespace fs = volt::fs;
using fs::DirEntry;
using fs::Path;
using fs::ReadDir;
using Entry = Expected<std::optional<DirEntry>>;

// prefix + the decimal i (appended: GCC 12's -Wrestrict misfires on
// `"literal" + std::string`).
std::string numbered(std::string_view prefix, int i) {
  std::string s(prefix);
  s += std::to_string(i);
  return s;
}

std::error_code sys(int err) {
  return std::error_code(err, std::system_category());
}

// A fresh directory under the system's temporary directory, removed with
// its contents at scope exit.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "volt-fs-dir-XXXXXX").string();
    const char* made = ::mkdtemp(pattern.data());
    EXPECT_NE(made, nullptr) << std::strerror(errno);
    path_ = made ? Path(made) : std::filesystem::temp_directory_path();
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  const Path& path() const { return path_; }
  Path operator/(std::string_view name) const { return path_ / name; }

 private:
  Path path_;
};

void write_file(const Path& path, std::string_view contents) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(contents.data(), static_cast<std::streamsize>(contents.size()));
  ASSERT_TRUE(out.good()) << path;
}

std::string read_file(const Path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// lstat, or a zeroed struct (st_mode 0) if the path does not exist.
struct stat lstat_of(const Path& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) st = {};
  return st;
}

bool exists_nofollow(const Path& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0;
}

// The process's descriptors, as "number -> what it refers to" (without the
// one that lists them).
std::vector<std::string> open_fds() {
  std::vector<std::string> fds;
  DIR* dir = ::opendir("/proc/self/fd");
  if (!dir) return fds;
  const std::string own = std::to_string(::dirfd(dir));
  while (const dirent* d = ::readdir(dir)) {
    const std::string name = d->d_name;
    if (name == "." || name == ".." || name == own) continue;
    char target[512] = {};
    const ssize_t n = ::readlinkat(::dirfd(dir), d->d_name, target, sizeof target - 1);
    fds.push_back(name + " -> " + (n > 0 ? std::string(target, static_cast<std::size_t>(n)) : "?"));
  }
  ::closedir(dir);
  std::sort(fds.begin(), fds.end());
  return fds;
}

// Every entry of `dir`, in the listing's order.
Task<Expected<std::vector<DirEntry>>> list_all(Path dir) {
  Expected<ReadDir> rd = co_await fs::read_dir(dir);
  if (!rd) co_return rd.error();
  std::vector<DirEntry> out;
  for (;;) {
    Entry e = co_await rd->next_entry();
    if (!e) co_return e.error();
    if (!*e) break;
    out.push_back(std::move(**e));
  }
  co_return out;
}

std::set<std::string> names_of(const std::vector<DirEntry>& entries) {
  std::set<std::string> names;
  for (const DirEntry& e : entries)
    names.insert(e.file_name().string());
  return names;
}

class FsDirTest : public ::testing::TestWithParam<Flavour> {
 protected:
  Runtime rt_ = make_runtime(GetParam());
  TempDir tmp_;
};

INSTANTIATE_TEST_SUITE_P(Flavours, FsDirTest, ::testing::Values(kMultiThread2, kCurrentThread),
                         FlavourName());

// For tests that make their runtimes themselves, at a chosen moment.
class FsDirProcessTest : public ::testing::TestWithParam<Flavour> {
 protected:
  TempDir tmp_;
};

INSTANTIATE_TEST_SUITE_P(Flavours, FsDirProcessTest,
                         ::testing::Values(kMultiThread2, kCurrentThread), FlavourName());

// ---- create_dir, create_dir_all, DirBuilder ----

TEST_P(FsDirTest, CreateDirMakesOneDirectoryAndReportsErrno) {
  const Path dir = tmp_ / "made";
  Expected<void> r = rt_.block_on(fs::create_dir(dir));
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_TRUE(S_ISDIR(lstat_of(dir).st_mode));

  EXPECT_EQ(rt_.block_on(fs::create_dir(dir)).error(), sys(EEXIST));
  EXPECT_EQ(rt_.block_on(fs::create_dir(tmp_ / "no" / "parent")).error(), sys(ENOENT));
  EXPECT_FALSE(exists_nofollow(tmp_ / "no"));
  write_file(tmp_ / "file", "x");
  EXPECT_EQ(rt_.block_on(fs::create_dir(tmp_ / "file" / "sub")).error(), sys(ENOTDIR));
}

TEST_P(FsDirTest, CreateDirTaskOwnsItsPath) {
  // The task is made from a path that is gone before it is awaited.
  Task<Expected<void>> task = [&] {
    const Path dir = tmp_ / "later";
    return fs::create_dir(dir);
  }();
  Expected<void> r = rt_.block_on(std::move(task));
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_TRUE(S_ISDIR(lstat_of(tmp_ / "later").st_mode));
}

TEST_P(FsDirTest, CreateDirAllMakesEveryMissingParent) {
  const Path deep = tmp_ / "a" / "b" / "c" / "d";
  Expected<void> r = rt_.block_on(fs::create_dir_all(deep));
  ASSERT_TRUE(r) << r.error().message();
  for (const Path& p : {tmp_ / "a", tmp_ / "a" / "b", tmp_ / "a" / "b" / "c", deep})
    EXPECT_TRUE(S_ISDIR(lstat_of(p).st_mode)) << p;

  // Existing: success, whether all of it or only part of it exists.
  EXPECT_TRUE(rt_.block_on(fs::create_dir_all(deep)));
  EXPECT_TRUE(rt_.block_on(fs::create_dir_all(tmp_ / "a" / "b" / "e" / "f")));
  EXPECT_TRUE(S_ISDIR(lstat_of(tmp_ / "a" / "b" / "e" / "f").st_mode));
  // A trailing separator names the same directory.
  EXPECT_TRUE(rt_.block_on(fs::create_dir_all(tmp_ / "g" / "h/")));
  EXPECT_TRUE(S_ISDIR(lstat_of(tmp_ / "g" / "h").st_mode));
  // Through a symbolic link to a directory: it counts as the directory.
  ASSERT_EQ(::symlink((tmp_ / "a").c_str(), (tmp_ / "to-a").c_str()), 0);
  EXPECT_TRUE(rt_.block_on(fs::create_dir_all(tmp_ / "to-a")));
  EXPECT_TRUE(rt_.block_on(fs::create_dir_all(tmp_ / "to-a" / "via-link")));
  EXPECT_TRUE(S_ISDIR(lstat_of(tmp_ / "a" / "via-link").st_mode));

  write_file(tmp_ / "file", "x");
  EXPECT_EQ(rt_.block_on(fs::create_dir_all(tmp_ / "file")).error(), sys(EEXIST));
  EXPECT_EQ(rt_.block_on(fs::create_dir_all(tmp_ / "file" / "x" / "y")).error(), sys(ENOTDIR));
  EXPECT_TRUE(S_ISREG(lstat_of(tmp_ / "file").st_mode));
}

TEST_P(FsDirTest, DirBuilderAppliesItsModeAndRecursion) {
  const mode_t old_umask = ::umask(022);
  Expected<void> one = rt_.block_on(fs::DirBuilder().mode(0750).create(tmp_ / "one"));
  Expected<void> missing = rt_.block_on(fs::DirBuilder().create(tmp_ / "x" / "y"));
  Expected<void> deep =
      rt_.block_on(fs::DirBuilder().recursive(true).mode(0700).create(tmp_ / "p" / "q" / "r"));
  Expected<void> again = rt_.block_on(fs::DirBuilder().recursive(true).create(tmp_ / "p" / "q"));
  Expected<void> exists = rt_.block_on(fs::DirBuilder().create(tmp_ / "p"));
  ::umask(022);
  Expected<void> masked = rt_.block_on(fs::DirBuilder().mode(0777).create(tmp_ / "masked"));
  ::umask(old_umask);

  ASSERT_TRUE(one) << one.error().message();
  EXPECT_EQ(lstat_of(tmp_ / "one").st_mode & 07777, 0750u);
  EXPECT_EQ(missing.error(), sys(ENOENT));
  ASSERT_TRUE(deep) << deep.error().message();
  for (const Path& p : {tmp_ / "p", tmp_ / "p" / "q", tmp_ / "p" / "q" / "r"})
    EXPECT_EQ(lstat_of(p).st_mode & 07777, 0700u) << p;
  EXPECT_TRUE(again);
  EXPECT_EQ(exists.error(), sys(EEXIST));
  ASSERT_TRUE(masked);
  EXPECT_EQ(lstat_of(tmp_ / "masked").st_mode & 07777, 0755u) << "the umask applies";
}

// ---- removal ----

TEST_P(FsDirTest, RemoveFileUnlinksAndReportsErrno) {
  write_file(tmp_ / "f", "data");
  Expected<void> r = rt_.block_on(fs::remove_file(tmp_ / "f"));
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_FALSE(exists_nofollow(tmp_ / "f"));

  EXPECT_EQ(rt_.block_on(fs::remove_file(tmp_ / "f")).error(), sys(ENOENT));
  ASSERT_EQ(::mkdir((tmp_ / "d").c_str(), 0755), 0);
  EXPECT_EQ(rt_.block_on(fs::remove_file(tmp_ / "d")).error(), sys(EISDIR));
  // A link is removed, not its target.
  ASSERT_EQ(::symlink((tmp_ / "d").c_str(), (tmp_ / "link").c_str()), 0);
  EXPECT_TRUE(rt_.block_on(fs::remove_file(tmp_ / "link")));
  EXPECT_FALSE(exists_nofollow(tmp_ / "link"));
  EXPECT_TRUE(S_ISDIR(lstat_of(tmp_ / "d").st_mode));
}

TEST_P(FsDirTest, RemoveDirRemovesOnlyAnEmptyDirectory) {
  ASSERT_EQ(::mkdir((tmp_ / "empty").c_str(), 0755), 0);
  ASSERT_EQ(::mkdir((tmp_ / "full").c_str(), 0755), 0);
  write_file(tmp_ / "full" / "f", "x");
  write_file(tmp_ / "file", "x");

  Expected<void> r = rt_.block_on(fs::remove_dir(tmp_ / "empty"));
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_FALSE(exists_nofollow(tmp_ / "empty"));
  EXPECT_EQ(rt_.block_on(fs::remove_dir(tmp_ / "full")).error(), sys(ENOTEMPTY));
  EXPECT_EQ(read_file(tmp_ / "full" / "f"), "x");
  EXPECT_EQ(rt_.block_on(fs::remove_dir(tmp_ / "empty")).error(), sys(ENOENT));
  EXPECT_EQ(rt_.block_on(fs::remove_dir(tmp_ / "file")).error(), sys(ENOTDIR));
}

TEST_P(FsDirTest, RemoveDirAllRemovesATreeButNothingBehindItsLinks) {
  // Outside the tree: a directory and a file that links inside point to.
  const Path outside = tmp_ / "outside";
  ASSERT_EQ(::mkdir(outside.c_str(), 0755), 0);
  write_file(outside / "keep.txt", "survives");
  ASSERT_EQ(::mkdir((outside / "inner").c_str(), 0755), 0);
  write_file(outside / "inner" / "deep.txt", "survives too");

  const Path tree = tmp_ / "tree";
  ASSERT_EQ(::mkdir(tree.c_str(), 0755), 0);
  ASSERT_EQ(::mkdir((tree / "sub").c_str(), 0755), 0);
  ASSERT_EQ(::mkdir((tree / "sub" / "deeper").c_str(), 0700), 0);
  ASSERT_EQ(::mkdir((tree / "empty").c_str(), 0755), 0);
  write_file(tree / "top.txt", "1");
  write_file(tree / "sub" / "mid.txt", "2");
  write_file(tree / "sub" / "deeper" / "low.txt", "3");
  ASSERT_EQ(::symlink(outside.c_str(), (tree / "sub" / "dir-link").c_str()), 0);
  ASSERT_EQ(::symlink((outside / "keep.txt").c_str(), (tree / "file-link").c_str()), 0);
  ASSERT_EQ(::symlink("../outside", (tree / "relative-link").c_str()), 0);
  ASSERT_EQ(::symlink("/nonexistent/dangling", (tree / "dangling").c_str()), 0);
  ASSERT_EQ(::mkfifo((tree / "sub" / "fifo").c_str(), 0600), 0);

  Expected<void> r = rt_.block_on(fs::remove_dir_all(tree));
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_FALSE(exists_nofollow(tree));
  EXPECT_EQ(read_file(outside / "keep.txt"), "survives");
  EXPECT_EQ(read_file(outside / "inner" / "deep.txt"), "survives too");

  // The path itself a link to a directory: the link goes, the directory stays.
  ASSERT_EQ(::symlink(outside.c_str(), (tmp_ / "top-link").c_str()), 0);
  EXPECT_TRUE(rt_.block_on(fs::remove_dir_all(tmp_ / "top-link")));
  EXPECT_FALSE(exists_nofollow(tmp_ / "top-link"));
  EXPECT_EQ(read_file(outside / "inner" / "deep.txt"), "survives too");

  // With a trailing '/', which would make the kernel follow it: still the link.
  ASSERT_EQ(::symlink(outside.c_str(), (tmp_ / "slash-link").c_str()), 0);
  EXPECT_TRUE(rt_.block_on(fs::remove_dir_all((tmp_ / "slash-link").native() + "//")));
  EXPECT_FALSE(exists_nofollow(tmp_ / "slash-link"));
  EXPECT_EQ(read_file(outside / "keep.txt"), "survives");
  // Ending in "." or "..": refused before anything is removed.
  EXPECT_EQ(rt_.block_on(fs::remove_dir_all(outside / ".")).error(), sys(EINVAL));
  EXPECT_EQ(rt_.block_on(fs::remove_dir_all(outside / "inner" / "..")).error(), sys(EINVAL));
  EXPECT_EQ(read_file(outside / "inner" / "deep.txt"), "survives too");
  // A directory named with a trailing '/'.
  ASSERT_EQ(::mkdir((tmp_ / "plain").c_str(), 0755), 0);
  write_file(tmp_ / "plain" / "f", "x");
  EXPECT_TRUE(rt_.block_on(fs::remove_dir_all((tmp_ / "plain").native() + "/")));
  EXPECT_FALSE(exists_nofollow(tmp_ / "plain"));

  EXPECT_EQ(rt_.block_on(fs::remove_dir_all(tree)).error(), sys(ENOENT));
  EXPECT_EQ(rt_.block_on(fs::remove_dir_all(outside / "keep.txt")).error(), sys(ENOTDIR));
  EXPECT_EQ(read_file(outside / "keep.txt"), "survives");
}

TEST_P(FsDirTest, RemoveDirAllRemovesAWideAndDeepTree) {
  // More entries than one getdents call returns, and 64 levels of nesting.
  const Path tree = tmp_ / "tree";
  ASSERT_EQ(::mkdir(tree.c_str(), 0755), 0);
  for (int i = 0; i < 2000; ++i)
    write_file(tree / numbered("f", i), "x");
  Path deep = tree;
  for (int i = 0; i < 64; ++i) {
    deep /= "d";
    ASSERT_EQ(::mkdir(deep.c_str(), 0755), 0);
  }
  write_file(deep / "bottom", "x");

  Expected<void> r = rt_.block_on(fs::remove_dir_all(tree));
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_FALSE(exists_nofollow(tree));
}

// ---- rename and links ----

TEST_P(FsDirTest, RenameMovesAndReplaces) {
  write_file(tmp_ / "a", "contents of a");
  write_file(tmp_ / "b", "old b");
  Expected<void> r = rt_.block_on(fs::rename(tmp_ / "a", tmp_ / "b"));
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_FALSE(exists_nofollow(tmp_ / "a"));
  EXPECT_EQ(read_file(tmp_ / "b"), "contents of a");

  ASSERT_EQ(::mkdir((tmp_ / "d").c_str(), 0755), 0);
  EXPECT_TRUE(rt_.block_on(fs::rename(tmp_ / "b", tmp_ / "d" / "moved")));
  EXPECT_EQ(read_file(tmp_ / "d" / "moved"), "contents of a");

  EXPECT_EQ(rt_.block_on(fs::rename(tmp_ / "a", tmp_ / "c")).error(), sys(ENOENT));
  EXPECT_EQ(rt_.block_on(fs::rename(tmp_ / "d" / "moved", tmp_ / "nodir" / "x")).error(),
            sys(ENOENT));
  write_file(tmp_ / "file", "f");
  EXPECT_EQ(rt_.block_on(fs::rename(tmp_ / "d", tmp_ / "file")).error(), sys(ENOTDIR));
  ASSERT_EQ(::mkdir((tmp_ / "full").c_str(), 0755), 0);
  write_file(tmp_ / "full" / "x", "x");
  const std::error_code onto_full = rt_.block_on(fs::rename(tmp_ / "d", tmp_ / "full")).error();
  EXPECT_TRUE(onto_full == sys(ENOTEMPTY) || onto_full == sys(EEXIST)) << onto_full.message();
}

TEST_P(FsDirTest, HardLinkSharesTheInode) {
  write_file(tmp_ / "orig", "shared");
  Expected<void> r = rt_.block_on(fs::hard_link(tmp_ / "orig", tmp_ / "link"));
  ASSERT_TRUE(r) << r.error().message();
  const struct stat a = lstat_of(tmp_ / "orig");
  const struct stat b = lstat_of(tmp_ / "link");
  EXPECT_EQ(a.st_ino, b.st_ino);
  EXPECT_EQ(a.st_nlink, 2u);
  EXPECT_EQ(read_file(tmp_ / "link"), "shared");

  EXPECT_EQ(rt_.block_on(fs::hard_link(tmp_ / "orig", tmp_ / "link")).error(), sys(EEXIST));
  EXPECT_EQ(rt_.block_on(fs::hard_link(tmp_ / "missing", tmp_ / "l2")).error(), sys(ENOENT));
  ASSERT_EQ(::mkdir((tmp_ / "d").c_str(), 0755), 0);
  EXPECT_EQ(rt_.block_on(fs::hard_link(tmp_ / "d", tmp_ / "dlink")).error(), sys(EPERM));
}

TEST_P(FsDirTest, SymlinkStoresTheTargetAsGivenAndReadLinkReturnsIt) {
  const Path target = "does/not/../exist/yet";
  Expected<void> r = rt_.block_on(fs::symlink(target, tmp_ / "rel"));
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_TRUE(S_ISLNK(lstat_of(tmp_ / "rel").st_mode));
  Expected<Path> back = rt_.block_on(fs::read_link(tmp_ / "rel"));
  ASSERT_TRUE(back) << back.error().message();
  EXPECT_EQ(back->native(), target.native());

  // Longer than read_link's first buffer (256 bytes): grown, not cut.
  std::string long_target;
  for (int i = 0; i < 300; ++i)
    long_target += "component/";
  long_target += "end";
  ASSERT_TRUE(rt_.block_on(fs::symlink(long_target, tmp_ / "long")));
  Expected<Path> long_back = rt_.block_on(fs::read_link(tmp_ / "long"));
  ASSERT_TRUE(long_back) << long_back.error().message();
  EXPECT_EQ(long_back->native(), long_target);

  EXPECT_EQ(rt_.block_on(fs::symlink("x", tmp_ / "rel")).error(), sys(EEXIST));
  EXPECT_EQ(rt_.block_on(fs::symlink("x", tmp_ / "nodir" / "l")).error(), sys(ENOENT));
  write_file(tmp_ / "plain", "x");
  EXPECT_EQ(rt_.block_on(fs::read_link(tmp_ / "plain")).error(), sys(EINVAL));
  EXPECT_EQ(rt_.block_on(fs::read_link(tmp_ / "missing")).error(), sys(ENOENT));
}

TEST_P(FsDirTest, CanonicalizeResolvesDotDotAndLinks) {
  // The temporary directory itself may sit behind a link (/tmp on macOS-like
  // layouts, a bind mount): resolve it once, independently of the call.
  char* base_c = ::realpath(tmp_.path().c_str(), nullptr);
  ASSERT_NE(base_c, nullptr);
  const Path base = base_c;
  std::free(base_c);
  ASSERT_EQ(::mkdir((tmp_ / "a").c_str(), 0755), 0);
  ASSERT_EQ(::mkdir((tmp_ / "a" / "b").c_str(), 0755), 0);
  ASSERT_EQ(::mkdir((tmp_ / "c").c_str(), 0755), 0);
  ASSERT_EQ(::symlink("a/b", (tmp_ / "link").c_str()), 0);

  Expected<Path> r = rt_.block_on(fs::canonicalize(tmp_ / "c" / ".." / "a" / "." / "b" / ".."));
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(*r, base / "a");
  Expected<Path> through_link = rt_.block_on(fs::canonicalize(tmp_ / "link" / ".." / "b"));
  ASSERT_TRUE(through_link) << through_link.error().message();
  EXPECT_EQ(*through_link, base / "a" / "b") << "'..' applies after the link is resolved";
  Expected<Path> relative = rt_.block_on(fs::canonicalize("."));
  ASSERT_TRUE(relative);
  EXPECT_EQ(*relative, std::filesystem::current_path());

  EXPECT_EQ(rt_.block_on(fs::canonicalize(tmp_ / "missing" / "..")).error(), sys(ENOENT));
  write_file(tmp_ / "file", "x");
  EXPECT_EQ(rt_.block_on(fs::canonicalize(tmp_ / "file" / "x")).error(), sys(ENOTDIR));
}

TEST_P(FsDirTest, SetPermissionsChangesTheModeBits) {
  write_file(tmp_ / "f", "x");
  Expected<void> r = rt_.block_on(fs::set_permissions(tmp_ / "f", fs::Permissions(0640)));
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(lstat_of(tmp_ / "f").st_mode & 07777, 0640u);
  fs::Permissions p(std::filesystem::perms::owner_read | std::filesystem::perms::group_exec);
  EXPECT_TRUE(rt_.block_on(fs::set_permissions(tmp_ / "f", p)));
  EXPECT_EQ(lstat_of(tmp_ / "f").st_mode & 07777, 0410u);
  // Through a link: the target changes.
  ASSERT_EQ(::symlink("f", (tmp_ / "link").c_str()), 0);
  EXPECT_TRUE(rt_.block_on(fs::set_permissions(tmp_ / "link", fs::Permissions(0604))));
  EXPECT_EQ(lstat_of(tmp_ / "f").st_mode & 07777, 0604u);
  EXPECT_EQ(rt_.block_on(fs::set_permissions(tmp_ / "missing", fs::Permissions(0600))).error(),
            sys(ENOENT));
}

// ---- copy ----

std::string random_bytes(std::size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::string s(n, '\0');
  for (char& c : s)
    c = static_cast<char>(gen() & 0xff);
  return s;
}

TEST_P(FsDirTest, CopyCopiesEveryByteAndThePermissionBits) {
  const std::string data = random_bytes(3 << 20, 7);
  write_file(tmp_ / "src", data);
  ASSERT_EQ(::chmod((tmp_ / "src").c_str(), 0751), 0);

  Expected<std::uint64_t> n = rt_.block_on(fs::copy(tmp_ / "src", tmp_ / "dst"));
  ASSERT_TRUE(n) << n.error().message();
  EXPECT_EQ(*n, data.size());
  EXPECT_TRUE(read_file(tmp_ / "dst") == data) << "contents differ";
  EXPECT_EQ(lstat_of(tmp_ / "dst").st_mode & 07777, 0751u);
  EXPECT_NE(lstat_of(tmp_ / "dst").st_ino, lstat_of(tmp_ / "src").st_ino);

  // Over a longer file with other permissions: truncated, and the source's bits.
  const std::string small = random_bytes(1000, 8);
  write_file(tmp_ / "small", small);
  ASSERT_EQ(::chmod((tmp_ / "small").c_str(), 0600), 0);
  Expected<std::uint64_t> m = rt_.block_on(fs::copy(tmp_ / "small", tmp_ / "dst"));
  ASSERT_TRUE(m) << m.error().message();
  EXPECT_EQ(*m, 1000u);
  EXPECT_EQ(read_file(tmp_ / "dst"), small);
  EXPECT_EQ(lstat_of(tmp_ / "dst").st_mode & 07777, 0600u);

  // An empty file.
  write_file(tmp_ / "empty", "");
  Expected<std::uint64_t> zero = rt_.block_on(fs::copy(tmp_ / "empty", tmp_ / "dst"));
  ASSERT_TRUE(zero);
  EXPECT_EQ(*zero, 0u);
  EXPECT_EQ(lstat_of(tmp_ / "dst").st_size, 0);
}

TEST_P(FsDirTest, CopyErrors) {
  write_file(tmp_ / "src", "precious");
  EXPECT_EQ(rt_.block_on(fs::copy(tmp_ / "missing", tmp_ / "dst")).error(), sys(ENOENT));
  EXPECT_FALSE(exists_nofollow(tmp_ / "dst"));
  EXPECT_EQ(rt_.block_on(fs::copy(tmp_ / "src", tmp_ / "nodir" / "dst")).error(), sys(ENOENT));
  ASSERT_EQ(::mkdir((tmp_ / "d").c_str(), 0755), 0);
  EXPECT_EQ(rt_.block_on(fs::copy(tmp_ / "d", tmp_ / "dst")).error(), sys(EISDIR));
  EXPECT_EQ(rt_.block_on(fs::copy(tmp_ / "src", tmp_ / "d")).error(), sys(EISDIR));
  // Onto itself, directly or through a link: refused, the data kept.
  EXPECT_EQ(rt_.block_on(fs::copy(tmp_ / "src", tmp_ / "src")).error(), sys(EINVAL));
  ASSERT_EQ(::symlink("src", (tmp_ / "link").c_str()), 0);
  EXPECT_EQ(rt_.block_on(fs::copy(tmp_ / "src", tmp_ / "link")).error(), sys(EINVAL));
  EXPECT_EQ(read_file(tmp_ / "src"), "precious");
}

TEST_P(FsDirTest, CopyReadsAFileWhoseSizeIsUnknown) {
  // procfs reports size 0 and copy_file_range copies nothing from it: the
  // bytes come from the read/write fallback.
  const std::string expected = read_file("/proc/self/cmdline");
  ASSERT_FALSE(expected.empty());
  Expected<std::uint64_t> n = rt_.block_on(fs::copy("/proc/self/cmdline", tmp_ / "cmdline"));
  ASSERT_TRUE(n) << n.error().message();
  EXPECT_EQ(*n, expected.size());
  EXPECT_EQ(read_file(tmp_ / "cmdline"), expected);
}

// ---- read_dir ----

TEST_P(FsDirTest, ReadDirListsExactlyTheDirectorysNames) {
  const Path dir = tmp_ / "many";
  ASSERT_EQ(::mkdir(dir.c_str(), 0755), 0);
  std::set<std::string> expected;
  for (int i = 0; i < 1000; ++i) {
    std::string name = numbered("file-", i);
    write_file(dir / name, "");
    expected.insert(std::move(name));
  }
  Expected<std::vector<DirEntry>> entries = rt_.block_on(list_all(dir));
  ASSERT_TRUE(entries) << entries.error().message();
  EXPECT_EQ(entries->size(), 1000u) << "each name once, no '.' or '..'";
  EXPECT_EQ(names_of(*entries), expected);
  for (const DirEntry& e : *entries)
    EXPECT_EQ(e.path(), dir / e.file_name());
}

TEST_P(FsDirTest, ReadDirOfAnEmptyDirectoryEndsAtOnceAndStaysEnded) {
  ASSERT_EQ(::mkdir((tmp_ / "empty").c_str(), 0755), 0);
  Expected<ReadDir> rd = rt_.block_on(fs::read_dir(tmp_ / "empty"));
  ASSERT_TRUE(rd) << rd.error().message();
  for (int i = 0; i < 3; ++i) {
    Entry e = rt_.block_on(rd->next_entry());
    ASSERT_TRUE(e) << e.error().message();
    EXPECT_FALSE(e->has_value());
  }
}

TEST_P(FsDirTest, ReadDirErrors) {
  EXPECT_EQ(rt_.block_on(fs::read_dir(tmp_ / "missing")).error(), sys(ENOENT));
  write_file(tmp_ / "file", "x");
  EXPECT_EQ(rt_.block_on(fs::read_dir(tmp_ / "file")).error(), sys(ENOTDIR));
  // An empty (default or moved-from) ReadDir lists nothing.
  ReadDir none;
  EXPECT_EQ(rt_.block_on(none.next_entry()).error(), sys(EBADF));
}

TEST_P(FsDirTest, DirEntryFileTypeIsTheEntrysOwnKind) {
  const Path dir = tmp_ / "kinds";
  ASSERT_EQ(::mkdir(dir.c_str(), 0755), 0);
  write_file(dir / "file", "12345");
  ASSERT_EQ(::mkdir((dir / "sub").c_str(), 0755), 0);
  ASSERT_EQ(::symlink("sub", (dir / "link").c_str()), 0);
  ASSERT_EQ(::mkfifo((dir / "fifo").c_str(), 0600), 0);

  Expected<std::vector<DirEntry>> entries = rt_.block_on(list_all(dir));
  ASSERT_TRUE(entries) << entries.error().message();
  ASSERT_EQ(entries->size(), 4u);
  for (const DirEntry& e : *entries) {
    Expected<fs::FileType> t = rt_.block_on(e.file_type());
    ASSERT_TRUE(t) << e.path() << ": " << t.error().message();
    const std::string name = e.file_name().string();
    EXPECT_EQ(t->is_file(), name == "file") << name;
    EXPECT_EQ(t->is_dir(), name == "sub") << name;
    EXPECT_EQ(t->is_symlink(), name == "link") << name << ": of the entry, not followed";
    EXPECT_EQ(t->is_fifo(), name == "fifo") << name;
  }
}

TEST_P(FsDirTest, DirEntryWithoutAKindAsksTheFileSystem) {
  // DT_UNKNOWN: what file systems without d_type report; file_type() lstats.
  write_file(tmp_ / "file", "12345");
  ASSERT_EQ(::symlink("file", (tmp_ / "link").c_str()), 0);
  const DirEntry file(tmp_ / "file", DT_UNKNOWN);
  const DirEntry link(tmp_ / "link", DT_UNKNOWN);
  const DirEntry gone(tmp_ / "gone", DT_UNKNOWN);

  Expected<fs::FileType> ft = rt_.block_on(file.file_type());
  ASSERT_TRUE(ft) << ft.error().message();
  EXPECT_TRUE(ft->is_file());
  Expected<fs::FileType> lt = rt_.block_on(link.file_type());
  ASSERT_TRUE(lt) << lt.error().message();
  EXPECT_TRUE(lt->is_symlink());
  EXPECT_EQ(rt_.block_on(gone.file_type()).error(), sys(ENOENT));

  // metadata(): of the entry itself (a link is not followed).
  Expected<fs::Metadata> fm = rt_.block_on(file.metadata());
  ASSERT_TRUE(fm) << fm.error().message();
  EXPECT_TRUE(fm->is_file());
  EXPECT_EQ(fm->len(), 5u);
  Expected<fs::Metadata> lm = rt_.block_on(link.metadata());
  ASSERT_TRUE(lm) << lm.error().message();
  EXPECT_TRUE(lm->is_symlink());
  EXPECT_EQ(lm->len(), 4u) << "the link's own size: its target \"file\"";
}

// Reads `n` entries of `dir` (or fewer, if it ends), then drops the listing.
Task<Expected<std::size_t>> read_some(Path dir, std::size_t n) {
  Expected<ReadDir> rd = co_await fs::read_dir(dir);
  if (!rd) co_return rd.error();
  std::size_t got = 0;
  while (got < n) {
    Entry e = co_await rd->next_entry();
    if (!e) co_return e.error();
    if (!*e) break;
    ++got;
  }
  co_return got;
}

// Reads 300 entries, reports, then waits on `never` (kept open by the test)
// holding the listing, until the runtime's shutdown destroys the frame.
Task<void> hold_listing(Path dir, oneshot::Sender<std::size_t> reached,
                        oneshot::Receiver<int> never) {
  Expected<ReadDir> rd = co_await fs::read_dir(dir);
  std::size_t got = 0;
  if (rd) {
    for (; got < 300; ++got) {
      Entry e = co_await rd->next_entry();
      if (!e || !*e) break;
    }
  }
  (void)reached.send(got);
  std::optional<int> v = co_await never;
  (void)v;
}

Task<std::optional<std::size_t>> receive(oneshot::Receiver<std::size_t> rx) {
  std::optional<std::size_t> v = co_await rx;
  co_return v;
}

bool wait_for(Gate* gate) {
  return gate->wait();
}

// Lists `dir` with cancelled next_entry calls: the first while its hop is
// held in the blocking pool's queue (the pool's one thread waits on a gate,
// so the call cannot finish before its timeout); then every call under a
// zero timeout, which cancels those that need a hop whenever the hop is
// slower than the timer (each followed by one call that may wait).
// Returns the names received and how many calls
// were cancelled.
struct Harvest {
  std::vector<std::string> names;
  std::size_t cancelled = 0;
};
Task<Expected<Harvest>> read_with_cancelled_calls(Path dir) {
  Expected<ReadDir> rd = co_await fs::read_dir(dir);
  if (!rd) co_return rd.error();
  Harvest h;
  Gate gate;
  JoinHandle<bool> busy = volt::spawn_blocking(wait_for, &gate);
  Expected<Entry> held = co_await volt::timeout(1ms, rd->next_entry());
  if (held) co_return errc::invalid_argument;  // impossible: the pool was busy
  ++h.cancelled;
  gate.open();
  const bool opened = co_await busy;
  if (!opened) co_return errc::timed_out;
  for (;;) {
    Expected<Entry> r = co_await volt::timeout(0ns, rd->next_entry());
    if (!r) {
      if (r.error() != errc::timed_out) co_return r.error();
      ++h.cancelled;
      // Then one call that may wait, so that the listing makes progress.
      Entry e = co_await rd->next_entry();
      if (!e) co_return e.error();
      if (!*e) break;
      h.names.push_back((*e)->file_name().string());
      continue;
    }
    if (!*r) co_return r->error();
    if (!**r) break;
    h.names.push_back((**r)->file_name().string());
  }
  co_return h;
}

TEST_P(FsDirProcessTest, ListingsDroppedHalfwayOrCancelledLeakNoDescriptor) {
  const Path dir = tmp_ / "many";
  ASSERT_EQ(::mkdir(dir.c_str(), 0755), 0);
  std::vector<std::string> expected;
  for (int i = 0; i < 1000; ++i) {
    expected.push_back(numbered("f", i));
    write_file(dir / expected.back(), "");
  }
  std::sort(expected.begin(), expected.end());
  // Counted with no runtime alive: the runtime's own descriptors count too.
  const std::vector<std::string> before = open_fds();
  {
    auto [reached_tx, reached_rx] = oneshot::channel<std::size_t>();
    auto [never_tx, never_rx] = oneshot::channel<int>();
    {
      Runtime rt = make_builder(GetParam()).max_blocking_threads(1).build();
      // Dropped by its task after 300 of 1,000 entries (two batches read).
      Expected<std::size_t> some = rt.block_on(read_some(dir, 300));
      ASSERT_TRUE(some) << some.error().message();
      EXPECT_EQ(*some, 300u);

      // Cancelled calls lose no entry and duplicate none.
      Expected<Harvest> h = rt.block_on(read_with_cancelled_calls(dir));
      ASSERT_TRUE(h) << h.error().message();
      std::sort(h->names.begin(), h->names.end());
      EXPECT_EQ(h->names, expected);
      EXPECT_GE(h->cancelled, 1u);

      // Held by a task that is still suspended when the runtime goes.
      (void)rt.spawn(hold_listing(dir, std::move(reached_tx), std::move(never_rx)));
      std::optional<std::size_t> got = rt.block_on(receive(std::move(reached_rx)));
      ASSERT_TRUE(got.has_value());
      EXPECT_EQ(*got, 300u);
    }
    // The runtime's own descriptors (epoll, eventfd, io_uring) may be closed
    // by a thread of its own just after its destructor returns (seen under
    // TSan, within a millisecond): wait for them, not for a directory's.
    wait_until([&] { return open_fds() == before; });
    EXPECT_EQ(open_fds(), before) << "a directory (or the runtime) kept a descriptor";
  }
}

// ---- permissions, as an unprivileged user ----

// Set in the child process of the test below: the directory to try.
constexpr const char* kNobodyDirEnv = "VOLT_FS_TEST_NOBODY_DIR";

// In the child: become nobody, make a runtime, try create_dir, opening and
// reading root's 0600 file, and writing a new file in `dir` (root's, 0755).
// The exit status says what happened.
enum ChildStatus : int { kGotEacces = 0, kSucceeded = 1, kOtherError = 2, kNoSetuid = 3 };

[[noreturn]] void create_dir_as_nobody(const Path& dir, const Flavour& flavour) {
  if (::setgroups(0, nullptr) != 0 || ::setgid(65534) != 0 || ::setuid(65534) != 0)
    ::_exit(kNoSetuid);
  int status = kGotEacces;
  // Both file engines; for each, the directory and the file calls: a
  // directory in `dir`, root's 0600 file "secret" there opened and read, a
  // new file written there.
  for (bool uring : {true, false}) {
    Runtime::Builder b = make_builder(flavour);
    b.io_uring(uring);
    Runtime rt = b.build();
    const Path secret = dir / "secret";
    const Path created = dir / "created";
    std::vector<std::error_code> errors;
    Expected<void> made = rt.block_on(fs::create_dir(dir / "denied"));
    errors.push_back(made ? std::error_code() : made.error());
    Expected<fs::File> opened = rt.block_on(fs::File::open(secret));
    errors.push_back(opened ? std::error_code() : opened.error());
    Expected<std::vector<std::byte>> read = rt.block_on(fs::read(secret));
    errors.push_back(read ? std::error_code() : read.error());
    Expected<void> written = rt.block_on(fs::write(created, std::string_view("x")));
    errors.push_back(written ? std::error_code() : written.error());
    for (const std::error_code& ec : errors) {
      if (!ec)
        status = kSucceeded;
      else if (ec != sys(EACCES) && status == kGotEacces)
        status = kOtherError;
    }
  }
  ::_exit(status);
}

class FsUnprivilegedTest : public ::testing::TestWithParam<Flavour> {};

INSTANTIATE_TEST_SUITE_P(Flavours, FsUnprivilegedTest,
                         ::testing::Values(kMultiThread2, kCurrentThread), FlavourName());

TEST_P(FsUnprivilegedTest, DirectoryAndFileCallsAsNobodyAreEacces) {
  if (const char* dir = std::getenv(kNobodyDirEnv)) create_dir_as_nobody(dir, GetParam());
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to switch to an unprivileged user";
  TempDir tmp;
  ASSERT_EQ(::chmod(tmp.path().c_str(), 0755), 0);  // nobody may look, not write
  const Path locked = tmp / "locked";
  ASSERT_EQ(::mkdir(locked.c_str(), 0755), 0);
  ASSERT_EQ(::chown(locked.c_str(), 0, 0), 0);
  const Path secret = locked / "secret";
  { std::ofstream(secret) << "root's"; }
  ASSERT_EQ(::chmod(secret.c_str(), 0600), 0);

  // The child is this binary run afresh on this test alone, not a fork of
  // this process: a fork of a multi-threaded process may not start threads
  // under ThreadSanitizer, and the child needs a runtime.
  const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string exe = "/proc/self/exe";
  std::string filter = "--gtest_filter=";
  filter += info->test_suite_name();
  filter += '.';
  filter += info->name();
  std::vector<char*> argv{exe.data(), filter.data(), nullptr};
  std::string dir_var = kNobodyDirEnv;
  dir_var += '=';
  dir_var += locked.string();
  std::vector<char*> envp{dir_var.data()};
  for (char** e = environ; *e != nullptr; ++e)
    envp.push_back(*e);
  envp.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  ASSERT_EQ(::posix_spawn_file_actions_init(&actions), 0);
  // gtest's report of the child's one test would read as this binary's.
  ASSERT_EQ(::posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0),
            0);
  pid_t pid = -1;
  const int spawned = ::posix_spawn(&pid, exe.c_str(), &actions, nullptr, argv.data(), envp.data());
  ::posix_spawn_file_actions_destroy(&actions);
  ASSERT_EQ(spawned, 0) << std::strerror(spawned);
  int wstatus = 0;
  ASSERT_EQ(::waitpid(pid, &wstatus, 0), pid);
  ASSERT_TRUE(WIFEXITED(wstatus)) << "child died: status " << wstatus;
  EXPECT_EQ(WEXITSTATUS(wstatus), kGotEacces)
      << "1: a call succeeded, 2: another error, 3: setuid failed";
  EXPECT_FALSE(exists_nofollow(locked / "denied"));
  EXPECT_FALSE(exists_nofollow(locked / "created"));
}

// ---- Metadata::from_statx and FileType ----

TEST(FsMetadataTest, FromStatxConvertsEveryField) {
  struct statx stx {};
  stx.stx_mask = STATX_BASIC_STATS;
  stx.stx_mode = S_IFREG | 0640;
  stx.stx_uid = 1001;
  stx.stx_gid = 1002;
  stx.stx_size = 123456789012ull;
  stx.stx_ino = 42;
  stx.stx_dev_major = 8;
  stx.stx_dev_minor = 3;
  stx.stx_rdev_major = 1;
  stx.stx_rdev_minor = 5;
  stx.stx_nlink = 3;
  stx.stx_blksize = 4096;
  stx.stx_blocks = 24;
  stx.stx_atime = {1700000000, 123456789, 0};
  stx.stx_mtime = {1700000001, 1, 0};
  stx.stx_ctime = {1700000002, 999999999, 0};
  stx.stx_btime = {1600000000, 5, 0};

  const fs::Metadata m = fs::Metadata::from_statx(&stx);
  EXPECT_TRUE(m.is_file());
  EXPECT_EQ(m.mode(), S_IFREG | 0640u);
  EXPECT_EQ(m.permissions().mode(), 0640u);
  EXPECT_EQ(m.uid(), 1001u);
  EXPECT_EQ(m.gid(), 1002u);
  EXPECT_EQ(m.len(), 123456789012ull);
  EXPECT_EQ(m.ino(), 42u);
  EXPECT_EQ(m.dev(), makedev(8, 3));
  EXPECT_EQ(m.rdev(), makedev(1, 5));
  EXPECT_EQ(m.nlink(), 3u);
  EXPECT_EQ(m.blksize(), 4096u);
  EXPECT_EQ(m.blocks(), 24u);
  using std::chrono::nanoseconds;
  using std::chrono::seconds;
  EXPECT_EQ(m.accessed().time_since_epoch(), seconds(1700000000) + nanoseconds(123456789));
  EXPECT_EQ(m.modified().time_since_epoch(), seconds(1700000001) + nanoseconds(1));
  EXPECT_EQ(m.changed().time_since_epoch(), seconds(1700000002) + nanoseconds(999999999));
  // No STATX_BTIME in the mask: the (here non-zero) field is not a birth time.
  EXPECT_EQ(m.created().error(), std::make_error_code(std::errc::function_not_supported));

  stx.stx_mask |= STATX_BTIME;
  const fs::Metadata with_btime = fs::Metadata::from_statx(&stx);
  ASSERT_TRUE(with_btime.created());
  EXPECT_EQ(with_btime.created()->time_since_epoch(), seconds(1600000000) + nanoseconds(5));

  // Before the epoch.
  stx.stx_mtime = {-2, 500000000, 0};
  EXPECT_EQ(fs::Metadata::from_statx(&stx).modified().time_since_epoch(), nanoseconds(-1500000000));
}

TEST(FsMetadataTest, FromStatxOfARealFileMatchesStat) {
  TempDir tmp;
  write_file(tmp / "f", "hello");
  struct statx stx {};
  ASSERT_EQ(::statx(AT_FDCWD, (tmp / "f").c_str(), 0, STATX_BASIC_STATS | STATX_BTIME, &stx), 0);
  struct stat st {};
  ASSERT_EQ(::stat((tmp / "f").c_str(), &st), 0);
  const fs::Metadata m = fs::Metadata::from_statx(&stx);
  EXPECT_EQ(m.len(), 5u);
  EXPECT_EQ(m.mode(), st.st_mode);
  EXPECT_EQ(m.ino(), st.st_ino);
  EXPECT_EQ(m.dev(), st.st_dev);
  EXPECT_EQ(m.nlink(), st.st_nlink);
  EXPECT_EQ(m.modified().time_since_epoch(),
            std::chrono::seconds(st.st_mtim.tv_sec) + std::chrono::nanoseconds(st.st_mtim.tv_nsec));
  EXPECT_EQ(m.created().has_value(), (stx.stx_mask & STATX_BTIME) != 0);
}

TEST(FsMetadataTest, FileTypeNamesEveryKind) {
  using std::filesystem::file_type;
  const std::pair<std::uint32_t, file_type> kinds[] = {
      {S_IFREG, file_type::regular}, {S_IFDIR, file_type::directory}, {S_IFLNK, file_type::symlink},
      {S_IFBLK, file_type::block},   {S_IFCHR, file_type::character}, {S_IFIFO, file_type::fifo},
      {S_IFSOCK, file_type::socket},
  };
  for (const auto& [mode, type] : kinds) {
    EXPECT_EQ(fs::FileType::from_mode(mode | 0755).type(), type) << std::oct << mode;
  }
  EXPECT_EQ(fs::FileType().type(), file_type::unknown);
  EXPECT_EQ(fs::FileType::from_mode(0755).type(), file_type::unknown);
}

}  // namespace
}  // namespace volt::test
