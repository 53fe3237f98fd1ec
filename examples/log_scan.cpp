// log_scan: the file pipeline recipe. Walks a directory tree, counts in
// every regular file the lines that contain a word (at most 8 files read at
// once), and writes a report atomically.
//
//   ./build/release/examples/log_scan /var/log/myapp ERROR report.txt
//   cat report.txt
//   app/2024-05-01.log: 12
//   app/2024-05-02.log: 0
//   worker.log: 3
//   total: 15
//
// The report has one line per regular file, "PATH: COUNT" with PATH relative
// to the scanned directory, sorted by path, then "total: N". It is written
// to "REPORT.tmp" (volt::fs::write) and renamed onto REPORT (volt::fs::rename),
// so a reader sees the old report or the new one, never half of one.
//
// The steps, each a volt API a program of this kind uses:
//  - the walk: volt::fs::read_dir on each directory, next_entry() until the
//    end; an entry's kind comes from the listing (DirEntry::file_type, no
//    system call on most file systems). Symbolic links are not followed (no
//    loops, nothing outside the tree); the report file and its .tmp are
//    skipped if they lie inside the tree;
//  - the counting: a task per file, spawned once a permit of a
//    volt::Semaphore of 8 is held (the permit moves into the task and goes
//    back when it ends), so at most 8 files are open and read at once however
//    large the tree; each reads its file line by line through a 64 KiB
//    volt::io::BufReader;
//  - the report: built in memory, written and renamed as above.
//
// Exit status: 0; 1 if DIR is not a directory (no report is written), if a
// file or directory below it could not be read (it is named on stderr and
// left out of the report, which is still written) or if the report could not
// be written; 2 for a usage error.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "volt/fs/fs.hpp"
#include "volt/volt.hpp"

