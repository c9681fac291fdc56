// HttpServer end to end: one Router served over h1 and h2c on the cleartext port, h1 and h2 over
// TLS and h3 over QUIC on the https port, checked with independent clients (curl for TCP,
// ngtcp2's gtlsclient for h3), byte for byte; Alt-Svc; graceful stop with downloads in flight.
// Parametrized: one TCP loop + single-loop QUIC, and two TCP loops + two QUIC workers.
#include "petrel/http/http_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "petrel/common/event_loop.h"
#include "petrel/common/timer.h"
#include "petrel/http/body.h"
#include "petrel/http/http3_client.h"
#include "petrel/http/static_files.h"
#include "quic/tls/certificate.h"
#include "server/listen_address.h"
#include "support/command.h"
#include "support/server_port.h"

namespace petrel {
namespace {

using testing::CommandResult;
using testing::ReadFile;
using testing::RunCommand;
using testing::Sha256Hex;
using testing::TempDir;

constexpr char kGtlsClient[] = "/usr/bin/gtlsclient";

// One request over a connection of its own (bounded: 60 s; the handshake by config.limits).
absl::StatusOr<Http3Response> FetchOverH3(Http3ClientConfig config, Http3Request request) {
  absl::StatusOr<std::unique_ptr<Http3Client>> client = Http3Client::Create(std::move(config));
  if (!client.ok()) return client.status();
  Http3Client& c = **client;
  absl::StatusOr<Http3Response> got = absl::UnknownError("not run");
  absl::StatusOr<uint64_t> id = c.Fetch(std::move(request), [&](absl::StatusOr<Http3Response> r) {
    got = std::move(r);
    c.CloseWhenDone();
  });
  if (!id.ok()) return id.status();
  if (absl::Status s = c.Connect(); !s.ok()) return s;
  Timer deadline(c.loop(), [&c] { c.Stop(); });
  deadline.StartAfter(std::chrono::seconds(60));
  c.Run();
  deadline.Cancel();
  return got;
}

size_t CountOf(absl::string_view text, absl::string_view needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != absl::string_view::npos;
       at = text.find(needle, at + 1)) {
    ++n;
  }
  return n;
}

std::string Pattern(size_t n) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>('a' + (i * 7 + i / 4093) % 26);
  return s;
}

struct Mode {
  size_t tcp_loops;
  size_t quic_workers;
};

class HttpServerTest : public ::testing::TestWithParam<Mode> {
 protected:
  void SetUp() override {
    big_ = Pattern(3 << 20);
    std::ofstream(site_ / "big.bin", std::ios::binary) << big_;
    std::ofstream(site_ / "index.html") << "<h1>index</h1>";
    HttpServerConfig c;
    c.http_port = 0;
    c.https_port = 0;
    c.tcp_loops = GetParam().tcp_loops;
    c.quic_workers = GetParam().quic_workers;
    c.idle_timeout = std::chrono::seconds(5);
    server_ = std::make_unique<HttpServer>(c);
    Router& r = server_->router();
    ASSERT_TRUE(
        r.Get("/hello", [](Request& req, Response& res) {
           res.Send(200, absl::StrCat("hello ", req.scheme(), " ", HttpVersionName(req.version())),
                    "text/plain");
         }).ok());
    ASSERT_TRUE(r.Post("/echo", [](Request& req, Response& res) {
                   req.body().ReadAll(8 << 20, [&res](absl::StatusOr<std::string> body) {
                     if (!body.ok()) return res.Send(500, std::string(body.status().message()));
                     res.Send(200, Sha256Hex(*body), "text/plain");
                   });
                 }).ok());
    ASSERT_TRUE(r.Get("/files/*", StaticFiles(site_.path().string())).ok());
    // Handlers that throw, before and after committing.
    ASSERT_TRUE(r.Get("/throw", [](Request&, Response& res) {
                   res.SetHeader("ETag", "\"meant-for-the-widget\"");
                   throw std::runtime_error("no such widget");
                 }).ok());
    ASSERT_TRUE(r.Get("/throw-int", [](Request&, Response&) { throw 42; }).ok());
    ASSERT_TRUE(r.Get("/throw-after-send", [](Request&, Response& res) {
                   res.Send(200, "sent before the throw\n", "text/plain");
                   throw std::runtime_error("after the response");
                 }).ok());
    ASSERT_TRUE(r.Get("/throw-streaming", [](Request&, Response& res) {
                   StreamingBody& out = res.Stream(200);
                   out.Write(Pattern(20000));
                   throw std::logic_error("midway through the body");
                 }).ok());
    // For the graceful-stop test: half the body at once, the rest when the test releases it.
    ASSERT_TRUE(
        r.Get("/held/:i", [this](Request& req, Response& res) {
           auto cancelled = std::make_shared<bool>(false);  // loop thread only
           res.SetOnCancel([cancelled] { *cancelled = true; });
           StreamingBody& out = res.Stream(200);
           const std::string body = HeldBody(req.params().Get("i"));
           out.Write(absl::string_view(body).substr(0, body.size() / 2));
           std::lock_guard lock(held_mu_);
           held_.push_back({EventLoop::Current(), &out, body.substr(body.size() / 2), cancelled});
           held_changed_.notify_all();
         }).ok());
    const absl::Status started = server_->Start();
    ASSERT_TRUE(started.ok()) << started;
    ASSERT_NE(server_->http_port(), 0);
    ASSERT_NE(server_->https_port(), 0);
  }

  std::string Curl(bool tls, const std::string& flags, const std::string& path) const {
    return absl::StrCat("curl -sS --max-time 30 ", flags, tls ? " -k https" : " http",
                        "://127.0.0.1:", tls ? server_->https_port() : server_->http_port(), path);
  }

  CommandResult H3Fetch(const std::string& path, const std::string& extra = "") {
    return RunCommand(
        absl::StrCat(kGtlsClient, " -q --exit-on-all-streams-close --download ",
                     downloads_.path().string(), " ", extra, " 127.0.0.1 ", server_->https_port(),
                     " https://127.0.0.1:", server_->https_port(), path),
        60);
  }

  static std::string HeldBody(absl::string_view i) {
    return absl::StrCat("download ", i, "\n", Pattern(64 << 10));
  }

  struct Held {
    EventLoop* loop;
    StreamingBody* out;
    std::string rest;
    std::shared_ptr<bool> cancelled;
  };

