#include "http/tcp/tcp_stream.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "http/tcp/tcp_listener.h"
#include "quic/tls/tls_context.h"

namespace petrel::http {
namespace {

using std::chrono::milliseconds;

std::string Pattern(size_t n, size_t seed = 0) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>('a' + (i * 131 + seed + i / 977) % 26);
  return s;
}

int Connect(const SocketAddress& to) {
  int fd = socket(to.family(), SOCK_STREAM | SOCK_CLOEXEC, 0);
  EXPECT_EQ(connect(fd, to.sockaddr_ptr(), to.length()), 0);
  return fd;
}

bool WriteAll(int fd, absl::string_view data) {
  while (!data.empty()) {
    ssize_t n = send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

// Reads until EOF (or error); `error` gets errno of a failed read (ECONNRESET, ...).
std::string ReadToEof(int fd, size_t limit, int* error = nullptr) {
  std::string out;
  char buf[65536];
  while (out.size() < limit) {
    ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && error != nullptr) *error = errno;
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

// The server side: a listener whose accepted sockets become TcpStreams run by `make_handler`.
class StreamServer {
 public:
  using Factory = std::function<std::unique_ptr<StreamHandler>(TcpStream*)>;
  StreamServer(EventLoop* loop, Factory factory, quic::TlsServerContext* tls = nullptr,
               TcpStreamOptions options = {})
      : loop_(loop), factory_(std::move(factory)) {
    auto l = TcpListener::Listen(
        loop, *SocketAddress::Parse("127.0.0.1", 0), {},
        [this, tls, options](int fd, const SocketAddress& peer, const SocketAddress& local) {
          auto s = TcpStream::Create(loop_, fd, peer, local,
                                     tls != nullptr ? tls->NewSsl() : nullptr, options);
          ASSERT_TRUE(s.ok()) << s.status();
          handlers_.push_back(factory_(s->get()));
          (*s)->set_handler(handlers_.back().get());
          streams_.push_back(*std::move(s));
        });
    EXPECT_TRUE(l.ok());
    listener_ = *std::move(l);
  }
  const SocketAddress& address() const { return listener_->local_address(); }
  TcpStream* stream(size_t i) { return i < streams_.size() ? streams_[i].get() : nullptr; }

 private:
  EventLoop* loop_;
  Factory factory_;
  std::unique_ptr<TcpListener> listener_;
  std::vector<std::unique_ptr<TcpStream>> streams_;
  std::vector<std::unique_ptr<StreamHandler>> handlers_;
};

template <typename P>
bool RunUntil(EventLoop& loop, P pred, milliseconds deadline = milliseconds(20000)) {
  const auto end = std::chrono::steady_clock::now() + deadline;
  while (!pred() && std::chrono::steady_clock::now() < end) loop.RunOnce(milliseconds(10));
  return pred();
}

struct Closed {
  bool closed = false;
  absl::Status reason;
};

class EchoHandler : public StreamHandler {
 public:
  EchoHandler(TcpStream* s, Closed* c) : s_(s), c_(c) {}
  void OnReadable(ByteBuffer& in) override {
    s_->Write(in.Readable());
    max_pending = std::max(max_pending, s_->pending_output());
    in.ConsumeAll();
    if (s_->pending_output() > 256 * 1024) s_->PauseReading();  // backpressure to the reader
  }
  void OnWritable() override { s_->ResumeReading(); }
  void OnPeerFinished() override { s_->ShutdownAfterFlush(); }
  void OnClosed(const absl::Status& r) override {
    c_->closed = true;
    c_->reason = r;
  }
  size_t max_pending = 0;

 private:
  TcpStream* s_;
  Closed* c_;
};

TEST(TcpStreamTest, PlainEchoOfFourMegabytesIsByteExact) {
  EventLoop loop;
  Closed closed;
  StreamServer server(&loop,
                      [&](TcpStream* s) { return std::make_unique<EchoHandler>(s, &closed); });
  const std::string data = Pattern(4 << 20);
  std::string echoed;
  std::thread client([&] {
    int fd = Connect(server.address());
    std::thread writer([&] {
      EXPECT_TRUE(WriteAll(fd, data));
      shutdown(fd, SHUT_WR);
    });
    echoed = ReadToEof(fd, data.size() + 1);
    writer.join();
    close(fd);
  });
  ASSERT_TRUE(RunUntil(loop, [&] { return closed.closed; }));
  client.join();
  EXPECT_TRUE(closed.reason.ok()) << closed.reason;
  EXPECT_EQ(echoed.size(), data.size());
  EXPECT_TRUE(echoed == data);
}

// Writes 8 MiB in 64 KiB chunks, only as fast as Write() allows.
class BlastHandler : public StreamHandler {
 public:
  explicit BlastHandler(TcpStream* s) : s_(s) {}
  void OnReadable(ByteBuffer& in) override {
    in.ConsumeAll();
    if (!started_) {
      started_ = true;
      Pump();
    }
  }
  void OnWritable() override { Pump(); }
  void OnClosed(const absl::Status&) override { closed = true; }
  void Pump() {
    while (sent < kTotal) {
      const bool more = s_->Write(Pattern(kChunk, sent / kChunk));
      sent += kChunk;
      max_pending = std::max(max_pending, s_->pending_output());
      if (!more) {
        ++blocked;
        return;
      }
    }
    s_->ShutdownAfterFlush();
  }
  static constexpr size_t kChunk = 64 * 1024;
  static constexpr size_t kTotal = 8 << 20;
  size_t sent = 0;
  size_t max_pending = 0;
  int blocked = 0;
  bool closed = false;

 private:
  TcpStream* s_;
  bool started_ = false;
};

TEST(TcpStreamTest, SlowReaderKeepsServerOutputBounded) {
  EventLoop loop;
  BlastHandler* h = nullptr;
  StreamServer server(&loop, [&](TcpStream* s) {
    auto b = std::make_unique<BlastHandler>(s);
    h = b.get();
    return b;
  });
  int fd = Connect(server.address());
  ASSERT_TRUE(WriteAll(fd, "go"));
  // The client reads nothing yet: the server must stop at its high-water mark.
  ASSERT_TRUE(RunUntil(loop, [&] { return h != nullptr && h->blocked > 0; }));
  for (int i = 0; i < 20; ++i) loop.RunOnce(milliseconds(5));
  EXPECT_LT(h->sent, BlastHandler::kTotal);
  EXPECT_LE(h->max_pending, TcpStreamOptions{}.high_water + BlastHandler::kChunk);
  std::string got;
  std::thread reader([&] {
    got = ReadToEof(fd, BlastHandler::kTotal + 1);
    close(fd);
  });
  ASSERT_TRUE(RunUntil(loop, [&] { return h->closed; }));
  reader.join();
  ASSERT_EQ(got.size(), BlastHandler::kTotal);
  for (size_t off = 0; off < got.size(); off += BlastHandler::kChunk) {
    ASSERT_TRUE(got.compare(off, BlastHandler::kChunk,
                            Pattern(BlastHandler::kChunk, off / BlastHandler::kChunk)) == 0);
  }
  EXPECT_LE(h->max_pending, TcpStreamOptions{}.high_water + BlastHandler::kChunk);
}

// Answers the first bytes with a large response and closes gracefully without reading the rest
// of the request — what an h1 server does after an error or with an unread body.
class RespondAndCloseHandler : public StreamHandler {
 public:
  RespondAndCloseHandler(TcpStream* s, std::string response)
      : s_(s), response_(std::move(response)) {}
  void OnReadable(ByteBuffer& in) override {
    in.ConsumeAll();
    if (responded_) return;
    responded_ = true;
    s_->Write(response_);
    s_->ShutdownAfterFlush();
  }
  void OnClosed(const absl::Status&) override { closed = true; }
  bool closed = false;

 private:
  TcpStream* s_;
  std::string response_;
  bool responded_ = false;
};

TEST(TcpStreamTest, LingeringCloseDeliversTheWholeResponse) {
  EventLoop loop;
  const std::string response = Pattern(1 << 20, 7);
  RespondAndCloseHandler* h = nullptr;
  StreamServer server(&loop, [&](TcpStream* s) {
    auto r = std::make_unique<RespondAndCloseHandler>(s, response);
    h = r.get();
    return r;
  });
  std::string got;
  int error = 0;
  std::thread client([&] {
    int fd = Connect(server.address());
    // The client keeps sending request bytes the server never reads while the response flows,
    // one chunk per chunk received: some arrive after the server has finished writing. A server
    // that closed then would answer them with an RST and destroy the unread response.
    WriteAll(fd, "GET /big HTTP/1.1\r\n");
    char buf[16384];
    for (;;) {
      ssize_t n = recv(fd, buf, sizeof(buf), 0);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) error = errno;
      if (n <= 0) break;
      got.append(buf, static_cast<size_t>(n));
      send(fd, buf, 512, MSG_NOSIGNAL);
    }
    close(fd);
  });
  ASSERT_TRUE(RunUntil(loop, [&] { return h != nullptr && h->closed; }));
  client.join();
  EXPECT_EQ(error, 0) << "the client saw " << strerror(error);
  EXPECT_EQ(got.size(), response.size());
  EXPECT_TRUE(got == response);
}

class FileHandler : public StreamHandler {
 public:
  FileHandler(TcpStream* s, int file_fd, size_t size) : s_(s), fd_(file_fd), size_(size) {}
  void OnReadable(ByteBuffer& in) override {
    in.ConsumeAll();
    if (started_) return;
    started_ = true;
    s_->Write("HEAD\n");
    EXPECT_TRUE(s_->SendFile(fd_, 0, size_));
  }
  void OnWritable() override { s_->ShutdownAfterFlush(); }
  void OnClosed(const absl::Status& r) override {
    closed = true;
    EXPECT_TRUE(r.ok()) << r;
  }
  bool closed = false;

 private:
  TcpStream* s_;
  int fd_;
  size_t size_;
  bool started_ = false;
};

TEST(TcpStreamTest, SendFileAfterBufferedBytesIsByteExact) {
  const std::string content = Pattern(3 << 20, 3);
  const std::string path =
      std::filesystem::temp_directory_path() / ("petrel-sendfile-" + std::to_string(getpid()));
  std::ofstream(path, std::ios::binary) << content;
  int file_fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(file_fd, 0);
  EventLoop loop;
  FileHandler* h = nullptr;
  StreamServer server(&loop, [&](TcpStream* s) {
    auto f = std::make_unique<FileHandler>(s, file_fd, content.size());
    h = f.get();
    return f;
  });
  std::string got;
  std::thread client([&] {
    int fd = Connect(server.address());
    WriteAll(fd, "get");
    got = ReadToEof(fd, content.size() + 100);
    close(fd);
  });
  ASSERT_TRUE(RunUntil(loop, [&] { return h != nullptr && h->closed; }));
  client.join();
  close(file_fd);
  std::filesystem::remove(path);
  EXPECT_EQ(got.size(), content.size() + 5);
  EXPECT_TRUE(got == "HEAD\n" + content);
}

// Over TLS with curl as the client: the handshake, ALPN selection, a request and a response.
class HelloHandler : public StreamHandler {
 public:
  explicit HelloHandler(TcpStream* s) : s_(s) {}
  void OnHandshakeDone() override { alpn = std::string(quic::SelectedAlpn(s_->ssl())); }
  void OnReadable(ByteBuffer& in) override {
    if (in.Readable().find("\r\n\r\n") == absl::string_view::npos) return;
    request = std::string(in.Readable());
    in.ConsumeAll();
    s_->Write("HTTP/1.1 200 OK\r\nContent-Length: 12\r\nConnection: close\r\n\r\nhello, tls!\n");
    s_->ShutdownAfterFlush();
  }
  void OnClosed(const absl::Status&) override { closed = true; }
  std::string alpn;
  std::string request;
  bool closed = false;

 private:
  TcpStream* s_;
};

TEST(TcpStreamTest, TlsServesCurlWithAlpn) {
  if (system("command -v curl >/dev/null 2>&1") != 0) GTEST_SKIP() << "curl not installed";
  auto pem = quic::GenerateSelfSigned({"localhost", "127.0.0.1"});
  ASSERT_TRUE(pem.ok());
  quic::TlsServerConfig config;
  config.certificate = *pem;
  config.alpn = {"h2", "http/1.1"};
  config.tls13_only = false;
  auto tls = quic::TlsServerContext::Create(config);
  ASSERT_TRUE(tls.ok()) << tls.status();
  for (const char* version : {"--tlsv1.3", "--tlsv1.2 --tls-max 1.2"}) {
    EventLoop loop;
    HelloHandler* h = nullptr;
    StreamServer server(
        &loop,
        [&](TcpStream* s) {
          auto x = std::make_unique<HelloHandler>(s);
          h = x.get();
          return x;
        },
        tls->get());
    std::string out;
    std::atomic<bool> done{false};
    std::thread client([&] {
      const std::string cmd =
          "curl -sk --http1.1 " + std::string(version) +
          " --max-time 10 https://127.0.0.1:" + std::to_string(server.address().port()) + "/hello";
      FILE* p = popen(cmd.c_str(), "r");
      char buf[256];
      while (p != nullptr && fgets(buf, sizeof(buf), p) != nullptr) out += buf;
      if (p != nullptr) pclose(p);
      done = true;
    });
    ASSERT_TRUE(RunUntil(loop, [&] { return done.load() && h != nullptr && h->closed; }));
    client.join();
    EXPECT_EQ(out, "hello, tls!\n") << version;
    EXPECT_EQ(h->alpn, "http/1.1");
    EXPECT_EQ(h->request.rfind("GET /hello HTTP/1.1\r\n", 0), 0u) << h->request;
  }
}

}  // namespace
}  // namespace petrel::http

namespace petrel::http {
namespace {

// Writes until the stream closes under it, once told to.
class EndlessWriter : public StreamHandler {
 public:
  explicit EndlessWriter(TcpStream* s) : s_(s) {}
  void OnReadable(ByteBuffer& in) override {
    got_request = true;
    in.ConsumeAll();
  }
  void OnWritable() override { Pump(); }
  void OnClosed(const absl::Status& r) override {
    closed = true;
    reason = r;
  }
  void Pump() {
    const std::string chunk(64 * 1024, 'z');
    while (!s_->closed() && s_->Write(chunk)) {
    }
  }
  bool got_request = false;
  bool closed = false;
  absl::Status reason;

