// Tests of the example programs (examples/), run as child processes and
// spoken to over loopback with plain blocking sockets, as a user would:
// echo_server + echo_client (round trips, a mismatch detected), http_server
// (200/404/405/431, keep-alive, pipelining, graceful shutdown on SIGTERM with
// a request in flight, SIGINT), chat_server (a line from one client reaches
// the two others, not its author), file_server (a 1 MiB file and a small one
// byte for byte, 404, 403 for "..", HEAD, SIGTERM), log_scan (the report of a
// small tree, written atomically), run_parallel (prefixed output, a failure,
// a program not found and a timeout, the summary and the exit status),
// parallel_tasks (the fastest answers in order, the rest aborted, the race);
// with volt::tls (VOLT_EXAMPLES_TLS): https_server fetched by https_get and
// curl, https_get refusing a server it cannot verify, https_server's graceful
// shutdown with TLS connections open, chat_server --tls with two
// `openssl s_client` clients (a CA and a localhost leaf made with the
// openssl command in a temporary directory).
//
// Each server is started on port 0 and prints its address on the first line
// of stdout. Every read has a timeout (kPatience): a hung program fails the
// test instead of hanging it; children are killed when a test ends.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

extern char** environ;

namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// How long any single step may take before the test calls it hung (generous:
// sanitizer builds on a loaded 2-core machine).
constexpr auto kPatience = 20s;

std::string example(std::string_view name) {
  return std::string(VOLT_EXAMPLES_DIR) + "/" + std::string(name);
}

// A child process with its stdout (and optionally stdin) on pipes.
class Child {
 public:
  // quiet: the child's stderr goes to /dev/null (openssl s_client's chatter).
  Child(const std::string& path, std::vector<std::string> args, bool pipe_stdin = false,
        bool quiet = false) {
    int out[2];
    int in[2] = {-1, -1};
    EXPECT_EQ(::pipe2(out, O_CLOEXEC), 0);
    if (pipe_stdin) {
      EXPECT_EQ(::pipe2(in, O_CLOEXEC), 0);
    }
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
    if (pipe_stdin) posix_spawn_file_actions_adddup2(&actions, in[0], STDIN_FILENO);
    if (quiet) posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
    std::vector<char*> argv;
    args.insert(args.begin(), path);
    for (auto& a : args)
      argv.push_back(a.data());
    argv.push_back(nullptr);
    const int err = ::posix_spawn(&pid_, path.c_str(), &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    EXPECT_EQ(err, 0) << path << ": " << std::strerror(err);
    ::close(out[1]);
    stdout_ = out[0];
    if (pipe_stdin) {
      ::close(in[0]);
      stdin_ = in[1];
    }
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  ~Child() {
    if (pid_ > 0 && !status_) {
      ::kill(pid_, SIGKILL);
      int status;
      ::waitpid(pid_, &status, 0);
    }
    if (stdout_ >= 0) ::close(stdout_);
    close_stdin();
  }

  // The next line of the child's stdout (without '\n'); nullopt at end of
  // stream or after kPatience.
  std::optional<std::string> read_line() {
    const auto deadline = Clock::now() + kPatience;
    for (;;) {
      if (auto nl = buffered_.find('\n'); nl != std::string::npos) {
        std::string line = buffered_.substr(0, nl);
        buffered_.erase(0, nl + 1);
        return line;
      }
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      pollfd p{stdout_, POLLIN, 0};
      if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) <= 0)
        return std::nullopt;
      char buf[4096];
      const ssize_t n = ::read(stdout_, buf, sizeof buf);
      if (n <= 0) return std::nullopt;
      buffered_.append(buf, static_cast<std::size_t>(n));
    }
  }

  // Everything left on the child's stdout until it closes it; `closed` says
  // whether it did (rather than kPatience running out).
  std::string read_to_end(bool* closed) {
    const auto deadline = Clock::now() + kPatience;
    *closed = false;
    for (;;) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      pollfd p{stdout_, POLLIN, 0};
      if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) <= 0) break;
      char buf[4096];
      const ssize_t n = ::read(stdout_, buf, sizeof buf);
      if (n <= 0) {
        *closed = n == 0;
        break;
      }
      buffered_.append(buf, static_cast<std::size_t>(n));
    }
    return std::exchange(buffered_, {});
  }

  // The port in the first line ("listening on [http[s]://]127.0.0.1:PORT[/...]").
  int listening_port() {
    std::optional<std::string> line = read_line();
    EXPECT_TRUE(line) << "the server printed no address";
    if (!line) return 0;
    const auto at = line->find("127.0.0.1:");
    EXPECT_NE(at, std::string::npos) << *line;
    if (at == std::string::npos) return 0;
    return std::atoi(line->c_str() + at + std::strlen("127.0.0.1:"));
  }

  void write_stdin(std::string_view text) {
    ASSERT_EQ(::write(stdin_, text.data(), text.size()), static_cast<ssize_t>(text.size()));
  }
  void close_stdin() {
    if (stdin_ >= 0) ::close(stdin_);
    stdin_ = -1;
  }

  void signal(int signum) { ASSERT_EQ(::kill(pid_, signum), 0); }

  // The exit status (waitpid's), or nullopt if it did not exit within `limit`.
  std::optional<int> wait(std::chrono::milliseconds limit = kPatience) {
    const auto deadline = Clock::now() + limit;
    while (!status_) {
      int status = 0;
      const pid_t r = ::waitpid(pid_, &status, WNOHANG);
      if (r == pid_) {
        status_ = status;
      } else if (Clock::now() > deadline) {
        return std::nullopt;
      } else {
        std::this_thread::sleep_for(10ms);
      }
    }
    return status_;
  }

 private:
  pid_t pid_ = -1;
  int stdout_ = -1;
  int stdin_ = -1;
  std::string buffered_;
  std::optional<int> status_;
};

