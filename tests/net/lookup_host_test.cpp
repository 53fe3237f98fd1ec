// Tests of volt::net::lookup_host (include/volt/net/lookup_host.hpp):
// "localhost" resolves to loopback addresses with the requested port and no
// duplicates; an address literal comes back at once without the blocking
// pool (shown with the pool's only thread held busy); malformed input is
// errc::invalid_argument; a name that does not exist is an error value in
// the "getaddrinfo" category (no throw, no hang); a lookup abandoned by a
// timeout while queued is dropped safely; many tasks resolve at once.
#include "volt/net/lookup_host.hpp"

#include <netdb.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/blocking_support.hpp"
#include "runtime/runtime_support.hpp"
#include "volt/time/sleep.hpp"
#include "volt/time/timeout.hpp"

namespace volt::test {
namespace {

using namespace std::chrono_literals;
using namespace std::string_view_literals;
using net::IpAddr;
using net::lookup_host;
using net::SocketAddr;
using Addrs = std::vector<SocketAddr>;

class LookupHostTest : public ::testing::TestWithParam<Flavour> {};

INSTANTIATE_TEST_SUITE_P(Flavours, LookupHostTest, ::testing::Values(kMultiThread2, kCurrentThread),
                         FlavourName());

Task<Expected<Addrs>> lookup(std::string host_port) {
  Expected<Addrs> r = co_await lookup_host(std::move(host_port));
  co_return r;
}

Task<Expected<Addrs>> lookup2(std::string host, std::uint16_t port) {
  Expected<Addrs> r = co_await lookup_host(std::move(host), port);
  co_return r;
}

bool has_duplicates(const Addrs& addrs) {
  for (std::size_t i = 0; i < addrs.size(); ++i)
    for (std::size_t j = i + 1; j < addrs.size(); ++j)
      if (addrs[i] == addrs[j]) return true;
  return false;
}

TEST_P(LookupHostTest, LocalhostResolvesToLoopbackWithThePort) {
  Runtime rt = make_runtime(GetParam());
  for (Expected<Addrs> r :
       {rt.block_on(lookup("localhost:80")), rt.block_on(lookup2("localhost", 80))}) {
    ASSERT_TRUE(r) << r.error().message();
    ASSERT_FALSE(r->empty());
    for (const SocketAddr& a : *r) {
      EXPECT_TRUE(a.ip().is_loopback()) << a;
      EXPECT_EQ(a.port(), 80) << a;
    }
    EXPECT_FALSE(has_duplicates(*r)) << "SOCK_STREAM only, deduplicated";
  }
  Expected<Addrs> high = rt.block_on(lookup("localhost:65535"));
  ASSERT_TRUE(high);
  EXPECT_EQ(high->front().port(), 65535);
  Expected<Addrs> zero = rt.block_on(lookup("localhost:0"));
  ASSERT_TRUE(zero);
  EXPECT_EQ(zero->front().port(), 0);
}

TEST_P(LookupHostTest, KeepsTheResolversOrder) {
  // What getaddrinfo itself answers, with the same hints, is the order.
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* list = nullptr;
  ASSERT_EQ(::getaddrinfo("localhost", nullptr, &hints, &list), 0);
  Addrs expected;
  for (addrinfo* ai = list; ai; ai = ai->ai_next) {
    SocketAddr a = SocketAddr::from_sockaddr(ai->ai_addr, ai->ai_addrlen).value();
    a.set_port(4242);
    if (std::find(expected.begin(), expected.end(), a) == expected.end()) expected.push_back(a);
  }
  ::freeaddrinfo(list);
  Runtime rt = make_runtime(GetParam());
  EXPECT_EQ(rt.block_on(lookup("localhost:4242")).value(), expected);
}

TEST_P(LookupHostTest, NumericAddressesAreReturnedAsIs) {
  Runtime rt = make_runtime(GetParam());
  struct Case {
    std::string text;
    std::string want;
  };
  for (const Case& c :
       {Case{"127.0.0.1:9", "127.0.0.1:9"}, Case{"[::1]:443", "[::1]:443"},
        Case{"10.20.30.40:0", "10.20.30.40:0"}, Case{"[2001:db8::1%3]:80", "[2001:db8::1%3]:80"}}) {
    Expected<Addrs> r = rt.block_on(lookup(c.text));
    ASSERT_TRUE(r) << c.text;
    ASSERT_EQ(r->size(), 1u) << c.text;
    EXPECT_EQ(r->front().to_string(), c.want);
  }
  for (const Case& c :
       {Case{"127.0.0.1", "127.0.0.1:7"}, Case{"::1", "[::1]:7"}, Case{"[::1]", "[::1]:7"},
        Case{"fe80::1%2", "[fe80::1%2]:7"}, Case{"[fe80::1%2]", "[fe80::1%2]:7"}}) {
    Expected<Addrs> r = rt.block_on(lookup2(c.text, 7));
    ASSERT_TRUE(r) << c.text;
    ASSERT_EQ(r->size(), 1u) << c.text;
    EXPECT_EQ(r->front().to_string(), c.want);
  }
}

// A lookup that records when it completes.
Task<Expected<Addrs>> flagged_lookup(std::string host_port, std::atomic<bool>* done) {
  Expected<Addrs> r = co_await lookup_host(std::move(host_port));
  done->store(true);
  co_return r;
}

template <class T>
Task<T> await_handle(JoinHandle<T> handle) {
  T value = co_await handle;
  co_return value;
}

// Holds the blocking pool's only thread (max_blocking_threads(1)) until
// released.
class BusyPool {
 public:
  explicit BusyPool(Runtime& rt)
      : blocker_(rt.spawn_blocking([this] {
          running_.store(true);
          gate_.wait();
          finished_.store(true);
        })) {
    EXPECT_TRUE(wait_until([this] { return running_.load(); }));
  }
  ~BusyPool() { release(); }
  void release() {
    if (!blocker_.valid()) return;
    gate_.open();
    blocker_.join();
  }
  // Whether the blocker has returned (released, or its gate gave up).
  bool finished() const { return finished_.load(); }