  TempDir site_;
  TempDir downloads_;
  std::string big_;
  std::unique_ptr<HttpServer> server_;
  std::mutex held_mu_;
  std::condition_variable held_changed_;
  std::vector<Held> held_;  // under held_mu_
};

TEST_P(HttpServerTest, OneHandlerOverEveryProtocol) {
  struct Case {
    bool tls;
    const char* flags;
    const char* want;  // the handler's view, then the response's version as curl saw it
  };
  // An HTTP/1.0 request gets an HTTP/1.1 response (RFC 9110 §6.2), framed for 1.0.
  for (const Case& c :
       {Case{false, "--http1.0", "http HTTP/1.0 1.1"},
        Case{false, "--http1.1", "http HTTP/1.1 1.1"},
        Case{false, "--http2-prior-knowledge", "http HTTP/2 2"},
        Case{true, "--http1.1", "https HTTP/1.1 1.1"}, Case{true, "--http2", "https HTTP/2 2"}}) {
    const CommandResult r =
        RunCommand(Curl(c.tls, absl::StrCat(c.flags, " -w ' %{http_version}'"), "/hello"));
    ASSERT_EQ(r.exit_code, 0) << c.flags << "\n" << r.output;
    EXPECT_EQ(r.output, absl::StrCat("hello ", c.want)) << c.flags;
  }
  if (access(kGtlsClient, X_OK) != 0) GTEST_SKIP() << "gtlsclient (ngtcp2-client) missing";
  const CommandResult r = H3Fetch("/hello");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(ReadFile(downloads_.path().string() + "/hello"), "hello https HTTP/3");
}

// A handler's exception ends its request only: 500 with nothing of what the handler meant for
// its own response (a committed response goes out as it was), and the next request on the same
// connection is served. A body the handler was streaming is cut off visibly: the stream is
// reset (h2, h3) or the connection closed without the last chunk (h1), and the connection of
// an h2 stream serves on.
TEST_P(HttpServerTest, AHandlerThatThrowsEndsOnlyItsRequest) {
  for (bool tls : {false, true}) {
    SCOPED_TRACE(tls ? "tls" : "cleartext");
    const std::string base =
        absl::StrCat(tls ? "https" : "http",
                     "://127.0.0.1:", tls ? server_->https_port() : server_->http_port());
    // HTTP/1.1: one curl, one connection (num_connects 0 after the first), four requests.
    CommandResult r = RunCommand(absl::StrCat(
        "curl -sS --max-time 30 -k --http1.1 -w '|%{http_code} %{num_connects}\n' ", base,
        "/throw ", base, "/throw-int ", base, "/throw-after-send ", base, "/hello"));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_EQ(r.output,
              absl::StrCat("500 Internal Server Error\n|500 1\n",
                           "500 Internal Server Error\n|500 0\n", "sent before the throw\n|200 0\n",
                           "hello ", tls ? "https" : "http", " HTTP/1.1|200 0\n"));
    // The handler's ETag is not on the 500.
    r = RunCommand(
        absl::StrCat("curl -sS --max-time 30 -k -D - -o /dev/null --http1.1 ", base, "/throw"));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_FALSE(absl::StrContains(absl::AsciiStrToLower(r.output), "etag")) << r.output;
    // A streamed body cut off: that transfer fails (the connection closes without the last
    // chunk), the next one gets a new connection.
    r = RunCommand(
        absl::StrCat("curl -sS --max-time 30 -k --http1.1 -o /dev/null -w '|%{http_code} "
                     "%{num_connects}\n' ",
                     base, "/throw-streaming ", base, "/hello"));
    EXPECT_TRUE(absl::StrContains(r.output, "curl: (")) << r.output;
    EXPECT_TRUE(absl::EndsWith(r.output,
                               absl::StrCat("hello ", tls ? "https" : "http", " HTTP/1.1|200 1\n")))
        << r.output;

    // HTTP/2 (nghttp: h2c by prior knowledge, h2 over TLS): the four requests at once on one
    // connection, then a streamed body cut off beside a request that completes.
    r = RunCommand(absl::StrCat("timeout 30 nghttp -v ", base, "/throw ", base, "/throw-int ", base,
                                "/throw-after-send ", base, "/hello"));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_EQ(CountOf(r.output, ":status: 500"), 2u) << r.output;
    EXPECT_EQ(CountOf(r.output, ":status: 200"), 2u) << r.output;
    EXPECT_EQ(CountOf(r.output, "500 Internal Server Error\n"), 2u) << r.output;
    EXPECT_TRUE(absl::StrContains(r.output, "sent before the throw\n")) << r.output;
    EXPECT_TRUE(
        absl::StrContains(r.output, absl::StrCat("hello ", tls ? "https" : "http", " HTTP/2")))
        << r.output;
    EXPECT_FALSE(absl::StrContains(r.output, "recv GOAWAY")) << r.output;
    r = RunCommand(
        absl::StrCat("timeout 30 nghttp -v ", base, "/throw-streaming ", base, "/hello"));
    EXPECT_TRUE(absl::StrContains(r.output,
                                  "recv RST_STREAM frame <length=4, flags=0x00, "
                                  "stream_id=13>\n          (error_code=INTERNAL_ERROR"))
        << r.output;
    EXPECT_TRUE(
        absl::StrContains(r.output, absl::StrCat("hello ", tls ? "https" : "http", " HTTP/2")))
        << r.output;
  }
  if (access(kGtlsClient, X_OK) != 0) GTEST_SKIP() << "gtlsclient (ngtcp2-client) missing";
  // h3: one gtlsclient connection, both requests.
  const CommandResult r =
      RunCommand(absl::StrCat(kGtlsClient, " -q --exit-on-all-streams-close --download ",
                              downloads_.path().string(), " 127.0.0.1 ", server_->https_port(),
                              " https://127.0.0.1:", server_->https_port(),
                              "/throw https://127.0.0.1:", server_->https_port(), "/hello"),
                 60);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(ReadFile(downloads_.path().string() + "/throw"), "500 Internal Server Error\n");
  EXPECT_EQ(ReadFile(downloads_.path().string() + "/hello"), "hello https HTTP/3");
  Http3ClientConfig config;
  config.server = *SocketAddress::Parse("127.0.0.1", server_->https_port());
  config.verify_peer = false;
  Http3Request streamed;
  streamed.path = "/throw-streaming";
  const absl::StatusOr<Http3Response> got = FetchOverH3(config, std::move(streamed));
  EXPECT_FALSE(got.ok()) << "a cut-off body must not arrive as a whole";
}