// Under ThreadSanitizer a signal sent from outside is held by TSan when it
// lands on a thread asleep in a raw futex or epoll system call (every thread
// of an idle server), until that thread calls a function TSan intercepts,
// which may be never (tests/signal/signal_test.cpp has the details). So the
// graceful-shutdown assertions, which send SIGTERM/SIGINT to the server,
// run in the Release and ASan builds only.
#if defined(__SANITIZE_THREAD__)
constexpr bool kSignalsFromOutsideArrive = false;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
constexpr bool kSignalsFromOutsideArrive = false;
#else
constexpr bool kSignalsFromOutsideArrive = true;
#endif
#else
constexpr bool kSignalsFromOutsideArrive = true;
#endif

bool exited_zero(std::optional<int> status) {
  return status && WIFEXITED(*status) && WEXITSTATUS(*status) == 0;
}

// A blocking loopback client with a receive timeout.
class Client {
 public:
  explicit Client(int port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    EXPECT_GE(fd_, 0);
    timeval tv{static_cast<time_t>(kPatience / 1s), 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    int one = 1;
    ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<std::uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a), 0) << std::strerror(errno);
  }
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;
  ~Client() { ::close(fd_); }

  void send(std::string_view text) {
    ASSERT_EQ(::send(fd_, text.data(), text.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(text.size()));
  }

  // Reads until `n` bytes are buffered (or end of stream / timeout) and takes them.
  std::string read_exactly(std::size_t n) {
    while (buffered_.size() < n && fill()) {
    }
    std::string out = buffered_.substr(0, n);
    buffered_.erase(0, out.size());
    return out;
  }
  // One '\n'-terminated line without the '\n'; nullopt at end of stream / timeout.
  std::optional<std::string> read_line() {
    for (;;) {
      if (auto nl = buffered_.find('\n'); nl != std::string::npos) {
        std::string line = buffered_.substr(0, nl);
        buffered_.erase(0, nl + 1);
        return line;
      }
      if (!fill()) return std::nullopt;
    }
  }
  // Everything until the peer closes; `closed` says whether it did (rather
  // than the read timing out).
  std::string read_to_end(bool* closed) {
    while (fill()) {
    }
    *closed = eof_;
    return std::exchange(buffered_, {});
  }
  // "host:port" of this end, as the server sees it.
  std::string local_address() const {
    sockaddr_in a{};
    socklen_t len = sizeof a;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    char ip[INET_ADDRSTRLEN];
    ::inet_ntop(AF_INET, &a.sin_addr, ip, sizeof ip);
    return std::string(ip) + ":" + std::to_string(ntohs(a.sin_port));
  }

 private:
  // One recv; false at end of stream, on an error or on the timeout.
  bool fill() {
    char buf[4096];
    const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    if (n == 0) eof_ = true;
    if (n <= 0) return false;
    buffered_.append(buf, static_cast<std::size_t>(n));
    return true;
  }
  int fd_ = -1;
  std::string buffered_;
  bool eof_ = false;
};

// ---- echo_server + echo_client ----

TEST(EchoExample, ClientCountMessagesRoundTrip) {
  Child server(example("echo_server"), {"127.0.0.1:0"});
  const int port = server.listening_port();
  ASSERT_GT(port, 0);
  Child client(example("echo_client"), {"127.0.0.1:" + std::to_string(port), "--count", "500"});
  std::optional<std::string> summary = client.read_line();
  ASSERT_TRUE(summary);
  EXPECT_NE(summary->find("500 messages"), std::string::npos) << *summary;
  EXPECT_TRUE(exited_zero(client.wait()));
}

TEST(EchoExample, ClientEchoesStdinLines) {
  Child server(example("echo_server"), {"127.0.0.1:0"});
  const int port = server.listening_port();
  ASSERT_GT(port, 0);
  Child client(example("echo_client"), {"127.0.0.1:" + std::to_string(port)}, true);
  client.write_stdin("first line\nsecond, longer line\n");
  client.close_stdin();
  EXPECT_EQ(client.read_line(), "first line");
  EXPECT_EQ(client.read_line(), "second, longer line");
  EXPECT_TRUE(exited_zero(client.wait()));
}

TEST(EchoExample, ServerEchoesManyClientsAtOnce) {
  Child server(example("echo_server"), {"127.0.0.1:0"});
  const int port = server.listening_port();
  ASSERT_GT(port, 0);
  std::vector<std::unique_ptr<Client>> clients;
  for (int i = 0; i < 20; ++i)
    clients.push_back(std::make_unique<Client>(port));
  for (int round = 0; round < 5; ++round) {
    for (std::size_t i = 0; i < clients.size(); ++i)
      clients[i]->send("client " + std::to_string(i) + " round " + std::to_string(round) + "\n");
    for (std::size_t i = 0; i < clients.size(); ++i)
      EXPECT_EQ(clients[i]->read_line(),
                "client " + std::to_string(i) + " round " + std::to_string(round));
  }
}

// A "server" that answers with the wrong bytes: the client must say so.
TEST(EchoExample, ClientFailsOnAMismatchedEcho) {
  const int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(listener, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::listen(listener, 1), 0);
  socklen_t len = sizeof a;
  ::getsockname(listener, reinterpret_cast<sockaddr*>(&a), &len);
  Child client(example("echo_client"), {"127.0.0.1:" + std::to_string(ntohs(a.sin_port))}, true);
  client.write_stdin("hello\n");
  const int conn = ::accept(listener, nullptr, nullptr);
  ASSERT_GE(conn, 0);
  char buf[6];
  ASSERT_EQ(::recv(conn, buf, sizeof buf, MSG_WAITALL), 6);
  ASSERT_EQ(::send(conn, "jello\n", 6, MSG_NOSIGNAL), 6);
  const std::optional<int> status = client.wait();
  ::close(conn);
  ::close(listener);
  ASSERT_TRUE(status) << "echo_client hung";
  EXPECT_TRUE(WIFEXITED(*status));
  EXPECT_NE(WEXITSTATUS(*status), 0);
}

