// file_server: serves the files of a directory over HTTP/1.1 keep-alive,
// streaming each file from disk in 64 KiB chunks (never whole in memory).
//
//   ./build/release/examples/file_server ./public 8080    # port 0: a free port
//   curl -O http://127.0.0.1:8080/docs/guide.pdf
//
// It prints "listening on http://127.0.0.1:PORT/ ..." on the first line of
// stdout, then answers:
//  - GET /path: 200 with Content-Type (from the extension) and
//    Content-Length, then the file's bytes; HEAD /path: the same head, no
//    body;
//  - 404 for a path that does not exist or is not a regular file (a
//    directory, a device);
//  - 403 for a target with a ".." segment (also written %2e%2e), and for a
//    path that leaves the root once its symbolic links are resolved;
//  - 400 for a malformed request (no "/" target, a bad %-escape, a NUL byte,
//    a request body), 405 for another method, 431 for a head over 8 KiB:
//    these close the connection.
// Connections are kept alive (HTTP/1.1; HTTP/1.0 and "Connection: close"
// close after the answer) and pipelined requests answered in order.
//
// SIGTERM or SIGINT (Ctrl-C): the server stops accepting, closes the idle
// connections, lets a connection in the middle of a request or of a file
// get its answer, waits at most 5 seconds for them, and exits with status 0.
// A second signal exits at once.
//
// How a path is resolved: the target is %-decoded, split on '/', and any
// ".." segment refused before the file system is asked; then the path under
// the root is canonicalized (volt::fs::canonicalize) and must still lie
// under the (canonical) root, so a symbolic link cannot lead outside it.
// (A link swapped in between the check and the open could; a server facing
// hostile local users would open with openat2's RESOLVE_BENEATH instead.)
#include <algorithm>
#include <array>
#include <atomic>
#include <cctype>
#include <charconv>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "volt/fs/fs.hpp"
#include "volt/net/tcp.hpp"
#include "volt/volt.hpp"

namespace {

namespace fs = volt::fs;
using namespace std::chrono_literals;
using volt::net::TcpListener;
using volt::net::TcpStream;

constexpr std::size_t kMaxHead = 8192;     // the longest request head accepted
constexpr std::size_t kChunk = 64 * 1024;  // file bytes per read and write
constexpr auto kDrain = std::chrono::seconds(5);

// ---- requests ----

enum class Method { kGet, kHead, kOther };

// What the server needs of one request head.
struct Request {
  Method method = Method::kOther;
  std::string target;     // as sent (e.g. "/a%20b.txt?x=1")
  bool close = false;     // answer, then close the connection
  bool has_body = false;  // Content-Length > 0 or Transfer-Encoding: refused
  bool malformed = false;
};

bool equals_ignoring_case(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t'))
    s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t'))
    s.remove_suffix(1);
  return s;
}

// `head`: the request line and the headers, through the blank line.
Request parse_request(std::string_view head) {
  Request r;
  const std::size_t eol = head.find("\r\n");
  const std::string_view line = head.substr(0, eol);
  const std::size_t sp1 = line.find(' ');
  const std::size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos) {
    r.malformed = true;
    r.close = true;
    return r;
  }
  const std::string_view method = line.substr(0, sp1);
  const std::string_view version = line.substr(sp2 + 1);
  r.target = std::string(line.substr(sp1 + 1, sp2 - sp1 - 1));
  r.method = method == "GET" ? Method::kGet : method == "HEAD" ? Method::kHead : Method::kOther;
  if (version == "HTTP/1.0") {
    r.close = true;
  } else if (version != "HTTP/1.1") {
    r.malformed = true;
    r.close = true;
  }
  std::string_view rest = head.substr(eol + 2);
  while (!rest.empty()) {
    const std::size_t end = rest.find("\r\n");
    const std::string_view header = rest.substr(0, end);
    rest = end == std::string_view::npos ? std::string_view() : rest.substr(end + 2);
    const std::size_t colon = header.find(':');
    if (colon == std::string_view::npos) continue;  // the blank line
    const std::string_view name = trim(header.substr(0, colon));
    const std::string_view value = trim(header.substr(colon + 1));
    if (equals_ignoring_case(name, "Connection")) {
      if (equals_ignoring_case(value, "close")) r.close = true;
      if (equals_ignoring_case(value, "keep-alive")) r.close = false;
    } else if (equals_ignoring_case(name, "Content-Length")) {
      if (value != "0") r.has_body = true;
    } else if (equals_ignoring_case(name, "Transfer-Encoding")) {
      r.has_body = true;
    }
  }
  return r;
}