// h3 serves https origins only (RFC 9114, 3.1.2): cleartext responses advertise nothing.
TEST_P(HttpServerTest, AltSvcAdvertisesH3OnTlsResponsesOnly) {
  for (bool tls : {false, true}) {
    const CommandResult r = RunCommand(Curl(tls, "-o /dev/null -D -", "/hello"));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const std::string head = absl::AsciiStrToLower(r.output);
    if (tls) {
      EXPECT_TRUE(
          absl::StrContains(head, absl::StrCat("alt-svc: h3=\":", server_->https_port(), "\"")))
          << r.output;
    } else {
      EXPECT_FALSE(absl::StrContains(head, "alt-svc")) << r.output;
    }
  }
}

TEST_P(HttpServerTest, StaticFileByteExactOverEveryProtocol) {
  const std::string want = Sha256Hex(big_);
  for (const auto& [tls, flags] :
       {std::pair{false, "--http1.1"}, std::pair{false, "--http2-prior-knowledge"},
        std::pair{true, "--http1.1"}, std::pair{true, "--http2"}}) {
    const std::string out = downloads_.path().string() + "/tcp.bin";
    const CommandResult r =
        RunCommand(Curl(tls, absl::StrCat(flags, " -o ", out), "/files/big.bin"));
    ASSERT_EQ(r.exit_code, 0) << flags << "\n" << r.output;
    EXPECT_EQ(Sha256Hex(ReadFile(out)), want) << flags << (tls ? " tls" : "");
  }
  if (access(kGtlsClient, X_OK) != 0) GTEST_SKIP() << "gtlsclient (ngtcp2-client) missing";
  const CommandResult r = H3Fetch("/files/big.bin");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(Sha256Hex(ReadFile(downloads_.path().string() + "/big.bin")), want);
}

// StaticFiles' conditionals and ranges come out unchanged through the h1 and h2 engines: a
// Range gives 206 with exactly those bytes, a matching If-None-Match a bodiless 304.
TEST_P(HttpServerTest, RangeAndNotModifiedOverTcpProtocols) {
  for (const auto& [tls, flags] :
       {std::pair{false, "--http1.1"}, std::pair{false, "--http2-prior-knowledge"},
        std::pair{true, "--http1.1"}, std::pair{true, "--http2"}}) {
    CommandResult r = RunCommand(
        Curl(tls, absl::StrCat(flags, " -r 1000-1999 -w '\n%{http_code}'"), "/files/big.bin"));
    ASSERT_EQ(r.exit_code, 0) << flags << "\n" << r.output;
    EXPECT_EQ(r.output, big_.substr(1000, 1000) + "\n206") << flags;
    r = RunCommand(Curl(tls, absl::StrCat(flags, " -I"), "/files/big.bin"));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const std::string head = absl::AsciiStrToLower(r.output);
    const size_t at = head.find("etag: ");
    ASSERT_NE(at, std::string::npos) << r.output;
    const std::string etag = r.output.substr(at + 6, r.output.find('\r', at) - at - 6);
    r = RunCommand(Curl(tls,
                        absl::StrCat(flags, " -H 'If-None-Match: ", etag,
                                     "' -o /dev/null -w '%{http_code} %{size_download}'"),
                        "/files/big.bin"));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_EQ(r.output, "304 0") << flags << " etag " << etag;
  }
}

// TLS over TCP resumes sessions (tickets) in TLS 1.2 and 1.3; the second connection is told so
// by an independent client (the openssl command line tool).
TEST_P(HttpServerTest, TlsSessionResumptionOverTcp) {
  if (std::system("command -v openssl >/dev/null 2>&1") != 0) GTEST_SKIP() << "no openssl CLI";
  const std::string request = (downloads_ / "request.txt").string();
  std::ofstream(request) << "GET /hello HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n";
  for (const char* version : {"-tls1_2", "-tls1_3"}) {
    const std::string session = (downloads_ / absl::StrCat("session", version)).string();
    const std::string base =
        absl::StrCat("openssl s_client -connect 127.0.0.1:", server_->https_port(), " ", version,
                     " -alpn http/1.1 -ign_eof ");
    CommandResult r = RunCommand(absl::StrCat(base, "-sess_out ", session, " < ", request), 20);
    ASSERT_TRUE(absl::StrContains(r.output, "hello https HTTP/1.1")) << version << r.output;
    EXPECT_TRUE(absl::StrContains(r.output, "\nNew, ")) << version;
    r = RunCommand(absl::StrCat(base, "-sess_in ", session, " < ", request), 20);
    EXPECT_TRUE(absl::StrContains(r.output, "hello https HTTP/1.1")) << version << r.output;
    EXPECT_TRUE(absl::StrContains(r.output, "\nReused, ")) << version << r.output;
  }
}

TEST_P(HttpServerTest, UploadOverEveryProtocol) {
  const std::string body = Pattern(1 << 20);
  const std::string file = downloads_.path().string() + "/upload.bin";
  std::ofstream(file, std::ios::binary) << body;
  for (const auto& [tls, flags] :
       {std::pair{false, "--http1.1"}, std::pair{false, "--http2-prior-knowledge"},
        std::pair{true, "--http1.1"}, std::pair{true, "--http2"}}) {
    const CommandResult r =
        RunCommand(Curl(tls, absl::StrCat(flags, " --data-binary @", file), "/echo"));
    ASSERT_EQ(r.exit_code, 0) << flags << "\n" << r.output;
    EXPECT_EQ(r.output, Sha256Hex(body)) << flags;
  }
  if (access(kGtlsClient, X_OK) != 0) GTEST_SKIP() << "gtlsclient (ngtcp2-client) missing";
  const CommandResult r = H3Fetch("/echo", absl::StrCat("-m POST -d ", file));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(ReadFile(downloads_.path().string() + "/echo"), Sha256Hex(body));
}