// ---- http_server ----

constexpr std::string_view kHello =
    "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 13\r\n\r\nHello, World!";
constexpr std::string_view kNotFound = "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n";
constexpr std::string_view kNotAllowed =
    "HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
constexpr std::string_view kRequest = "GET / HTTP/1.1\r\nHost: test\r\n\r\n";

TEST(HttpExample, AnswersKeepsAliveAndPipelines) {
  Child server(example("http_server"), {"127.0.0.1:0"});
  const int port = server.listening_port();
  ASSERT_GT(port, 0);
  Client c(port);
  c.send(kRequest);
  EXPECT_EQ(c.read_exactly(kHello.size()), kHello);
  // Same connection (keep-alive): a 404, then three pipelined requests in
  // one segment, answered in order.
  c.send("GET /missing HTTP/1.1\r\nHost: test\r\n\r\n");
  EXPECT_EQ(c.read_exactly(kNotFound.size()), kNotFound);
  c.send(std::string(kRequest) + "GET /nope HTTP/1.1\r\n\r\n" + std::string(kRequest));
  EXPECT_EQ(c.read_exactly(kHello.size() + kNotFound.size() + kHello.size()),
            std::string(kHello) + std::string(kNotFound) + std::string(kHello));
  // Another method: 405, then the server closes.
  c.send("POST / HTTP/1.1\r\nContent-Length: 0\r\n\r\n");
  bool closed = false;
  EXPECT_EQ(c.read_to_end(&closed), kNotAllowed);
  EXPECT_TRUE(closed);

  // A request head that never ends: 431 once 8 KiB have arrived, then close.
  // Exactly 8 KiB, so that nothing is left unread when the server closes
  // (unread bytes would make the close a reset).
  Client big(port);
  const std::string head = "GET / HTTP/1.1\r\nX-Long: ";
  big.send(head + std::string(8192 - head.size(), 'a'));
  const std::string answer = big.read_to_end(&closed);
  EXPECT_TRUE(answer.starts_with("HTTP/1.1 431 ")) << answer;
  EXPECT_TRUE(closed);

  if (kSignalsFromOutsideArrive) {
    server.signal(SIGTERM);
    EXPECT_TRUE(exited_zero(server.wait()));
  }
}

TEST(HttpExample, SigtermFinishesTheRequestInFlightClosesIdleAndExitsZero) {
  if (!kSignalsFromOutsideArrive) GTEST_SKIP() << "signals from outside do not arrive under TSan";
  Child server(example("http_server"), {"127.0.0.1:0"});
  const int port = server.listening_port();
  ASSERT_GT(port, 0);
  Client idle(port);
  idle.send(kRequest);
  ASSERT_EQ(idle.read_exactly(kHello.size()), kHello);  // now idle, kept alive
  Client busy(port);
  busy.send("GET / HTTP/1.1\r\nHost: te");  // half a request: in flight
  std::this_thread::sleep_for(100ms);       // let the server read it

  server.signal(SIGTERM);
  // The idle keep-alive connection is closed by the shutdown...
  bool closed = false;
  EXPECT_EQ(idle.read_to_end(&closed), "");
  EXPECT_TRUE(closed) << "the idle connection was not closed";
  EXPECT_FALSE(server.wait(50ms)) << "exited before the request in flight was answered";
  // ...while the one in the middle of a request still gets its answer.
  busy.send("st\r\n\r\n");
  EXPECT_EQ(busy.read_to_end(&closed), kHello);
  EXPECT_TRUE(closed);
  EXPECT_TRUE(exited_zero(server.wait()));
}

TEST(HttpExample, SigintExitsZero) {
  if (!kSignalsFromOutsideArrive) GTEST_SKIP() << "signals from outside do not arrive under TSan";
  Child server(example("http_server"), {"127.0.0.1:0"});
  const int port = server.listening_port();
  ASSERT_GT(port, 0);
  {
    Client c(port);
    c.send(kRequest);
    EXPECT_EQ(c.read_exactly(kHello.size()), kHello);
  }
  server.signal(SIGINT);
  EXPECT_TRUE(exited_zero(server.wait()));
}

// The server runs with a descriptor limit far below the number of clients:
// its accept loop hits EMFILE, backs off, and serves the waiting clients as
// the earlier ones leave (each answered in turn, none refused or dropped).
TEST(HttpExample, KeepsServingAfterRunningOutOfDescriptors) {
  constexpr int kClients = 60;
  rlimit saved{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &saved), 0);
  rlimit low = saved;
  low.rlim_cur = 32;  // the server's own descriptors (~10) + about 20 connections
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &low), 0);
  Child server(example("http_server"), {"127.0.0.1:0"});  // inherits the limit
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &saved), 0);
  const int port = server.listening_port();
  ASSERT_GT(port, 0);

  std::vector<std::unique_ptr<Client>> clients;
  for (int i = 0; i < kClients; ++i) {
    clients.push_back(std::make_unique<Client>(port));  // queued in the backlog if need be
    clients.back()->send(kRequest);
  }
  // In connection order (the order they are accepted): each is answered,
  // then leaves, freeing a descriptor for one still waiting.
  for (int i = 0; i < kClients; ++i) {
    EXPECT_EQ(clients[i]->read_exactly(kHello.size()), kHello) << "client " << i;
    clients[i].reset();
  }
  if (kSignalsFromOutsideArrive) {
    server.signal(SIGTERM);
    EXPECT_TRUE(exited_zero(server.wait()));
  }
}

// ---- chat_server ----

// The next line that is not a "***" notice.
std::optional<std::string> next_message(Client& c) {
  for (;;) {
    std::optional<std::string> line = c.read_line();
    if (!line || !line->starts_with("***")) return line;
  }
}

