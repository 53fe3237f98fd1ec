// volt/fs/fs.hpp: the file system, as awaitable calls (Tokio's tokio::fs).
//
//   namespace fs = volt::fs;
//   auto text = co_await fs::read_to_string("config.toml");
//   if (!text) co_return text.error();
//   (co_await fs::create_dir_all("out/reports")).value();
//   (co_await fs::write("out/reports/today.txt", std::string_view("ok\n"))).value();
//
//   auto dir = co_await fs::read_dir("out");
//   while (auto entry = co_await dir->next_entry()) {   // Expected<std::optional<DirEntry>>
//     if (!*entry) break;                               // end of the directory
//     std::puts((*entry)->file_name().c_str());
//   }
//
// Every function returns a Task<Expected<T>>: awaited inside a runtime, it
// gives the value or the errno of the failed call (std::system_category:
// ENOENT, EACCES, ENOTDIR, EEXIST, ...). Paths are std::filesystem::path,
// relative ones resolved against the process's working directory.
//
// When the work happens: every function copies what it needs from its
// arguments before it returns, so the task may be stored and awaited later.
// The read-only calls (read, read_to_string, metadata, symlink_metadata,
// try_exists) are done during the call when the kernel can do them without
// blocking (the path in the dentry cache, the data in the page cache: see
// file.hpp), and the task then only delivers the result; the rest, and every
// call that changes the file system, runs when the task is awaited, on the
// runtime's file engine (io_uring or the blocking pool, one hop per call).
//
// Cancelled (the awaiting task aborted, a timeout, a select): the call may
// have happened or not; memory the kernel or a pool thread uses is the
// call's own, never the caller's.
//
// Compared with Tokio: the same names and results, plus append() and
// positional I/O on File (file.hpp); no call loses an error (write() reports
// the write's and the close's errors).
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "volt/expected.hpp"
#include "volt/fs/file.hpp"
#include "volt/fs/metadata.hpp"
#include "volt/io/buffer.hpp"
#include "volt/task/task.hpp"

namespace volt::fs {

using Path = std::filesystem::path;

// ---- whole files ----

// The whole file. One open+read+close on the engine (linked on io_uring), or
// on the calling thread when the page cache holds it: then the copy runs on
// the worker (16 MiB: about 1.5 ms of it, as one unit of the task's budget).
// For very large files, a File read in chunks keeps the worker responsive.
Task<Expected<std::vector<std::byte>>> read(const Path& path);
// The same, as text (bytes as they are: no encoding check).
Task<Expected<std::string>> read_to_string(const Path& path);
// Creates or truncates `path` and writes `contents` (copied), in one job on
// the blocking pool (open, write, close). Success means
// every byte was written and the close succeeded (an error of either is
// reported; the file then holds an unknown prefix).
Task<Expected<void>> write(const Path& path, io::ConstBuffer contents);
// Appends `contents` to `path`, creating it if missing (the seeds' appendFile).
Task<Expected<void>> append(const Path& path, io::ConstBuffer contents);
// Copies the contents and permission bits of `from` to `to` (created or
// truncated); returns the number of bytes copied. In the kernel where it can
// (copy_file_range), else by reads and writes, on the blocking pool.
Task<Expected<std::uint64_t>> copy(const Path& from, const Path& to);

// ---- names ----

// rename(2): replaces `to` if it exists (atomically, on one file system).
Task<Expected<void>> rename(const Path& from, const Path& to);
Task<Expected<void>> remove_file(const Path& path);
// An empty directory.
Task<Expected<void>> remove_dir(const Path& path);
// A directory and everything below it (not following symbolic links).
Task<Expected<void>> remove_dir_all(const Path& path);
// EEXIST if it exists; ENOENT if the parent does not.
Task<Expected<void>> create_dir(const Path& path);
// With every missing parent; success if it exists as a directory.
Task<Expected<void>> create_dir_all(const Path& path);
Task<Expected<void>> hard_link(const Path& existing, const Path& link);
// A symbolic link at `link` whose target is `target` (stored as given).
Task<Expected<void>> symlink(const Path& target, const Path& link);
Task<Expected<Path>> read_link(const Path& path);
// The absolute path with every symbolic link, "." and ".." resolved; the
// path must exist.
Task<Expected<Path>> canonicalize(const Path& path);

// ---- metadata ----

// Follows symbolic links.
Task<Expected<Metadata>> metadata(const Path& path);
// Of the link itself.
Task<Expected<Metadata>> symlink_metadata(const Path& path);
Task<Expected<void>> set_permissions(const Path& path, Permissions perm);
// true if the path exists (following links), false if it does not (ENOENT,
// or ENOTDIR on the way); other errors (EACCES on a parent) are errors.
Task<Expected<bool>> try_exists(const Path& path);

// ---- directories ----

// One entry of a directory listing, as read_dir found it. It holds the name
// and shares the directory's path with the listing's other entries, so a
// listing allocates nothing per entry for names of up to 15 bytes.
class DirEntry {
 public:
  DirEntry(std::shared_ptr<const Path> dir, std::string name, unsigned char d_type) noexcept
      : dir_(std::move(dir)), name_(std::move(name)), d_type_(d_type) {}
  // From a whole path (its parent and its last component).
  DirEntry(const Path& path, unsigned char d_type);
  // The directory's path joined with the name (what read_dir was given,
  // so relative if that was relative).
  Path path() const;
  Path file_name() const { return Path(name_); }
  // The name as the directory holds it (no allocation).
  const std::string& file_name_str() const noexcept { return name_; }
  // From the listing when the file system reports it (no system call), else
  // by lstat. Of the entry itself (a symbolic link is reported as one).
  Task<Expected<FileType>> file_type() const;
  // symlink_metadata of the entry (Tokio's DirEntry::metadata does not
  // follow links either).
  Task<Expected<Metadata>> metadata() const;

 private:
  std::shared_ptr<const Path> dir_;
  std::string name_;
  unsigned char d_type_;  // DT_* of the listing, DT_UNKNOWN if not reported
};

// A directory being listed: entries in the file system's order, without "."
// and "..". Entries are read in batches (one blocking-pool hop per batch of
// up to 1,024), so listing a large directory costs few hops.
class ReadDir {
 public:
  ReadDir() noexcept;
  ReadDir(ReadDir&&) noexcept;
  ReadDir& operator=(ReadDir&&) noexcept;
  ~ReadDir();

  // The next entry; std::nullopt at the end. An error ends the listing.
  Task<Expected<std::optional<DirEntry>>> next_entry();

  struct State;  // src/fs/read_dir.cpp

 private:
  friend Task<Expected<ReadDir>> read_dir(const Path& path);
  explicit ReadDir(std::shared_ptr<State> state) noexcept;
  std::shared_ptr<State> state_;
};

Task<Expected<ReadDir>> read_dir(const Path& path);

// Creates directories with options (std's DirBuilder):
//   co_await volt::fs::DirBuilder().recursive(true).mode(0750).create("a/b/c");
class DirBuilder {
 public:
  // Also create every missing parent; success if the directory exists.
  DirBuilder& recursive(bool on) noexcept {
    recursive_ = on;
    return *this;
  }
  // Permission bits of the created directories, before the umask (0777).
  DirBuilder& mode(std::uint32_t mode) noexcept {
    mode_ = mode;
    return *this;
  }
  Task<Expected<void>> create(const Path& path) const;

 private:
  bool recursive_ = false;
  std::uint32_t mode_ = 0777;
};

}  // namespace volt::fs
