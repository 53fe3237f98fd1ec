// parallel_tasks: the parallel-tasks recipe. Fans out health checks to N
// services at once, keeps the first K answers, aborts the slower checks,
// then races two lookups and keeps whichever answers first.
//
//   ./build/release/examples/parallel_tasks --services 8 --first 3
//   checking 8 services, keeping the first 3 to answer
//   service-6 healthy (answered in 30 ms)
//   service-1 healthy (answered in 60 ms)
//   service-4 healthy (answered in 90 ms)
//   aborted 5 slower checks (5 reported cancelled)
//   race: cache answered first (value 42); the database lookup was cancelled
//
// A "service" here is simulated: its check sleeps for the service's response
// time (the services answer in 30 ms, 60 ms, ... in a random order; --seed S
// makes the order reproducible) and reports it. A real program would connect
// and send a request in the same place (volt::net::TcpStream::connect, a
// write and a read, each under volt::timeout).
//
// The steps, each a volt API a program of this kind uses:
//  - the fan-out: every check spawned into a volt::JoinSet, so they run at
//    once (across the runtime's workers), and join_next() hands back each
//    result as its check finishes: the first K results are the K fastest
//    services, and the whole wait is the K-th fastest response time, not the
//    sum of them;
//  - the rest: JoinSet::abort_all() aborts the checks still running (their
//    frames are destroyed where they sleep); draining the set shows each
//    reported as errc::cancelled. Destroying the set would abort them too;
//  - the race: volt::select over two lookups awaited in this task (not
//    spawned): the first to complete wins, the other is cancelled by
//    destruction before the co_await returns.
//
// Exit status: 0; 2 for a usage error (N and K are counts, 1 <= K <= N <= 100).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <random>
#include <string>
#include <variant>
#include <vector>

#include "volt/volt.hpp"

namespace {

using namespace std::chrono_literals;

constexpr std::chrono::milliseconds kResponseStep{30};  // service i answers in (i+1) steps

struct Health {
  int service = 0;
  std::chrono::milliseconds took{};
};

// One health check: the simulated round trip to `service`.
volt::Task<Health> check(int service, std::chrono::milliseconds response_time) {
  co_await volt::sleep(response_time);
  co_return Health{service, response_time};
}

volt::Task<int> lookup_in_cache() {
  co_await volt::sleep(5ms);
  co_return 42;
}

volt::Task<int> lookup_in_database() {
  co_await volt::sleep(2s);
  co_return 42;
}

volt::Task<int> run(int services, int first, unsigned seed) {
  // Response times 30 ms, 60 ms, ... dealt to the services in random order.
  std::vector<std::chrono::milliseconds> times;
  for (int i = 0; i < services; ++i)
    times.push_back(kResponseStep * (i + 1));
  std::mt19937 random(seed);
  std::shuffle(times.begin(), times.end(), random);

  std::printf("checking %d services, keeping the first %d to answer\n", services, first);
  volt::JoinSet<Health> checks;
  for (int i = 0; i < services; ++i)
    checks.spawn(check(i, times[static_cast<std::size_t>(i)]));

  for (int taken = 0; taken < first; ++taken) {
    std::optional<volt::Expected<Health>> result = co_await checks.join_next();
    if (!result) break;  // the set is empty (not with first <= services)
    if (!*result) {
      std::printf("a check failed: %s\n", result->error().message().c_str());
      continue;
    }
    const Health& h = **result;
    std::printf("service-%d healthy (answered in %lld ms)\n", h.service,
                static_cast<long long>(h.took.count()));
  }

  // The slower checks are no longer wanted: abort them, and see each one
  // come back as cancelled.
  const std::size_t slower = checks.len();
  checks.abort_all();
  int cancelled = 0;
  for (;;) {
    std::optional<volt::Expected<Health>> result = co_await checks.join_next();
    if (!result) break;
    if (!*result && result->error() == volt::errc::cancelled) ++cancelled;
  }
  std::printf("aborted %zu slower checks (%d reported cancelled)\n", slower, cancelled);

  // The race: whichever lookup answers first; the other is cancelled.
  auto winner = co_await volt::select(lookup_in_cache(), lookup_in_database());
  if (winner.index() == 0) {
    std::printf("race: cache answered first (value %d); the database lookup was cancelled\n",
                std::get<0>(winner));
  } else {
    std::printf("race: database answered first (value %d); the cache lookup was cancelled\n",
                std::get<1>(winner));
  }
  co_return 0;
}

// A count in [1, 100], or nullopt.
std::optional<int> parse_count(const char* text) {
  char* end = nullptr;
  const long v = std::strtol(text, &end, 10);
  if (end == text || *end != '\0' || v < 1 || v > 100) return std::nullopt;
  return static_cast<int>(v);
}

}  // namespace

int main(int argc, char** argv) {
  int services = 8;
  int first = 3;
  unsigned seed = std::random_device{}();
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (i + 1 >= argc) {
      std::fprintf(stderr, "usage: %s [--services N] [--first K] [--seed S]\n", argv[0]);
      return 2;
    }
    const char* value = argv[++i];
    std::optional<int> n = parse_count(value);
    if (arg == "--services" && n) {
      services = *n;
    } else if (arg == "--first" && n) {
      first = *n;
    } else if (arg == "--seed") {
      seed = static_cast<unsigned>(std::strtoul(value, nullptr, 10));
    } else {
      std::fprintf(stderr, "usage: %s [--services N] [--first K] [--seed S]\n", argv[0]);
      return 2;
    }
  }
  if (first > services) {
    std::fprintf(stderr, "%s: --first (%d) is more than --services (%d)\n", argv[0], first,
                 services);
    return 2;
  }
  volt::Runtime rt = volt::Runtime::Builder().thread_name("checks").build();
  return rt.block_on(run(services, first, seed));
}
