// bench/files.cpp: Tier 7, files; the same work as the Tokio side's files.rs,
// written as a volt user writes it (volt::fs).
//
// Every workload reads fixtures made once per process, on first use and so
// before its first timed window, in a directory of their own under the
// system's temporary directory ("volt-bench-files-<pid>", removed when the
// process ends): 64 files of 4 KiB, one of 16 MiB, one of 64 MiB, a text file
// of 200,000 lines of 80 bytes, a directory of 1,000 one-byte entries and an
// output directory. The page cache holds them after the warm-ups, so what is
// measured is the runtime's cost around the system calls, not the disk.
//
// Paths are built before the timer starts, as on the Tokio side. A failed
// call throws std::runtime_error, a wrong result std::logic_error (the
// harness prints it and exits non-zero, as the Tokio side panics).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include <unistd.h>

#include "harness.hpp"
#include "volt/fs/fs.hpp"
#include "volt/io/buf_reader.hpp"

namespace volt_bench {
namespace {

namespace fs = volt::fs;
using Path = std::filesystem::path;

constexpr std::size_t kSmallFiles = 64;
constexpr std::size_t kSmallLen = 4096;
constexpr std::size_t kLargeLen = std::size_t{16} << 20;
constexpr std::uint64_t kRandomFileLen = std::uint64_t{64} << 20;
constexpr std::size_t kBlock = 4096;
constexpr std::size_t kLines = 200'000;
constexpr std::size_t kLineLen = 80;  // plus '\n'
constexpr std::size_t kDirEntries = 1000;
constexpr std::size_t kLinesBuffer = 64 << 10;

// Byte `i` of every binary fixture: a fixed pattern both sides can check.
constexpr unsigned char pattern(std::uint64_t i) {
  return static_cast<unsigned char>(i % 251);
}

std::vector<char> pattern_bytes(std::size_t len) {
  std::vector<char> bytes(len);
  for (std::size_t i = 0; i < len; ++i)
    bytes[i] = static_cast<char>(pattern(i));
  return bytes;
}

void write_file(const Path& path, const char* data, std::size_t len) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(data, static_cast<std::streamsize>(len));
  out.close();
  if (!out) throw std::runtime_error("cannot write the fixture " + path.string());
}
void write_file(const Path& path, const std::vector<char>& bytes) {
  write_file(path, bytes.data(), bytes.size());
}

std::string entry_name(std::uint64_t i) {
  char name[32];
  std::snprintf(name, sizeof name, "entry-%04llu", static_cast<unsigned long long>(i));
  return name;
}

// The fixtures: made by the first call of fixtures() (synchronously, with
// std::filesystem, outside every timed window), removed by the destructor
// when the process exits.
class Fixtures {
 public:
  Fixtures()
      : root_(std::filesystem::temp_directory_path() /
              ("volt-bench-files-" + std::to_string(::getpid()))) {
    std::filesystem::create_directories(root_);
    const std::vector<char> small = pattern_bytes(kSmallLen);
    for (std::size_t i = 0; i < kSmallFiles; ++i)
      write_file(root_ / ("small-" + std::to_string(i)), small);
    write_file(root_ / "large", pattern_bytes(kLargeLen));
    write_file(root_ / "random", pattern_bytes(kRandomFileLen));
    std::string text;
    text.reserve(kLines * (kLineLen + 1));
    for (std::size_t i = 0; i < kLines; ++i) {
      text.append(kLineLen, static_cast<char>('a' + i % 26));
      text.push_back('\n');
    }
    write_file(root_ / "lines.txt", text.data(), text.size());
    const Path dir = root_ / "dir";
    std::filesystem::create_directories(dir);
    for (std::size_t i = 0; i < kDirEntries; ++i)
      write_file(dir / entry_name(i), "x", 1);
    std::filesystem::create_directories(root_ / "out");
  }
  Fixtures(const Fixtures&) = delete;
  Fixtures& operator=(const Fixtures&) = delete;
  ~Fixtures() {
    std::error_code ignored;
    std::filesystem::remove_all(root_, ignored);
  }

