// The h1 engine end to end: real sockets, the H1TestServer on its loop thread, curl (cleartext
// and TLS) and raw sockets as the peers. Transfers are checked byte for byte (SHA-256).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "h1_test_server.h"
#include "support/command.h"

namespace petrel::http {
namespace {

using std::chrono::milliseconds;

struct CommandResult {
  int exit_code = -1;
  std::string output;
};

// Runs `cmd` through the shell, stdout only (stderr to `err_file` if given).
CommandResult RunCommand(const std::string& cmd) {
  CommandResult r;
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) r.output.append(buf, n);
  const int status = pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

std::string Sha256Of(const std::filesystem::path& path) {
  CommandResult r = RunCommand(absl::StrCat("sha256sum ", path.string()));
  return r.output.substr(0, 64);
}

using ::petrel::testing::TempDir;

// `mib` MiB of pseudo-random bytes (deterministic per seed), written without holding them all.
void WriteRandomFile(const std::filesystem::path& path, size_t mib, uint32_t seed) {
  std::ofstream out(path, std::ios::binary);
  std::string block(1 << 20, '\0');
  uint32_t x = seed;
  for (size_t m = 0; m < mib; ++m) {
    for (char& c : block) {
      x = x * 1664525u + 1013904223u;
      c = static_cast<char>(x >> 24);
    }
    out.write(block.data(), static_cast<std::streamsize>(block.size()));
  }
}

std::string ExpectedBig(uint64_t offset, uint64_t n) {
  std::string s;
  s.reserve(n);
  for (uint64_t i = 0; i < n; ++i) s.push_back(H1BigByte(offset + i));
  return s;
}

// ---- Raw sockets ----

class RawClient {
 public:
  explicit RawClient(uint16_t port, int rcvbuf = 0) {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (rcvbuf > 0) setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
  }
  ~RawClient() {
    if (fd_ >= 0) close(fd_);
  }
  bool connected() const { return connected_; }
  int fd() const { return fd_; }
  // The client's port: the server's peer port for this connection.
  uint16_t local_port() const {
    sockaddr_in a{};
    socklen_t len = sizeof(a);
    if (getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0) return 0;
    return ntohs(a.sin_port);
  }

  bool Send(absl::string_view bytes) {
    while (!bytes.empty()) {
      const ssize_t n = send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
      if (n <= 0) return false;
      bytes.remove_prefix(static_cast<size_t>(n));
    }
    return true;
  }
  void ShutdownWrite() { shutdown(fd_, SHUT_WR); }

  // Reads what arrives within `timeout` into received(); false on timeout. eof() once the peer
  // closed (or reset).
  bool ReadSome(milliseconds timeout, size_t max = 1 << 20) {
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(timeout.count())) <= 0) return false;
    std::string buf(max, '\0');
    const ssize_t n = recv(fd_, buf.data(), buf.size(), 0);
    if (n <= 0) {
      eof_ = true;
      return true;
    }
    received_.append(buf.data(), static_cast<size_t>(n));
    return true;
  }
  // Reads until EOF or until the deadline; true if EOF was seen.
  bool ReadUntilEof(milliseconds timeout = milliseconds(10000)) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!eof_) {
      const auto left =
          std::chrono::duration_cast<milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0 || !ReadSome(left)) return false;
    }
    return true;
  }
  // Reads until received() holds `n` bytes (or contains `needle`), EOF or the deadline.
  bool ReadUntilSize(size_t n, milliseconds timeout = milliseconds(10000)) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (received_.size() < n && !eof_) {
      const auto left =
          std::chrono::duration_cast<milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0 || !ReadSome(left, std::min<size_t>(1 << 20, n - received_.size())))
        return false;
    }
    return received_.size() >= n;
  }
  bool ReadUntilContains(absl::string_view needle, milliseconds timeout = milliseconds(10000)) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!absl::StrContains(received_, needle) && !eof_) {
      const auto left =
          std::chrono::duration_cast<milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0 || !ReadSome(left)) return false;
    }
    return absl::StrContains(received_, needle);
  }

  const std::string& received() const { return received_; }
  std::string& mutable_received() { return received_; }
  bool eof() const { return eof_; }

 private:
  int fd_ = -1;
  bool connected_ = false;
  bool eof_ = false;
  std::string received_;
};

// Removes "Date: ...\r\n" lines so responses compare byte for byte.
std::string WithoutDate(absl::string_view s) {
  std::string out;
  for (absl::string_view line : absl::StrSplit(s, absl::ByString("\r\n"))) {
    if (absl::StartsWith(line, "Date: ")) continue;
    absl::StrAppend(&out, line, "\r\n");
  }
  if (out.size() >= 2) out.resize(out.size() - 2);  // StrSplit's last piece has no CRLF
  return out;
}

H1TestServer::Options Defaults(bool tls = false) {
  H1TestServer::Options o;
  o.tls = tls;
  o.h1.max_request_body = uint64_t{128} << 20;
  return o;
}

std::string Url(const H1TestServer& s, bool tls, absl::string_view path) {
  return absl::StrCat("'", tls ? "https" : "http", "://127.0.0.1:", s.port(), path, "'");
}

std::string Curl(bool tls) {
  return tls ? "curl -sS -k --http1.1 --max-time 120 " : "curl -sS --http1.1 --max-time 120 ";
}

// ---- curl, cleartext and TLS ----

class H1CurlTest : public ::testing::TestWithParam<bool> {};

TEST_P(H1CurlTest, Http10And11AndRequestFields) {
  const bool tls = GetParam();
  H1TestServer server(Defaults(tls));
  ASSERT_TRUE(server.ok());
  CommandResult r = RunCommand(Curl(tls) + Url(server, tls, "/hello"));
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.output, "hello");
  r = RunCommand(Curl(tls) + "--http1.0 " + Url(server, tls, "/hello"));
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.output, "hello");
  r = RunCommand(Curl(tls) + Url(server, tls, "/info?a=1&b=2"));
  EXPECT_EQ(r.output, absl::StrCat(tls ? "https" : "http", " 127.0.0.1:", server.port(),
                                   " HTTP/1.1 /info a=1&b=2 ", tls ? "http/1.1" : "-"));
  r = RunCommand(Curl(tls) + "--http1.0 " + Url(server, tls, "/info"));
  EXPECT_TRUE(absl::StrContains(r.output, " HTTP/1.0 /info ")) << r.output;
  // HTTP/1.0 and an unknown length: close-delimited, byte-exact.
  r = RunCommand(Curl(tls) + "--http1.0 " + Url(server, tls, "/stream?kib=300"));
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_TRUE(r.output == ExpectedBig(0, 300 << 10)) << r.output.size();
}