 private:
  TcpStream* s_;
};

// A TLS peer that has closed cleanly (FIN, so the server is in CLOSE_WAIT) makes the server's
// second write fail with EPIPE. That must end the stream with an error, not kill the process with
// SIGPIPE, which the test binary does not ignore (BoringSSL's own socket BIO would raise it).
TEST(TcpStreamTest, WritingToAClosedTlsPeerIsAnErrorNotSigpipe) {
  ASSERT_EQ(signal(SIGPIPE, SIG_DFL), SIG_DFL);
  auto pem = quic::GenerateSelfSigned({"localhost"});
  ASSERT_TRUE(pem.ok());
  quic::TlsServerConfig config;
  config.certificate = *pem;
  config.alpn = {"http/1.1"};
  config.tls13_only = false;
  auto tls = quic::TlsServerContext::Create(config);
  ASSERT_TRUE(tls.ok());
  quic::TlsClientConfig client_config;
  client_config.alpn = {"http/1.1"};
  client_config.verify_peer = false;
  client_config.tls13_only = false;
  auto client_tls = quic::TlsClientContext::Create(client_config);
  ASSERT_TRUE(client_tls.ok());

  EventLoop loop;
  EndlessWriter* h = nullptr;
  StreamServer server(
      &loop,
      [&](TcpStream* s) {
        auto w = std::make_unique<EndlessWriter>(s);
        h = w.get();
        return w;
      },
      tls->get());
  std::atomic<bool> left{false};
  std::thread client([&] {
    int fd = Connect(server.address());
    auto ssl = (*client_tls)->NewSsl("localhost");
    ASSERT_TRUE(ssl.ok());
    // TLS 1.2: no post-handshake tickets, so nothing is unread when the client closes and the
    // close is a FIN, not an RST.
    SSL_set_max_proto_version(ssl->get(), TLS1_2_VERSION);
    SSL_set_fd(ssl->get(), fd);
    ASSERT_EQ(SSL_connect(ssl->get()), 1);
    ASSERT_EQ(SSL_write(ssl->get(), "go", 2), 2);
    close(fd);
    left = true;
  });
  ASSERT_TRUE(RunUntil(loop, [&] { return left.load() && h != nullptr && h->got_request; }));
  client.join();
  h->Pump();  // the first send succeeds and draws an RST; the next ones get EPIPE
  ASSERT_TRUE(RunUntil(loop, [&] { return h->closed; }));
  EXPECT_FALSE(h->reason.ok());
}

}  // namespace
}  // namespace petrel::http

namespace petrel::http {
namespace {

// Collects a TLS request until its last bytes arrive, reading in small budgets and pausing
// after every read (resumed from the loop a turn later, the way an engine resumes once its
// handler consumed the body).
class TrickleReader : public StreamHandler {
 public:
  TrickleReader(TcpStream* s, EventLoop* loop) : s_(s), loop_(loop) {}
  void OnReadable(ByteBuffer& in) override {
    const absl::string_view r = in.Readable();
    got.append(r.data(), r.size());
    in.ConsumeAll();
    if (absl::EndsWith(got, "END-OF-BODY")) {
      s_->Write("HTTP/1.1 200 OK\r\nContent-Length: 3\r\nConnection: close\r\n\r\nok\n");
      s_->ShutdownAfterFlush();
      return;
    }
    s_->PauseReading();
    TcpStream* s = s_;
    loop_->Post([s] { s->ResumeReading(); });
  }
  void OnClosed(const absl::Status&) override { closed = true; }
  std::string got;
  bool closed = false;