TEST(ChatExample, ALineReachesEveryOtherClientNotItsAuthor) {
  Child server(example("chat_server"), {"127.0.0.1:0"});
  const int port = server.listening_port();
  ASSERT_GT(port, 0);
  Client a(port), b(port), c(port);
  // Each is in the room once it has its welcome line.
  for (Client* x : {&a, &b, &c}) {
    std::optional<std::string> welcome = x->read_line();
    ASSERT_TRUE(welcome);
    EXPECT_EQ(*welcome, "*** welcome, you are " + x->local_address());
  }
  a.send("hello from a\n");
  const std::string expected = "[" + a.local_address() + "] hello from a";
  EXPECT_EQ(next_message(b), expected);
  EXPECT_EQ(next_message(c), expected);
  // a is not sent its own line: the next message it sees is b's.
  b.send("hi a\n");
  EXPECT_EQ(next_message(a), "[" + b.local_address() + "] hi a");
  EXPECT_EQ(next_message(c), "[" + b.local_address() + "] hi a");
}

// ---- file_server ----

// A directory of its own under the temporary directory, removed at the end.
class TempDir {
 public:
  explicit TempDir(std::string_view name)
      : path_(std::filesystem::temp_directory_path() /
              (std::string(name) + "-" + std::to_string(::getpid()))) {
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

void write_file(const std::filesystem::path& path, std::string_view contents) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(contents.data(), static_cast<std::streamsize>(contents.size()));
  ASSERT_TRUE(out.good()) << path;
}

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// One HTTP answer: its status line, Content-Length and body (`with_body`
// false for HEAD: the head only).
struct HttpAnswer {
  std::string status_line;
  std::string head;  // the header lines, each ending in "\r\n"
  std::size_t content_length = 0;
  std::string body;
};

HttpAnswer read_answer(Client& c, bool with_body = true) {
  HttpAnswer a;
  std::optional<std::string> line = c.read_line();
  if (!line) return a;
  a.status_line = *line;
  while (std::optional<std::string> header = c.read_line()) {
    if (*header == "\r") break;
    a.head += *header + "\n";
    constexpr std::string_view kLength = "Content-Length: ";
    if (header->starts_with(kLength))
      a.content_length = std::strtoull(header->c_str() + kLength.size(), nullptr, 10);
  }
  if (with_body) a.body = c.read_exactly(a.content_length);
  return a;
}

TEST(FileServerExample, ServesFilesKeepsAliveRefusesEscapes) {
  TempDir root("volt-file-server-test");
  std::string big(1 << 20, '\0');
  for (std::size_t i = 0; i < big.size(); ++i)
    big[i] = static_cast<char>(i % 251);
  write_file(root.path() / "big.bin", big);
  write_file(root.path() / "hello.txt", "hello, files\n");
  std::filesystem::create_directories(root.path() / "sub");
  write_file(root.path() / "sub" / "inner.txt", "inner\n");

  Child server(example("file_server"), {root.path().string(), "0"});
  const int port = server.listening_port();
  ASSERT_GT(port, 0);
  Client c(port);

  // The 1 MiB file, byte for byte; then, on the same connection, the others.
  c.send("GET /big.bin HTTP/1.1\r\nHost: test\r\n\r\n");
  HttpAnswer a = read_answer(c);
  EXPECT_EQ(a.status_line, "HTTP/1.1 200 OK\r");
  EXPECT_EQ(a.content_length, big.size());
  EXPECT_TRUE(a.body == big) << "the 1 MiB file came back different (" << a.body.size()
                             << " bytes)";

  c.send("GET /hello.txt HTTP/1.1\r\nHost: test\r\n\r\n");
  a = read_answer(c);
  EXPECT_EQ(a.status_line, "HTTP/1.1 200 OK\r");
  EXPECT_NE(a.head.find("Content-Type: text/plain"), std::string::npos) << a.head;
  EXPECT_EQ(a.body, "hello, files\n");

  // Pipelined: a subdirectory's file (%-escaped) and a missing one.
  c.send(
      "GET /sub/inn%65r.txt HTTP/1.1\r\nHost: test\r\n\r\n"
      "GET /missing.txt HTTP/1.1\r\nHost: test\r\n\r\n");
  a = read_answer(c);
  EXPECT_EQ(a.status_line, "HTTP/1.1 200 OK\r");
  EXPECT_EQ(a.body, "inner\n");
  a = read_answer(c);
  EXPECT_EQ(a.status_line, "HTTP/1.1 404 Not Found\r");

  // A directory is not a file.
  c.send("GET /sub HTTP/1.1\r\nHost: test\r\n\r\n");
  EXPECT_EQ(read_answer(c).status_line, "HTTP/1.1 404 Not Found\r");

  // HEAD: the head of the big file, no body; the next answer follows at once.
  c.send("HEAD /big.bin HTTP/1.1\r\nHost: test\r\n\r\nGET /hello.txt HTTP/1.1\r\n\r\n");
  a = read_answer(c, false);
  EXPECT_EQ(a.status_line, "HTTP/1.1 200 OK\r");
  EXPECT_EQ(a.content_length, big.size());
  EXPECT_EQ(read_answer(c).body, "hello, files\n");

  // Out of the root: "..", plain or %-escaped, is refused before the file
  // system is asked; a symbolic link out of the root after it resolves it.
  std::filesystem::create_symlink("/etc", root.path() / "etc-link");
  for (const char* target :
       {"/../etc/passwd", "/sub/../../etc/passwd", "/%2e%2e/etc/passwd", "/etc-link/passwd"}) {
    c.send("GET " + std::string(target) + " HTTP/1.1\r\nHost: test\r\n\r\n");
    a = read_answer(c);
    EXPECT_TRUE(a.status_line == "HTTP/1.1 403 Forbidden\r" ||
                a.status_line == "HTTP/1.1 404 Not Found\r")
        << target << ": " << a.status_line;
    EXPECT_EQ(a.body.find("root:"), std::string::npos) << target;
  }

  // Another method: 405 and the connection closes.
  c.send("DELETE /hello.txt HTTP/1.1\r\nHost: test\r\n\r\n");
  bool closed = false;
  const std::string rest = c.read_to_end(&closed);
  EXPECT_TRUE(rest.starts_with("HTTP/1.1 405 ")) << rest;
  EXPECT_TRUE(closed);

  if (kSignalsFromOutsideArrive) {
    server.signal(SIGTERM);
    EXPECT_TRUE(exited_zero(server.wait()));
  }
}

// ---- log_scan ----

TEST(LogScanExample, CountsMatchingLinesAndWritesTheReportAtomically) {
  TempDir dir("volt-log-scan-test");
  const std::filesystem::path tree = dir.path() / "logs";
  std::filesystem::create_directories(tree / "sub" / "deeper");
  write_file(tree / "a.log", "ERROR one\nok\nan ERROR two\nERRORS three\nfine\n");
  write_file(tree / "sub" / "b.log", "nothing\nto see\n");
  write_file(tree / "sub" / "deeper" / "c.txt", "ERROR\n\nlast ERROR line without newline");
  const std::filesystem::path report = dir.path() / "report.txt";
  write_file(report, "the previous report\n");  // replaced by the new one

  Child scan(example("log_scan"), {tree.string(), "ERROR", report.string()});
  EXPECT_TRUE(exited_zero(scan.wait()));
  EXPECT_EQ(read_file(report),
            "a.log: 3\n"
            "sub/b.log: 0\n"
            "sub/deeper/c.txt: 2\n"
            "total: 5\n");
  EXPECT_FALSE(std::filesystem::exists(report.string() + ".tmp"));
  std::size_t entries = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir.path()))
    ++entries;
  EXPECT_EQ(entries, 2u) << "logs/ and report.txt only";
}

