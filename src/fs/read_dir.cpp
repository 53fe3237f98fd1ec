// volt/fs/fs.hpp: read_dir, ReadDir and DirEntry.
//
// A listing's State is shared between the ReadDir and every blocking-pool
// job reading for it, so that a next_entry cancelled while its job runs
// cannot close the DIR under that job: the DIR is closed when the listing
// reaches its end, or when the last of them lets the State go.
//
// Entries read by a job land in the State, not in the job's result: a
// next_entry cancelled after its job ran loses nothing, the next call finds
// the batch there.
#include <dirent.h>

#include <cerrno>
#include <cstddef>
#include <memory>
#include <mutex>
#include <optional>
#include <system_error>
#include <utility>
#include <vector>

#include "volt/error.hpp"
#include "volt/fs/fs.hpp"
#include "volt/task/spawn_blocking.hpp"

namespace volt::fs {

using Entry = Expected<std::optional<DirEntry>>;

struct ReadDir::State {
  static constexpr std::size_t kBatch = 1024;

  explicit State(Path p) : path(std::move(p)), shared_path(std::make_shared<const Path>(path)) {}
  State(const State&) = delete;
  State& operator=(const State&) = delete;
  ~State() {
    if (dir != nullptr) ::closedir(dir);
  }

  // ReadDir's constructor is private; a nested class may use it.
  static ReadDir wrap(std::shared_ptr<State> state) noexcept { return ReadDir(std::move(state)); }

  // The next entry, error or end if there is one to report; false if a
  // batch must be read first.
  bool take(Entry& out) {
    const std::lock_guard lock(mutex);
    if (next < batch.size()) {
      out = Entry(std::in_place, std::move(batch[next++]));
      return true;
    }
    if (error) {
      // Reported once; the listing has ended.
      out = std::exchange(error, {});
      return true;
    }
    if (end) {
      out = Entry(std::in_place, std::nullopt);
      return true;
    }
    return false;
  }

  const Path path;
  // Held by the pool jobs only, across readdir: two jobs of one listing
  // (a cancelled next_entry's and its successor's) take turns on the DIR.
  // Workers never wait for it.
  std::mutex dir_mutex;
  DIR* dir = nullptr;  // guarded by dir_mutex; null after the end

  // Held briefly, by workers and jobs.
  std::mutex mutex;
  // The entries read and not yet taken: batch[next..] (a vector and an
  // index: one allocation per batch, none per entry). Guarded by mutex.
  std::vector<DirEntry> batch;
  std::size_t next = 0;
  // The directory's path, shared by every entry (an entry keeps its name
  // only and joins on path()).
  std::shared_ptr<const Path> shared_path;
  std::error_code error;  // guarded by mutex: ended the listing, not yet reported
  bool end = false;       // guarded by mutex: no more entries to read
};

namespace {

using State = ReadDir::State;

// On a blocking-pool thread.
Expected<std::shared_ptr<State>> open_blocking(Path path) {
  auto state = std::make_shared<State>(std::move(path));
  state->dir = ::opendir(state->path.c_str());  // O_DIRECTORY | O_CLOEXEC in glibc and musl
  if (state->dir == nullptr) return std::error_code(errno, std::system_category());
  return state;
}

bool is_dot_or_dot_dot(const char* name) noexcept {
  return name[0] == '.' && (name[1] == '\0' || (name[1] == '.' && name[2] == '\0'));
}

// On a blocking-pool thread: reads up to a batch of entries into the State.
void read_batch(const std::shared_ptr<State>& state) {
  const std::lock_guard dir_lock(state->dir_mutex);
  {
    const std::lock_guard lock(state->mutex);
    // An earlier job (of a cancelled next_entry) already read a batch, or
    // the end: nothing to do until that is consumed.
    if (state->end || state->next < state->batch.size()) return;
  }
  std::vector<DirEntry> read;
  read.reserve(State::kBatch);
  std::error_code error;
  bool end = false;
  while (read.size() < State::kBatch) {
    errno = 0;
    const dirent* d = ::readdir(state->dir);
    if (d == nullptr) {
      if (errno != 0) error = std::error_code(errno, std::system_category());
      end = true;
      break;
    }
    if (is_dot_or_dot_dot(d->d_name)) continue;
    read.emplace_back(state->shared_path, d->d_name, d->d_type);
  }
  if (end) {
    // The descriptor goes now, not when the ReadDir does.
    ::closedir(state->dir);
    state->dir = nullptr;
  }
  const std::lock_guard lock(state->mutex);
  state->batch = std::move(read);  // the previous batch is all taken
  state->next = 0;
  state->error = error;
  state->end = end;
}

Task<Expected<ReadDir>> open_dir(Path path) {
  try {
    Expected<std::shared_ptr<State>> state =
        co_await volt::spawn_blocking(open_blocking, std::move(path));
    if (!state) co_return state.error();
    co_return State::wrap(std::move(*state));
  } catch (const Error& e) {
    // The pool refused the job (the runtime is shutting down).
    co_return e.code();
  }
}

Task<Entry> ready_entry(Entry entry) {
  co_return entry;
}

Task<Entry> next_after_read(std::shared_ptr<State> state) {
  Entry out(std::in_place, std::nullopt);
  // More than one round only when another task took the batch this one read
  // (two tasks listing one ReadDir at once).
  for (;;) {
    try {
      co_await volt::spawn_blocking(read_batch, state);
    } catch (const Error& e) {
      co_return e.code();
    }
    if (state->take(out)) co_return out;
  }
}

Task<Expected<FileType>> ready_type(FileType type) {
  co_return type;
}

Task<Expected<FileType>> type_by_lstat(Path path) {
  Expected<Metadata> m = co_await symlink_metadata(path);
  if (!m) co_return m.error();
  co_return m->file_type();
}

}  // namespace

ReadDir::ReadDir() noexcept = default;
ReadDir::ReadDir(std::shared_ptr<State> state) noexcept : state_(std::move(state)) {}
ReadDir::ReadDir(ReadDir&&) noexcept = default;
ReadDir& ReadDir::operator=(ReadDir&&) noexcept = default;
ReadDir::~ReadDir() = default;

Task<Expected<ReadDir>> read_dir(const Path& path) {
  return open_dir(path);  // copied into the coroutine's parameter here
}

Task<Entry> ReadDir::next_entry() {
  // A default-constructed or moved-from ReadDir lists nothing, as an empty File.
  if (!state_) return ready_entry(std::error_code(EBADF, std::system_category()));
  Entry out(std::in_place, std::nullopt);
  // Served from the batch without a hop, 1,023 times out of 1,024.
  if (state_->take(out)) return ready_entry(std::move(out));
  return next_after_read(state_);
}

DirEntry::DirEntry(const Path& path, unsigned char d_type)
    : dir_(std::make_shared<const Path>(path.parent_path())),
      name_(path.filename().native()),
      d_type_(d_type) {}

Path DirEntry::path() const {
  return dir_ ? *dir_ / name_ : Path(name_);
}

Task<Expected<FileType>> DirEntry::file_type() const {
  if (d_type_ != DT_UNKNOWN) return ready_type(FileType::from_mode(DTTOIF(d_type_)));
  return type_by_lstat(path());
}

Task<Expected<Metadata>> DirEntry::metadata() const {
  return symlink_metadata(path());
}

}  // namespace volt::fs