TEST_P(H1CurlTest, KeepAliveReusesOneConnection) {
  const bool tls = GetParam();
  H1TestServer server(Defaults(tls));
  ASSERT_TRUE(server.ok());
  CommandResult r = RunCommand(Curl(tls) + "-o /dev/null -o /dev/null -w '%{num_connects}\\n' " +
                               Url(server, tls, "/hello") + " " + Url(server, tls, "/big?kib=64"));
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.output, "1\n0\n");
  EXPECT_EQ(server.accepted(), 1u);
}

TEST_P(H1CurlTest, Upload50MiBWithExpectContinue) {
  const bool tls = GetParam();
  TempDir dir;
  WriteRandomFile(dir / "up", 50, 7);
  H1TestServer server(Defaults(tls));
  ASSERT_TRUE(server.ok());
  CommandResult r = RunCommand(
      absl::StrCat(Curl(tls), "-v -H 'Expect: 100-continue' --data-binary @", (dir / "up").string(),
                   " ", Url(server, tls, "/sha256"), " 2>", (dir / "err").string()));
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.output, absl::StrCat(Sha256Of(dir / "up"), " ", 50 << 20));
  EXPECT_TRUE(absl::StrContains(ReadFile(dir / "err"), "HTTP/1.1 100 Continue"));
  ASSERT_TRUE(server.WaitClosed(1, milliseconds(10000)));
  EXPECT_EQ(server.continues_sent(), 1u);
}

TEST_P(H1CurlTest, ChunkedUploadFromStdinAndEcho) {
  const bool tls = GetParam();
  TempDir dir;
  WriteRandomFile(dir / "up", 3, 9);
  H1TestServer server(Defaults(tls));
  ASSERT_TRUE(server.ok());
  CommandResult r = RunCommand(absl::StrCat("cat ", (dir / "up").string(), " | ", Curl(tls),
                                            "-T - ", Url(server, tls, "/sha256")));
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.output, absl::StrCat(Sha256Of(dir / "up"), " ", 3 << 20));
  // Streaming echo of a chunked upload: chunked both ways, backpressure both ways.
  r = RunCommand(absl::StrCat("cat ", (dir / "up").string(), " | ", Curl(tls), "-T - -o ",
                              (dir / "echo").string(), " ", Url(server, tls, "/echo")));
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(Sha256Of(dir / "echo"), Sha256Of(dir / "up"));
}

TEST_P(H1CurlTest, Download100MiBFileByteExact) {
  const bool tls = GetParam();
  TempDir dir;
  WriteRandomFile(dir / "file", 100, 11);
  H1TestServer::Options o = Defaults(tls);
  o.file_path = (dir / "file").string();
  H1TestServer server(o);
  ASSERT_TRUE(server.ok());
  CommandResult r =
      RunCommand(absl::StrCat(Curl(tls), "-o ", (dir / "down").string(),
                              " -w '%{http_code} %{size_download}' ", Url(server, tls, "/file")));
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.output, absl::StrCat("200 ", 100 << 20));
  EXPECT_EQ(Sha256Of(dir / "down"), Sha256Of(dir / "file"));
  ASSERT_TRUE(server.WaitClosed(1, milliseconds(10000)));
  // sendfile(2) on cleartext; pread + TLS records otherwise.
  EXPECT_EQ(server.sendfile_responses(), tls ? 0u : 1u);
}

TEST_P(H1CurlTest, HeadHasNoBody) {
  const bool tls = GetParam();
  H1TestServer server(Defaults(tls));
  ASSERT_TRUE(server.ok());
  CommandResult r = RunCommand(Curl(tls) + "-I " + Url(server, tls, "/hello"));
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_TRUE(absl::StartsWith(r.output, "HTTP/1.1 200 OK\r\n")) << r.output;
  EXPECT_TRUE(absl::StrContains(r.output, "Content-Length: 5\r\n")) << r.output;
  EXPECT_TRUE(absl::EndsWith(r.output, "\r\n\r\n")) << r.output;
  // A producer behind HEAD is drained, nothing sent; the connection is reused after it.
  r = RunCommand(Curl(tls) + "-o /dev/null -w '%{num_connects}' -I " +
                 Url(server, tls, "/stream?kib=512") + " -o /dev/null " +
                 Url(server, tls, "/hello"));
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.output, "10");
}

TEST_P(H1CurlTest, ProducerDownloadLengthKnownAndChunked) {
  const bool tls = GetParam();
  TempDir dir;
  H1TestServer server(Defaults(tls));
  ASSERT_TRUE(server.ok());
  for (const char* path : {"/big?kib=8192", "/stream?kib=8192"}) {
    CommandResult r = RunCommand(
        absl::StrCat(Curl(tls), "-o ", (dir / "out").string(), " ", Url(server, tls, path)));
    EXPECT_EQ(r.exit_code, 0);
    EXPECT_TRUE(ReadFile(dir / "out") == ExpectedBig(0, 8192 << 10)) << path;
  }
}

INSTANTIATE_TEST_SUITE_P(CleartextAndTls, H1CurlTest, ::testing::Values(false, true),
                         [](const auto& p) { return p.param ? "Tls" : "Cleartext"; });

// ---- Raw sockets ----