TEST(LogScanExample, AMissingDirectoryFails) {
  TempDir dir("volt-log-scan-missing-test");
  const std::filesystem::path report = dir.path() / "report.txt";
  Child scan(example("log_scan"), {(dir.path() / "nope").string(), "x", report.string()});
  const std::optional<int> status = scan.wait();
  ASSERT_TRUE(status);
  EXPECT_TRUE(WIFEXITED(*status));
  EXPECT_EQ(WEXITSTATUS(*status), 1);
  EXPECT_FALSE(std::filesystem::exists(report));
  EXPECT_FALSE(std::filesystem::exists(report.string() + ".tmp"));
}

// ---- run_parallel ----

// A finished run: the exit status (waitpid's, nullopt if it did not exit
// within kPatience), what it wrote on stdout and on stderr, and how long it
// took.
struct Finished {
  std::optional<int> status;
  std::string out;
  std::string err;
  Clock::duration took{};
};

// Runs `path` with `args`, its stdout and stderr into files of `dir`.
Finished run_to_end(const std::string& path, std::vector<std::string> args,
                    const std::filesystem::path& dir) {
  const std::string out_path = (dir / "stdout").string();
  const std::string err_path = (dir / "stderr").string();
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, out_path.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, err_path.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  std::vector<char*> argv;
  args.insert(args.begin(), path);
  for (auto& a : args)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  Finished run;
  const auto started = Clock::now();
  pid_t pid = -1;
  const int err = ::posix_spawn(&pid, path.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  EXPECT_EQ(err, 0) << path << ": " << std::strerror(err);
  if (err != 0) return run;
  const auto deadline = started + kPatience;
  for (;;) {
    int status = 0;
    if (::waitpid(pid, &status, WNOHANG) == pid) {
      run.status = status;
      break;
    }
    if (Clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      break;
    }
    std::this_thread::sleep_for(5ms);
  }
  run.took = Clock::now() - started;
  run.out = read_file(out_path);
  run.err = read_file(err_path);
  return run;
}

// The lines of `text` (without their '\n').
std::vector<std::string> lines_of(std::string_view text) {
  std::vector<std::string> lines;
  while (!text.empty()) {
    const std::size_t nl = text.find('\n');
    lines.emplace_back(text.substr(0, nl));
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
  }
  return lines;
}

bool has_line(const std::vector<std::string>& lines, std::string_view prefix) {
  for (const std::string& line : lines)
    if (line.starts_with(prefix)) return true;
  return false;
}

// A success, a failure, a program that does not exist and one that outlives
// its timeout, two at a time (one line is blank: skipped, but counted in
// the line numbers; bare names are searched in PATH).
TEST(RunParallelExample, PrefixesOutputReportsEachOutcomeAndFails) {
  TempDir dir("volt-run-parallel-test");
  const std::filesystem::path commands = dir.path() / "commands.txt";
  write_file(commands,
             "echo hello   from\tone\n"
             "/bin/sh -c echo_to_stderr\n"
             "\n"
             "/nonexistent/program --flag\n"
             "sleep 10\n"
             "/bin/ls /nonexistent-run-parallel-path\n");
  const Finished run =
      run_to_end(example("run_parallel"), {"-j", "2", "-t", "1", commands.string()}, dir.path());
  ASSERT_TRUE(run.status) << "run_parallel hung";
  EXPECT_TRUE(WIFEXITED(*run.status));
  EXPECT_EQ(WEXITSTATUS(*run.status), 1) << run.out << run.err;
  // One timeout of 1 s, the other commands quick: well under kPatience, and
  // not waiting for sleep's 10 s.
  EXPECT_LT(run.took, 8s);

  const std::vector<std::string> out = lines_of(run.out);
  const std::vector<std::string> err = lines_of(run.err);
  // Line 1: its output on stdout, split on white space, then its status.
  EXPECT_TRUE(has_line(out, "[1] hello from one")) << run.out;
  EXPECT_TRUE(has_line(out, "[1] exit 0 (")) << run.out;
  // Line 2: sh cannot find the command: its complaint on stderr, prefixed,
  // and exit 127.
  EXPECT_TRUE(has_line(err, "[2] ")) << run.err;
  EXPECT_TRUE(has_line(out, "[2] failed: exit 127 (")) << run.out;
  // Line 4: not started at all (an error from spawn, naming the cause).
  EXPECT_TRUE(has_line(out, "[4] could not start: /nonexistent/program: ")) << run.out;
  // Line 5: killed at its timeout.
  EXPECT_TRUE(has_line(out, "[5] timed out after 1.00 s: killed")) << run.out;
  // Line 6: ls's error on stderr, prefixed, and its non-zero exit.
  EXPECT_TRUE(has_line(err, "[6] ")) << run.err;
  EXPECT_TRUE(has_line(out, "[6] failed: exit ")) << run.out;
  // Nothing unprefixed but the summary, which comes last.
  ASSERT_FALSE(out.empty());
  for (std::size_t i = 0; i + 1 < out.size(); ++i)
    EXPECT_TRUE(out[i].starts_with("[")) << out[i];
  for (const std::string& line : err)
    EXPECT_TRUE(line.starts_with("[")) << line;
  EXPECT_EQ(out.back(), "5 command(s): 1 succeeded, 2 failed, 1 timed out, 1 could not start");
}

TEST(RunParallelExample, AllSucceedingExitsZeroAndAMissingFileOrBadUsageFails) {
  TempDir dir("volt-run-parallel-ok-test");
  const std::filesystem::path commands = dir.path() / "commands.txt";
  std::string many;
  for (int i = 0; i < 6; ++i)
    many += "/bin/echo line " + std::to_string(i) + "\n";
  write_file(commands, many);
  Finished run = run_to_end(example("run_parallel"), {"-j", "3", commands.string()}, dir.path());
  ASSERT_TRUE(run.status);
  EXPECT_TRUE(exited_zero(run.status)) << run.out << run.err;
  const std::vector<std::string> out = lines_of(run.out);
  for (int i = 0; i < 6; ++i) {
    std::string prefix = "[";  // not "[" + ...: a false -Wrestrict under GCC 12
    prefix += std::to_string(i + 1);
    prefix += "] ";
    EXPECT_TRUE(has_line(out, prefix + "line " + std::to_string(i))) << run.out;
    EXPECT_TRUE(has_line(out, prefix + "exit 0 (")) << run.out;
  }
  ASSERT_FALSE(out.empty());
  EXPECT_EQ(out.back(), "6 command(s): 6 succeeded, 0 failed, 0 timed out, 0 could not start");
  EXPECT_EQ(run.err, "");

  run = run_to_end(example("run_parallel"), {(dir.path() / "missing.txt").string()}, dir.path());
  ASSERT_TRUE(run.status);
  EXPECT_TRUE(WIFEXITED(*run.status));
  EXPECT_EQ(WEXITSTATUS(*run.status), 1);

  run = run_to_end(example("run_parallel"), {"-j", "0", commands.string()}, dir.path());
  ASSERT_TRUE(run.status);
  EXPECT_TRUE(WIFEXITED(*run.status));
  EXPECT_EQ(WEXITSTATUS(*run.status), 2);
}

// ---- parallel_tasks ----

// Response times are 30, 60, ... 240 ms dealt at random: the first three
// answers must be the 30, 60 and 90 ms ones, in that order (join_next in
// completion order), the five others aborted, and the 2 s database lookup
// cancelled by the select (the run takes far less than 2 s).
TEST(ParallelTasksExample, TakesTheFastestAnswersAbortsTheRestAndRacesTwoLookups) {
  TempDir dir("volt-parallel-tasks-test");
  Finished run = run_to_end(example("parallel_tasks"),
                            {"--services", "8", "--first", "3", "--seed", "7"}, dir.path());
  ASSERT_TRUE(run.status);
  EXPECT_TRUE(WIFEXITED(*run.status));
  EXPECT_EQ(WEXITSTATUS(*run.status), 0) << run.err;
  const std::vector<std::string> lines = lines_of(run.out);
  ASSERT_EQ(lines.size(), 6u) << run.out;
  EXPECT_EQ(lines[0], "checking 8 services, keeping the first 3 to answer");
  std::vector<std::string> services;
  for (int i = 0; i < 3; ++i) {
    const std::string& line = lines[static_cast<std::size_t>(i) + 1];
    std::string suffix = " healthy (answered in ";
    suffix += std::to_string(30 * (i + 1));
    suffix += " ms)";
    EXPECT_TRUE(line.starts_with("service-")) << line;
    EXPECT_TRUE(line.ends_with(suffix)) << line;
    services.push_back(line.substr(0, line.find(' ')));
  }
  EXPECT_NE(services[0], services[1]);
  EXPECT_NE(services[1], services[2]);
  EXPECT_NE(services[0], services[2]);
  EXPECT_EQ(lines[4], "aborted 5 slower checks (5 reported cancelled)");
  EXPECT_EQ(lines[5], "race: cache answered first (value 42); the database lookup was cancelled");
  EXPECT_LT(run.took, 1500ms) << "the losing lookup was waited for";
}

TEST(ParallelTasksExample, BadUsageExitsTwo) {
  TempDir dir("volt-parallel-tasks-usage-test");
  Finished run =
      run_to_end(example("parallel_tasks"), {"--services", "3", "--first", "4"}, dir.path());
  ASSERT_TRUE(run.status);
  EXPECT_TRUE(WIFEXITED(*run.status));
  EXPECT_EQ(WEXITSTATUS(*run.status), 2);
  run = run_to_end(example("parallel_tasks"), {"--services", "zero"}, dir.path());
  ASSERT_TRUE(run.status);
  EXPECT_EQ(WEXITSTATUS(*run.status), 2);
}

// ---- TLS: https_server, https_get, chat_server --tls ----

#if VOLT_EXAMPLES_TLS

// `name` found in PATH (empty if it is not there).
std::string find_program(std::string_view name) {
  const char* path = std::getenv("PATH");
  std::string_view dirs = path != nullptr ? path : "/usr/bin:/bin";
  while (!dirs.empty()) {
    const std::size_t colon = dirs.find(':');
    std::filesystem::path candidate(dirs.substr(0, colon));
    candidate /= name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate.string();
    dirs.remove_prefix(colon == std::string_view::npos ? dirs.size() : colon + 1);
  }
  return {};
}

// A CA, a leaf it signed for localhost and 127.0.0.1 (cert.pem, key.pem),
// and an unrelated CA (other-ca.pem), made by the openssl command in a
// directory of the test's own.
class Pki {
 public:
  Pki() : dir_("volt-examples-tls-test") {
    openssl_ = find_program("openssl");
    if (openssl_.empty()) return;
    const std::string d = dir_.path().string();
    write_file(dir_.path() / "ext.cnf", "subjectAltName=DNS:localhost,IP:127.0.0.1\n");
    const std::vector<std::vector<std::string>> steps = {
        {"req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
         "-keyout", d + "/ca.key", "-out", d + "/ca.pem", "-days", "30", "-subj",
         "/CN=volt-examples-test-ca"},
        {"req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
         "-keyout", d + "/other-ca.key", "-out", d + "/other-ca.pem", "-days", "30", "-subj",
         "/CN=volt-examples-other-ca"},
        {"req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout",
         d + "/key.pem", "-out", d + "/leaf.csr", "-subj", "/CN=localhost"},
        {"x509", "-req", "-in", d + "/leaf.csr", "-CA", d + "/ca.pem", "-CAkey", d + "/ca.key",
         "-CAcreateserial", "-days", "30", "-extfile", d + "/ext.cnf", "-out", d + "/cert.pem"},
    };
    const std::filesystem::path scratch = dir_.path() / "run";
    std::filesystem::create_directories(scratch);
    for (const std::vector<std::string>& step : steps) {
      const Finished run = run_to_end(openssl_, step, scratch);
      if (!exited_zero(run.status)) {
        ADD_FAILURE() << "openssl " << step[0] << " failed: " << run.err;
        return;
      }
    }
    ok_ = true;
  }
  bool ok() const { return ok_; }
  const std::string& openssl() const { return openssl_; }
  std::string file(std::string_view name) const { return (dir_.path() / name).string(); }
  std::string ca() const { return file("ca.pem"); }
  std::string cert() const { return file("cert.pem"); }
  std::string key() const { return file("key.pem"); }
  // A scratch directory for run_to_end's output files.
  std::filesystem::path scratch() const { return dir_.path() / "run"; }

 private:
  TempDir dir_;
  std::string openssl_;
  bool ok_ = false;
};

std::string url(int port, std::string_view host = "localhost", std::string_view path = "/") {
  std::string u = "https://";
  u += host;
  u += ":";
  u += std::to_string(port);
  u += path;
  return u;
}

TEST(HttpsExample, HttpsGetAndCurlFetchVerifiedAndAnUntrustedServerIsRefused) {
  Pki pki;
  if (!pki.ok()) GTEST_SKIP() << "no openssl command";
  Child server(example("https_server"), {"127.0.0.1:0", pki.cert(), pki.key()});
  const int port = server.listening_port();
  ASSERT_GT(port, 0);

  // https_get, the CA given: the status line and the body on stdout, the
  // header lines on stderr.
  Finished run = run_to_end(example("https_get"), {url(port), "--cacert", pki.ca()}, pki.scratch());
  ASSERT_TRUE(run.status) << "https_get hung";
  EXPECT_TRUE(exited_zero(run.status)) << run.err;
  EXPECT_EQ(run.out, "HTTP/1.1 200 OK\nHello, World!");
  EXPECT_NE(run.err.find("Content-Length: 13"), std::string::npos) << run.err;
  // By IP address (matched against the certificate's IP name), another path.
  run = run_to_end(example("https_get"), {url(port, "127.0.0.1", "/missing"), "--cacert", pki.ca()},
                   pki.scratch());
  EXPECT_TRUE(exited_zero(run.status)) << run.err;
  EXPECT_EQ(run.out, "HTTP/1.1 404 Not Found\n");

  // curl: two requests on one kept-alive TLS connection.
  const std::string curl = find_program("curl");
  if (curl.empty()) {
    ADD_FAILURE() << "no curl command: the curl half of the test did not run";
  } else {
    run = run_to_end(curl, {"-sS", "--cacert", pki.ca(), url(port), url(port)}, pki.scratch());
    ASSERT_TRUE(run.status) << "curl hung";
    EXPECT_TRUE(exited_zero(run.status)) << run.err;
    EXPECT_EQ(run.out, "Hello, World!Hello, World!");
  }

  // Without the right CA: the system's store, then an unrelated CA. Both
  // fail the handshake, say why, and exit non-zero.
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{url(port)},
        std::vector<std::string>{url(port), "--cacert", pki.file("other-ca.pem")}}) {
    run = run_to_end(example("https_get"), args, pki.scratch());
    ASSERT_TRUE(run.status) << "https_get hung";
    EXPECT_TRUE(WIFEXITED(*run.status));
    EXPECT_NE(WEXITSTATUS(*run.status), 0);
    EXPECT_NE(run.err.find("certificate verify failed"), std::string::npos) << run.err;
    EXPECT_EQ(run.out, "");
  }
  // The server is still serving after refused handshakes.
  run = run_to_end(example("https_get"), {url(port), "--cacert", pki.ca()}, pki.scratch());
  EXPECT_EQ(run.out, "HTTP/1.1 200 OK\nHello, World!");

  if (kSignalsFromOutsideArrive) {
    server.signal(SIGTERM);
    EXPECT_TRUE(exited_zero(server.wait()));
  }
}

