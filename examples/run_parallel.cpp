// run_parallel: the process pipeline recipe. Runs the commands listed in a
// file, at most N at once, each with a timeout, and prints their output as it
// arrives.
//
//   $ cat jobs.txt
//   echo hello
//   ls /nope
//   sleep 10
//   ./build/release/examples/run_parallel -j 2 -t 1 jobs.txt
//   [1] hello
//   [1] exit 0 (0.00 s)
//   [2] ls: cannot access '/nope': No such file or directory     (on stderr)
//   [2] failed: exit 2 (0.01 s)
//   [3] timed out after 1.00 s: killed
//   3 command(s): 1 succeeded, 1 failed, 1 timed out, 0 could not start
//
// COMMANDS_FILE: one command per line, split on spaces and tabs (no shell:
// no quoting, no pipes, no globbing, no variables); lines with nothing but
// white space are skipped. A command is named by its line number, [i].
//
// Options: -j N at most N commands at once (default 4); -t SECONDS the time a
// command may run before it is killed (default 60; fractions allowed).
//
// What it prints, each line written whole (lines of different commands
// interleave, never the bytes of one line):
//  - each line of a command's stdout on stdout, of its stderr on stderr,
//    prefixed with "[i] ", as the command writes it;
//  - when a command ends, one line on stdout: "[i] exit 0 (T s)",
//    "[i] failed: exit N (T s)", "[i] failed: killed by signal S (T s)",
//    "[i] timed out after T s: killed" or "[i] could not start: PROGRAM: REASON"
//    (REASON: exec's error, e.g. "No such file or directory");
//  - at the end, the summary line shown above.
//
// The steps, each a volt API a program of this kind uses:
//  - the commands file: volt::fs::read_to_string;
//  - the bound: a volt::Semaphore of N permits; a command's task is spawned
//    once a permit is held, and the permit goes back when the task ends;
//  - each command: volt::process::Command with its stdin on /dev/null (the
//    commands do not share ours) and its stdout and stderr piped; a program
//    that cannot be started is an error from spawn(), not an exit status;
//  - the output: a task per pipe reads it line by line through a
//    volt::io::BufReader and prints each line with its prefix;
//  - the timeout: volt::timeout around Child::wait(); when it expires the
//    command is killed (Child::kill(), which also reaps it). Its pipes then
//    end, unless a process the command started keeps them open: its output
//    is read for at most 1 s more after the command ended.
//
// Exit status: 0 if every command exited 0; 1 if any failed, timed out or
// could not start, or if COMMANDS_FILE cannot be read; 2 for a usage error.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "volt/fs/fs.hpp"
#include "volt/process/process.hpp"
#include "volt/volt.hpp"

namespace {

namespace process = volt::process;
using namespace std::chrono_literals;
using Seconds = std::chrono::duration<double>;

// How long a command's output is still read after the command ended (a
// process it started in the background may hold its pipes open).
constexpr auto kDrainGrace = 1s;

struct Job {
  std::size_t line = 0;  // 1-based line number in the commands file
  std::vector<std::string> argv;
};

enum class Outcome { succeeded, failed, timed_out, not_started };

// Writes one whole line ("[i] text\n") to `to`, then flushes it, so that the
// lines of concurrent commands interleave only as whole lines.
void print_line(std::FILE* to, std::size_t line, std::string_view text) {
  // Appended piece by piece: "[" + std::to_string(...) makes GCC 12 report a
  // false -Wrestrict in char_traits (an error with VOLT_WERROR).
  std::string out = "[";
  out += std::to_string(line);
  out += "] ";
  out.append(text);
  out.push_back('\n');
  ::flockfile(to);
  std::fwrite(out.data(), 1, out.size(), to);
  std::fflush(to);
  ::funlockfile(to);
}

std::string format_seconds(Seconds s) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f s", s.count());
  return text;
}

// Copies the lines of `pipe` (a command's stdout or stderr) to `to`, each
// prefixed with "[line] ".
volt::Task<void> forward_lines(volt::io::PipeReader pipe, std::size_t line, std::FILE* to) {
  volt::io::BufReader<volt::io::PipeReader> reader(std::move(pipe));
  auto lines = std::move(reader).lines();
  for (;;) {
    volt::Expected<std::optional<std::string>> next = co_await lines.next_line();
    if (!next) {
      print_line(to, line, "(reading its output failed: " + next.error().message() + ")");
      co_return;
    }
    if (!*next) co_return;  // the end of the output
    print_line(to, line, **next);
  }
}

// Waits for a command's two forwarding tasks until `deadline`, then
// abandons whichever has not finished.
volt::Task<void> drain(volt::JoinHandle<void>& out, volt::JoinHandle<void>& err,
                       volt::Instant deadline) {
  volt::Expected<void> out_done = co_await volt::timeout_at(deadline, out);
  if (!out_done) out.abort();
  volt::Expected<void> err_done = co_await volt::timeout_at(deadline, err);
  if (!err_done) err.abort();
}