// RFC 8470 over h3: with a resumed session gtlsclient sends its request in 0-RTT; a GET is
// served, a POST gets 425 Too Early (the engine only answers 425 to data that came in 0-RTT).
TEST_P(HttpServerTest, ZeroRttUnsafeMethodGetsTooEarly) {
  if (access(kGtlsClient, X_OK) != 0) GTEST_SKIP() << "gtlsclient (ngtcp2-client) missing";
  const std::string session = downloads_.path().string() + "/session.pem";
  const std::string tp = downloads_.path().string() + "/tp.txt";
  const std::string resume = absl::StrCat("--session-file=", session, " --tp-file=", tp);
  CommandResult r = H3Fetch("/hello", resume);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  ASSERT_TRUE(std::filesystem::exists(session) && std::filesystem::exists(tp));
  const std::string file = downloads_.path().string() + "/post.bin";
  std::ofstream(file, std::ios::binary) << "some body";
  r = RunCommand(absl::StrCat(kGtlsClient, " --no-quic-dump --exit-on-all-streams-close ", resume,
                              " -m POST -d ", file, " 127.0.0.1 ", server_->https_port(),
                              " https://127.0.0.1:", server_->https_port(), "/echo"),
                 60);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(absl::StrContains(r.output, "[:status: 425]")) << r.output;
  r = RunCommand(absl::StrCat(kGtlsClient, " --no-quic-dump --exit-on-all-streams-close ", resume,
                              " 127.0.0.1 ", server_->https_port(),
                              " https://127.0.0.1:", server_->https_port(), "/hello"),
                 60);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(absl::StrContains(r.output, "[:status: 200]")) << r.output;
}

// A download slowed by the client is in flight when Stop() begins: it still completes.
TEST_P(HttpServerTest, GracefulStopFinishesInFlightDownloads) {
  const std::string out1 = downloads_.path().string() + "/h1.bin";
  const std::string out2 = downloads_.path().string() + "/h2.bin";
  CommandResult r1;
  CommandResult r2;
  std::thread t1([&] {
    r1 = RunCommand(
        Curl(false, absl::StrCat("--http1.1 --limit-rate 2M -o ", out1), "/files/big.bin"));
  });
  std::thread t2([&] {
    r2 =
        RunCommand(Curl(true, absl::StrCat("--http2 --limit-rate 2M -o ", out2), "/files/big.bin"));
  });
  // Both transfers have begun once their files exist and are not empty.
  auto started = [](const std::string& path) {
    std::error_code ec;
    const uintmax_t n = std::filesystem::file_size(path, ec);
    return !ec && n > 0;
  };
  for (int i = 0; i < 1000 && !(started(out1) && started(out2)); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(started(out1) && started(out2));
  server_->Stop(std::chrono::seconds(20));
  server_->Wait();
  t1.join();
  t2.join();
  EXPECT_EQ(r1.exit_code, 0) << r1.output;
  EXPECT_EQ(r2.exit_code, 0) << r2.output;
  EXPECT_EQ(Sha256Hex(ReadFile(out1)), Sha256Hex(big_));
  EXPECT_EQ(Sha256Hex(ReadFile(out2)), Sha256Hex(big_));
  // And nothing listens any more.
  EXPECT_NE(RunCommand(Curl(false, "--http1.1", "/hello")).exit_code, 0);
}

// 200 HTTP/3 downloads (four gtlsclient connections of 50 streams) are under way when Stop()
// begins: every handler has sent half its body and holds the rest until then. Each completes
// byte for byte.
TEST_P(HttpServerTest, GracefulStopFinishesTwoHundredH3Downloads) {
  if (access(kGtlsClient, X_OK) != 0) GTEST_SKIP() << "gtlsclient (ngtcp2-client) missing";
  constexpr int kClients = 4;
  constexpr int kStreams = 50;
  std::vector<CommandResult> results(kClients);
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    const std::string dir = absl::StrCat(downloads_.path().string(), "/c", c);
    std::filesystem::create_directories(dir);
    std::string uris;
    for (int i = 0; i < kStreams; ++i) {
      absl::StrAppend(&uris, " https://127.0.0.1:", server_->https_port(), "/held/",
                      c * kStreams + i);
    }
    clients.emplace_back([this, c, dir, uris, &results] {
      results[c] =
          RunCommand(absl::StrCat(kGtlsClient, " -q --exit-on-all-streams-close", " --download ",
                                  dir, " 127.0.0.1 ", server_->https_port(), uris),
                     120);
    });
  }
  bool all_held = false;
  {
    std::unique_lock lock(held_mu_);
    all_held = held_changed_.wait_for(lock, std::chrono::seconds(60),
                                      [this] { return held_.size() == kClients * kStreams; });
  }
  EXPECT_TRUE(all_held);
  server_->Stop(std::chrono::seconds(60));
  {
    std::lock_guard lock(held_mu_);
    for (Held& h : held_) {
      h.loop->Post([out = h.out, rest = std::move(h.rest), cancelled = h.cancelled] {
        if (*cancelled) return;
        out->Write(rest);
        out->Finish();
      });
    }
  }
  server_->Wait();
  for (std::thread& t : clients) t.join();
  for (int c = 0; c < kClients; ++c) {
    EXPECT_EQ(results[c].exit_code, 0) << results[c].output;
    for (int i = 0; i < kStreams; ++i) {
      const int n = c * kStreams + i;
      const std::string got = ReadFile(absl::StrCat(downloads_.path().string(), "/c", c, "/", n));
      EXPECT_EQ(got.size(), HeldBody(absl::StrCat(n)).size()) << n;
      EXPECT_TRUE(got == HeldBody(absl::StrCat(n))) << "download " << n << " differs";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Modes, HttpServerTest, ::testing::Values(Mode{1, 0}, Mode{2, 2}),
                         [](const ::testing::TestParamInfo<Mode>& p) {
                           return absl::StrCat("tcp", p.param.tcp_loops, "_quic",
                                               p.param.quic_workers);
                         });

// Port 0 with h3: the TCP listeners and the QUIC socket share a number, so the server must pick
// one free on both. Half of 127.0.0.2's ephemeral UDP numbers are taken here (as the client
// sockets of a busy host take them); a number picked by TCP alone would collide about every
// other start.
TEST(HttpServerPortTest, AnyHttpsPortIsFreeForBothTcpAndUdp) {
  std::vector<int> udp;
  for (int i = 0; i < 14000; ++i) {
    const int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    ASSERT_GE(fd, 0) << "socket " << i;
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(0x7f000002);
    if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
      close(fd);
      break;
    }
    udp.push_back(fd);
  }
  ASSERT_GT(udp.size(), 10000u);
  for (int round = 0; round < 12; ++round) {
    HttpServerConfig c;
    c.listen = {"127.0.0.2"};
    c.http_port = std::nullopt;
    c.https_port = 0;
    c.tcp_loops = 1;
    c.quic_workers = 0;
    HttpServer server(c);
    const absl::Status started = server.Start();
    ASSERT_TRUE(started.ok()) << "round " << round << ": " << started;
    EXPECT_NE(server.https_port(), 0);
    server.Stop(std::chrono::milliseconds(0));
    server.Wait();
  }
  for (int fd : udp) close(fd);
}

// The listen addresses: by default loopback on both families, so that `localhost` reaches the
// server whatever it resolves to (Chromium's QUIC goes to ::1 alone); ADDR:PORT binds one port.
class HttpServerListenTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!server::CanBind(*SocketAddress::Parse("::1", 0))) {
      GTEST_SKIP() << "this machine has no IPv6 loopback";
    }
  }

  static void AddHello(HttpServer& server) {
    ASSERT_TRUE(server.router()
                    .Get("/hello",
                         [](Request& req, Response& res) {
                           res.Send(200, absl::StrCat("hello ", HttpVersionName(req.version())),
                                    "text/plain");
                         })
                    .ok());
  }

  static std::string Curl(const std::string& url, const std::string& flags = "") {
    const CommandResult r =
        RunCommand(absl::StrCat("curl -sS -g -k --max-time 20 ", flags, " ", url));
    return r.exit_code == 0 ? r.output : absl::StrCat("curl exit ", r.exit_code, ": ", r.output);
  }

  std::string H3(const std::string& ip, uint16_t port) {
    const CommandResult r =
        RunCommand(absl::StrCat(kGtlsClient, " -q --exit-on-all-streams-close --download ",
                                downloads_.path().string(), " ", ip, " ", port,
                                " https://localhost:", port, "/hello"),
                   60);
    if (r.exit_code != 0) return absl::StrCat("gtlsclient exit ", r.exit_code, ": ", r.output);
    return ReadFile(downloads_.path() / "hello");
  }

  TempDir downloads_;
};

