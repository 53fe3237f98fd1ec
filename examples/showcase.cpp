// volt showcase: the first program to run.
//
// Spawns many thousands of tasks across the workers (a fan-out of fan-outs),
// awaits their join handles, shows an exception and a cancellation travelling
// through join handles, then timers (thousands of concurrent sleeps and how
// late they fired, a timeout, an interval), the blocking pool and the
// synchronisation primitives (a semaphore bounding concurrency, a mutex, a
// barrier, a once-cell, a cancellation token), channels, files (a file
// written, then read back by 8 tasks at once through one File), and prints what happened and
// the runtime's statistics. Then it serves HTTP (the server of
// examples/http_server) on 127.0.0.1:8080 until Ctrl-C or SIGTERM, which
// stop it gracefully (exit status 0):
//
//   ./build/release/examples/volt_showcase [tasks] [workers] [--http ADDRESS] [--no-http]
//   curl http://127.0.0.1:8080/          # from another terminal: Hello, World!
//
// --http 127.0.0.1:9000 serves elsewhere; --no-http exits after the demos.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#include "http_handler.hpp"
#include "volt/volt.hpp"

namespace {

// A little CPU work, so that tasks are worth stealing.
volt::Task<std::uint64_t> collatz_steps(std::uint64_t n) {
  std::uint64_t steps = 0;
  while (n != 1) {
    n = (n % 2) ? 3 * n + 1 : n / 2;
    ++steps;
  }
  co_return steps;
}

// Each batch spawns its own children and awaits them: tasks spawned from a
// worker go to its LIFO slot and are stolen by idle workers.
volt::Task<std::uint64_t> batch(std::uint64_t first, std::uint64_t count) {
  std::vector<volt::JoinHandle<std::uint64_t>> children;
  children.reserve(count);
  for (std::uint64_t n = first; n < first + count; ++n)
    children.push_back(volt::spawn(collatz_steps(n)));
  std::uint64_t total = 0;
  for (auto& child : children)
    total += co_await child;
  co_return total;
}

volt::Task<int> fails() {
  co_await volt::yield_now();
  throw std::runtime_error("this task failed on purpose");
}

volt::Task<void> waits_forever(volt::oneshot::Receiver<int> never) {
  (void)co_await never;
}

using std::chrono::milliseconds;

// Sleeps `d` and returns how late it woke (never early), in microseconds.
volt::Task<double> late_by(milliseconds d) {
  const auto start = std::chrono::steady_clock::now();
  co_await volt::sleep(d);
  const auto late = std::chrono::steady_clock::now() - (start + d);
  co_return std::chrono::duration<double, std::micro>(late).count();
}

volt::Task<int> slow_answer() {
  co_await volt::sleep(milliseconds(500));
  co_return 42;
}

volt::Task<void> timers() {
  // 5,000 concurrent sleeps of 1..50 ms: each timer lives in its task's frame.
  std::vector<volt::JoinHandle<double>> sleepers;
  for (int i = 0; i < 5000; ++i)
    sleepers.push_back(volt::spawn(late_by(milliseconds(1 + i % 50))));
  std::vector<double> lateness;
  for (auto& s : sleepers)
    lateness.push_back(co_await s);
  std::sort(lateness.begin(), lateness.end());
  std::printf("  5000 sleeps of 1..50 ms woke late by: median %.0f us, p99 %.0f us, max %.0f us\n",
              lateness[lateness.size() / 2], lateness[lateness.size() * 99 / 100], lateness.back());

  // A timeout cancels the slow operation where it waits.
  volt::Expected<int> answer = co_await volt::timeout(milliseconds(20), slow_answer());
  std::printf("  timeout(20 ms, a 500 ms task): %s\n", answer.error().message().c_str());

  // An interval ticks on schedule.
  volt::Interval every = volt::interval(milliseconds(10));
  const volt::Instant first = co_await every.tick();
  volt::Instant at = first;
  for (int i = 0; i < 5; ++i)
    at = co_await every.tick();
  std::printf("  interval(10 ms): 6 ticks, the last %.0f ms after the first\n",
              std::chrono::duration<double, std::milli>(at - first).count());

  // Blocking work runs on the blocking pool, not on a worker.
  auto digest = volt::spawn_blocking([] {
    std::this_thread::sleep_for(milliseconds(5));  // stands for a blocking call
    std::uint64_t h = 1469598103934665603ull;
    for (int i = 0; i < 1'000'000; ++i)
      h = (h ^ static_cast<std::uint64_t>(i)) * 1099511628211ull;
    return h;
  });
  std::uint64_t value = co_await digest;
  std::printf("  spawn_blocking returned %016llx\n", static_cast<unsigned long long>(value));
}

// A semaphore bounds how many of these run at once.
volt::Task<void> bounded(volt::Semaphore* slots, std::atomic<int>* inside, std::atomic<int>* peak) {
  volt::Expected<volt::SemaphorePermit> permit = co_await slots->acquire();
  const int now = inside->fetch_add(1) + 1;
  int seen = peak->load();
  while (now > seen && !peak->compare_exchange_weak(seen, now)) {
  }
  co_await volt::sleep(milliseconds(1));
  inside->fetch_sub(1);
}

volt::Task<void> count_words(volt::Mutex<std::map<std::string, int>>* words, int i) {
  static const char* const kWords[] = {"async", "task", "waker", "permit"};
  auto guard = co_await words->lock();
  ++(*guard)[kWords[i % 4]];
}

volt::Task<int> phases(volt::Barrier* barrier, int rounds) {
  int led = 0;
  for (int i = 0; i < rounds; ++i) {
    volt::BarrierWaitResult r = co_await barrier->wait();
    led += r.is_leader() ? 1 : 0;
  }
  co_return led;
}

volt::Task<int> expensive_config(std::atomic<int>* runs) {
  runs->fetch_add(1);
  co_await volt::sleep(milliseconds(2));
  co_return 8080;
}

volt::Task<int> config_port(volt::OnceCell<int>* config, std::atomic<int>* runs) {
  // The initialiser is named before the co_await statement: a lambda whose
  // captures have destructors is miscompiled there by g++ 12 (README,
  // "Compiler issues"; a pointer, as here, would be safe either way).
  auto init = [runs] { return expensive_config(runs); };
  co_return co_await config->get_or_init(init);
}

volt::Task<void> until_cancelled(volt::CancellationToken token, std::atomic<int>* stopped) {
  co_await token.cancelled();
  stopped->fetch_add(1);
}

volt::Task<void> synchronisation() {
  volt::Semaphore slots(4);
  std::atomic<int> inside{0}, peak{0};
  std::vector<volt::JoinHandle<void>> hs;
  for (int i = 0; i < 100; ++i)
    hs.push_back(volt::spawn(bounded(&slots, &inside, &peak)));
  for (auto& h : hs)
    co_await h;
  std::printf("  Semaphore(4): 100 tasks, at most %d ran at once\n", peak.load());

  volt::Mutex<std::map<std::string, int>> words;
  hs.clear();
  for (int i = 0; i < 1000; ++i)
    hs.push_back(volt::spawn(count_words(&words, i)));
  for (auto& h : hs)
    co_await h;
  {
    auto guard = co_await words.lock();
    std::printf("  Mutex<map>: 1000 tasks counted async=%d task=%d waker=%d permit=%d\n",
                (*guard)["async"], (*guard)["task"], (*guard)["waker"], (*guard)["permit"]);
  }

  volt::Barrier barrier(4);
  std::vector<volt::JoinHandle<int>> parties;
  for (int i = 0; i < 4; ++i)
    parties.push_back(volt::spawn(phases(&barrier, 10)));
  int leaders = 0;
  for (auto& p : parties)
    leaders += co_await p;
  std::printf("  Barrier(4): 4 tasks x 10 generations, %d leaders (one per generation)\n", leaders);

  volt::OnceCell<int> config;
  std::atomic<int> runs{0};
  std::vector<volt::JoinHandle<int>> readers;
  for (int i = 0; i < 16; ++i)
    readers.push_back(volt::spawn(config_port(&config, &runs)));
  int port = 0;
  for (auto& r : readers)
    port = co_await r;
  std::printf("  OnceCell: 16 concurrent get_or_init, initialiser ran %d time(s), value %d\n",
              runs.load(), port);

  volt::CancellationToken shutdown;
  std::atomic<int> stopped{0};
  hs.clear();
  for (int i = 0; i < 8; ++i)
    hs.push_back(volt::spawn(until_cancelled(shutdown.child_token(), &stopped)));
  co_await volt::sleep(milliseconds(1));
  shutdown.cancel();
  for (auto& h : hs)
    co_await h;
  std::printf("  CancellationToken: cancel() on the parent stopped %d tasks waiting on children\n",
              stopped.load());
}

volt::Task<void> produce(volt::mpmc::Sender<int> jobs, int first, int count) {
  for (int i = first; i < first + count; ++i) {
    volt::SendResult<int> sent = co_await jobs.send(int{i});  // waits while the channel is full
    if (!sent) co_return;
  }
}

volt::Task<long> consume(volt::mpmc::Receiver<int> jobs, volt::broadcast::Sender<long> progress) {
  long sum = 0;
  for (;;) {
    std::optional<int> job = co_await jobs.recv();
    if (!job) break;  // closed (the last producer is done) and drained
    sum += *job;
  }
  (void)progress.send(sum);
  co_return sum;
}

volt::Task<void> channels() {
  // Bounded MPMC: 4 producers, 3 consumers, room for 8 jobs.
  auto [jobs_tx, jobs_rx] = volt::mpmc::channel<int>(8);
  auto [progress_tx, progress_rx] = volt::broadcast::channel<long>(16);
  std::vector<volt::JoinHandle<void>> producers;
  std::vector<volt::JoinHandle<long>> consumers;
  for (int p = 0; p < 4; ++p)
    producers.push_back(volt::spawn(produce(jobs_tx, p * 2500, 2500)));
  for (int c = 0; c < 3; ++c)
    consumers.push_back(volt::spawn(consume(jobs_rx, progress_tx)));
  jobs_tx = {};  // only the producers' copies keep it open
  jobs_rx = {};
  long total = 0;
  for (auto& h : consumers)
    total += co_await h;
  for (auto& h : producers)
    co_await h;
  long reported = 0;
  while (auto part = progress_rx.try_recv())
    reported += *part;
  std::printf("  mpmc: 10000 jobs through a channel of 8, sum %ld (broadcast saw %ld)\n", total,
              reported);

  // watch: the latest value only; a slow reader sees the last one.
  auto [config_tx, config_rx] = volt::watch::channel<int>(0);
  for (int v = 1; v <= 5; ++v)
    (void)config_tx.send(v);
  volt::Expected<void> changed = co_await config_rx.changed();
  std::printf("  watch: after 5 sends the receiver sees %d (changed: %s)\n",
              *config_rx.borrow_and_update(), changed ? "yes" : "no");

  // select: the first of a receive and a timer; the loser is cancelled.
  auto [quiet_tx, quiet_rx] = volt::mpmc::channel<int>(1);
  auto first = co_await volt::select(quiet_rx.recv(), volt::sleep(milliseconds(5)));
  std::printf("  select: %s won; the receive it cancelled took nothing (len %zu)\n",
              first.index() == 1 ? "the 5 ms timer" : "the receive", quiet_rx.len());
}

// Files: write a file, read blocks of it from 8 tasks at once with positional
// reads on one File, list the directory, clean up.
volt::Task<std::uint64_t> sum_block(const volt::fs::File& file, std::uint64_t offset) {
  std::vector<std::byte> block(64 * 1024);
  volt::Expected<void> got = co_await file.read_exact_at(block, offset);
  if (!got) co_return 0;
  std::uint64_t sum = 0;
  for (std::byte b : block)
    sum += static_cast<std::uint64_t>(b);
  co_return sum;
}

volt::Task<void> files(volt::Runtime* rt) {
  namespace fs = volt::fs;
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("volt-showcase-" + std::to_string(::getpid()));
  if (!co_await fs::create_dir_all(dir)) co_return;
  const std::filesystem::path data = dir / "data.bin";
  std::vector<std::byte> bytes(8 * 64 * 1024);
  for (std::size_t i = 0; i < bytes.size(); ++i)
    bytes[i] = static_cast<std::byte>(i % 251);
  volt::Expected<void> written = co_await fs::write(data, bytes);
  volt::Expected<fs::File> file = co_await fs::File::open(data);
  if (written && file) {
    std::vector<volt::JoinHandle<std::uint64_t>> readers;
    for (std::uint64_t i = 0; i < 8; ++i)
      readers.push_back(volt::spawn(sum_block(*file, i * 64 * 1024)));
    std::uint64_t sum = 0;
    for (auto& r : readers)
      sum += co_await r;
    std::uint64_t expected = 0;
    for (std::byte b : bytes)
      expected += static_cast<std::uint64_t>(b);
    std::printf(
        "  wrote 512 KiB, 8 tasks read it back through one File: checksum %s (engine: %s)\n",
        sum == expected ? "matches" : "DIFFERS",
        rt->uses_io_uring() ? "io_uring" : "blocking pool");
  }
  volt::Expected<fs::Metadata> meta = co_await fs::metadata(data);
  const std::filesystem::path missing = dir / "missing";
  volt::Expected<std::string> none = co_await fs::read_to_string(missing);
  std::printf("  metadata: %llu bytes; reading a missing file: %s\n",
              meta ? static_cast<unsigned long long>(meta->len()) : 0ULL,
              none ? "found?" : none.error().message().c_str());
  (void)co_await fs::remove_dir_all(dir);
}

volt::Task<std::uint64_t> main_task(std::uint64_t tasks) {
  constexpr std::uint64_t kBatch = 1000;
  std::vector<volt::JoinHandle<std::uint64_t>> batches;
  for (std::uint64_t first = 1; first <= tasks; first += kBatch)
    batches.push_back(volt::spawn(batch(first, std::min(kBatch, tasks - first + 1))));
  std::uint64_t total = 0;
  for (auto& b : batches)
    total += co_await b;

  // An exception escaping a task reaches whoever awaits it.
  try {
    co_await volt::spawn(fails());
  } catch (const std::runtime_error& e) {
    std::printf("  caught from a task:   %s\n", e.what());
  }
  // Aborting a task destroys its frame where it waits; its handle says so.
  auto [tx, rx] = volt::oneshot::channel<int>();
  auto stuck = volt::spawn(waits_forever(std::move(rx)));
  co_await volt::yield_now();
  stuck.abort();
  try {
    co_await stuck;
  } catch (const volt::Error& e) {
    std::printf("  aborted task reports: %s\n", e.what());
  }
  co_return total;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> positional;
  std::optional<std::string> http = "127.0.0.1:8080";
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--http" && i + 1 < argc) {
      http = argv[++i];
    } else if (arg == "--no-http") {
      http.reset();
    } else if (!arg.starts_with("-")) {
      positional.push_back(arg);
    } else {
      std::fprintf(stderr, "usage: volt_showcase [tasks] [workers] [--http ADDRESS] [--no-http]\n");
      return 2;
    }
  }
  std::uint64_t tasks =
      positional.size() > 0 ? std::strtoull(positional[0].c_str(), nullptr, 10) : 200'000;
  auto builder = volt::Runtime::Builder().thread_name("showcase");
  if (positional.size() > 1)
    builder.worker_threads(std::strtoul(positional[1].c_str(), nullptr, 10));
  volt::Runtime rt = builder.build();

  std::printf("volt showcase: %llu tasks\n", static_cast<unsigned long long>(tasks));
  auto start = std::chrono::steady_clock::now();
  std::uint64_t total = rt.block_on(main_task(tasks));
  auto elapsed =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start);
  std::printf("  Collatz steps of 1..%llu: %llu (%.1f ms)\n",
              static_cast<unsigned long long>(tasks), static_cast<unsigned long long>(total),
              elapsed.count());
  std::printf("time and the blocking pool:\n");
  rt.block_on(timers());
  std::printf("synchronisation:\n");
  rt.block_on(synchronisation());
  std::printf("channels:\n");
  rt.block_on(channels());
  std::printf("files:\n");
  rt.block_on(files(&rt));

  volt::RuntimeStats stats = rt.stats();
  std::printf(
      "\nruntime: %zu workers, %llu tasks spawned, %llu polls (%llu by the main thread "
      "while it waited in block_on), %llu stolen, %llu parks, %llu still alive\n",
      stats.num_workers, static_cast<unsigned long long>(stats.total_spawned),
      static_cast<unsigned long long>(stats.total_polled),
      static_cast<unsigned long long>(stats.blocked_thread_polls),
      static_cast<unsigned long long>(stats.total_stolen),
      static_cast<unsigned long long>(stats.total_parked),
      static_cast<unsigned long long>(stats.live_tasks));
  std::printf("timers: %llu fired, %llu pending; blocking pool: %llu threads (%llu idle)\n",
              static_cast<unsigned long long>(stats.timers_fired),
              static_cast<unsigned long long>(stats.active_timers),
              static_cast<unsigned long long>(stats.blocking_threads),
              static_cast<unsigned long long>(stats.idle_blocking_threads));
  std::printf("%-8s %10s %10s %8s %8s %8s %9s %9s\n", "worker", "polled", "lifo hits", "steals",
              "stolen", "parked", "inject b.", "interval");
  for (std::size_t i = 0; i < stats.workers.size(); ++i) {
    const volt::WorkerStats& w = stats.workers[i];
    std::printf("%-8zu %10llu %10llu %8llu %8llu %8llu %9llu %9u\n", i,
                static_cast<unsigned long long>(w.tasks_polled),
                static_cast<unsigned long long>(w.lifo_hits),
                static_cast<unsigned long long>(w.steal_operations),
                static_cast<unsigned long long>(w.tasks_stolen),
                static_cast<unsigned long long>(w.times_parked),
                static_cast<unsigned long long>(w.global_batch_fetches), w.global_queue_interval);
  }
  if (!http) return 0;

  // Last, a real server: the HTTP/1.1 keep-alive server of
  // examples/http_server, until Ctrl-C (SIGINT) or SIGTERM.
  std::printf(
      "\nHTTP: the server of examples/http_server; `curl` the address below from "
      "another terminal\n");
  std::fflush(stdout);
  const int status =
      rt.block_on(http_example::serve_until_signalled(*http, std::chrono::seconds(5)));
  if (status != 0) std::fprintf(stderr, "(serve on another port with --http 127.0.0.1:PORT)\n");
  return status;
}