 private:
  Gate gate_;
  std::atomic<bool> running_{false};
  std::atomic<bool> finished_{false};
  JoinHandle<void> blocker_;
};

// With the pool's only thread held busy, literals still resolve (they never
// reach the pool), while a name waits for the pool.
TEST_P(LookupHostTest, NumericShortcutDoesNotUseTheBlockingPool) {
  Runtime rt = make_builder(GetParam()).max_blocking_threads(1).build();
  BusyPool busy(rt);
  const int resolved = rt.block_on([]() -> Task<int> {
    int ok = 0;
    for (int i = 0; i < 100; ++i) {
      Expected<Addrs> a = co_await lookup_host("127.0.0.1:" + std::to_string(i));
      Expected<Addrs> b = co_await lookup_host("::1", static_cast<std::uint16_t>(i));
      if (a && b && a->front().port() == i && b->front().port() == i) ++ok;
    }
    co_return ok;
  }());
  EXPECT_EQ(resolved, 100);
  EXPECT_FALSE(busy.finished()) << "the literals waited for the pool to come free";
  // A name does need the pool: it is still pending while the pool is held.
  std::atomic<bool> named_done{false};
  JoinHandle<Expected<Addrs>> named =
      rt.block_on([](std::atomic<bool>* done) -> Task<JoinHandle<Expected<Addrs>>> {
        JoinHandle<Expected<Addrs>> h = volt::spawn(flagged_lookup("localhost:1", done));
        co_await volt::sleep(30ms);
        co_return h;
      }(&named_done));
  EXPECT_FALSE(named_done.load()) << "a name resolved without the pool";
  EXPECT_FALSE(busy.finished());
  busy.release();
  Expected<Addrs> r = rt.block_on(await_handle(std::move(named)));
  EXPECT_TRUE(named_done.load());
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->front().ip().is_loopback());
}

TEST_P(LookupHostTest, MalformedInputIsInvalidArgument) {
  Runtime rt = make_runtime(GetParam());
  for (std::string_view text :
       {"localhost"sv, "localhost:"sv, "localhost:70000"sv, "localhost:65536"sv, "localhost:http"sv,
        "localhost:-1"sv, "localhost: 80"sv, ":80"sv, ""sv, "::1:80"sv, "[::1"sv, "[::1]"sv,
        "[::1]:"sv, "[::1]:70000"sv, "[localhost]:80"sv, "[not-an-address]:80"sv, "1.2.3.4:99999"sv,
        "local\0host:80"sv}) {
    Expected<Addrs> r = rt.block_on(lookup(std::string(text)));
    EXPECT_FALSE(r) << "accepted '" << text << "'";
    EXPECT_EQ(r.error(), code(errc::invalid_argument)) << text;
  }
  for (std::string_view host :
       {""sv, "[::1"sv, "[localhost]"sv, "::1::2"sv, "local\0host"sv, "[::1]:80"sv}) {
    Expected<Addrs> r = rt.block_on(lookup2(std::string(host), 80));
    EXPECT_FALSE(r) << "accepted '" << host << "'";
    EXPECT_EQ(r.error(), code(errc::invalid_argument)) << host;
  }
}

TEST_P(LookupHostTest, UnknownNameIsAnErrorValue) {
  Runtime rt = make_runtime(GetParam());
  const auto start = std::chrono::steady_clock::now();
  Expected<Addrs> r = rt.block_on(lookup("no-such-host.invalid:80"));
  const auto elapsed = std::chrono::steady_clock::now() - start;
  ASSERT_FALSE(r) << "resolved to " << r->front();
  // EAI_NONAME where a DNS server answers; EAI_AGAIN (or a system error)
  // where none is reachable. Either way a value, with a real message.
  EXPECT_TRUE(r.error().category() == net::resolver_category() ||
              r.error().category() == std::system_category())
      << r.error().category().name() << ": " << r.error().message();
  EXPECT_FALSE(r.error().message().empty());
  if (r.error() == std::error_code(EAI_NONAME, net::resolver_category())) {
    EXPECT_TRUE(net::is_host_not_found(r.error()));
    EXPECT_EQ(r.error().message(), ::gai_strerror(EAI_NONAME));
  }
  // resolv.conf's worst case (timeout x attempts) is 10 s by default.
  EXPECT_LT(elapsed, 40s);
  Expected<Addrs> r2 = rt.block_on(lookup2("no-such-host.invalid", 80));
  EXPECT_FALSE(r2);
}

TEST(ResolverCategory, NameMessagesAndClassification) {
  const std::error_category& cat = net::resolver_category();
  EXPECT_STREQ(cat.name(), "getaddrinfo");
  EXPECT_EQ(&cat, &net::resolver_category());
  EXPECT_EQ(cat.message(EAI_NONAME), ::gai_strerror(EAI_NONAME));
  EXPECT_EQ(cat.message(EAI_AGAIN), ::gai_strerror(EAI_AGAIN));
  EXPECT_TRUE(net::is_host_not_found(std::error_code(EAI_NONAME, cat)));
  EXPECT_TRUE(net::is_host_not_found(code(errc::host_not_found)));
  EXPECT_FALSE(net::is_host_not_found(std::error_code(EAI_AGAIN, cat))) << "a failure to ask";
  EXPECT_FALSE(net::is_host_not_found(std::error_code(EAI_NONAME, std::generic_category())));
  EXPECT_FALSE(net::is_host_not_found(std::error_code()));
}

// A lookup abandoned while it waits for the pool is dropped without harm:
// the queued work still runs later, and its result is freed (ASan checks).
TEST_P(LookupHostTest, AbandonedLookupIsDroppedSafely) {
  Runtime rt = make_builder(GetParam()).max_blocking_threads(1).build();
  BusyPool busy(rt);
  Expected<Expected<Addrs>> timed = rt.block_on([]() -> Task<Expected<Expected<Addrs>>> {
    Expected<Expected<Addrs>> r = co_await volt::timeout(20ms, lookup_host("localhost:80"));
    co_return r;
  }());
  EXPECT_EQ(timed.error(), code(errc::timed_out));
  const std::error_code aborted = rt.block_on([]() -> Task<std::error_code> {
    JoinHandle<Expected<Addrs>> h = volt::spawn(lookup("localhost:81"));
    co_await volt::sleep(5ms);  // long enough for it to queue its lookup
    h.abort();
    try {
      Expected<Addrs> r = co_await h;
      (void)r;
    } catch (const Error& e) {
      co_return e.code();
    }
    co_return std::error_code();
  }());
  EXPECT_EQ(aborted, code(errc::cancelled));
  busy.release();
  Expected<Addrs> after = rt.block_on(lookup("localhost:82"));
  ASSERT_TRUE(after);
  EXPECT_EQ(after->front().port(), 82);
}

Task<Expected<Addrs>> lookup_form(int form, std::uint16_t port) {
  switch (form) {
    case 0:
      return lookup_host("localhost:" + std::to_string(port));
    case 1:
      return lookup_host("localhost", port);
    default:
      return lookup_host("127.0.0.1:" + std::to_string(port));
  }
}

Task<int> resolve_many(int task, int count) {
  int ok = 0;
  for (int i = 0; i < count; ++i) {
    const std::uint16_t port = static_cast<std::uint16_t>(1000 + task * 100 + i);
    // Alternate the forms, so names and literals interleave on the pool.
    Expected<Addrs> r = co_await lookup_form(i % 3, port);
    if (r && !r->empty() && r->front().port() == port && r->front().ip().is_loopback()) ++ok;
  }
  co_return ok;
}

TEST_P(LookupHostTest, ManyConcurrentLookupsFromSeveralTasks) {
  Runtime rt = make_runtime(GetParam());
  constexpr int kTasks = 8;
  const int per_task = static_cast<int>(std::max<std::size_t>(scale(60), 12));
  const int total = rt.block_on([](int per) -> Task<int> {
    std::vector<JoinHandle<int>> handles;
    for (int t = 0; t < kTasks; ++t)
      handles.push_back(volt::spawn(resolve_many(t, per)));
    int sum = 0;
    for (auto& h : handles) {
      int n = co_await h;
      sum += n;
    }
    co_return sum;
  }(per_task));
  EXPECT_EQ(total, kTasks * per_task);
}

}  // namespace
}  // namespace volt::test