TEST_F(HttpServerListenTest, DefaultServesLoopbackOnBothFamilies) {
  HttpServerConfig c;
  c.http_port = 0;
  c.https_port = 0;
  HttpServer server(c);
  AddHello(server);
  const absl::Status started = server.Start();
  ASSERT_TRUE(started.ok()) << started;
  const uint16_t http = server.http_port();
  const uint16_t https = server.https_port();
  std::vector<std::string> bound;
  for (const SocketAddress& a : server.local_addresses()) bound.push_back(a.ToString());
  // TCP cleartext and TLS, then QUIC, each on both families.
  const std::vector<std::string> want = {
      absl::StrCat("127.0.0.1:", http),  absl::StrCat("[::1]:", http),
      absl::StrCat("127.0.0.1:", https), absl::StrCat("[::1]:", https),
      absl::StrCat("127.0.0.1:", https), absl::StrCat("[::1]:", https)};
  EXPECT_EQ(bound, want);
  for (const char* ip : {"127.0.0.1", "[::1]"}) {
    EXPECT_EQ(Curl(absl::StrCat("http://", ip, ":", http, "/hello"), "--http1.1"),
              "hello HTTP/1.1");
    EXPECT_EQ(Curl(absl::StrCat("https://", ip, ":", https, "/hello"), "--http2"), "hello HTTP/2");
  }
  if (access(kGtlsClient, X_OK) != 0) GTEST_SKIP() << "gtlsclient (ngtcp2-client) missing";
  EXPECT_EQ(H3("::1", https), "hello HTTP/3");
  EXPECT_EQ(H3("127.0.0.1", https), "hello HTTP/3");
}

TEST_F(HttpServerListenTest, AddressWithAPortServesOnlyThatPort) {
  const uint16_t http = testing::PickServerPort();
  uint16_t https = testing::PickServerPort();
  while (https == http) https = testing::PickServerPort();
  ASSERT_NE(http, 0);
  ASSERT_NE(https, 0);
  HttpServerConfig c;
  c.http_port = http;
  c.https_port = https;
  c.listen = {"127.0.0.1", absl::StrCat("[::1]:", https)};
  HttpServer server(c);
  AddHello(server);
  const absl::Status started = server.Start();
  ASSERT_TRUE(started.ok()) << started;
  EXPECT_EQ(Curl(absl::StrCat("http://127.0.0.1:", http, "/hello"), "--http1.1"), "hello HTTP/1.1");
  EXPECT_EQ(Curl(absl::StrCat("https://[::1]:", https, "/hello"), "--http2"), "hello HTTP/2");
  // No cleartext listener on ::1: the connection is refused (curl's exit 7).
  EXPECT_TRUE(absl::StartsWith(Curl(absl::StrCat("http://[::1]:", http, "/hello")), "curl exit 7"));
  if (access(kGtlsClient, X_OK) != 0) GTEST_SKIP() << "gtlsclient (ngtcp2-client) missing";
  EXPECT_EQ(H3("::1", https), "hello HTTP/3");
}

TEST(HttpServerListenConfigTest, BadAddressesFailTheStartAndNameTheEntry) {
  HttpServerConfig c;
  c.http_port = 0;
  c.https_port = std::nullopt;
  c.listen = {"127.0.0.1", "localhost"};
  HttpServer server(c);
  const absl::Status started = server.Start();
  EXPECT_EQ(started.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(started.message(), "listen: 'localhost'")) << started;
}

// Virtual hosts through the library: HttpServer::Host routers chosen by Host / :authority on h1,
// h2 and h3, a host certificate chosen by SNI over TCP (curl verifying it) and QUIC
// (Http3Client verifying it), 421 across hosts, and ReloadCertificate reading the host's files.
class HttpServerVirtualHostTest : public ::testing::Test {
 protected:
  void SetUp() override {
    WriteCertificate({"a.example"}, "a");
    HttpServerConfig c;
    c.http_port = 0;
    c.https_port = 0;
    c.listen = {"127.0.0.1"};
    c.hosts = {{{"a.example"}, Path("a.crt"), Path("a.key")}};
    config_ = c;
    server_ = std::make_unique<HttpServer>(c);
    ASSERT_TRUE(server_->router().Get("/", Says("default")).ok());
    ASSERT_TRUE(server_->Host("a.example").Get("/", Says("a")).ok());
    ASSERT_TRUE(server_->Host("*.b.example").Get("/", Says("b")).ok());  // the default cert
    const absl::Status started = server_->Start();
    ASSERT_TRUE(started.ok()) << started;
  }

