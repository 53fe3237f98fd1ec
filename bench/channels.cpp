// bench/channels.cpp: Tier 2, the channels' non-waiting API on one thread
// with no runtime; the same work as the Tokio side's channels.rs
// (values are std::uint64_t; channels that outlive one op are built before
// the timer starts).
#include <cstdint>
#include <stdexcept>

#include "harness.hpp"

namespace volt_bench {
namespace {

// try_send into a bounded channel of capacity ops; only the sends are timed,
// the channel is drained after the timer stops.
Sample channel_send(std::uint64_t ops) {
  auto [tx, rx] = volt::mpmc::channel<std::uint64_t>(ops);
  Meter meter = Meter::start();
  for (std::uint64_t value = 0; value < ops; ++value)
    if (!tx.try_send(std::uint64_t{value})) throw std::logic_error("channel_send: full");
  Sample sample = meter.stop();
  for (std::uint64_t value = 0; value < ops; ++value)
    if (!rx.try_recv()) throw std::logic_error("channel_send: a value is missing");
  return sample;
}

// try_recv from a channel pre-filled with ops values; only the receives are
// timed.
Sample channel_recv(std::uint64_t ops) {
  auto [tx, rx] = volt::mpmc::channel<std::uint64_t>(ops);
  for (std::uint64_t value = 0; value < ops; ++value)
    if (!tx.try_send(std::uint64_t{value})) throw std::logic_error("channel_recv: full");
  Meter meter = Meter::start();
  for (std::uint64_t value = 0; value < ops; ++value) {
    volt::Expected<std::uint64_t> received = rx.try_recv();
    if (!received) throw std::logic_error("channel_recv: the channel was pre-filled");
    black_box(*received);
  }
  return meter.stop();
}

// try_send then try_recv on a bounded channel of capacity 1024.
Sample channel_roundtrip(std::uint64_t ops) {
  auto [tx, rx] = volt::mpmc::channel<std::uint64_t>(1024);
  Meter meter = Meter::start();
  for (std::uint64_t value = 0; value < ops; ++value) {
    if (!tx.try_send(std::uint64_t{value})) throw std::logic_error("channel_roundtrip: full");
    volt::Expected<std::uint64_t> received = rx.try_recv();
    if (!received || *received != value) throw std::logic_error("channel_roundtrip: wrong value");
  }
  return meter.stop();
}

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

// One send on a broadcast channel of capacity 1024 with 4 receivers, then
// each receiver try_recv's it.
Sample broadcast_4rx(std::uint64_t ops) {
  auto [tx, first] = volt::broadcast::channel<std::uint64_t>(1024);
  volt::broadcast::Receiver<std::uint64_t> receivers[] = {std::move(first), tx.subscribe(),
                                                          tx.subscribe(), tx.subscribe()};
  Meter meter = Meter::start();
  for (std::uint64_t value = 0; value < ops; ++value) {
    if (!tx.send(value)) throw std::logic_error("broadcast_4rx: there are receivers");
    for (auto& rx : receivers) {
      volt::broadcast::RecvResult<std::uint64_t> received = rx.try_recv();
      if (!received || *received != value)
        throw std::logic_error("broadcast_4rx: a value was just sent");
    }
  }
  return meter.stop();
}

// Send a new value; the receiver observes that it has changed and borrows it.
Sample watch(std::uint64_t ops) {
  auto [tx, rx] = volt::watch::channel<std::uint64_t>(0);
  Meter meter = Meter::start();
  for (std::uint64_t value = 1; value <= ops; ++value) {
    if (!tx.send(value)) throw std::logic_error("watch: the receiver is alive");
    volt::Expected<bool> changed = rx.has_changed();
    if (!changed || !*changed) throw std::logic_error("watch: a value was just sent");
    const std::uint64_t seen = *rx.borrow_and_update();
    black_box(seen);
  }
  return meter.stop();
}

constexpr Bench kBenches[] = {
    plain_bench("channel_send", 100'000, channel_send),
    plain_bench("channel_recv", 100'000, channel_recv),
    plain_bench("channel_roundtrip", 100'000, channel_roundtrip),
    plain_bench("oneshot", 100'000, oneshot),
    plain_bench("broadcast_4rx", 100'000, broadcast_4rx),
    plain_bench("watch", 100'000, watch),
};

}  // namespace

std::span<const Bench> channel_benches() {
  return kBenches;
}

}  // namespace volt_bench