TEST(H1RawTest, PipelinedResponsesInOrderByteExact) {
  H1TestServer server(Defaults());
  ASSERT_TRUE(server.ok());
  RawClient c(server.port());
  ASSERT_TRUE(c.connected());
  ASSERT_TRUE(
      c.Send("GET /hello HTTP/1.1\r\nHost: a\r\n\r\n"
             "GET /204 HTTP/1.1\r\nHost: a\r\n\r\n"
             "GET /304 HTTP/1.1\r\nHost: a\r\n\r\n"
             "POST /sha256 HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabc"
             "GET /trailers HTTP/1.1\r\nHost: a\r\nTE: trailers\r\n\r\n"
             "GET /trailers HTTP/1.1\r\nHost: a\r\n\r\n"
             "GET /info?x HTTP/1.1\r\nHost: b:1\r\nConnection: close\r\n\r\n"));
  ASSERT_TRUE(c.ReadUntilEof());
  EXPECT_EQ(WithoutDate(c.received()),
            "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n\r\nhello"
            "HTTP/1.1 204 No Content\r\n\r\n"
            "HTTP/1.1 304 Not Modified\r\nETag: \"v1\"\r\n\r\n"
            "HTTP/1.1 200 OK\r\nContent-Length: 66\r\n\r\n"
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad 3"
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
            "4\r\nbody\r\n0\r\nx-checksum: 42\r\n\r\n"
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nbody\r\n0\r\n\r\n"
            "HTTP/1.1 200 OK\r\nContent-Length: 27\r\nConnection: close\r\n\r\n"
            "http b:1 HTTP/1.1 /info x -");
  EXPECT_TRUE(absl::StrContains(c.received(), "\r\nDate: "));
}

// A small keep-alive response — a buffer body, and a small file read into the write — leaves
// in one write that carries head and body; its request costs one read (no second read that
// only finds EAGAIN). N sequential requests on one connection: exactly N reads and N writes.
TEST(H1RawTest, SmallKeepAliveRequestsCostOneReadAndOneWriteEach) {
  TempDir dir;
  std::ofstream(dir / "small") << "twelve bytes";
  H1TestServer::Options o = Defaults();
  o.file_path = (dir / "small").string();
  H1TestServer server(o);
  ASSERT_TRUE(server.ok());
  for (const std::string body : {"hello", "twelve bytes"}) {
    const std::string path = body == "hello" ? "/hello" : "/file";
    const std::string request = absl::StrCat("GET ", path, " HTTP/1.1\r\nHost: a\r\n\r\n");
    RawClient c(server.port());
    ASSERT_TRUE(c.connected());
    ASSERT_TRUE(c.Send(request));
    ASSERT_TRUE(c.ReadUntilContains(absl::StrCat("\r\n\r\n", body))) << c.received();
    // Every response has the same size (the Date is fixed-width).
    const size_t response_size = c.received().size();
    const TcpIoCounters before = server.live_io_counters();
    constexpr int kRequests = 50;
    for (int i = 1; i <= kRequests; ++i) {
      ASSERT_TRUE(c.Send(request));
      ASSERT_TRUE(c.ReadUntilSize(response_size * static_cast<size_t>(i + 1))) << i;
    }
    const TcpIoCounters after = server.live_io_counters();
    EXPECT_EQ(after.reads - before.reads, uint64_t{kRequests}) << path;
    EXPECT_EQ(after.writes - before.writes, uint64_t{kRequests}) << path;
    EXPECT_EQ(c.received().size(), response_size * (kRequests + 1));
    EXPECT_TRUE(absl::EndsWith(c.received(), absl::StrCat("\r\n\r\n", body)));
  }
  EXPECT_EQ(server.sendfile_responses(), 0u);  // below the sendfile threshold
}