  static Handler Says(std::string who) {
    return [who](Request& req, Response& res) {
      res.Send(200, absl::StrCat(who, " ", HttpVersionName(req.version())), "text/plain");
    };
  }
  std::string Path(const std::string& name) const { return (dir_.path() / name).string(); }
  void WriteCertificate(const std::vector<std::string>& names, const std::string& file) {
    absl::StatusOr<quic::CertificatePem> pem = quic::GenerateSelfSigned(names);
    ASSERT_TRUE(pem.ok());
    ASSERT_TRUE(quic::WritePemFiles(*pem, Path(file + ".crt"), Path(file + ".key")).ok());
  }

  // GET https://NAME:PORT/ with curl, NAME resolving to 127.0.0.1.
  std::string Curl(const std::string& name, const std::string& flags) const {
    const uint16_t port = server_->https_port();
    const CommandResult r =
        RunCommand(absl::StrCat("curl -sS --max-time 20 --resolve ", name, ":", port, ":127.0.0.1 ",
                                flags, " https://", name, ":", port, "/ -w ' %{http_code}'"));
    return r.exit_code == 0 ? r.output : absl::StrCat("curl exit ", r.exit_code, ": ", r.output);
  }

  // GET / over HTTP/3 with SNI `name`, verifying against `ca_file` (empty: no verification).
  std::string H3(const std::string& name, const std::string& ca_file,
                 const std::string& authority = "") {
    Http3ClientConfig config;
    config.server = *SocketAddress::Parse("127.0.0.1", server_->https_port());
    config.server_name = name;
    config.verify_peer = !ca_file.empty();
    config.ca_file = ca_file;
    Http3Request req;
    req.authority = authority;
    absl::StatusOr<Http3Response> got = FetchOverH3(std::move(config), std::move(req));
    if (!got.ok()) return got.status().ToString();
    return absl::StrCat(got->body, " ", got->status);
  }

  TempDir dir_;
  HttpServerConfig config_;
  std::unique_ptr<HttpServer> server_;
};

TEST_F(HttpServerVirtualHostTest, HostsBySniAndAuthorityOverEveryProtocol) {
  const std::string a_ca = absl::StrCat("--cacert ", Path("a.crt"));
  EXPECT_EQ(Curl("a.example", a_ca + " --http1.1"), "a HTTP/1.1 200");
  EXPECT_EQ(Curl("a.example", a_ca + " --http2"), "a HTTP/2 200");
  EXPECT_EQ(H3("a.example", Path("a.crt")), "a HTTP/3 200");
  EXPECT_EQ(Curl("x.b.example", "-k --http2"), "b HTTP/2 200");
  EXPECT_EQ(H3("x.b.example", ""), "b HTTP/3 200");
  EXPECT_EQ(Curl("other.example", "-k --http1.1"), "default HTTP/1.1 200");
  EXPECT_EQ(Curl("localhost", "-k --http2"), "default HTTP/2 200");
  // Cleartext: Host alone.
  const CommandResult clear = RunCommand(absl::StrCat(
      "curl -sS --max-time 20 -H 'Host: y.b.example' http://127.0.0.1:", server_->http_port(),
      "/"));
  EXPECT_EQ(clear.output, "b HTTP/1.1");
}

TEST_F(HttpServerVirtualHostTest, RequestForAnotherHostThanTheSniIsMisdirected) {
  // a.example's certificate covers only a.example; the default one covers localhost.
  EXPECT_TRUE(absl::EndsWith(Curl("a.example", "-k --http2 -H 'Host: x.b.example'"), " 421"));
  EXPECT_TRUE(absl::EndsWith(Curl("a.example", "-k --http1.1 -H 'Host: localhost'"), " 421"));
  EXPECT_TRUE(absl::EndsWith(Curl("x.b.example", "-k --http2 -H 'Host: a.example'"), " 421"));
  EXPECT_TRUE(absl::StartsWith(H3("a.example", "", "x.b.example"), "421 Misdirected Request\n"));
  // The same host by another spelling is not another host.
  EXPECT_EQ(Curl("a.example", "-k --http2 -H 'Host: A.EXAMPLE.:1'"), "a HTTP/2 200");
}

TEST_F(HttpServerVirtualHostTest, ReloadCertificateReadsTheHostFilesAgain) {
  const std::string old_ca = Path("a-old.crt");
  std::filesystem::copy_file(Path("a.crt"), old_ca);
  WriteCertificate({"a.example"}, "a");  // renewed in place
  EXPECT_EQ(Curl("a.example", absl::StrCat("--http2 --cacert ", old_ca)), "a HTTP/2 200");
  const absl::Status reloaded = server_->ReloadCertificate();
  ASSERT_TRUE(reloaded.ok()) << reloaded;
  EXPECT_EQ(Curl("a.example", absl::StrCat("--http2 --cacert ", Path("a.crt"))), "a HTTP/2 200");
  EXPECT_EQ(H3("a.example", Path("a.crt")), "a HTTP/3 200");
  EXPECT_NE(H3("a.example", old_ca), "a HTTP/3 200");
  // A broken host key: refused, the renewed certificate stays.
  std::ofstream(Path("a.key")) << "not a key";
  EXPECT_FALSE(server_->ReloadCertificate().ok());
  EXPECT_EQ(Curl("a.example", absl::StrCat("--http1.1 --cacert ", Path("a.crt"))),
            "a HTTP/1.1 200");
}

