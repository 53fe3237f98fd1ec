// volt/net/lookup_host.hpp: name resolution through getaddrinfo on the
// blocking pool.
#include "volt/net/lookup_host.hpp"

#include <netdb.h>

#include <algorithm>
#include <cerrno>
#include <memory>
#include <optional>
#include <string_view>
#include <utility>

#include "volt/task/spawn_blocking.hpp"

namespace volt::net {
namespace {

using Addrs = std::vector<SocketAddr>;

class ResolverCategory final : public std::error_category {
 public:
  const char* name() const noexcept override { return "getaddrinfo"; }
  // gai_strerror returns static strings (thread-safe in glibc and musl).
  std::string message(int code) const override { return ::gai_strerror(code); }
};

// Decimal 0..65535, digits only.
std::optional<std::uint16_t> parse_port(std::string_view s) noexcept {
  if (s.empty() || s.size() > 5) return std::nullopt;
  std::uint32_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + static_cast<std::uint32_t>(c - '0');
  }
  if (v > 65535) return std::nullopt;
  return static_cast<std::uint16_t>(v);
}

// Runs on a blocking-pool thread.
Expected<Addrs> resolve_blocking(const std::string& host, std::uint16_t port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  // One entry per address: without a socket type getaddrinfo repeats each
  // address for SOCK_STREAM, SOCK_DGRAM and SOCK_RAW.
  hints.ai_socktype = SOCK_STREAM;
  // No AI_ADDRCONFIG: with it, glibc drops ::1 and even 127.0.0.1 on hosts
  // whose only interface is loopback (containers), so "localhost" fails.
  hints.ai_flags = 0;
  addrinfo* list = nullptr;
  // No service: the port is set on each result below, so that no services
  // database lookup happens and any port number works.
  errno = 0;
  const int rc = ::getaddrinfo(host.c_str(), nullptr, &hints, &list);
  if (rc == EAI_SYSTEM) {
    const int err = errno;
    return std::error_code(err != 0 ? err : EIO, std::system_category());
  }
  if (rc != 0) return std::error_code(rc, resolver_category());
  const std::unique_ptr<addrinfo, void (*)(addrinfo*)> owner(list, ::freeaddrinfo);
  Addrs out;
  for (const addrinfo* ai = list; ai != nullptr; ai = ai->ai_next) {
    Expected<SocketAddr> addr = SocketAddr::from_sockaddr(ai->ai_addr, ai->ai_addrlen);
    if (!addr) continue;  // a family other than IPv4/IPv6: not reachable by TCP/UDP
    addr->set_port(port);
    // Quadratic, but resolver answers hold a handful of addresses; a set
    // would lose the order, which is the order to try them in.
    if (std::find(out.begin(), out.end(), *addr) == out.end()) out.push_back(*addr);
  }
  if (out.empty()) return std::error_code(EAI_NONAME, resolver_category());
  return out;
}

Task<Expected<Addrs>> ready(Expected<Addrs> result) {
  co_return result;
}

// Out of line from the coroutine below: spawn_blocking finds the runtime
// through a thread_local, which must not be read in a coroutine body.
JoinHandle<Expected<Addrs>> start_resolve(std::string host, std::uint16_t port) {
  return volt::spawn_blocking(
      [host = std::move(host), port] { return resolve_blocking(host, port); });
}

Task<Expected<Addrs>> resolve(std::string host, std::uint16_t port) {
  // Outside the try: no runtime is a usage error, thrown as documented.
  JoinHandle<Expected<Addrs>> handle = start_resolve(std::move(host), port);
  try {
    Expected<Addrs> result = co_await handle;
    co_return result;
  } catch (const Error& e) {
    // The pool refused or dropped the work (runtime shutdown): a value, as
    // every other failure to resolve.
    co_return e.code();
  }
}

// A host name (not an address literal) to resolve: non-empty, no NUL byte
// (c_str() would cut it short), no colon (an IPv6 literal that failed to
// parse, or "::1:80"-style ambiguity), no brackets.
bool plausible_name(std::string_view host) noexcept {
  return !host.empty() &&
         host.find_first_of(std::string_view(":[]\0", 4)) == std::string_view::npos;
}

}  // namespace

const std::error_category& resolver_category() noexcept {
  static const ResolverCategory category;
  return category;
}

bool is_host_not_found(const std::error_code& code) noexcept {
  if (code == errc::host_not_found) return true;
  if (code.category() != resolver_category()) return false;
  switch (code.value()) {
    case EAI_NONAME:
#ifdef EAI_NODATA
    case EAI_NODATA:
#endif
#ifdef EAI_ADDRFAMILY
    case EAI_ADDRFAMILY:
#endif
      return true;
    default:
      return false;
  }
}

// Plain functions, not coroutines: the text is checked here (it has no side
// effects, so doing it before the Task is awaited changes nothing visible),
// and the Task returned is either an already-complete one or the resolver's,
// one coroutine frame either way.
Task<Expected<Addrs>> lookup_host(std::string host_port) {
  if (Expected<SocketAddr> literal = SocketAddr::parse(host_port)) return ready(Addrs{*literal});
  const std::string_view text = host_port;
  const std::size_t colon = text.rfind(':');
  if (colon == std::string_view::npos) return ready(errc::invalid_argument);  // no port
  const std::optional<std::uint16_t> port = parse_port(text.substr(colon + 1));
  if (!port || !plausible_name(text.substr(0, colon))) return ready(errc::invalid_argument);
  host_port.resize(colon);
  return resolve(std::move(host_port), *port);
}

Task<Expected<Addrs>> lookup_host(std::string host, std::uint16_t port) {
  const std::string_view text = host;
  if (Expected<IpAddr> ip = IpAddr::parse(text)) return ready(Addrs{SocketAddr(*ip, port)});
  // An IPv6 literal in brackets or with a scope: let SocketAddr::parse read it.
  if (text.find(':') != std::string_view::npos) {
    const bool bracketed = !text.empty() && text.front() == '[';
    std::string with_port;
    if (!bracketed) with_port += '[';
    with_port += host;
    if (!bracketed) with_port += ']';
    with_port += ':';
    with_port += std::to_string(port);
    if (Expected<SocketAddr> literal = SocketAddr::parse(with_port)) return ready(Addrs{*literal});
    return ready(errc::invalid_argument);
  }
  if (!plausible_name(text)) return ready(errc::invalid_argument);
  return resolve(std::move(host), port);
}

}  // namespace volt::net
