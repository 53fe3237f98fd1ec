// bench/forkjoin.cpp: Tier 10, fork-join trees (after the cross-runtime
// harness tzcnt/runtime-benchmarks: fib, skynet, nqueens), sized for a 2-core
// machine. Each tree is built from inside a runtime task; every spawned task
// is awaited through its join handle; one op is one spawn. The size is the
// largest whose spawn count does not exceed `ops` (exact in a full run;
// --quick runs a smaller tree). The result is checked, as the Tokio side
// checks it.
#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "harness.hpp"

namespace volt_bench {
namespace {

[[noreturn]] void wrong_result(const char* bench, std::uint64_t got, std::uint64_t want) {
  std::fprintf(stderr, "%s: result %llu, expected %llu\n", bench,
               static_cast<unsigned long long>(got), static_cast<unsigned long long>(want));
  std::abort();
}

// ---- fork_fib ----

// Spawns of fib(n) when one leg is spawned and the other runs inline:
// fib(n + 1) - 1.
std::uint64_t fib_spawns(std::uint64_t n) {
  std::uint64_t a = 0, b = 1;
  for (std::uint64_t i = 0; i < n + 1; ++i) {
    std::uint64_t next = a + b;
    a = b;
    b = next;
  }
  return a - 1;
}

volt::Task<std::uint64_t> fib(std::uint64_t n) {
  if (n < 2) co_return n;
  volt::JoinHandle<std::uint64_t> hot = volt::spawn(fib(n - 1));
  std::uint64_t y = co_await fib(n - 2);
  std::uint64_t x = co_await hot;
  co_return x + y;
}

// fib(n) spawning the n-1 leg and computing the n-2 leg inline (fib(24):
// 75,024 spawns).
volt::Task<Sample> fork_fib(std::uint64_t ops) {
  std::uint64_t n = 2;
  while (n + 1 < 40 && fib_spawns(n + 1) <= ops)
    ++n;
  std::uint64_t a = 0, b = 1;
  for (std::uint64_t i = 0; i < n; ++i) {
    std::uint64_t next = a + b;
    a = b;
    b = next;
  }
  Meter meter = Meter::start();
  std::uint64_t r = co_await fib(n);
  Sample sample = meter.stop();
  if (r != a) wrong_result("fork_fib", r, a);
  co_return sample;
}

// ---- fork_skynet ----

std::uint64_t pow10(std::uint32_t k) {
  std::uint64_t v = 1;
  while (k-- > 0)
    v *= 10;
  return v;
}

volt::Task<std::uint64_t> skynet(std::uint64_t base, std::uint32_t depth, std::uint32_t max) {
  if (depth == max) co_return base;
  std::uint64_t step = pow10(max - depth - 1);
  std::array<volt::JoinHandle<std::uint64_t>, 10> children;
  for (std::uint64_t i = 0; i < 10; ++i)
    children[i] = volt::spawn(skynet(base + step * i, depth + 1, max));
  std::uint64_t sum = 0;
  for (auto& child : children)
    sum += co_await child;
  co_return sum;
}

// A 10-way tree: every inner node spawns 10 children and sums their results
// (depth 5: 100,000 leaves, 111,110 spawns; the sum is checked).
volt::Task<Sample> fork_skynet(std::uint64_t ops) {
  auto spawns = [](std::uint32_t d) {
    std::uint64_t s = 0;
    for (std::uint32_t k = 1; k <= d; ++k)
      s += pow10(k);
    return s;
  };
  std::uint32_t depth = 1;
  while (depth + 1 < 9 && spawns(depth + 1) <= ops)
    ++depth;
  std::uint64_t leaves = pow10(depth);
  Meter meter = Meter::start();
  std::uint64_t r = co_await skynet(0, 0, depth);
  Sample sample = meter.stop();
  if (r != leaves * (leaves - 1) / 2) wrong_result("fork_skynet", r, leaves * (leaves - 1) / 2);
  co_return sample;
}

// ---- fork_nqueens ----

struct QueensSize {
  int n;
  std::uint64_t spawns;
  std::uint64_t solutions;
};
constexpr std::array<QueensSize, 5> kQueens{
    {{7, 551, 40}, {8, 2'056, 92}, {9, 8'393, 352}, {10, 35'538, 724}, {11, 166'925, 2'680}}};

using Board = std::array<std::int8_t, 16>;

volt::Task<std::uint64_t> queens(int n, int row, Board cols) {
  if (row == n) co_return 1;
  // Tokio: a Vec with capacity n per node.
  std::vector<volt::JoinHandle<std::uint64_t>> children;
  children.reserve(static_cast<std::size_t>(n));
  for (int col = 0; col < n; ++col) {
    bool safe = true;
    for (int r = 0; r < row && safe; ++r) {
      int d = row - r;
      safe = cols[r] != col && cols[r] != col - d && cols[r] != col + d;
    }
    if (!safe) continue;
    Board next = cols;
    next[static_cast<std::size_t>(row)] = static_cast<std::int8_t>(col);
    children.push_back(volt::spawn(queens(n, row + 1, next)));
  }
  std::uint64_t solutions = 0;
  for (auto& child : children)
    solutions += co_await child;
  co_return solutions;
}

// N-queens by spawning one task per safe placement of each row (n = 10:
// 35,538 spawns, 724 solutions, checked).
volt::Task<Sample> fork_nqueens(std::uint64_t ops) {
  QueensSize size = kQueens[0];
  for (const QueensSize& q : kQueens)
    if (q.spawns <= ops) size = q;
  Board empty{};
  Meter meter = Meter::start();
  std::uint64_t r = co_await queens(size.n, 0, empty);
  Sample sample = meter.stop();
  if (r != size.solutions) wrong_result("fork_nqueens", r, size.solutions);
  co_return sample;
}

constexpr std::array kBenches{
    task_bench("fork_fib", 75'024, fork_fib),
    task_bench("fork_skynet", 111'110, fork_skynet),
    task_bench("fork_nqueens", 35'538, fork_nqueens),
};

}  // namespace

std::span<const Bench> forkjoin_benches() {
  return kBenches;
}

}  // namespace volt_bench