TEST_F(HttpServerVirtualHostTest, ReloadAppliesNewHostsRoutesAndCertificates) {
  WriteCertificate({"a.example"}, "a2");
  HttpServerConfig next = config_;
  next.hosts = {{{"a.example"}, Path("a2.crt"), Path("a2.key")}, {{"c.example"}, "", "", false}};
  HttpRoutes routes;
  ASSERT_TRUE(routes.router().Get("/", Says("default2")).ok());
  ASSERT_TRUE(routes.Host("a.example").Get("/", Says("a2")).ok());
  ASSERT_TRUE(routes.Host("C.EXAMPLE").Get("/", Says("c")).ok());
  const absl::Status reloaded = server_->Reload(next, std::move(routes));
  ASSERT_TRUE(reloaded.ok()) << reloaded;
  EXPECT_EQ(Curl("a.example", absl::StrCat("--http2 --cacert ", Path("a2.crt"))), "a2 HTTP/2 200");
  EXPECT_EQ(H3("a.example", Path("a2.crt")), "a2 HTTP/3 200");
  EXPECT_EQ(Curl("c.example", "-k --http1.1"), "c HTTP/1.1 200");
  EXPECT_EQ(Curl("x.b.example", "-k --http2"), "default2 HTTP/2 200");  // that host is gone
  // c.example has alt_svc off; a.example advertises h3.
  const CommandResult heads = RunCommand(absl::StrCat(
      "curl -sS -k -D - -o /dev/null --resolve c.example:", server_->https_port(),
      ":127.0.0.1 https://c.example:", server_->https_port(), "/ --resolve a.example:",
      server_->https_port(), ":127.0.0.1 https://a.example:", server_->https_port(), "/"));
  EXPECT_EQ(absl::StrContains(absl::AsciiStrToLower(heads.output), "alt-svc: h3="), true);
  EXPECT_EQ(heads.output.find("alt-svc"), heads.output.rfind("alt-svc")) << heads.output;

  // What only a restart can change is refused, and so is a bad name; nothing changes.
  HttpServerConfig moved = next;
  moved.https_port = 1;
  moved.tcp_loops = 3;
  absl::Status refused = server_->Reload(moved, HttpRoutes());
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(refused.message(), "need a restart: https_port, tcp_loops"))
      << refused;
  HttpServerConfig bad = next;
  bad.hosts.push_back({{"a b"}, "", "", true});
  EXPECT_FALSE(server_->Reload(bad, HttpRoutes()).ok());
  EXPECT_EQ(Curl("a.example", absl::StrCat("--http1.1 --cacert ", Path("a2.crt"))),
            "a2 HTTP/1.1 200");
  EXPECT_EQ(Curl("c.example", "-k --http2"), "c HTTP/2 200");
}

// One HTTP/1.1 connection held by the test: blocking writes and reads, bounded by a timeout.
class HeldH1Connection {
 public:
  explicit HeldH1Connection(const SocketAddress& to) {
    fd_ = socket(to.family(), SOCK_STREAM | SOCK_CLOEXEC, 0);
    timeval tv{20, 0};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    connected_ = connect(fd_, to.sockaddr_ptr(), to.length()) == 0;
  }
  ~HeldH1Connection() { close(fd_); }
  bool connected() const { return connected_; }

  // "STATUS BODY" of one request (Content-Length responses only), or what went wrong.
  std::string Exchange(const std::string& method, const std::string& path,
                       const std::string& body = "") {
    const std::string req = absl::StrCat(
        method, " ", path, " HTTP/1.1\r\nHost: held.example\r\nContent-Length: ", body.size(),
        "\r\n\r\n", body);
    if (send(fd_, req.data(), req.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(req.size())) {
      return "send failed";
    }
    size_t head_end = std::string::npos;
    while ((head_end = in_.find("\r\n\r\n")) == std::string::npos) {
      if (!Read()) return "closed before a head";
    }
    const std::string head = absl::AsciiStrToLower(in_.substr(0, head_end));
    const size_t cl = head.find("content-length: ");
    if (cl == std::string::npos || head.size() < 12) return "no content-length";
    const size_t length = std::strtoul(head.c_str() + cl + 16, nullptr, 10);
    while (in_.size() < head_end + 4 + length) {
      if (!Read()) return "closed before the body";
    }
    std::string out = absl::StrCat(head.substr(9, 3), " ", in_.substr(head_end + 4, length));
    in_.erase(0, head_end + 4 + length);
    return out;
  }

 private:
  bool Read() {
    char buf[4096];
    const ssize_t n = recv(fd_, buf, sizeof(buf), 0);
    if (n <= 0) return false;
    in_.append(buf, static_cast<size_t>(n));
    return true;
  }

  int fd_ = -1;
  bool connected_ = false;
  std::string in_;
};

// One HTTP/3 connection held by the test: the client runs on a thread of its own; each
// Exchange is one request on the same connection.
class HeldH3Connection {
 public:
  explicit HeldH3Connection(const SocketAddress& to) {
    Http3ClientConfig config;
    config.server = to;
    config.verify_peer = false;
    // Exchange posts to the client's loop, which belongs to the client's thread only once Run()
    // has begun there (before, RunInLoop would run the task on the caller's thread, racing the
    // loop): wait for the handshake, which that thread reports.
    auto connected = std::make_shared<std::promise<void>>();
    Http3ClientCallbacks callbacks;
    callbacks.on_connected = [connected] { connected->set_value(); };
    auto client = Http3Client::Create(config, std::move(callbacks));
    if (!client.ok() || !(*client)->Connect().ok()) return;
    client_ = *std::move(client);
    thread_ = std::thread([this] { client_->Run(); });
    if (connected->get_future().wait_for(std::chrono::seconds(30)) != std::future_status::ready) {
      ADD_FAILURE() << "no handshake with " << to.ToString();
    }
  }
  ~HeldH3Connection() {
    if (client_ == nullptr) return;
    client_->Stop();
    thread_.join();
  }

  std::string Exchange(const std::string& method, const std::string& path,
                       const std::string& body = "") {
    if (client_ == nullptr) return "no client";
    auto result = std::make_shared<std::promise<std::string>>();
    std::future<std::string> got = result->get_future();
    client_->loop()->RunInLoop([this, result, method, path, body] {
      Http3Request req;
      req.method = method;
      req.path = path;
      req.body = ResponseBody(body);
      absl::StatusOr<uint64_t> id =
          client_->Fetch(std::move(req), [result](absl::StatusOr<Http3Response> r) {
            result->set_value(r.ok() ? absl::StrCat(r->status, " ", r->body)
                                     : r.status().ToString());
          });
      if (!id.ok()) result->set_value(id.status().ToString());
    });
    if (got.wait_for(std::chrono::seconds(30)) != std::future_status::ready) return "timed out";
    return got.get();
  }

 private:
  std::unique_ptr<Http3Client> client_;
  std::thread thread_;
};

// Reload: connections opened after it get the new routes, limits and listen addresses; those
// already open finish on what they started with — their routes and limits, and their listener
// even when the new config drops its address.
class HttpServerReloadTest : public ::testing::Test {
 protected:
  static HttpRoutes Version(const std::string& v) {
    HttpRoutes routes;
    EXPECT_TRUE(routes.router()
                    .Get("/", [v](Request&, Response& res) { res.Send(200, v, "text/plain"); })
                    .ok());
    EXPECT_TRUE(routes.router()
                    .Post("/up",
                          [v](Request& req, Response& res) {
                            req.body().ReadAll(1 << 20, [&res, v](absl::StatusOr<std::string> b) {
                              res.Send(200, absl::StrCat(v, " got ", b.ok() ? b->size() : 0),
                                       "text/plain");
                            });
                          })
                    .ok());
    return routes;
  }

