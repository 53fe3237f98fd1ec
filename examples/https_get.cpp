// https_get: fetch one URL over HTTPS, as a tiny curl (volt::tls over
// OpenSSL, with the server's certificate verified).
//
//   ./build/release/examples/https_get https://example.com/
//   ./build/release/examples/https_get https://localhost:8443/ --cacert ca.pem
//
// Resolves HOST (volt::net::lookup_host), connects to its addresses in turn,
// does the TLS handshake verifying the server (its chain against the
// system's trust store, or against the CA certificates of --cacert FILE
// alone; its name against HOST, a DNS name or an IP literal), sends
//
//   GET /PATH HTTP/1.1 / Host: HOST[:PORT] / Connection: close
//
// and prints the answer's status line and body on stdout (the header lines
// on stderr). The body is framed as the server says: Content-Length,
// chunked, or up to the end of the connection (then only a TLS close_notify
// counts as the end: a connection cut without one is a truncated body, an
// error).
//
// Exit status: 0 when a whole answer came (whatever its status code, as
// curl), 1 on any error, with its message on stderr (e.g. "https_get: TLS
// handshake with localhost failed: certificate verify failed: unable to get
// local issuer certificate"), 2 for a bad command line.
#include <algorithm>
#include <cctype>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "volt/io/buf_reader.hpp"
#include "volt/net/lookup_host.hpp"
#include "volt/net/tcp.hpp"
#include "volt/tls/context.hpp"
#include "volt/tls/stream.hpp"
#include "volt/volt.hpp"

namespace {

using namespace std::chrono_literals;
using volt::net::TcpStream;
using TlsStream = volt::tls::Stream<TcpStream>;
using Reader = volt::io::BufReader<TlsStream&>;

constexpr auto kConnectLimit = 10s;  // per address
constexpr auto kHandshakeLimit = 10s;
constexpr auto kIdleLimit = 30s;  // any one read of the answer
constexpr std::size_t kMaxHead = 64 * 1024;

struct Url {
  std::string host;  // without brackets ("::1" for "[::1]")
  std::uint16_t port = 443;
  std::string authority;  // as written: the Host header
  std::string target;     // "/path?query" (never empty)
};

// Parses "https://HOST[:PORT][/PATH]"; on failure, `why` says what is wrong.
std::optional<Url> parse_url(std::string_view url, std::string& why) {
  constexpr std::string_view kScheme = "https://";
  if (url.size() < kScheme.size() ||
      !std::equal(kScheme.begin(), kScheme.end(), url.begin(), [](char a, char b) {
        return a == std::tolower(static_cast<unsigned char>(b));
      })) {
    why = "the URL must begin with https://";
    return std::nullopt;
  }
  url.remove_prefix(kScheme.size());
  const std::size_t end = url.find_first_of("/?#");
  Url u;
  u.authority = std::string(url.substr(0, end));
  std::string_view rest = end == std::string_view::npos ? std::string_view() : url.substr(end);
  rest = rest.substr(0, rest.find('#'));  // a fragment is not sent
  if (rest.empty() || rest.front() != '/') u.target = "/";
  u.target += rest;
  std::string_view auth = u.authority;
  if (auth.find('@') != std::string_view::npos) {
    why = "user names in the URL are not supported";
    return std::nullopt;
  }
  std::string_view port;
  if (auth.starts_with("[")) {  // an IPv6 literal
    const std::size_t close = auth.find(']');
    if (close == std::string_view::npos) {
      why = "unbalanced [ in the host";
      return std::nullopt;
    }
    u.host = std::string(auth.substr(1, close - 1));
    std::string_view after = auth.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') {
        why = "unexpected characters after ]";
        return std::nullopt;
      }
      port = after.substr(1);
    }
  } else {
    const std::size_t colon = auth.find(':');
    u.host = std::string(auth.substr(0, colon));
    if (colon != std::string_view::npos) port = auth.substr(colon + 1);
  }
  if (u.host.empty()) {
    why = "no host in the URL";
    return std::nullopt;
  }
  if (!port.empty() || auth.ends_with(":")) {
    unsigned value = 0;
    const auto [ptr, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
    if (ec != std::errc() || ptr != port.data() + port.size() || value == 0 || value > 65535) {
      why = "bad port in the URL";
      return std::nullopt;
    }
    u.port = static_cast<std::uint16_t>(value);
  }
  return u;
}

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i])))
      return false;
  return true;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t'))
    s.remove_prefix(1);
  while (!s.empty() &&
         (s.back() == ' ' || s.back() == '\t' || s.back() == '\r' || s.back() == '\n'))
    s.remove_suffix(1);
  return s;
}