// Runs one command to its end (or its timeout). Holds `permit` (one of the
// semaphore's) until it returns.
volt::Task<Outcome> run_one(Job job, volt::Duration limit,
                            [[maybe_unused]] volt::SemaphorePermit permit) {
  const auto started = std::chrono::steady_clock::now();
  process::Command command(job.argv[0]);
  for (std::size_t i = 1; i < job.argv.size(); ++i)
    command.arg(job.argv[i]);
  command.stdin(process::Stdio::null())
      .stdout(process::Stdio::piped())
      .stderr(process::Stdio::piped());
  volt::Expected<process::Child> spawned = command.spawn();
  if (!spawned) {
    print_line(stdout, job.line,
               "could not start: " + job.argv[0] + ": " + spawned.error().message());
    co_return Outcome::not_started;
  }
  process::Child& child = *spawned;
  volt::JoinHandle<void> out =
      volt::spawn(forward_lines(std::move(*child.stdout), job.line, stdout));
  volt::JoinHandle<void> err =
      volt::spawn(forward_lines(std::move(*child.stderr), job.line, stderr));

  volt::Expected<volt::Expected<process::ExitStatus>> waited =
      co_await volt::timeout(limit, child.wait());
  if (!waited) {
    // The deadline came first: kill the command (and reap it), then report.
    volt::Expected<void> killed = co_await child.kill();
    co_await drain(out, err, volt::time::now() + kDrainGrace);
    if (!killed) {
      print_line(stdout, job.line, "timed out; killing it failed: " + killed.error().message());
    } else {
      print_line(stdout, job.line, "timed out after " + format_seconds(limit) + ": killed");
    }
    co_return Outcome::timed_out;
  }
  const Seconds took = std::chrono::steady_clock::now() - started;
  co_await drain(out, err, volt::time::now() + kDrainGrace);
  if (!*waited) {
    print_line(stdout, job.line, "failed: waiting for it failed: " + waited->error().message());
    co_return Outcome::failed;
  }
  const process::ExitStatus status = **waited;
  if (status.success()) {
    print_line(stdout, job.line, "exit 0 (" + format_seconds(took) + ")");
    co_return Outcome::succeeded;
  }
  if (status.code()) {
    print_line(
        stdout, job.line,
        "failed: exit " + std::to_string(*status.code()) + " (" + format_seconds(took) + ")");
  } else {
    print_line(stdout, job.line,
               "failed: killed by signal " + std::to_string(status.signal().value_or(0)) + " (" +
                   format_seconds(took) + ")");
  }
  co_return Outcome::failed;
}

// The commands of `text`: one per line that has anything but white space,
// split on spaces and tabs.
std::vector<Job> parse_commands(std::string_view text) {
  std::vector<Job> jobs;
  std::size_t line = 0;
  while (!text.empty()) {
    ++line;
    const std::size_t nl = text.find('\n');
    std::string_view rest = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    Job job;
    job.line = line;
    for (;;) {
      const std::size_t begin = rest.find_first_not_of(" \t\r");
      if (begin == std::string_view::npos) break;
      rest.remove_prefix(begin);
      const std::size_t end = rest.find_first_of(" \t\r");
      job.argv.emplace_back(rest.substr(0, end));
      rest.remove_prefix(end == std::string_view::npos ? rest.size() : end);
    }
    if (!job.argv.empty()) jobs.push_back(std::move(job));
  }
  return jobs;
}

volt::Task<int> run_all(std::string path, std::uint64_t parallel, volt::Duration limit) {
  volt::Expected<std::string> text = co_await volt::fs::read_to_string(path);
  if (!text) {
    std::fprintf(stderr, "%s: %s\n", path.c_str(), text.error().message().c_str());
    co_return 1;
  }
  std::vector<Job> jobs = parse_commands(*text);

  // At most `parallel` commands at a time: a permit first, then the task
  // that holds it.
  volt::Semaphore permits(parallel);
  std::vector<volt::JoinHandle<Outcome>> running;
  running.reserve(jobs.size());
  for (Job& job : jobs) {
    volt::Expected<volt::SemaphorePermit> permit = co_await permits.acquire();
    if (!permit) co_return 1;  // not reached: the semaphore is never closed
    running.push_back(volt::spawn(run_one(std::move(job), limit, std::move(*permit))));
  }

  std::size_t counts[4] = {0, 0, 0, 0};
  for (volt::JoinHandle<Outcome>& handle : running) {
    const Outcome outcome = co_await handle;
    ++counts[static_cast<int>(outcome)];
  }
  std::printf("%zu command(s): %zu succeeded, %zu failed, %zu timed out, %zu could not start\n",
              running.size(), counts[static_cast<int>(Outcome::succeeded)],
              counts[static_cast<int>(Outcome::failed)],
              counts[static_cast<int>(Outcome::timed_out)],
              counts[static_cast<int>(Outcome::not_started)]);
  std::fflush(stdout);
  co_return counts[static_cast<int>(Outcome::succeeded)] == running.size() ? 0 : 1;
}

int usage(const char* self) {
  std::fprintf(stderr, "usage: %s [-j N] [-t SECONDS] COMMANDS_FILE\n", self);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::uint64_t parallel = 4;
  double seconds = 60;
  const char* file = nullptr;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if ((arg == "-j" || arg == "-t") && i + 1 < argc) {
      const char* value = argv[++i];
      char* end = nullptr;
      if (arg == "-j") {
        const unsigned long long n = std::strtoull(value, &end, 10);
        if (*value == '\0' || *end != '\0' || n == 0 || n > 100000) return usage(argv[0]);
        parallel = n;
      } else {
        seconds = std::strtod(value, &end);
        if (*value == '\0' || *end != '\0' || !(seconds > 0) || seconds > 1e6)
          return usage(argv[0]);
      }
    } else if (file == nullptr && !arg.empty() && arg[0] != '-') {
      file = argv[i];
    } else {
      return usage(argv[0]);
    }
  }
  if (file == nullptr) return usage(argv[0]);
  const auto limit = std::chrono::duration_cast<volt::Duration>(Seconds(seconds));
  volt::Runtime rt = volt::Runtime::Builder().thread_name("run").build();
  return rt.block_on(run_all(file, parallel, limit));
}