namespace {

namespace fs = volt::fs;
using Path = std::filesystem::path;

constexpr std::uint64_t kConcurrentFiles = 8;
constexpr std::size_t kReadBuffer = 64 * 1024;

// The regular files below `root` (not following symbolic links); a
// directory that cannot be listed is named on stderr and sets `failed`.
volt::Task<std::vector<Path>> walk(Path root, bool& failed) {
  std::vector<Path> files;
  std::vector<Path> pending;
  pending.push_back(std::move(root));
  while (!pending.empty()) {
    const Path dir = std::move(pending.back());
    pending.pop_back();
    volt::Expected<fs::ReadDir> listing = co_await fs::read_dir(dir);
    if (!listing) {
      std::fprintf(stderr, "%s: %s\n", dir.c_str(), listing.error().message().c_str());
      failed = true;
      continue;
    }
    for (;;) {
      volt::Expected<std::optional<fs::DirEntry>> next = co_await listing->next_entry();
      if (!next) {
        std::fprintf(stderr, "%s: %s\n", dir.c_str(), next.error().message().c_str());
        failed = true;
        break;
      }
      if (!*next) break;  // the end of this directory
      const fs::DirEntry& entry = **next;
      volt::Expected<fs::FileType> type = co_await entry.file_type();
      if (!type) {
        std::fprintf(stderr, "%s: %s\n", entry.path().c_str(), type.error().message().c_str());
        failed = true;
      } else if (type->is_dir()) {
        pending.push_back(entry.path());
      } else if (type->is_file()) {
        files.push_back(entry.path());
      }
    }
  }
  co_return files;
}

// The number of lines of `path` that contain `word`. Holds `permit` (one of
// the semaphore's) until it returns.
volt::Task<volt::Expected<std::uint64_t>> count_matches(
    Path path, std::shared_ptr<const std::string> word,
    [[maybe_unused]] volt::SemaphorePermit permit) {
  volt::Expected<fs::File> file = co_await fs::File::open(path);
  if (!file) co_return file.error();
  volt::io::BufReader<fs::File> reader(std::move(*file), kReadBuffer);
  std::string line;
  std::uint64_t count = 0;
  for (;;) {
    line.clear();
    volt::Expected<std::size_t> n = co_await reader.read_line(line);
    if (!n) co_return n.error();
    if (*n == 0) break;  // end of the file
    if (line.find(*word) != std::string::npos) ++count;
  }
  co_return count;
}

struct FileCount {
  std::string path;  // relative to the scanned directory
  std::uint64_t count = 0;
};

volt::Task<int> scan(Path dir, std::string word, Path report) {
  // The directory itself must be there: otherwise there is nothing to
  // report (no report is written).
  volt::Expected<fs::Metadata> top = co_await fs::metadata(dir);
  if (!top || !top->is_dir()) {
    std::fprintf(stderr, "%s: %s\n", dir.c_str(),
                 top ? "not a directory" : top.error().message().c_str());
    co_return 1;
  }
  int status = 0;
  bool walk_failed = false;
  std::vector<Path> files = co_await walk(dir, walk_failed);
  if (walk_failed) status = 1;

  // A report (or its .tmp) inside the tree is not part of what is scanned.
  const Path tmp = Path(report.string() + ".tmp");
  const Path report_abs = std::filesystem::absolute(report).lexically_normal();
  const Path tmp_abs = std::filesystem::absolute(tmp).lexically_normal();
  std::erase_if(files, [&](const Path& f) {
    const Path abs = std::filesystem::absolute(f).lexically_normal();
    return abs == report_abs || abs == tmp_abs;
  });

  // At most kConcurrentFiles counting tasks at a time: a permit first, then
  // the task that holds it.
  volt::Semaphore permits(kConcurrentFiles);
  auto shared_word = std::make_shared<const std::string>(std::move(word));
  std::vector<volt::JoinHandle<volt::Expected<std::uint64_t>>> counting;
  counting.reserve(files.size());
  for (const Path& file : files) {
    volt::Expected<volt::SemaphorePermit> permit = co_await permits.acquire();
    if (!permit) co_return 1;  // not reached: the semaphore is never closed
    counting.push_back(volt::spawn(count_matches(file, shared_word, std::move(*permit))));
  }

  std::vector<FileCount> counts;
  std::uint64_t total = 0;
  for (std::size_t i = 0; i < files.size(); ++i) {
    volt::Expected<std::uint64_t> counted = co_await counting[i];
    if (!counted) {
      std::fprintf(stderr, "%s: %s\n", files[i].c_str(), counted.error().message().c_str());
      status = 1;
      continue;
    }
    FileCount entry;
    entry.path = files[i].lexically_relative(dir).string();
    entry.count = *counted;
    counts.push_back(std::move(entry));
    total += *counted;
  }
  std::sort(counts.begin(), counts.end(),
            [](const FileCount& a, const FileCount& b) { return a.path < b.path; });

  std::string text;
  for (const FileCount& c : counts)
    text += c.path + ": " + std::to_string(c.count) + "\n";
  text += "total: " + std::to_string(total) + "\n";

  // Atomically: the whole report under a temporary name, then renamed.
  volt::Expected<void> written = co_await fs::write(tmp, text);
  if (!written) {
    std::fprintf(stderr, "%s: %s\n", tmp.c_str(), written.error().message().c_str());
    volt::Expected<void> removed = co_await fs::remove_file(tmp);
    (void)removed;
    co_return 1;
  }
  volt::Expected<void> renamed = co_await fs::rename(tmp, report);
  if (!renamed) {
    std::fprintf(stderr, "rename %s -> %s: %s\n", tmp.c_str(), report.c_str(),
                 renamed.error().message().c_str());
    volt::Expected<void> removed = co_await fs::remove_file(tmp);
    (void)removed;
    co_return 1;
  }
  std::fprintf(stderr, "%zu file(s), %llu matching line(s): %s\n", counts.size(),
               static_cast<unsigned long long>(total), report.c_str());
  co_return status;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4 || argv[2][0] == '\0') {
    std::fprintf(stderr, "usage: %s DIR WORD REPORT   (WORD not empty)\n", argv[0]);
    return 2;
  }
  volt::Runtime rt = volt::Runtime::Builder().thread_name("scan").build();
  return rt.block_on(scan(argv[1], argv[2], argv[3]));
}