// An error to report: what failed, and why.
struct Failure {
  std::string what;
  std::error_code code;
};

int report(const Failure& f) {
  std::fprintf(stderr, "https_get: %s: %s\n", f.what.c_str(), f.code.message().c_str());
  return 1;
}

// One line of the answer's head (with its "\r\n"), bounded by kIdleLimit.
volt::Task<volt::Expected<std::size_t>> next_line(Reader& reader, std::string& line) {
  line.clear();
  co_return (co_await volt::timeout(kIdleLimit, reader.read_line(line))).flatten();
}

// Copies up to `limit` body bytes (all of them if nullopt: up to the end of
// the stream) to stdout. Returns the count copied.
volt::Task<volt::Expected<std::uint64_t>> copy_body(Reader& reader,
                                                    std::optional<std::uint64_t> limit) {
  char buf[16 * 1024];
  std::uint64_t copied = 0;
  while (!limit || copied < *limit) {
    std::size_t want = sizeof buf;
    if (limit && *limit - copied < want) want = static_cast<std::size_t>(*limit - copied);
    volt::Expected<std::size_t> n =
        (co_await volt::timeout(kIdleLimit, reader.read(volt::io::MutableBuffer(buf, want))))
            .flatten();
    if (!n) co_return n.error();
    if (*n == 0) break;
    std::fwrite(buf, 1, *n, stdout);
    copied += *n;
  }
  co_return copied;
}

// Reads the chunked body (RFC 9112 7.1) to stdout, trailers included.
volt::Task<volt::Expected<void>> copy_chunked(Reader& reader) {
  std::string line;
  for (;;) {
    volt::Expected<std::size_t> n = co_await next_line(reader, line);
    if (!n) co_return n.error();
    if (*n == 0) co_return volt::make_error_code(volt::errc::unexpected_eof);
    const std::string_view size_text = trim(std::string_view(line).substr(0, line.find(';')));
    std::uint64_t size = 0;
    const auto [ptr, ec] =
        std::from_chars(size_text.data(), size_text.data() + size_text.size(), size, 16);
    if (ec != std::errc() || ptr != size_text.data() + size_text.size() || size_text.empty())
      co_return std::make_error_code(std::errc::bad_message);
    if (size == 0) break;
    volt::Expected<std::uint64_t> copied = co_await copy_body(reader, size);
    if (!copied) co_return copied.error();
    if (*copied < size) co_return volt::make_error_code(volt::errc::unexpected_eof);
    n = co_await next_line(reader, line);  // the CRLF after the chunk
    if (!n) co_return n.error();
    if (trim(line) != "") co_return std::make_error_code(std::errc::bad_message);
  }
  for (;;) {  // trailer fields, up to the blank line
    volt::Expected<std::size_t> n = co_await next_line(reader, line);
    if (!n) co_return n.error();
    if (*n == 0 || trim(line).empty()) co_return volt::Expected<void>();
  }
}

