// The h2 engine end to end: real sockets, the H2TestServer on its loop thread, and external
// clients (curl, nghttp, h2load, a raw-frame python-h2/hpack script) as the peers.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <regex>
#include <string>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "h2_test_server.h"
#include "http/h2/flood_guard.h"
#include "http/h2/protocol_detect.h"
#include "support/command.h"

#ifndef PETREL_H2_SCRIPT_DIR
#error "PETREL_H2_SCRIPT_DIR must point at tests/http/h2"
#endif

namespace petrel::http {
namespace {

struct CommandResult {
  int exit_code = -1;
  std::string output;
};

// Runs `cmd` through the shell (stderr merged), with `on_line` seeing each output line.
template <typename OnLine>
CommandResult RunCommand(const std::string& cmd, OnLine on_line) {
  CommandResult r;
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  while (fgets(buf, sizeof(buf), p) != nullptr) {
    r.output += buf;
    on_line(absl::string_view(buf));
  }
  const int status = pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}
CommandResult RunCommand(const std::string& cmd) {
  return RunCommand(cmd, [](absl::string_view) {});
}

bool Have(const char* tool) {
  return system(absl::StrCat("command -v ", tool, " >/dev/null 2>&1").c_str()) == 0;
}

std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

using ::petrel::testing::TempDir;

std::string Url(const H2TestServer& s, bool tls, absl::string_view path) {
  return absl::StrCat(tls ? "https" : "http", "://127.0.0.1:", s.port(), path);
}

std::string Curl(bool tls) {
  return tls ? "curl -sS -k --http2 --max-time 60 "
             : "curl -sS --http2-prior-knowledge --max-time 60 ";
}

// ---- Units ----

TEST(H2ProtocolDetectTest, PrefaceH1AndNeedMore) {
  EXPECT_EQ(DetectCleartextProtocol(""), CleartextProtocol::kNeedMore);
  EXPECT_EQ(DetectCleartextProtocol("PRI * HTTP/2"), CleartextProtocol::kNeedMore);
  EXPECT_EQ(DetectCleartextProtocol(kH2ClientPreface), CleartextProtocol::kH2);
  EXPECT_EQ(DetectCleartextProtocol(absl::StrCat(kH2ClientPreface, "\x00\x00")),
            CleartextProtocol::kH2);
  EXPECT_EQ(DetectCleartextProtocol("GET / HTTP/1.1\r\n"), CleartextProtocol::kH1);
  EXPECT_EQ(DetectCleartextProtocol("PRI * HTTP/1.1"), CleartextProtocol::kH1);
  EXPECT_EQ(DetectCleartextProtocol("P"), CleartextProtocol::kNeedMore);
  EXPECT_TRUE(LooksLikeH2Preface(kH2ClientPreface));
  EXPECT_FALSE(LooksLikeH2Preface("PRI"));
}

TEST(H2FloodGuardTest, RateWindowAndContinuations) {
  H2FloodLimits limits;
  limits.max_pings = 3;
  limits.max_continuations = 2;
  FloodGuard guard(limits);
  const TimePoint t0 = MonotonicNow();
  EXPECT_FALSE(guard.OnPing(t0));
  EXPECT_FALSE(guard.OnPing(t0));
  EXPECT_FALSE(guard.OnPing(t0));
  // A new window forgets the old count.
  EXPECT_FALSE(guard.OnPing(t0 + std::chrono::seconds(2)));
  EXPECT_FALSE(guard.tripped());
  EXPECT_FALSE(guard.OnPing(t0 + std::chrono::seconds(2)));
  EXPECT_FALSE(guard.OnPing(t0 + std::chrono::seconds(2)));
  EXPECT_TRUE(guard.OnPing(t0 + std::chrono::seconds(2)));
  EXPECT_EQ(guard.reason(), "PING flood");

  FloodGuard g2(limits);
  g2.OnHeaderBlockStart(10);
  EXPECT_FALSE(g2.OnContinuation(10));
  EXPECT_FALSE(g2.OnContinuation(10));
  g2.OnHeaderBlockStart(10);  // a new block resets the count
  EXPECT_FALSE(g2.OnContinuation(10));
  EXPECT_FALSE(g2.OnContinuation(10));
  EXPECT_TRUE(g2.OnContinuation(10));
  EXPECT_EQ(g2.reason(), "CONTINUATION flood");
}

// ---- curl ----

class H2CurlTest : public ::testing::TestWithParam<bool> {};

TEST_P(H2CurlTest, GetHello) {
  if (!Have("curl")) GTEST_SKIP() << "curl not installed";
  const bool tls = GetParam();
  H2TestServer server({.tls = tls});
  ASSERT_TRUE(server.ok());
  CommandResult r = RunCommand(Curl(tls) + "-w ' %{http_version} %{response_code}' " +
                               Url(server, tls, "/hello"));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output, "hello 2 200");
  r = RunCommand(Curl(tls) + "-o /dev/null -w '%{response_code}' " + Url(server, tls, "/nope"));
  EXPECT_EQ(r.output, "404");
}

TEST_P(H2CurlTest, PostEchoOfFiveMegabytesIsByteExact) {
  if (!Have("curl")) GTEST_SKIP() << "curl not installed";
  const bool tls = GetParam();
  H2TestServer server({.tls = tls});
  ASSERT_TRUE(server.ok());
  TempDir dir;
  std::string body(5'000'000, '\0');
  for (size_t i = 0; i < body.size(); ++i) body[i] = static_cast<char>((i * 2654435761u) >> 13);
  std::ofstream(dir / "in", std::ios::binary) << body;
  const CommandResult r = RunCommand(
      Curl(tls) + "--data-binary @" + (dir / "in").string() + " -o " + (dir / "out").string() +
      " -w '%{http_version} %{response_code}' " + Url(server, tls, "/echo"));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output, "2 200");
  const std::string echoed = ReadFile(dir / "out");
  EXPECT_EQ(echoed.size(), body.size());
  EXPECT_TRUE(echoed == body);
}