// ---- paths ----

// The target as a path relative to the root: the query dropped, %XX
// decoded, empty and "." segments skipped. 400 for a malformed target, 403
// for a ".." segment; 200 otherwise.
struct Decoded {
  int status = 200;
  std::filesystem::path relative;
};

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

Decoded decode_target(std::string_view target) {
  Decoded d;
  target = target.substr(0, target.find_first_of("?#"));
  if (!target.starts_with('/')) {
    d.status = 400;
    return d;
  }
  std::string path;
  for (std::size_t i = 0; i < target.size(); ++i) {
    char c = target[i];
    if (c == '%') {
      const int hi = i + 2 < target.size() ? hex_digit(target[i + 1]) : -1;
      const int lo = hi < 0 ? -1 : hex_digit(target[i + 2]);
      if (lo < 0) {
        d.status = 400;
        return d;
      }
      c = static_cast<char>(hi * 16 + lo);
      i += 2;
    }
    if (c == '\0') {
      d.status = 400;
      return d;
    }
    path.push_back(c);
  }
  std::string_view rest = path;
  while (!rest.empty()) {
    const std::size_t slash = rest.find('/');
    const std::string_view segment = rest.substr(0, slash);
    rest = slash == std::string_view::npos ? std::string_view() : rest.substr(slash + 1);
    if (segment == "..") {
      d.status = 403;
      return d;
    }
    if (segment.empty() || segment == ".") continue;
    d.relative /= std::filesystem::path(segment);
  }
  return d;
}

// True if `path` is `root` or below it (both canonical), compared by
// components: "/srv/www2" is not under "/srv/www".
bool within(const std::filesystem::path& root, const std::filesystem::path& path) {
  auto [r, p] = std::mismatch(root.begin(), root.end(), path.begin(), path.end());
  return r == root.end();
}

std::string_view content_type(const std::filesystem::path& path) {
  static constexpr std::pair<std::string_view, std::string_view> kTypes[] = {
      {".html", "text/html; charset=utf-8"},
      {".htm", "text/html; charset=utf-8"},
      {".txt", "text/plain; charset=utf-8"},
      {".log", "text/plain; charset=utf-8"},
      {".md", "text/markdown; charset=utf-8"},
      {".css", "text/css"},
      {".js", "text/javascript"},
      {".json", "application/json"},
      {".svg", "image/svg+xml"},
      {".png", "image/png"},
      {".jpg", "image/jpeg"},
      {".jpeg", "image/jpeg"},
      {".gif", "image/gif"},
      {".pdf", "application/pdf"},
  };
  const std::string extension = path.extension().string();
  for (const auto& [ext, type] : kTypes)
    if (equals_ignoring_case(extension, ext)) return type;
  return "application/octet-stream";
}

// ---- answers ----

std::string_view reason(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 431:
      return "Request Header Fields Too Large";
    default:
      return "Internal Server Error";
  }
}

std::string status_line(int status) {
  std::string line = "HTTP/1.1 " + std::to_string(status) + " ";
  line += reason(status);
  line += "\r\n";
  return line;
}

// An error answer with a one-line text body.
std::string error_answer(int status, bool close) {
  std::string body(reason(status));
  body += "\n";
  std::string out = status_line(status);
  out += "Content-Type: text/plain; charset=utf-8\r\nContent-Length: ";
  out += std::to_string(body.size());
  out += close ? "\r\nConnection: close\r\n\r\n" : "\r\n\r\n";
  out += body;
  return out;
}