TEST(HttpsExample, BadArgumentsAndAMissingKeyFail) {
  Pki pki;
  if (!pki.ok()) GTEST_SKIP() << "no openssl command";
  Finished run = run_to_end(example("https_server"),
                            {"127.0.0.1:0", pki.cert(), pki.file("nope.pem")}, pki.scratch());
  ASSERT_TRUE(run.status);
  EXPECT_TRUE(WIFEXITED(*run.status));
  EXPECT_EQ(WEXITSTATUS(*run.status), 1) << run.err;
  EXPECT_NE(run.err.find("nope.pem"), std::string::npos) << run.err;

  run = run_to_end(example("https_get"), {"http://localhost/"}, pki.scratch());
  ASSERT_TRUE(run.status);
  EXPECT_TRUE(WIFEXITED(*run.status));
  EXPECT_EQ(WEXITSTATUS(*run.status), 2) << run.err;
  // Nobody listening: a connection error, not a hang.
  run =
      run_to_end(example("https_get"), {url(1, "127.0.0.1"), "--cacert", pki.ca()}, pki.scratch());
  ASSERT_TRUE(run.status);
  EXPECT_TRUE(WIFEXITED(*run.status));
  EXPECT_EQ(WEXITSTATUS(*run.status), 1) << run.err;
  EXPECT_NE(run.err.find("cannot connect"), std::string::npos) << run.err;
}