TEST_P(H2CurlTest, DownloadOfTwentyMebibytesIsByteExact) {
  if (!Have("curl")) GTEST_SKIP() << "curl not installed";
  const bool tls = GetParam();
  H2TestServer server({.tls = tls});
  ASSERT_TRUE(server.ok());
  TempDir dir;
  const CommandResult r = RunCommand(Curl(tls) + "-o " + (dir / "big").string() +
                                     " -w '%{response_code}' " + Url(server, tls, "/big?mib=20"));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output, "200");
  const std::string got = ReadFile(dir / "big");
  ASSERT_EQ(got.size(), size_t{20} << 20);
  size_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i) bad += got[i] != BigByte(i);
  EXPECT_EQ(bad, 0u);
}

TEST_P(H2CurlTest, HeadSendsLengthButNoBody) {
  if (!Have("curl")) GTEST_SKIP() << "curl not installed";
  const bool tls = GetParam();
  H2TestServer server({.tls = tls});
  ASSERT_TRUE(server.ok());
  const CommandResult r = RunCommand(Curl(tls) + "-I " + Url(server, tls, "/big?mib=2"));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("HTTP/2 200"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("content-length: 2097152"), std::string::npos) << r.output;
}

TEST_P(H2CurlTest, ResponsesCarryADateUnlessTheHandlerSetOne) {
  // RFC 9110 §6.6.1: the engine adds Date (IMF-fixdate); a handler's own Date is sent instead.
  if (!Have("curl")) GTEST_SKIP() << "curl not installed";
  const bool tls = GetParam();
  H2TestServer server({.tls = tls});
  ASSERT_TRUE(server.ok());
  CommandResult r = RunCommand(Curl(tls) + "-o /dev/null -D - " + Url(server, tls, "/hello"));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(std::regex_search(
      r.output, std::regex(R"(\ndate: (Mon|Tue|Wed|Thu|Fri|Sat|Sun), \d\d [A-Z][a-z][a-z] )"
                           R"(\d{4} \d\d:\d\d:\d\d GMT\r\n)")))
      << r.output;
  r = RunCommand(Curl(tls) + "-o /dev/null -D - " + Url(server, tls, "/dated"));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("\ndate: Sun, 06 Nov 1994 08:49:37 GMT\r\n"), std::string::npos)
      << r.output;
  EXPECT_EQ(r.output.find("date:"), r.output.rfind("date:")) << "one Date field:\n" << r.output;
}

INSTANTIATE_TEST_SUITE_P(TlsAndCleartext, H2CurlTest, ::testing::Values(true, false),
                         [](const auto& p) { return p.param ? "Tls" : "Cleartext"; });

// ---- nghttp, h2load ----

