// bench/processes.cpp: Tier 8, child processes; the same work as the Tokio
// side's processes.rs, written as a volt user writes it (volt::process).
//
// Every child is a real program (/bin/true, /bin/echo, /bin/cat): what is
// measured is the runtime's cost around spawning, the exit notification and
// the pipes, plus the kernel's fork/exec path, which both sides pay alike.
// Each workload checks what it got (exit status, output, byte count); a
// failed call throws std::runtime_error, a wrong result std::logic_error (the
// harness prints it and exits non-zero, as the Tokio side panics).
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "harness.hpp"
#include "volt/process/process.hpp"

namespace volt_bench {
namespace {

using volt::process::Child;
using volt::process::Command;
using volt::process::ExitStatus;
using volt::process::Output;
using volt::process::Stdio;

// Spawn /bin/true and await its exit status, one after another.
volt::Task<Sample> process_spawn_wait(std::uint64_t ops) {
  Meter meter = Meter::start();
  for (std::uint64_t i = 0; i < ops; ++i) {
    Command command("/bin/true");
    volt::Expected<ExitStatus> status = co_await command.status();
    if (!expect(std::move(status), "process_spawn_wait: status").success())
      throw std::logic_error("process_spawn_wait: /bin/true failed");
  }
  co_return meter.stop();
}

// One of process_spawn_many's tasks: one /bin/true, awaited.
volt::Task<void> run_true() {
  Command command("/bin/true");
  volt::Expected<ExitStatus> status = co_await command.status();
  if (!expect(std::move(status), "process_spawn_many: status").success())
    throw std::logic_error("process_spawn_many: /bin/true failed");
}

// Spawn ops /bin/true children at once (a task each), then await them all.
volt::Task<Sample> process_spawn_many(std::uint64_t ops) {
  Meter meter = Meter::start();
  std::vector<volt::JoinHandle<void>> tasks;
  tasks.reserve(ops);
  for (std::uint64_t i = 0; i < ops; ++i)
    tasks.push_back(volt::spawn(run_true()));
  for (auto& task : tasks)
    co_await task;
  co_return meter.stop();
}

// /bin/echo hello with its output captured, one after another.
volt::Task<Sample> process_output(std::uint64_t ops) {
  constexpr std::string_view kHello = "hello\n";
  Meter meter = Meter::start();
  for (std::uint64_t i = 0; i < ops; ++i) {
    Command command("/bin/echo");
    command.arg("hello");
    volt::Expected<Output> captured = co_await command.output();
    const Output output = expect(std::move(captured), "process_output: output");
    if (!output.status.success()) throw std::logic_error("process_output: /bin/echo failed");
    if (output.stdout != kHello) throw std::logic_error("process_output: wrong output");
  }
  co_return meter.stop();
}

constexpr std::size_t kChunk = 64 << 10;

// process_pipe_throughput's writer: `ops` chunks into cat's stdin, then the
// pipe is closed (the ChildStdin is destroyed when the task ends), so cat
// sees the end of its input. The chunk is the caller's, which outlives the
// task (it awaits it).
volt::Task<void> write_chunks(volt::process::ChildStdin in, const std::vector<char>* chunk,
                              std::uint64_t ops) {
  for (std::uint64_t i = 0; i < ops; ++i) {
    volt::Expected<void> written = co_await in.write_all(*chunk);
    expect(std::move(written), "process_pipe_throughput: write");
  }
}

// process_pipe_throughput's reader: cat's stdout to the end, counted.
volt::Task<std::uint64_t> read_all(volt::process::ChildStdout out) {
  std::vector<char> buf(kChunk);
  std::uint64_t total = 0;
  for (;;) {
    volt::Expected<std::size_t> n = co_await out.read(buf);
    const std::size_t got = expect(std::move(n), "process_pipe_throughput: read");
    if (got == 0) break;
    total += got;
  }
  co_return total;
}

// ops chunks of 64 KiB through /bin/cat: one task writes them to its stdin
// (then closes it), another reads its stdout to the end; one op is one chunk.
volt::Task<Sample> process_pipe_throughput(std::uint64_t ops) {
  std::vector<char> chunk(kChunk);
  for (std::size_t i = 0; i < kChunk; ++i)
    chunk[i] = static_cast<char>(i % 251);

  Meter meter = Meter::start();
  Command command("/bin/cat");
  command.stdin(Stdio::piped()).stdout(Stdio::piped());
  Child child = expect(command.spawn(), "process_pipe_throughput: spawn cat");
  volt::JoinHandle<void> writer = volt::spawn(write_chunks(std::move(*child.stdin), &chunk, ops));
  volt::JoinHandle<std::uint64_t> reader = volt::spawn(read_all(std::move(*child.stdout)));
  co_await writer;
  const std::uint64_t total = co_await reader;
  if (total != ops * kChunk) throw std::logic_error("process_pipe_throughput: wrong total");
  volt::Expected<ExitStatus> status = co_await child.wait();
  if (!expect(std::move(status), "process_pipe_throughput: wait").success())
    throw std::logic_error("process_pipe_throughput: cat failed");
  co_return meter.stop();
}

constexpr Bench kBenches[] = {
    task_bench("process_spawn_wait", 200, process_spawn_wait),
    task_bench("process_spawn_many", 200, process_spawn_many),
    task_bench("process_output", 200, process_output),
    task_bench("process_pipe_throughput", 1'024, process_pipe_throughput),
};

}  // namespace

std::span<const Bench> process_benches() {
  return kBenches;
}

}  // namespace volt_bench