// An `openssl s_client` to 127.0.0.1:port verifying the server against
// pki's CA, its stdin and stdout on pipes (-quiet: the application data
// only; stdin's end does not end the connection).
std::unique_ptr<Child> s_client(const Pki& pki, int port) {
  std::string connect = "127.0.0.1:";
  connect += std::to_string(port);
  return std::make_unique<Child>(
      pki.openssl(),
      std::vector<std::string>{"s_client", "-quiet", "-connect", connect, "-servername",
                               "localhost", "-verify_hostname", "localhost", "-CAfile", pki.ca(),
                               "-verify_return_error"},
      true, true);
}

// SIGTERM with two TLS connections open: the idle one is closed (s_client
// sees the end of the connection and exits), the one holding half a request
// gets its answer, then the server exits 0.
TEST(HttpsExample, SigtermFinishesTheRequestInFlightClosesIdleAndExitsZero) {
  if (!kSignalsFromOutsideArrive) GTEST_SKIP() << "signals from outside do not arrive under TSan";
  Pki pki;
  if (!pki.ok()) GTEST_SKIP() << "no openssl command";
  Child server(example("https_server"), {"127.0.0.1:0", pki.cert(), pki.key()});
  const int port = server.listening_port();
  ASSERT_GT(port, 0);
  std::unique_ptr<Child> idle = s_client(pki, port);
  idle->write_stdin(kRequest);
  EXPECT_EQ(idle->read_line(), "HTTP/1.1 200 OK\r");  // now idle, kept alive
  std::unique_ptr<Child> busy = s_client(pki, port);
  busy->write_stdin("GET / HTTP/1.1\r\nHost: te");  // half a request: in flight
  std::this_thread::sleep_for(500ms);               // the handshake, and the server reads it

  server.signal(SIGTERM);
  bool closed = false;
  const std::string rest = idle->read_to_end(&closed);
  EXPECT_TRUE(closed) << "the idle connection was not closed";
  EXPECT_TRUE(rest.ends_with("Hello, World!")) << rest;
  EXPECT_TRUE(exited_zero(idle->wait())) << "s_client saw an error (no close_notify?)";
  EXPECT_FALSE(server.wait(50ms)) << "exited before the request in flight was answered";
  busy->write_stdin("st\r\n\r\n");
  EXPECT_EQ(busy->read_to_end(&closed), kHello);
  EXPECT_TRUE(closed);
  EXPECT_TRUE(exited_zero(server.wait()));
}