volt::Task<int> get(Url url, std::optional<std::string> cacert) {
  volt::tls::Context::Builder builder = volt::tls::Context::client();
  builder.alpn({"http/1.1"});
  if (cacert) builder.ca_file(*cacert);
  volt::Expected<volt::tls::Context> context = builder.build();
  if (!context) {
    std::string what = "cannot use the CA file ";
    what += cacert.value_or("(system store)");
    co_return report({what, context.error()});
  }

  // Resolve, then try each address in the resolver's order.
  volt::Expected<std::vector<volt::net::SocketAddr>> addrs =
      co_await volt::net::lookup_host(url.host, url.port);
  if (!addrs) {
    std::string what = "cannot resolve ";
    what += url.host;
    co_return report({what, addrs.error()});
  }
  std::optional<TcpStream> tcp;
  std::error_code last;
  for (const volt::net::SocketAddr& addr : *addrs) {
    volt::Expected<TcpStream> s = co_await TcpStream::connect_timeout(addr, kConnectLimit);
    if (s) {
      tcp = std::move(*s);
      break;
    }
    last = s.error();
    std::fprintf(stderr, "* %s: %s\n", addr.to_string().c_str(), last.message().c_str());
  }
  if (!tcp) {
    std::string what = "cannot connect to ";
    what += url.authority;
    co_return report({what, last});
  }
  (void)tcp->set_nodelay(true);

  volt::Expected<TlsStream> tls =
      (co_await volt::timeout(kHandshakeLimit,
                              volt::tls::connect(*context, std::move(*tcp), url.host)))
          .flatten();
  if (!tls) {
    std::string what = "TLS handshake with ";
    what += url.host;
    what += " failed";
    co_return report({what, tls.error()});
  }

  std::string request = "GET ";
  request += url.target;
  request += " HTTP/1.1\r\nHost: ";
  request += url.authority;
  request += "\r\nUser-Agent: volt-https_get\r\nAccept: */*\r\nConnection: close\r\n\r\n";
  if (volt::Expected<void> sent = co_await tls->write_all(request); !sent)
    co_return report({"cannot send the request", sent.error()});

  Reader reader(*tls);
  std::string line;
  std::string status;
  std::optional<std::uint64_t> length;
  bool chunked = false;
  for (;;) {  // 1xx interim answers are skipped (not expected for a GET)
    volt::Expected<std::size_t> n = co_await next_line(reader, line);
    if (!n) co_return report({"cannot read the answer", n.error()});
    if (*n == 0) co_return report({"no answer", volt::make_error_code(volt::errc::unexpected_eof)});
    status = std::string(trim(line));
    if (!status.starts_with("HTTP/1.") || status.size() < 12)
      co_return report({"not an HTTP answer", std::make_error_code(std::errc::bad_message)});
    std::size_t head = status.size();
    for (;;) {
      n = co_await next_line(reader, line);
      if (!n) co_return report({"cannot read the answer's head", n.error()});
      if (*n == 0)
        co_return report({"the answer's head", volt::make_error_code(volt::errc::unexpected_eof)});
      head += line.size();
      if (head > kMaxHead)
        co_return report(
            {"the answer's head is too long", std::make_error_code(std::errc::message_size)});
      const std::string_view field = trim(line);
      if (field.empty()) break;
      std::fprintf(stderr, "%.*s\n", static_cast<int>(field.size()), field.data());
      const std::size_t colon = field.find(':');
      if (colon == std::string_view::npos) continue;
      const std::string_view name = trim(field.substr(0, colon));
      const std::string_view value = trim(field.substr(colon + 1));
      if (iequals(name, "Content-Length")) {
        std::uint64_t v = 0;
        const auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
        if (ec != std::errc() || ptr != value.data() + value.size())
          co_return report({"bad Content-Length", std::make_error_code(std::errc::bad_message)});
        length = v;
      } else if (iequals(name, "Transfer-Encoding")) {
        chunked = value.size() >= 7 && iequals(value.substr(value.size() - 7), "chunked");
      }
    }
    if (status[9] != '1' || status.starts_with("HTTP/1.1 101")) break;
  }
  std::printf("%s\n", status.c_str());

  const std::string_view code = std::string_view(status).substr(9, 3);
  if (code == "204" || code == "304") {
    // No body, whatever the head says.
  } else if (chunked) {
    if (volt::Expected<void> body = co_await copy_chunked(reader); !body)
      co_return report({"cannot read the body", body.error()});
  } else if (length) {
    volt::Expected<std::uint64_t> copied = co_await copy_body(reader, length);
    if (!copied) co_return report({"cannot read the body", copied.error()});
    if (*copied < *length)
      co_return report({"the body is shorter than its Content-Length",
                        volt::make_error_code(volt::errc::unexpected_eof)});
  } else {
    // Up to the end of the connection: the server's close_notify (read() 0)
    // is the end; a transport cut without it is errc::unexpected_eof.
    volt::Expected<std::uint64_t> copied = co_await copy_body(reader, std::nullopt);
    if (!copied && copied.error() == volt::errc::unexpected_eof)
      co_return report(
          {"the connection ended without a TLS close_notify: the body may be "
           "truncated",
           copied.error()});
    if (!copied) co_return report({"cannot read the body", copied.error()});
  }
  std::fflush(stdout);
  // Our close_notify; the server may have closed already (Connection: close).
  (void)co_await tls->shutdown();
  co_return 0;
}

int usage(const char* argv0) {
  std::fprintf(stderr, "usage: %s https://HOST[:PORT][/PATH] [--cacert FILE]\n", argv0);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::optional<std::string> url_text;
  std::optional<std::string> cacert;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--cacert") {
      if (i + 1 >= argc) return usage(argv[0]);
      cacert = argv[++i];
    } else if (arg.starts_with("-") || url_text) {
      return usage(argv[0]);
    } else {
      url_text = std::string(arg);
    }
  }
  if (!url_text) return usage(argv[0]);
  std::string why;
  std::optional<Url> url = parse_url(*url_text, why);
  if (!url) {
    std::fprintf(stderr, "https_get: %s: %s\n", url_text->c_str(), why.c_str());
    return 2;
  }
  volt::Runtime rt = volt::Runtime::Builder().worker_threads(1).thread_name("https_get").build();
  return rt.block_on(get(std::move(*url), std::move(cacert)));
}