int status_of(const std::error_code& error) {
  if (error == std::errc::permission_denied) return 403;
  if (error == std::errc::no_such_file_or_directory || error == std::errc::not_a_directory ||
      error == std::errc::too_many_symbolic_link_levels || error == std::errc::filename_too_long)
    return 404;
  return 500;
}

// A file ready to be sent, or the status that answers the request instead.
struct Opened {
  int status = 200;
  fs::File file;
  std::uint64_t length = 0;
  std::filesystem::path path;
};

// Resolves `relative` under `root` and opens it (see the header comment).
volt::Task<Opened> open_under(const std::filesystem::path& root,
                              const std::filesystem::path& relative) {
  Opened out;
  const std::filesystem::path candidate = root / relative;
  volt::Expected<std::filesystem::path> canonical = co_await fs::canonicalize(candidate);
  if (!canonical) {
    out.status = status_of(canonical.error());
    co_return out;
  }
  if (!within(root, *canonical)) {
    out.status = 403;  // a symbolic link out of the root
    co_return out;
  }
  volt::Expected<fs::File> file = co_await fs::File::open(*canonical);
  if (!file) {
    out.status = status_of(file.error());
    co_return out;
  }
  // The descriptor's metadata (fstat), not the path's: it describes the
  // file that will be read.
  volt::Expected<fs::Metadata> meta = co_await file->metadata();
  if (!meta) {
    out.status = status_of(meta.error());
    co_return out;
  }
  if (!meta->is_file()) {
    out.status = 404;  // a directory or a device: nothing to send
    co_return out;
  }
  out.file = std::move(*file);
  out.length = meta->len();
  out.path = std::move(*canonical);
  co_return out;
}

// Sends exactly `length` bytes of `file` from its start, a chunk at a time.
// False if the file could not be read or ended early (it shrank), or the
// peer went away: the promised Content-Length cannot be kept, so the
// connection must close.
volt::Task<bool> send_file(const TcpStream& stream, fs::File& file, std::uint64_t length,
                           std::vector<std::byte>& chunk) {
  if (chunk.empty()) chunk.resize(kChunk);
  std::uint64_t sent = 0;
  while (sent < length) {
    const std::size_t want =
        static_cast<std::size_t>(std::min<std::uint64_t>(chunk.size(), length - sent));
    volt::Expected<std::size_t> n = co_await file.read(volt::io::MutableBuffer(chunk.data(), want));
    if (!n || *n == 0) co_return false;
    volt::Expected<void> written =
        co_await stream.write_all(volt::io::ConstBuffer(chunk.data(), *n));
    if (!written) co_return false;
    sent += *n;
  }
  co_return true;
}

// Answers one request. True if the connection may carry another one.
volt::Task<bool> respond(const TcpStream& stream, const std::filesystem::path& root,
                         const Request& request, std::vector<std::byte>& chunk) {
  int status = 200;
  if (request.malformed || request.has_body) {
    status = 400;
  } else if (request.method == Method::kOther) {
    status = 405;
  }
  Decoded decoded;
  if (status == 200) {
    decoded = decode_target(request.target);
    status = decoded.status;
  }
  if (status != 200) {
    const bool close = request.close || status == 400 || status == 405;
    const std::string answer = error_answer(status, close);
    volt::Expected<void> sent = co_await stream.write_all(answer);
    co_return sent && !close;
  }

  Opened opened = co_await open_under(root, decoded.relative);
  if (opened.status != 200) {
    const std::string answer = error_answer(opened.status, request.close);
    volt::Expected<void> sent = co_await stream.write_all(answer);
    co_return sent && !request.close;
  }

  std::string head = status_line(200);
  head += "Content-Type: ";
  head += content_type(opened.path);
  head += "\r\nContent-Length: ";
  head += std::to_string(opened.length);
  head += request.close ? "\r\nConnection: close\r\n\r\n" : "\r\n\r\n";
  volt::Expected<void> sent = co_await stream.write_all(head);
  if (!sent) co_return false;
  if (request.method == Method::kHead) co_return !request.close;
  const bool complete = co_await send_file(stream, opened.file, opened.length, chunk);
  co_return complete && !request.close;
}

