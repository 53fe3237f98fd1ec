// volt/net/lookup_host.hpp: resolve "host:port" to socket addresses, on the
// blocking pool.
//
//   volt::Expected<std::vector<volt::net::SocketAddr>> addrs =
//       co_await volt::net::lookup_host("localhost:8080");
//   if (!addrs) log(addrs.error().message());   // e.g. "Name or service not known"
//   for (const auto& a : *addrs) { /* try to connect to a, in order */ }
//
//   auto same = co_await volt::net::lookup_host("example.com", 443);
//
// Accepted forms: "name:port", "1.2.3.4:port", "[v6-address]:port",
// "[fe80::1%eth0]:port", and, in the two-argument form, a bare name or
// address ("localhost", "::1", "[::1]") with the port apart.
//
// Guarantees:
//  - An address literal (anything SocketAddr::parse or IpAddr::parse accepts)
//    is returned at once as the only result: no thread hop, no resolver.
//  - Otherwise getaddrinfo runs on the runtime's blocking pool
//    (volt::spawn_blocking), never on a worker, for IPv4 and IPv6 alike
//    (AF_UNSPEC) and without AI_ADDRCONFIG, so "localhost" resolves in a
//    container that has no IPv6 (or no non-loopback) interface. The result
//    keeps the resolver's order (the order in which to try the addresses)
//    with duplicates removed, each with the requested port; it is never
//    empty.
//  - Errors are values:
//     * errc::invalid_argument: no port, a port that is not decimal 0..65535,
//       an empty host, a host holding a NUL byte, an unbracketed IPv6
//       address with a port ("::1:80"), unbalanced brackets;
//     * resolver_category() codes (category name "getaddrinfo", value the
//       EAI_* code, message from gai_strerror): EAI_NONAME for a name that
//       does not exist, EAI_AGAIN for a temporary DNS failure, ...;
//       is_host_not_found(code) says whether the name is unknown (as
//       opposed to a failure to ask);
//     * EAI_SYSTEM: the errno it came with, as a std::system_category code;
//     * errc::runtime_shutdown / errc::cancelled if the runtime shut down
//       before the blocking pool ran the lookup.
//  - Needs a runtime: awaited (or spawned) inside one, as every Task. If the
//    lookup needs the resolver and there is no runtime on the thread the
//    task runs on, it throws volt::Error(errc::no_runtime), as spawn_blocking.
//  - Cancelling the awaiting task (abort, select, timeout) drops the
//    result: getaddrinfo itself cannot be interrupted, so a lookup already
//    running on the blocking pool finishes there and its result is freed.
//    Wrap in volt::timeout to bound the wait: a slow DNS server can take
//    resolv.conf's timeout x attempts (10 s by default) to answer.
#pragma once

#include <cstdint>
#include <string>
#include <system_error>
#include <vector>

#include "volt/expected.hpp"
#include "volt/net/socket_addr.hpp"
#include "volt/task/task.hpp"

namespace volt::net {

// The getaddrinfo error category: value = an EAI_* code (negative on glibc),
// message = gai_strerror. Two codes of it compare equal when their EAI_*
// values are equal.
const std::error_category& resolver_category() noexcept;

// Whether `code` means the name does not exist or has no address
// (EAI_NONAME, EAI_NODATA, EAI_ADDRFAMILY; also volt::errc::host_not_found),
// rather than a failure to ask (EAI_AGAIN, EAI_FAIL, EAI_MEMORY, a system
// error).
bool is_host_not_found(const std::error_code& code) noexcept;

// "host:port"; see the header comment.
Task<Expected<std::vector<SocketAddr>>> lookup_host(std::string host_port);
// A host name or address literal (IPv6 with or without brackets), and a port.
Task<Expected<std::vector<SocketAddr>>> lookup_host(std::string host, std::uint16_t port);

}  // namespace volt::net