// Two `openssl s_client` clients in a chat_server --tls room.
TEST(ChatExample, TlsClientsExchangeLines) {
  Pki pki;
  if (!pki.ok()) GTEST_SKIP() << "no openssl command";
  Child server(example("chat_server"), {"127.0.0.1:0", "--tls", pki.cert(), pki.key()});
  const int port = server.listening_port();
  ASSERT_GT(port, 0);
  constexpr std::string_view kWelcome = "*** welcome, you are ";
  std::unique_ptr<Child> a = s_client(pki, port);
  std::optional<std::string> welcome_a = a->read_line();
  ASSERT_TRUE(welcome_a);
  ASSERT_TRUE(welcome_a->starts_with(kWelcome)) << *welcome_a;
  const std::string address_a = welcome_a->substr(kWelcome.size());
  std::unique_ptr<Child> b = s_client(pki, port);
  std::optional<std::string> welcome_b = b->read_line();
  ASSERT_TRUE(welcome_b);
  ASSERT_TRUE(welcome_b->starts_with(kWelcome)) << *welcome_b;
  const std::string address_b = welcome_b->substr(kWelcome.size());

  a->write_stdin("hello over tls\n");
  // b hears it (after any notice); a is not sent its own line.
  std::string expected = "[";
  expected += address_a;
  expected += "] hello over tls";
  std::optional<std::string> line;
  do {
    line = b->read_line();
  } while (line && line->starts_with("***"));
  EXPECT_EQ(line, expected);
  b->write_stdin("and back\n");
  expected = "[";
  expected += address_b;
  expected += "] and back";
  do {
    line = a->read_line();
  } while (line && line->starts_with("***"));
  EXPECT_EQ(line, expected);
}

#endif  // VOLT_EXAMPLES_TLS

}  // namespace