 private:
  TcpStream* s_;
  EventLoop* loop_;
};

// TLS plaintext already decrypted inside BoringSSL makes no socket event: a read that stopped
// on its budget, or a resume after a pause, must still deliver it (the last bytes of an upload
// once hung there until the client gave up).
TEST(TcpStreamTest, TlsPlaintextLeftInTheSessionIsDelivered) {
  if (system("command -v curl >/dev/null 2>&1") != 0) GTEST_SKIP() << "curl not installed";
  auto pem = quic::GenerateSelfSigned({"localhost", "127.0.0.1"});
  ASSERT_TRUE(pem.ok());
  quic::TlsServerConfig config;
  config.certificate = *pem;
  config.alpn = {"http/1.1"};
  config.tls13_only = false;
  auto tls = quic::TlsServerContext::Create(config);
  ASSERT_TRUE(tls.ok()) << tls.status();
  char path[] = "/tmp/petrel-trickle-XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  close(fd);
  const std::string body = Pattern(300'000) + "END-OF-BODY";
  std::ofstream(path, std::ios::binary) << body;
  for (int round = 0; round < 5; ++round) {
    EventLoop loop;
    TrickleReader* h = nullptr;
    TcpStreamOptions options;
    options.max_bytes_per_event = 1000;  // never a whole TLS record
    StreamServer server(
        &loop,
        [&](TcpStream* s) {
          auto x = std::make_unique<TrickleReader>(s, &loop);
          h = x.get();
          return x;
        },
        tls->get(), options);
    std::string out;
    std::atomic<bool> done{false};
    std::thread client([&] {
      const std::string cmd =
          "curl -sk --http1.1 --max-time 10 -H 'Expect:' --data-binary @" + std::string(path) +
          " https://127.0.0.1:" + std::to_string(server.address().port()) + "/up";
      FILE* p = popen(cmd.c_str(), "r");
      char buf[256];
      while (p != nullptr && fgets(buf, sizeof(buf), p) != nullptr) out += buf;
      if (p != nullptr) pclose(p);
      done = true;
    });
    EXPECT_TRUE(RunUntil(loop, [&] { return done.load() && h != nullptr && h->closed; }));
    client.join();
    EXPECT_EQ(out, "ok\n") << round;
    ASSERT_NE(h, nullptr);
    EXPECT_TRUE(absl::EndsWith(h->got, body)) << round << ": got " << h->got.size() << " bytes";
  }
  unlink(path);
}

}  // namespace
}  // namespace petrel::http