TEST(H2ToolsTest, NghttpMultiplexesTwentyStreamsAndTrailers) {
  if (!Have("nghttp")) GTEST_SKIP() << "nghttp not installed";
  H2TestServer server({});
  ASSERT_TRUE(server.ok());
  CommandResult r = RunCommand("timeout 30 nghttp -nv -m 20 " + Url(server, false, "/hello"));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  size_t ok = 0;
  for (size_t pos = 0; (pos = r.output.find(":status: 200", pos)) != std::string::npos; ++pos) ++ok;
  EXPECT_EQ(ok, 20u) << r.output;
  r = RunCommand("timeout 30 nghttp -v " + Url(server, false, "/trailers"));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("x-checksum: 42"), std::string::npos) << r.output;
  // Several different URLs on one connection, over TLS too.
  H2TestServer tls_server({.tls = true});
  ASSERT_TRUE(tls_server.ok());
  r = RunCommand("timeout 30 nghttp -nv " + Url(tls_server, true, "/hello") + " " +
                 Url(tls_server, true, "/big?mib=1") + " " + Url(tls_server, true, "/slow?ms=50"));
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

TEST(H2ToolsTest, H2loadTwoThousandRequestsWithoutFailures) {
  if (!Have("h2load")) GTEST_SKIP() << "h2load not installed";
  for (bool tls : {false, true}) {
    H2TestServer server({.tls = tls});
    ASSERT_TRUE(server.ok());
    const CommandResult r =
        RunCommand("timeout 60 h2load -n 2000 -c 10 -m 10 " + Url(server, tls, "/hello"));
    EXPECT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("2000 succeeded, 0 failed, 0 errored"), std::string::npos) << r.output;
  }
}

// ---- Raw frames (python3 + hpack) ----

std::string Script() { return std::string(PETREL_H2_SCRIPT_DIR) + "/h2_raw_client.py"; }

bool HavePythonH2() {
  return system("/usr/bin/python3 -c 'import hpack, h2' >/dev/null 2>&1") == 0;
}

class H2RawTest : public ::testing::TestWithParam<const char*> {};

// Counts the connections the engine closed for the peer's protocol errors.
class ProtocolErrorCounter final : public RequestObserver {
 public:
  void OnRequestDone(const RequestRecord&) override {}
  void OnPeerLimit(HttpProtocol protocol, PeerLimit limit) override {
    if (protocol == HttpProtocol::kHttp2 && limit == PeerLimit::kProtocolError) ++count;
  }
  std::atomic<int> count{0};
};

TEST_P(H2RawTest, ServerAnswersAsRequired) {
  if (!HavePythonH2()) GTEST_SKIP() << "/usr/bin/python3 lacks hpack/h2";
  H2TestServer::Options options;
  ProtocolErrorCounter protocol_errors;
  options.h2.observer = &protocol_errors;
  const std::string scenario = GetParam();
  if (scenario == "data_over_limit") options.h2.max_request_body = 64 * 1024;
  H2TestServer server(options);
  ASSERT_TRUE(server.ok());
  const CommandResult r = RunCommand(
      absl::StrCat("timeout 30 /usr/bin/python3 ", Script(), " ", server.port(), " ", scenario));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.rfind("PASS", 0), 0u) << r.output;
  if (absl::string_view(scenario).find("flood") != absl::string_view::npos ||
      scenario == "rapid_reset") {
    // The GOAWAY came from our guard, not from nghttp2 for another reason.
    EXPECT_FALSE(server.last_calm_reason().empty());
  }
  // A GOAWAY for the peer's error is counted as limit="protocol_error"; stream errors and the
  // flood guard's ENHANCE_YOUR_CALM are not.
  const bool connection_error = scenario == "streams_beyond_limit" || scenario == "window_overflow";
  EXPECT_EQ(protocol_errors.count.load(), connection_error ? 1 : 0);
  if (scenario == "reset_cancels") {
    // Response::Cancel ran the handler's on_cancel; the handler never answered.
    EXPECT_EQ(server.slow_cancelled(), 1);
    EXPECT_EQ(server.slow_done(), 0);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Scenarios, H2RawTest,
    ::testing::Values("rapid_reset", "continuation_flood", "continuation_flood_after_stream_error",
                      "ping_flood", "settings_flood", "empty_data_flood", "missing_path",
                      "uppercase_header", "connection_header", "content_length_mismatch",
                      "window_overflow", "body_over_limit", "data_over_limit", "big_headers",
                      "credit_on_consume", "reset_cancels", "request_trailers", "methods",
                      "priority_field", "priority_update", "fin_while_window_closed",
                      "streams_beyond_limit", "streams_beyond_limit_early"),
    [](const auto& p) { return std::string(p.param); });

