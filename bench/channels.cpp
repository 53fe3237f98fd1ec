// bench/channels.cpp: Tier 2, the channels' non-waiting API on one thread
// with no runtime; the same work as shared/bench/tokio/src/channels.rs
// (values are std::uint64_t; channels that outlive one op are built before
// the timer starts).
#include <cstdint>
#include <stdexcept>

#include "harness.hpp"

namespace volt_bench {
namespace {

// Create a oneshot pair, send a value, receive it with try_recv.
Sample oneshot(std::uint64_t ops) {
  Meter meter = Meter::start();
  for (std::uint64_t value = 0; value < ops; ++value) {
    auto [tx, rx] = volt::oneshot::channel<std::uint64_t>();
    if (tx.send(value)) throw std::logic_error("oneshot: the receiver is alive");
    std::optional<std::uint64_t> received = rx.try_recv();
    if (!received) throw std::logic_error("oneshot: a value was just sent");
    black_box(*received);
  }
  return meter.stop();
}

constexpr Bench kBenches[] = {
    plain_bench("oneshot", 100'000, oneshot),
};

}  // namespace

std::span<const Bench> channel_benches() {
  return kBenches;
}

}  // namespace volt_bench