// ---- connections and shutdown ----

// The live connections, so that the shutdown can wait for the last one.
struct Live {
  std::atomic<std::size_t> count{0};
  volt::Notify gone;  // notified when the count drops to zero
};

// Counts one connection from before its task is spawned until the task ends
// (or the runtime destroys it).
class LiveGuard {
 public:
  explicit LiveGuard(std::shared_ptr<Live> live) noexcept : live_(std::move(live)) {
    live_->count.fetch_add(1, std::memory_order_relaxed);
  }
  LiveGuard(LiveGuard&& other) noexcept : live_(std::move(other.live_)) {}
  LiveGuard& operator=(LiveGuard&&) = delete;
  ~LiveGuard() {
    if (live_ && live_->count.fetch_sub(1, std::memory_order_release) == 1)
      live_->gone.notify_waiters();
  }

 private:
  std::shared_ptr<Live> live_;
};

// Waits until no connection is live, at most `limit`; true if none is.
volt::Task<bool> all_gone(std::shared_ptr<Live> live, std::chrono::nanoseconds limit) {
  const volt::Instant deadline = volt::time::now() + limit;
  for (;;) {
    volt::Notify::Notified notified = live->gone.notified();  // before the load
    if (live->count.load(std::memory_order_acquire) == 0) co_return true;
    volt::Expected<void> woke = co_await volt::timeout_at(deadline, std::move(notified));
    if (!woke) co_return live->count.load(std::memory_order_acquire) == 0;
  }
}

// One connection: requests are read into a fixed 8 KiB buffer and answered
// one at a time, until the peer closes, an answer closes, or the shutdown
// finds the connection idle.
volt::Task<void> serve_connection(TcpStream stream,
                                  std::shared_ptr<const std::filesystem::path> root,
                                  volt::CancellationToken shutdown,
                                  [[maybe_unused]] LiveGuard guard) {
  if (!stream.set_nodelay(true)) co_return;
  std::array<char, kMaxHead> input;
  std::size_t filled = 0;
  std::vector<std::byte> chunk;  // the file buffer, made at the first file
  for (;;) {
    const std::string_view buffered(input.data(), filled);
    const std::size_t blank = buffered.find("\r\n\r\n");
    if (blank == std::string_view::npos) {
      if (filled == kMaxHead) {
        const std::string answer = error_answer(431, true);
        volt::Expected<void> ignored = co_await stream.write_all(answer);
        (void)ignored;
        co_return;
      }
      volt::io::MutableBuffer free_space(input.data() + filled, kMaxHead - filled);
      volt::Expected<std::size_t> n = volt::errc::closed;  // set by one of the reads below
      if (filled == 0) {
        // Idle between requests: the shutdown may end the wait. Biased: a
        // request that has already arrived is answered first (read is
        // cancel-safe: the read that loses has taken nothing).
        auto first = co_await volt::select_biased(stream.read(free_space), shutdown.cancelled());
        if (first.index() == 1) co_return;
        n = std::move(std::get<0>(first));
      } else {
        n = co_await stream.read(free_space);  // the rest of a request
      }
      if (!n || *n == 0) co_return;
      filled += *n;
      continue;
    }

    const std::size_t consumed = blank + 4;
    const Request request = parse_request(buffered.substr(0, consumed));
    const bool again = co_await respond(stream, *root, request, chunk);
    if (!again) co_return;
    std::memmove(input.data(), input.data() + consumed, filled - consumed);
    filled -= consumed;
    // Shutting down: the answer is out; close unless another request has
    // begun to arrive.
    if (shutdown.is_cancelled() && filled == 0) co_return;
  }
}