// A client that stops reading: the engine stops pulling the body at TCP backpressure (the
// stream's high-water mark plus what the kernel buffers), not after producing all 64 MiB.
TEST(H2BackpressureTest, SlowReaderBoundsWhatTheProducerMakes) {
  if (!HavePythonH2()) GTEST_SKIP() << "/usr/bin/python3 lacks hpack/h2";
  H2TestServer server({});
  ASSERT_TRUE(server.ok());
  uint64_t produced_at_stall = 0;
  const CommandResult r = RunCommand(
      absl::StrCat("timeout 60 /usr/bin/python3 ", Script(), " ", server.port(), " slow_reader"),
      [&](absl::string_view line) {
        if (line.rfind("STALLED", 0) == 0) produced_at_stall = server.big_produced();
      });
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("PASS"), std::string::npos) << r.output;
  RecordProperty("produced_at_stall", std::to_string(produced_at_stall));
  EXPECT_GT(produced_at_stall, 0u);
  EXPECT_LT(produced_at_stall, uint64_t{24} << 20);
  EXPECT_EQ(server.big_produced(), uint64_t{64} << 20);
}

// The frames of every stream answered in one loop turn leave in one TcpStream write (one
// SSL_write, one send), not one write per frame.
TEST(H2OutputTest, StreamsAnsweredInOneTurnLeaveInOneWrite) {
  if (!HavePythonH2()) GTEST_SKIP() << "/usr/bin/python3 lacks hpack/h2";
  H2TestServer server({});
  ASSERT_TRUE(server.ok());
  const CommandResult r = RunCommand(
      absl::StrCat("timeout 30 /usr/bin/python3 ", Script(), " ", server.port(), " burst"));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.rfind("PASS", 0), 0u) << r.output;
  ASSERT_TRUE(server.WaitForClosedConnections(1));
  // One write for the setup (our SETTINGS, the connection WINDOW_UPDATE, the ACK of the
  // client's SETTINGS), one for the 20 responses (40 frames) the client sent in one segment.
  EXPECT_EQ(server.last_connection_writes(), 2u);
  EXPECT_EQ(server.last_connection_flushes(), 2u);
}

// Many concurrent streams, big bodies mixed with small ones, arrive byte-exact whether the
// server is held back by TCP (wide windows and a late reader: the output buffer fills) or by
// flow control (narrow windows), over TLS and cleartext; python-h2 is the peer.
class H2MixedTest : public ::testing::TestWithParam<std::tuple<bool, const char*>> {};

TEST_P(H2MixedTest, BigAndSmallBodiesByteExact) {
  if (!HavePythonH2()) GTEST_SKIP() << "/usr/bin/python3 lacks hpack/h2";
  const auto [tls, windows] = GetParam();
  H2TestServer server({.tls = tls});
  ASSERT_TRUE(server.ok());
  const CommandResult r = RunCommand(
      absl::StrCat("timeout 90 /usr/bin/python3 ", PETREL_H2_SCRIPT_DIR, "/h2_mixed_client.py ",
                   server.port(), tls ? " tls " : " clear ", windows));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.rfind("PASS", 0), 0u) << r.output;
  EXPECT_EQ(server.big_produced(), uint64_t{8} << 20);
}

INSTANTIATE_TEST_SUITE_P(Windows, H2MixedTest,
                         ::testing::Combine(::testing::Values(true, false),
                                            ::testing::Values("wide", "narrow")),
                         [](const auto& p) {
                           return absl::StrCat(std::get<0>(p.param) ? "Tls" : "Cleartext", "_",
                                               std::get<1>(p.param));
                         });

TEST(H2ShutdownTest, GoawayTwiceAndInFlightStreamCompletes) {
  if (!HavePythonH2()) GTEST_SKIP() << "/usr/bin/python3 lacks hpack/h2";
  H2TestServer server({});
  ASSERT_TRUE(server.ok());
  bool shut = false;
  const CommandResult r = RunCommand(absl::StrCat("timeout 30 /usr/bin/python3 ", Script(), " ",
                                                  server.port(), " graceful_shutdown"),
                                     [&](absl::string_view line) {
                                       if (line.rfind("READY", 0) == 0 && !shut) {
                                         shut = true;
                                         server.ShutdownConnections();
                                       }
                                     });
  EXPECT_TRUE(shut) << r.output;
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("PASS"), std::string::npos) << r.output;
  EXPECT_EQ(server.slow_done(), 1);
}

}  // namespace
}  // namespace petrel::http