  static std::string Curl(const std::string& url, const std::string& flags = "") {
    const CommandResult r = RunCommand(
        absl::StrCat("curl -sS -g -k --max-time 20 -w ' %{http_code}' ", flags, " ", url));
    return r.exit_code == 0 ? r.output : absl::StrCat("curl exit ", r.exit_code);
  }

  static std::string H3(const std::string& ip, uint16_t port, const std::string& body = "") {
    Http3ClientConfig config;
    config.server = *SocketAddress::Parse(ip, port);
    config.verify_peer = false;
    config.limits.handshake_timeout_ms = 3000;  // a dropped handshake fails soon
    Http3Request req;
    if (!body.empty()) {
      req.method = "POST";
      req.path = "/up";
      req.body = ResponseBody(body);
    }
    absl::StatusOr<Http3Response> got = FetchOverH3(std::move(config), std::move(req));
    return got.ok() ? absl::StrCat(got->body, " ", got->status) : "failed";
  }
};

TEST_F(HttpServerReloadTest, NewConnectionsGetTheNewConfigOpenOnesFinishOnTheOld) {
  HttpServerConfig config;
  config.http_port = 0;
  config.https_port = 0;
  config.listen = {"127.0.0.1"};
  config.max_request_body = 100;
  HttpServer server(config);
  server.routes() = Version("v1");
  const absl::Status started = server.Start();
  ASSERT_TRUE(started.ok()) << started;
  const uint16_t http = server.http_port();
  const uint16_t https = server.https_port();
  const std::string ten(10, 'x');
  auto url = [](const char* scheme, const char* ip, uint16_t port, const char* path = "/") {
    return absl::StrCat(scheme, "://", ip, ":", port, path);
  };

  HeldH1Connection h1(*SocketAddress::Parse("127.0.0.1", http));
  ASSERT_TRUE(h1.connected());
  ASSERT_EQ(h1.Exchange("GET", "/"), "200 v1");
  HeldH3Connection h3(*SocketAddress::Parse("127.0.0.1", https));
  ASSERT_EQ(h3.Exchange("GET", "/"), "200 v1");

  // New routes, a 5-byte body limit, and 127.0.0.2 besides 127.0.0.1.
  HttpServerConfig next = config;
  next.listen = {"127.0.0.1", "127.0.0.2"};
  next.max_request_body = 5;
  absl::Status reloaded = server.Reload(next, Version("v2"));
  ASSERT_TRUE(reloaded.ok()) << reloaded;
  // The connections from before: old routes, old limit.
  EXPECT_EQ(h1.Exchange("GET", "/"), "200 v1");
  EXPECT_EQ(h1.Exchange("POST", "/up", ten), "200 v1 got 10");
  EXPECT_EQ(h3.Exchange("GET", "/"), "200 v1");
  EXPECT_EQ(h3.Exchange("POST", "/up", ten), "200 v1 got 10");
  // New ones: new routes, new limit, on either address.
  for (const char* ip : {"127.0.0.1", "127.0.0.2"}) {
    EXPECT_EQ(Curl(url("http", ip, http), "--http1.1"), "v2 200") << ip;
    EXPECT_EQ(Curl(url("http", ip, http), "--http2-prior-knowledge"), "v2 200") << ip;
    EXPECT_EQ(Curl(url("https", ip, https), "--http2"), "v2 200") << ip;
    EXPECT_TRUE(absl::EndsWith(Curl(url("https", ip, https, "/up"), "--http2 -d " + ten), " 413"))
        << ip;
    EXPECT_EQ(H3(ip, https), "v2 200") << ip;
    EXPECT_TRUE(absl::EndsWith(H3(ip, https, ten), " 413")) << ip;
  }
  std::vector<std::string> bound;
  for (const SocketAddress& a : server.local_addresses()) bound.push_back(a.ToString());
  EXPECT_EQ(bound, (std::vector<std::string>{
                       absl::StrCat("127.0.0.1:", http), absl::StrCat("127.0.0.2:", http),
                       absl::StrCat("127.0.0.1:", https), absl::StrCat("127.0.0.2:", https),
                       absl::StrCat("127.0.0.1:", https), absl::StrCat("127.0.0.2:", https)}));

  // 127.0.0.1 dropped: nothing new is accepted there, the connections on it go on.
  next.listen = {"127.0.0.2"};
  reloaded = server.Reload(next, Version("v3"));
  ASSERT_TRUE(reloaded.ok()) << reloaded;
  EXPECT_EQ(Curl(url("http", "127.0.0.1", http)), "curl exit 7");  // refused
  EXPECT_EQ(Curl(url("https", "127.0.0.1", https)), "curl exit 7");
  EXPECT_EQ(H3("127.0.0.1", https), "failed");
  EXPECT_EQ(Curl(url("https", "127.0.0.2", https), "--http1.1"), "v3 200");
  EXPECT_EQ(H3("127.0.0.2", https), "v3 200");
  EXPECT_EQ(h1.Exchange("GET", "/"), "200 v1");
  EXPECT_EQ(h3.Exchange("GET", "/"), "200 v1");

  // An address that cannot be bound: refused, naming it; nothing changes.
  next.listen = {"127.0.0.2", "192.0.2.1"};
  next.max_request_body = 1000;
  reloaded = server.Reload(next, Version("v4"));
  EXPECT_FALSE(reloaded.ok());
  EXPECT_TRUE(absl::StrContains(reloaded.message(), "192.0.2.1")) << reloaded;
  EXPECT_EQ(Curl(url("https", "127.0.0.2", https), "--http2"), "v3 200");
  EXPECT_TRUE(
      absl::EndsWith(Curl(url("https", "127.0.0.2", https, "/up"), "--http2 -d " + ten), " 413"));
  EXPECT_EQ(H3("127.0.0.2", https), "v3 200");
  EXPECT_EQ(Curl(url("http", "127.0.0.1", http)), "curl exit 7");
}

TEST(HttpServerVirtualHostConfigTest, BadHostNamesFailTheStart) {
  HttpServerConfig c;
  c.http_port = 0;
  c.https_port = std::nullopt;
  c.listen = {"127.0.0.1"};
  HttpServer server(c);
  (void)server.Host("a b");
  const absl::Status started = server.Start();
  EXPECT_EQ(started.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(started.message(), "hosts: bad host name \"a b\"")) << started;
}

}  // namespace
}  // namespace petrel