// Accepts until `shutdown` is cancelled, a task per connection.
volt::Task<void> accept_loop(const TcpListener& listener,
                             std::shared_ptr<const std::filesystem::path> root,
                             volt::CancellationToken shutdown, std::shared_ptr<Live> live) {
  std::chrono::steady_clock::time_point last_report{};
  for (;;) {
    // accept is cancel-safe: the accept that loses has taken no connection.
    auto first = co_await volt::select(listener.accept(), shutdown.cancelled());
    if (first.index() == 1) co_return;
    volt::Expected<std::pair<TcpStream, volt::net::SocketAddr>> accepted =
        std::move(std::get<0>(first));
    if (accepted) {
      LiveGuard guard(live);
      (void)volt::spawn(
          serve_connection(std::move(accepted->first), root, shutdown, std::move(guard)));
      continue;
    }
    // Out of descriptors or memory: the connection waits in the backlog.
    const auto now = std::chrono::steady_clock::now();
    if (now - last_report >= 1s) {
      std::fprintf(stderr, "accept failed: %s (retrying)\n", accepted.error().message().c_str());
      last_report = now;
    }
    auto woke = co_await volt::select(volt::sleep(10ms), shutdown.cancelled());
    if (woke.index() == 1) co_return;
  }
}

volt::Task<int> run(std::string root_argument, std::uint16_t port) {
  // Handlers first: from the moment a client can connect, SIGTERM and
  // SIGINT are counted here instead of killing the process.
  volt::signal::Signal term = volt::signal::signal(SIGTERM);
  volt::signal::Signal interrupt = volt::signal::signal(SIGINT);

  const std::filesystem::path root_path(root_argument);
  volt::Expected<std::filesystem::path> root = co_await fs::canonicalize(root_path);
  if (!root) {
    std::fprintf(stderr, "%s: %s\n", root_argument.c_str(), root.error().message().c_str());
    co_return 1;
  }
  volt::Expected<fs::Metadata> meta = co_await fs::metadata(*root);
  if (!meta || !meta->is_dir()) {
    std::fprintf(stderr, "%s: not a directory\n", root_argument.c_str());
    co_return 1;
  }
  const volt::net::SocketAddr address(volt::net::IpAddr::v4_loopback(), port);
  volt::Expected<TcpListener> listener = TcpListener::bind(address);
  if (!listener) {
    std::fprintf(stderr, "cannot listen on %s: %s\n", address.to_string().c_str(),
                 listener.error().message().c_str());
    co_return 1;
  }
  volt::Expected<volt::net::SocketAddr> local = listener->local_addr();
  std::printf("listening on http://%s/ serving %s (stop with Ctrl-C or SIGTERM)\n",
              local ? local->to_string().c_str() : address.to_string().c_str(), root->c_str());
  std::fflush(stdout);

  auto shared_root = std::make_shared<const std::filesystem::path>(std::move(*root));
  auto live = std::make_shared<Live>();
  volt::CancellationToken stop;
  volt::JoinHandle<void> server = volt::spawn(accept_loop(*listener, shared_root, stop, live));
  auto first = co_await volt::select(term.recv(), interrupt.recv());
  std::fprintf(stderr, "%s: stopping: no new connections, finishing the answers in flight\n",
               first.index() == 0 ? "SIGTERM" : "SIGINT");
  stop.cancel();
  co_await server;  // the accept loop ends at once
  volt::JoinHandle<bool> drain = volt::spawn(all_gone(live, kDrain));
  auto drained = co_await volt::select(drain, term.recv(), interrupt.recv());
  if (drained.index() != 0 || !std::get<0>(drained))
    std::fprintf(stderr, "stopped without waiting for the last connections\n");
  else
    std::fprintf(stderr, "stopped: every connection finished\n");
  co_return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || argc > 3) {
    std::fprintf(stderr, "usage: %s ROOT [PORT]   (PORT 0: a free port; default 8080)\n", argv[0]);
    return 2;
  }
  std::uint16_t port = 8080;
  if (argc == 3) {
    const std::string_view text = argv[2];
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), port);
    if (ec != std::errc() || end != text.data() + text.size()) {
      std::fprintf(stderr, "%s: not a port number\n", argv[2]);
      return 2;
    }
  }
  volt::Runtime rt = volt::Runtime::Builder().thread_name("files").build();
  return rt.block_on(run(argv[1], port));
}