// A blocking TLS client over BoringSSL for one connection (no certificate check: the test
// server's is self-signed). Reads time out after 10 s, so a misbehaving server fails the test
// instead of hanging it.
class TlsClient {
 public:
  explicit TlsClient(uint16_t port) : raw_(port), ctx_(SSL_CTX_new(TLS_method())) {
    timeval timeout{10, 0};
    setsockopt(raw_.fd(), SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
    int one = 1;
    setsockopt(raw_.fd(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    ssl_.reset(SSL_new(ctx_.get()));
    static const uint8_t kAlpn[] = {8, 'h', 't', 't', 'p', '/', '1', '.', '1'};
    SSL_set_alpn_protos(ssl_.get(), kAlpn, sizeof(kAlpn));
    SSL_set_fd(ssl_.get(), raw_.fd());
    connected_ = raw_.connected() && SSL_connect(ssl_.get()) == 1;
  }
  bool connected() const { return connected_; }
  bool Send(absl::string_view bytes) {
    return SSL_write(ssl_.get(), bytes.data(), static_cast<int>(bytes.size())) ==
           static_cast<int>(bytes.size());
  }
  bool ReadUntilSize(size_t n) {
    char buf[4096];
    while (received_.size() < n) {
      const int r = SSL_read(ssl_.get(), buf, sizeof(buf));
      if (r <= 0) return false;
      received_.append(buf, static_cast<size_t>(r));
    }
    return true;
  }
  bool ReadUntilContains(absl::string_view needle) {
    char buf[4096];
    while (!absl::StrContains(received_, needle)) {
      const int r = SSL_read(ssl_.get(), buf, sizeof(buf));
      if (r <= 0) return false;
      received_.append(buf, static_cast<size_t>(r));
    }
    return true;
  }
  const std::string& received() const { return received_; }

 private:
  RawClient raw_;
  bssl::UniquePtr<SSL_CTX> ctx_;
  bssl::UniquePtr<SSL> ssl_;
  bool connected_ = false;
  std::string received_;
};

// The same under TLS: the socket BIO reads a request's record with one recv (and finds out
// without a syscall that nothing more is there), and the head and body leave in one SSL_write,
// one record, one send.
TEST(H1RawTest, TlsSmallKeepAliveRequestsCostOneReadAndOneWriteEach) {
  H1TestServer server(Defaults(/*tls=*/true));
  ASSERT_TRUE(server.ok());
  const std::string request = "GET /hello HTTP/1.1\r\nHost: a\r\n\r\n";
  TlsClient c(server.port());
  ASSERT_TRUE(c.connected());
  // The first exchange also finishes the handshake's leftovers (session tickets).
  ASSERT_TRUE(c.Send(request));
  ASSERT_TRUE(c.ReadUntilContains("\r\n\r\nhello")) << c.received();
  const size_t response_size = c.received().size();
  const TcpIoCounters before = server.live_io_counters();
  constexpr int kRequests = 50;
  for (int i = 1; i <= kRequests; ++i) {
    ASSERT_TRUE(c.Send(request));
    ASSERT_TRUE(c.ReadUntilSize(response_size * static_cast<size_t>(i + 1))) << i;
  }
  const TcpIoCounters after = server.live_io_counters();
  EXPECT_EQ(after.reads - before.reads, uint64_t{kRequests});
  EXPECT_EQ(after.writes - before.writes, uint64_t{kRequests});
  EXPECT_EQ(c.received().size(), response_size * (kRequests + 1));
}

// Above the threshold a file still goes out with sendfile(2), byte-exact, and the connection
// serves the next request.
TEST(H1RawTest, LargeFileUsesSendfileSmallOneDoesNot) {
  TempDir dir;
  WriteRandomFile(dir / "big", 1, 5);
  H1TestServer::Options o = Defaults();
  o.file_path = (dir / "big").string();
  o.h1.sendfile_min = 64 * 1024;
  H1TestServer server(o);
  ASSERT_TRUE(server.ok());
  std::string received;
  {
    RawClient c(server.port());
    ASSERT_TRUE(
        c.Send("GET /file HTTP/1.1\r\nHost: a\r\n\r\n"
               "GET /file HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n"));
    ASSERT_TRUE(c.ReadUntilEof());
    received = c.received();
  }  // closed: the server's lingering close ends at once
  const std::string file = ReadFile(dir / "big");
  const std::string expected = absl::StrCat(
      "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: ", file.size(),
      "\r\n\r\n", file,
      "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: ", file.size(),
      "\r\nConnection: close\r\n\r\n", file);
  EXPECT_TRUE(WithoutDate(received) == expected);
  ASSERT_TRUE(server.WaitClosed(1, milliseconds(10000)));
  EXPECT_EQ(server.sendfile_responses(), 2u);
}

TEST(H1RawTest, SmugglingAttemptAnswered400AndNextRequestNotProcessed) {
  H1TestServer server(Defaults());
  ASSERT_TRUE(server.ok());
  RawClient c(server.port());
  ASSERT_TRUE(
      c.Send("POST /sha256 HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n"
             "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
             "GET /hello HTTP/1.1\r\nHost: a\r\n\r\n"));
  ASSERT_TRUE(c.ReadUntilEof());
  EXPECT_TRUE(absl::StartsWith(c.received(), "HTTP/1.1 400 Bad Request\r\n")) << c.received();
  EXPECT_TRUE(absl::StrContains(c.received(), "Connection: close\r\n"));
  EXPECT_FALSE(absl::StrContains(c.received(), "hello"));
  EXPECT_EQ(server.hello_hits(), 0u);
}

struct ErrorCase {
  const char* name;
  std::string request;
  int status;
};

TEST(H1RawTest, EveryParseErrorGetsItsStatusConnectionCloseAndEof) {
  H1TestServer::Options o = Defaults();
  o.h1.max_request_body = 1000;
  H1TestServer server(o);
  ASSERT_TRUE(server.ok());
  const std::vector<ErrorCase> cases = {
      {"bare LF", "GET / HTTP/1.1\nHost: a\n\n", 400},
      {"no Host", "GET / HTTP/1.1\r\n\r\n", 400},
      {"two Hosts", "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400},
      {"obs-fold", "GET / HTTP/1.1\r\nHost: a\r\nX: 1\r\n 2\r\n\r\n", 400},
      {"TE on 1.0", "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", 400},
      {"CL list", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1, 2\r\n\r\n", 400},
      {"CL over limit", "POST /sha256 HTTP/1.1\r\nHost: a\r\nContent-Length: 1001\r\n\r\n", 413},
      {"chunked over limit",
       absl::StrCat("POST /sha256 HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
                    "800\r\n",
                    std::string(0x800, 'x'), "\r\n0\r\n\r\n"),
       413},
      {"bad chunk size",
       "POST /sha256 HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 400},
      {"long target", absl::StrCat("GET /", std::string(9000, 'a'), " HTTP/1.1\r\n\r\n"), 414},
      {"too many fields",
       [] {
         std::string s = "GET / HTTP/1.1\r\nHost: a\r\n";
         for (int i = 0; i < 101; ++i) absl::StrAppend(&s, "X-", i, ": v\r\n");
         return s + "\r\n";
       }(),
       431},
      {"huge field",
       absl::StrCat("GET / HTTP/1.1\r\nHost: a\r\nX: ", std::string(70000, 'v'), "\r\n\r\n"), 431},
      {"unknown coding", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip\r\n\r\n", 501},
      {"version", "GET / HTTP/1.2\r\nHost: a\r\n\r\n", 505},
      {"bare CR", "GET / HTTP/1.1\rHost: a\r\n\r\n", 400},
      {"method not a token", "GE(T / HTTP/1.1\r\nHost: a\r\n\r\n", 400},
      {"target not visible ASCII", "GET /a\x7f HTTP/1.1\r\nHost: a\r\n\r\n", 400},
      {"field name not a token", "GET / HTTP/1.1\r\nHost: a\r\nX(y: 1\r\n\r\n", 400},
      {"space before colon", "GET / HTTP/1.1\r\nHost: a\r\nX : 1\r\n\r\n", 400},
      {"CTL in value", "GET / HTTP/1.1\r\nHost: a\r\nX: a\x01b\r\n\r\n", 400},
      {"TE and CL",
       "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n"
       "Content-Length: 5\r\n\r\n0\r\n\r\n",
       400},
      {"chunked twice", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, chunked\r\n\r\n",
       400},
      // RFC 9112 §6.3: a request whose final coding is not chunked is a 400.
      {"chunked not last", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, gzip\r\n\r\n",
       400},
      {"differing CLs",
       "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", 400},
      {"CL not digits", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: +5\r\n\r\n", 400},
      {"CL overflow",
       "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 99999999999999999999999\r\n\r\n", 400},
      {"chunk size over 16 digits",
       "POST /sha256 HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
       "00000000000000001\r\nx\r\n0\r\n\r\n",
       400},
      {"chunk size line over 1 KiB",
       absl::StrCat("POST /sha256 HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n1;",
                    std::string(1100, 'e'), "\r\nx\r\n0\r\n\r\n"),
       400},
      {"no CRLF after chunk data",
       "POST /sha256 HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nxy\r\n0\r\n\r\n",
       400},
      {"trailers over 8 KiB",
       absl::StrCat("POST /sha256 HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n"
                    "X-T: ",
                    std::string(9000, 't'), "\r\n\r\n"),
       431},
  };
  for (const ErrorCase& e : cases) {
    RawClient c(server.port());
    ASSERT_TRUE(c.connected());
    c.Send(e.request + "GET /hello HTTP/1.1\r\nHost: a\r\n\r\n");
    EXPECT_TRUE(c.ReadUntilEof()) << e.name;
    EXPECT_TRUE(absl::StartsWith(c.received(), absl::StrCat("HTTP/1.1 ", e.status, " ")))
        << e.name << ": " << c.received().substr(0, 100);
    EXPECT_TRUE(absl::StrContains(c.received(), "Connection: close\r\n")) << e.name;
    EXPECT_FALSE(absl::StrContains(c.received(), "hello")) << e.name;
  }
  EXPECT_EQ(server.hello_hits(), 0u);
  // Lingering close ends at the client's EOF (each client closed at the end of its iteration),
  // not only when the 2 s linger deadline passes.
  EXPECT_TRUE(server.WaitClosed(static_cast<int>(cases.size()), milliseconds(1500)));
  // Every one is the engine's but the Content-Length over the limit, which the router answers
  // once the request is routed (a route may allow more).
  EXPECT_EQ(server.error_responses(), cases.size() - 1);
}

TEST(H1RawTest, SlowlorisGets408AfterHeaderTimeout) {
  H1TestServer::Options o = Defaults();
  o.h1.header_timeout = milliseconds(300);
  H1TestServer server(o);
  ASSERT_TRUE(server.ok());
  RawClient c(server.port());
  const auto start = std::chrono::steady_clock::now();
  const std::string head =
      "GET /hello HTTP/1.1\r\nHost: a\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
  // One byte every 20 ms (the trickle never completes the head): the timeout counts from the
  // first byte, not from the last.
  // Meanwhile other connections are served normally.
  size_t served = 0;
  for (size_t i = 0; i < head.size() && !c.eof(); ++i) {
    c.Send(head.substr(i, 1));
    c.ReadSome(milliseconds(20));
    if (i % 4 == 0) {
      RawClient other(server.port());
      other.Send("GET /hello HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n");
      if (other.ReadUntilEof(milliseconds(1000)) && absl::EndsWith(other.received(), "hello")) {
        ++served;
      }
    }
  }
  EXPECT_GE(served, 2u);
  ASSERT_TRUE(c.ReadUntilEof());
  const auto elapsed = std::chrono::steady_clock::now() - start;
  EXPECT_TRUE(absl::StartsWith(c.received(), "HTTP/1.1 408 Request Timeout\r\n")) << c.received();
  EXPECT_TRUE(absl::StrContains(c.received(), "Connection: close\r\n"));
  EXPECT_LT(elapsed, std::chrono::seconds(5));
  EXPECT_EQ(server.hello_hits(), served);  // the trickled request itself never ran
}

TEST(H1RawTest, IdleKeepAliveTimeoutClosesSilently) {
  H1TestServer::Options o = Defaults();
  o.h1.idle_timeout = milliseconds(300);
  H1TestServer server(o);
  ASSERT_TRUE(server.ok());
  RawClient c(server.port());
  ASSERT_TRUE(c.Send("GET /hello HTTP/1.1\r\nHost: a\r\n\r\n"));
  ASSERT_TRUE(c.ReadUntilContains("hello"));
  const size_t after_response = c.received().size();
  ASSERT_TRUE(c.ReadUntilEof(milliseconds(5000)));
  EXPECT_EQ(c.received().size(), after_response);  // nothing more: no 408
}

// The idle timeout counts from the end of the last response, not from the first idle period: the
// engine leaves its idle timer running across requests and re-arms it when it fires early. Only
// a lower bound is checked, which a loaded machine cannot break.
TEST(H1RawTest, IdleTimeoutCountsFromTheLastResponse) {
  H1TestServer::Options o = Defaults();
  o.h1.idle_timeout = milliseconds(600);
  H1TestServer server(o);
  ASSERT_TRUE(server.ok());
  RawClient c(server.port());
  ASSERT_TRUE(c.Send("GET /hello HTTP/1.1\r\nHost: a\r\n\r\n"));
  ASSERT_TRUE(c.ReadUntilContains("hello"));
  std::this_thread::sleep_for(milliseconds(400));
  const auto second = std::chrono::steady_clock::now();
  ASSERT_TRUE(c.Send("GET /hello HTTP/1.1\r\nHost: a\r\n\r\n"));
  ASSERT_TRUE(c.ReadUntilEof(milliseconds(5000)));
  EXPECT_GE(std::chrono::steady_clock::now() - second, milliseconds(600));
  EXPECT_EQ(server.hello_hits(), 2u);
}

// Backpressure tests: the server's sockets get a fixed SO_SNDBUF and the client a fixed
// SO_RCVBUF (set before connect, so the window is small from the handshake). The kernel then
// holds well under 1 MiB for a client that reads nothing, so a 4 MiB response must leave output
// queued in the stream beyond its high water: the stall is reached by construction, whatever the
// machine's speed.
constexpr size_t kHighWater = 256 * 1024;
constexpr int kSocketBuffer = 64 * 1024;
constexpr uint64_t kStallBody = uint64_t{4} << 20;

H1TestServer::Options BackpressureOptions() {
  H1TestServer::Options o = Defaults();
  o.stream.high_water = kHighWater;
  o.sndbuf = kSocketBuffer;
  return o;
}

// The documented bound on a connection's queued output: the stream's high water plus one body
// chunk plus a head (generously).
size_t PendingBound(const H1TestServer::Options& o) {
  return o.stream.high_water + o.h1.max_output_chunk + 64 * 1024;
}

// The stream told the engine to stop (its output once passed the high water, so Write returned
// false) and not everything has gone out since (the stream announces that with OnWritable and
// the engine resumes). For a client that reads nothing this state lasts: the kernel has no room
// for what is queued. pending_output alone may dip below the high water as the kernel takes a
// few more bytes, which is why the engine's maximum is the witness of the push-back.
bool Stalled(const H1TestServer::LiveConnection& c) {
  return c.max_pending_output > kHighWater && c.pending_output > 0;
}

// For failure messages: what the loop thread saw, so a failure says which half of Stalled() or
// which bound did not hold.
std::string Describe(const std::optional<H1TestServer::LiveConnection>& c) {
  if (!c.has_value()) return "no live connection";
  return absl::StrCat("pending_output ", c->pending_output, ", max_pending_output ",
                      c->max_pending_output);
}

TEST(H1RawTest, SlowReaderDoesNotMakeTheServerBuffer) {
  const H1TestServer::Options o = BackpressureOptions();
  const size_t bound = PendingBound(o);
  H1TestServer server(o);
  ASSERT_TRUE(server.ok());
  RawClient c(server.port(), kSocketBuffer);
  ASSERT_TRUE(c.connected());
  ASSERT_TRUE(c.Send(absl::StrCat("GET /big?kib=", kStallBody >> 10,
                                  " HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")));
  // The client reads nothing until the server's output is blocked on it.
  ASSERT_TRUE(server.WaitLiveConnection(c.local_port(), Stalled, milliseconds(20000)))
      << Describe(server.live_connection(c.local_port())) << ", produced " << server.big_produced();
  // The client still reads nothing while the server's loop turns many more times (each look is
  // a round trip through it): an engine that kept pulling from the producer despite
  // backpressure would queue more on every turn; a bounded one stays stopped.
  std::optional<H1TestServer::LiveConnection> live;
  for (int i = 0; i < 64; ++i) {
    live = server.live_connection(c.local_port());
    ASSERT_TRUE(live.has_value()) << i;
    ASSERT_TRUE(Stalled(*live)) << i << ": " << Describe(live) << ", produced "
                                << server.big_produced();
    ASSERT_LE(live->pending_output, bound) << i;
    ASSERT_LE(live->max_pending_output, bound) << i;
  }
  // Kernel buffers of both ends (capped above) plus the bound: far from the whole body.
  EXPECT_LT(server.big_produced(), uint64_t{2} << 20);

  // Now the client reads, a little at a time; the queued output stays bounded throughout.
  uint64_t checked_at = 0;
  while (!c.eof()) {
    ASSERT_TRUE(c.ReadSome(milliseconds(20000), 16 * 1024))
        << "no progress after " << c.received().size() << " bytes; "
        << Describe(server.live_connection(c.local_port()));
    if (c.received().size() - checked_at >= 512 * 1024) {
      checked_at = c.received().size();
      live = server.live_connection(c.local_port());
      if (live.has_value()) {
        EXPECT_LE(live->pending_output, bound);
      }
    }
  }
  const size_t head = c.received().find("\r\n\r\n");
  ASSERT_NE(head, std::string::npos);
  ASSERT_EQ(c.received().size(), head + 4 + kStallBody);
  EXPECT_TRUE(c.received().substr(head + 4) == ExpectedBig(0, kStallBody));
  ASSERT_TRUE(server.WaitClosed(1, milliseconds(20000)));
  // Over the connection's whole life: the stall made the server queue (by construction), and
  // never beyond the bound.
  EXPECT_GT(server.max_pending_output(), kHighWater);
  EXPECT_LE(server.max_pending_output(), bound);
}

// While one client's response is blocked on it (it reads nothing), other connections' requests
// are answered, complete and byte for byte: a stuck reader costs its own connection only. No
// latency is asserted; the deadlines only guard against a hang.
TEST(H1RawTest, StalledReaderDoesNotDelayOtherConnections) {
  const H1TestServer::Options o = BackpressureOptions();
  H1TestServer server(o);
  ASSERT_TRUE(server.ok());
  RawClient stalled(server.port(), kSocketBuffer);
  ASSERT_TRUE(stalled.connected());
  ASSERT_TRUE(stalled.Send(
      absl::StrCat("GET /big?kib=", kStallBody >> 10, " HTTP/1.1\r\nHost: a\r\n\r\n")));
  ASSERT_TRUE(server.WaitLiveConnection(stalled.local_port(), Stalled, milliseconds(20000)));
  const std::string expected =
      "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n"
      "Connection: close\r\n\r\nhello";
  for (int i = 0; i < 5; ++i) {
    RawClient other(server.port());
    ASSERT_TRUE(other.Send("GET /hello HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n"));
    ASSERT_TRUE(other.ReadUntilEof(milliseconds(20000))) << i;
    EXPECT_EQ(WithoutDate(other.received()), expected) << i;
    // Answered while the stalled response was still blocked, not after it.
    const std::optional<H1TestServer::LiveConnection> live =
        server.live_connection(stalled.local_port());
    ASSERT_TRUE(live.has_value()) << i;
    EXPECT_TRUE(Stalled(*live)) << i << ": " << live->pending_output;
  }
  EXPECT_EQ(server.hello_hits(), 5u);
  EXPECT_LT(server.big_produced(), kStallBody);  // the stalled response did not run ahead
  // Once its client reads, the stalled response completes, byte for byte.
  ASSERT_TRUE(stalled.ReadUntilContains("\r\n\r\n", milliseconds(20000)));
  const size_t head = stalled.received().find("\r\n\r\n") + 4;
  ASSERT_TRUE(stalled.ReadUntilSize(head + kStallBody, milliseconds(20000)));
  EXPECT_TRUE(stalled.received().substr(head) == ExpectedBig(0, kStallBody));
}

// A keep-alive sequence (GET, Content-Length POST, chunked POST with extensions and trailers,
// and a closing GET) sent in two writes split at every byte boundary, and byte by byte, gets
// the same responses as when sent at once.
TEST(H1RawTest, KeepAliveSequenceSplitAtEveryByteBoundary) {
  H1TestServer server(Defaults());
  ASSERT_TRUE(server.ok());
  const std::string sequence =
      "GET /hello HTTP/1.1\r\nHost: a\r\n\r\n"
      "POST /sha256 HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabc"
      "POST /sha256 HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
      "1;ext=v\r\na\r\n2\r\nbc\r\n0\r\nX-Trailer: t\r\n\r\n"
      "GET /info?q HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n";
  auto run = [&](const std::vector<std::string>& pieces) {
    RawClient c(server.port());
    int one = 1;
    setsockopt(c.fd(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    for (const std::string& piece : pieces) {
      EXPECT_TRUE(c.Send(piece));
      // Gives the server a chance to read each piece on its own; the result must not depend
      // on whether it did.
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    EXPECT_TRUE(c.ReadUntilEof());
    return WithoutDate(c.received());
  };
  const std::string whole = run({sequence});
  ASSERT_TRUE(absl::StartsWith(whole, "HTTP/1.1 200 OK")) << whole;
  const std::vector<absl::string_view> parts = absl::StrSplit(whole, "HTTP/1.1 200 OK");
  EXPECT_EQ(parts.size(), 5u) << whole;  // four responses
  for (size_t k = 1; k < sequence.size(); ++k) {
    EXPECT_EQ(run({sequence.substr(0, k), sequence.substr(k)}), whole) << "split at " << k;
  }
  std::vector<std::string> bytes;
  for (char ch : sequence) bytes.emplace_back(1, ch);
  EXPECT_EQ(run(bytes), whole) << "byte by byte";
}

TEST(H1RawTest, SendTimeoutClosesAStalledReader) {
  H1TestServer::Options o = Defaults();
  o.h1.send_timeout = milliseconds(300);
  H1TestServer server(o);
  ASSERT_TRUE(server.ok());
  RawClient c(server.port(), /*rcvbuf=*/64 * 1024);
  ASSERT_TRUE(c.Send("GET /big?kib=65536 HTTP/1.1\r\nHost: a\r\n\r\n"));
  // The client reads nothing: the server's output blocks and the deadline closes it.
  ASSERT_TRUE(server.WaitClosed(1, milliseconds(10000)));
  ASSERT_TRUE(c.ReadUntilEof(milliseconds(20000)));
  EXPECT_LT(c.received().size(), size_t{64} << 20);
}

TEST(H1RawTest, RequestBodyBackpressureStopsReadingTheSocket) {
  H1TestServer server(Defaults());
  ASSERT_TRUE(server.ok());
  RawClient c(server.port());
  ASSERT_TRUE(c.Send("POST /pause HTTP/1.1\r\nHost: a\r\nContent-Length: 67108864\r\n\r\n"));
  // Push body bytes until the connection stops taking them (no progress for 500 ms).
  const std::string chunk(64 * 1024, 'b');
  uint64_t sent = 0;
  bool stalled = false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (sent < (uint64_t{64} << 20) && std::chrono::steady_clock::now() < deadline) {
    const ssize_t n = send(c.fd(), chunk.data(), chunk.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n > 0) {
      sent += static_cast<uint64_t>(n);
      continue;
    }
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) break;
    pollfd p{c.fd(), POLLOUT, 0};
    if (poll(&p, 1, 500) == 0) {
      stalled = true;
      break;
    }
  }
  EXPECT_TRUE(stalled);
  // Kernel buffers on both ends + the stream's input buffer + the body window.
  EXPECT_LT(sent, uint64_t{24} << 20);
  EXPECT_GT(server.pause_seen(), 0u);
}

TEST(H1RawTest, ContinueOnlyWhenTheHandlerReads) {
  H1TestServer server(Defaults());
  ASSERT_TRUE(server.ok());
  {  // The handler answers without reading: no 100; the client never sent the body → close.
    RawClient c(server.port());
    ASSERT_TRUE(
        c.Send("POST /noread HTTP/1.1\r\nHost: a\r\nContent-Length: 1000\r\n"
               "Expect: 100-continue\r\n\r\n"));
    ASSERT_TRUE(c.ReadUntilEof());
    EXPECT_TRUE(absl::StartsWith(c.received(), "HTTP/1.1 200 OK\r\n")) << c.received();
    EXPECT_FALSE(absl::StrContains(c.received(), "100 Continue"));
    EXPECT_TRUE(absl::StrContains(c.received(), "Connection: close\r\n"));
  }
  {  // The handler reads: 100 first, then (after the body) the answer.
    RawClient c(server.port());
    ASSERT_TRUE(
        c.Send("POST /sha256 HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n"
               "Expect: 100-continue\r\n\r\n"));
    ASSERT_TRUE(c.ReadUntilContains("\r\n\r\n"));
    EXPECT_EQ(c.received(), "HTTP/1.1 100 Continue\r\n\r\n");
    ASSERT_TRUE(c.Send("abc"));
    ASSERT_TRUE(c.ReadUntilContains(" 3"));
    EXPECT_TRUE(absl::StrContains(c.received(), "ba7816bf8f01cfea414140de5dae2223b00361a3"));
  }
  ASSERT_TRUE(server.WaitClosed(2, milliseconds(10000)));
  EXPECT_EQ(server.continues_sent(), 1u);
}

TEST(H1RawTest, UnreadBodySmallIsDiscardedLargeCloses) {
  H1TestServer server(Defaults());
  ASSERT_TRUE(server.ok());
  {  // Small rest (part of it still to come): discarded, the next request is served.
    RawClient c(server.port());
    ASSERT_TRUE(c.Send("POST /noread HTTP/1.1\r\nHost: a\r\nContent-Length: 2000\r\n\r\n"));
    ASSERT_TRUE(c.Send(std::string(1000, 'x')));
    ASSERT_TRUE(c.ReadUntilContains("ignored"));
    EXPECT_FALSE(absl::StrContains(c.received(), "Connection: close"));
    ASSERT_TRUE(c.Send(absl::StrCat(
        std::string(1000, 'y'), "GET /hello HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")));
    ASSERT_TRUE(c.ReadUntilEof());
    EXPECT_TRUE(absl::EndsWith(c.received(), "hello")) << c.received();
  }
  {  // Large rest: Connection: close, then the connection ends; the next request is not served.
    RawClient c(server.port());
    ASSERT_TRUE(c.Send(absl::StrCat("POST /noread HTTP/1.1\r\nHost: a\r\nContent-Length: ",
                                    10 << 20, "\r\n\r\n", std::string(1000, 'x'))));
    ASSERT_TRUE(c.ReadUntilContains("ignored"));
    EXPECT_TRUE(absl::StrContains(c.received(), "Connection: close\r\n"));
    ASSERT_TRUE(c.ReadUntilEof());
  }
  EXPECT_EQ(server.hello_hits(), 1u);
}

// An answer that does not read a body which came whole with the request — chunked, or sent
// after `Expect: 100-continue` without waiting for the 100 — keeps the connection: the body is
// dropped and the next request served. (Before the head is written the engine could not know
// where a chunked body ends, and a client sent no 100 might still send its body.)
TEST(H1RawTest, UnreadBodyThatCameWithTheRequestKeepsTheConnection) {
  H1TestServer server(Defaults());
  ASSERT_TRUE(server.ok());
  const std::string next = "GET /hello HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n";
  const std::string requests[] = {
      "POST /noread HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
      "5\r\nhello\r\n3;ext=1\r\nabc\r\n0\r\nX-Trailer: t\r\n\r\n",
      "POST /noread HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n"
      "Expect: 100-continue\r\n\r\nhello",
      "POST /noread HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n"
      "Expect: 100-continue\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
  };
  for (const std::string& request : requests) {
    RawClient c(server.port());
    ASSERT_TRUE(c.Send(request + next));
    ASSERT_TRUE(c.ReadUntilEof());
    const std::string& got = c.received();
    EXPECT_TRUE(absl::StartsWith(got, "HTTP/1.1 200 OK\r\n")) << got;
    EXPECT_EQ(got.find("Connection: close"), got.rfind("Connection: close")) << got;
    EXPECT_FALSE(absl::StrContains(got, "100 Continue")) << got;
    EXPECT_TRUE(absl::EndsWith(got, "hello")) << request << "\n" << got;
  }
  EXPECT_EQ(server.hello_hits(), 3u);
  {  // A chunked body still arriving when the answer goes: the head says close, as before.
    RawClient c(server.port());
    ASSERT_TRUE(
        c.Send("POST /noread HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel"));
    ASSERT_TRUE(c.ReadUntilEof());
    EXPECT_TRUE(absl::StrContains(c.received(), "Connection: close\r\n")) << c.received();
  }
  {  // A malformed chunked body after the answer: the connection closes, nothing more is served.
    RawClient c(server.port());
    ASSERT_TRUE(c.Send(
        "POST /noread HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n" + next));
    ASSERT_TRUE(c.ReadUntilEof());
    EXPECT_TRUE(absl::StartsWith(c.received(), "HTTP/1.1 200 OK\r\n")) << c.received();
    EXPECT_FALSE(absl::EndsWith(c.received(), "hello")) << c.received();
  }
  EXPECT_EQ(server.hello_hits(), 3u);
}

TEST(H1RawTest, Http10KeepAliveOnlyWhenAsked) {
  H1TestServer server(Defaults());
  ASSERT_TRUE(server.ok());
  {
    RawClient c(server.port());
    ASSERT_TRUE(c.Send("GET /hello HTTP/1.0\r\n\r\n"));
    ASSERT_TRUE(c.ReadUntilEof());
    EXPECT_TRUE(absl::StrContains(c.received(), "Connection: close\r\n"));
    EXPECT_TRUE(absl::EndsWith(c.received(), "hello"));
  }
  {
    RawClient c(server.port());
    ASSERT_TRUE(c.Send("GET /hello HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"));
    ASSERT_TRUE(c.ReadUntilContains("hello"));
    EXPECT_TRUE(absl::StrContains(c.received(), "Connection: keep-alive\r\n"));
    c.mutable_received().clear();
    ASSERT_TRUE(c.Send("GET /stream?kib=5 HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"));
    ASSERT_TRUE(c.ReadUntilEof());  // unknown length on 1.0: close-delimited
    EXPECT_FALSE(absl::StrContains(c.received(), "Transfer-Encoding"));
    EXPECT_TRUE(absl::EndsWith(c.received(), absl::StrCat("\r\n\r\n", ExpectedBig(0, 5 << 10))));
  }
}

TEST(H1RawTest, GracefulShutdownFinishesTheCurrentResponseOnly) {
  H1TestServer server(Defaults());
  ASSERT_TRUE(server.ok());
  RawClient c(server.port());
  ASSERT_TRUE(
      c.Send("GET /slow?ms=300 HTTP/1.1\r\nHost: a\r\n\r\nGET /hello HTTP/1.1\r\nHost: a\r\n\r\n"));
  ASSERT_TRUE(server.WaitSlowStarted(1, milliseconds(10000)));
  server.ShutdownConnections();
  ASSERT_TRUE(c.ReadUntilEof());
  EXPECT_EQ(WithoutDate(c.received()),
            "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 4\r\n"
            "Connection: close\r\n\r\nslow");
  EXPECT_EQ(server.hello_hits(), 0u);
  // An idle connection closes at once.
  RawClient idle(server.port());
  ASSERT_TRUE(idle.Send("GET /hello HTTP/1.1\r\nHost: a\r\n\r\n"));
  ASSERT_TRUE(idle.ReadUntilContains("hello"));
  server.ShutdownConnections();
  EXPECT_TRUE(idle.ReadUntilEof());
}

TEST(H1RawTest, BodyReadTimeout) {
  H1TestServer::Options o = Defaults();
  o.h1.body_read_timeout = milliseconds(300);
  H1TestServer server(o);
  ASSERT_TRUE(server.ok());
  RawClient c(server.port());
  ASSERT_TRUE(c.Send("POST /sha256 HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\nabc"));
  ASSERT_TRUE(c.ReadUntilEof());
  EXPECT_TRUE(absl::StartsWith(c.received(), "HTTP/1.1 408 ")) << c.received();
}

}  // namespace
}  // namespace petrel::http