  const Path& root() const noexcept { return root_; }

 private:
  Path root_;
};

const Fixtures& fixtures() {
  static const Fixtures made;
  return made;
}

// fs::read of a 4 KiB file (cycling over 64 of them), one after another.
volt::Task<Sample> fs_read_small(std::uint64_t ops) {
  const Path& root = fixtures().root();
  std::vector<Path> paths;
  paths.reserve(ops);
  for (std::uint64_t i = 0; i < ops; ++i)
    paths.push_back(root / ("small-" + std::to_string(i % kSmallFiles)));

  Meter meter = Meter::start();
  for (const Path& path : paths) {
    volt::Expected<std::vector<std::byte>> read = co_await fs::read(path);
    const std::vector<std::byte> data = expect(std::move(read), "fs_read_small: read");
    if (data.size() != kSmallLen) throw std::logic_error("fs_read_small: wrong length");
  }
  co_return meter.stop();
}

// fs::read of the whole 16 MiB file; one op is one file.
volt::Task<Sample> fs_read_16m(std::uint64_t ops) {
  const Path path = fixtures().root() / "large";

  Meter meter = Meter::start();
  for (std::uint64_t i = 0; i < ops; ++i) {
    volt::Expected<std::vector<std::byte>> read = co_await fs::read(path);
    const std::vector<std::byte> data = expect(std::move(read), "fs_read_16m: read");
    if (data.size() != kLargeLen) throw std::logic_error("fs_read_16m: wrong length");
  }
  co_return meter.stop();
}

// Line by line through a 64 KiB BufReader over a File (200,000 lines of 80
// bytes); one op is one line. The open is inside the window, as on the
// Tokio side.
volt::Task<Sample> fs_lines(std::uint64_t ops) {
  const Path path = fixtures().root() / "lines.txt";

  Meter meter = Meter::start();
  volt::Expected<fs::File> opened = co_await fs::File::open(path);
  volt::io::BufReader<fs::File> reader(expect(std::move(opened), "fs_lines: open"), kLinesBuffer);
  volt::io::Lines<volt::io::BufReader<fs::File>> lines = std::move(reader).lines();
  std::uint64_t count = 0;
  while (count < ops) {
    volt::Expected<std::optional<std::string>> next = co_await lines.next_line();
    const std::optional<std::string> line = expect(std::move(next), "fs_lines: read_line");
    if (!line) throw std::logic_error("fs_lines: the file has fewer lines than ops");
    if (line->size() != kLineLen) throw std::logic_error("fs_lines: wrong line length");
    ++count;
  }
  co_return meter.stop();
}

// One of fs_read_at_random's tasks: n positional reads of 4 KiB at
// pseudo-random 4 KiB-aligned offsets (the Tokio side's generator), each
// checked against the pattern. The shared_ptr keeps the one open file alive
// as long as any task uses it.
volt::Task<void> random_reads(std::shared_ptr<const fs::File> file, std::uint64_t task,
                              std::uint64_t n) {
  constexpr std::uint64_t kBlocks = kRandomFileLen / kBlock;
  std::byte block[kBlock];
  std::uint64_t x = 0x9E37'79B9'7F4A'7C15ull ^ (task + 1);
  for (std::uint64_t i = 0; i < n; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    const std::uint64_t offset = (x >> 33) % kBlocks * kBlock;
    volt::Expected<void> read = co_await file->read_exact_at(block, offset);
    expect(std::move(read), "fs_read_at_random: read_exact_at");
    if (block[0] != static_cast<std::byte>(pattern(offset)))
      throw std::logic_error("fs_read_at_random: wrong block");
  }
}

// 16 tasks, each ops/16 positional reads of 4 KiB of the 64 MiB file, all on
// one File opened before the window.
volt::Task<Sample> fs_read_at_random(std::uint64_t ops) {
  constexpr std::uint64_t kTasks = 16;
  const Path path = fixtures().root() / "random";
  volt::Expected<fs::File> opened = co_await fs::File::open(path);
  auto file =
      std::make_shared<const fs::File>(expect(std::move(opened), "fs_read_at_random: open"));

  Meter meter = Meter::start();
  std::vector<volt::JoinHandle<void>> tasks;
  tasks.reserve(kTasks);
  for (std::uint64_t t = 0; t < kTasks; ++t)
    tasks.push_back(volt::spawn(random_reads(file, t, share(ops, kTasks, t))));
  for (auto& task : tasks)
    co_await task;
  co_return meter.stop();
}

// fs::write of 4 KiB into a new file (create, write, close), a new file per
// op, in a directory emptied before the window.
volt::Task<Sample> fs_write_small(std::uint64_t ops) {
  const Path out = fixtures().root() / "out";
  std::filesystem::remove_all(out);
  std::filesystem::create_directories(out);
  const std::vector<char> data = pattern_bytes(kSmallLen);
  std::vector<Path> paths;
  paths.reserve(ops);
  for (std::uint64_t i = 0; i < ops; ++i)
    paths.push_back(out / ("w-" + std::to_string(i)));

  Meter meter = Meter::start();
  for (const Path& path : paths) {
    volt::Expected<void> written = co_await fs::write(path, data);
    expect(std::move(written), "fs_write_small: write");
  }
  co_return meter.stop();
}

// fs::metadata of existing files (cycling over the 1,000 directory entries).
volt::Task<Sample> fs_metadata(std::uint64_t ops) {
  const Path dir = fixtures().root() / "dir";
  std::vector<Path> paths;
  paths.reserve(ops);
  for (std::uint64_t i = 0; i < ops; ++i)
    paths.push_back(dir / entry_name(i % kDirEntries));

  Meter meter = Meter::start();
  for (const Path& path : paths) {
    volt::Expected<fs::Metadata> stat = co_await fs::metadata(path);
    const fs::Metadata m = expect(std::move(stat), "fs_metadata: metadata");
    if (m.len() != 1) throw std::logic_error("fs_metadata: wrong length");
  }
  co_return meter.stop();
}

// Lists the 1,000-entry directory, collecting each name; one op is one entry
// (ops / 1,000 listings).
volt::Task<Sample> fs_read_dir(std::uint64_t ops) {
  const Path dir = fixtures().root() / "dir";
  const std::uint64_t listings = std::max<std::uint64_t>(ops / kDirEntries, 1);

  Meter meter = Meter::start();
  for (std::uint64_t l = 0; l < listings; ++l) {
    volt::Expected<fs::ReadDir> opened = co_await fs::read_dir(dir);
    fs::ReadDir entries = expect(std::move(opened), "fs_read_dir: read_dir");
    std::vector<Path> names;
    names.reserve(kDirEntries);
    for (;;) {
      volt::Expected<std::optional<fs::DirEntry>> next = co_await entries.next_entry();
      std::optional<fs::DirEntry> entry = expect(std::move(next), "fs_read_dir: next_entry");
      if (!entry) break;
      names.push_back(entry->file_name());
    }
    if (names.size() != kDirEntries) throw std::logic_error("fs_read_dir: wrong entry count");
  }
  co_return meter.stop();
}

constexpr Bench kBenches[] = {
    task_bench("fs_read_small", 10'000, fs_read_small),
    task_bench("fs_read_16m", 8, fs_read_16m),
    task_bench("fs_lines", 200'000, fs_lines),
    task_bench("fs_read_at_random", 10'000, fs_read_at_random),
    task_bench("fs_write_small", 1'000, fs_write_small),
    task_bench("fs_metadata", 10'000, fs_metadata),
    task_bench("fs_read_dir", 10'000, fs_read_dir),
};

}  // namespace

std::span<const Bench> file_benches() {
  return kBenches;
}

}  // namespace volt_bench
