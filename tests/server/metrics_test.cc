// HttpServer observability: GET /metrics on the admin address (Prometheus text) and the access
// log. Requests over h1 (cleartext and TLS), h2c, h2 (TLS) and h3 (gtlsclient), some of them
// 404s, must move the per-protocol counters by exactly their number, the latency histogram must
// count every request, the JSON access log must hold one parseable line per request, and
// /metrics must not be served on the public ports. TCP bytes per protocol must cover what was
// downloaded, and the connections-by-state gauges must follow connections the test holds open
// and fall back to 0. Plus unit tests of the log line format.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "petrel/common/timer.h"
#include "petrel/http/http3_client.h"
#include "petrel/http/http_server.h"
#include "server/access_log.h"
#include "support/command.h"

namespace petrel {
// Every allocation of the process, for the per-request allocation check below.
std::atomic<uint64_t> g_allocations{0};
}  // namespace petrel

// Not inlined: GCC would otherwise pair the inlined free() with `new` and warn.
[[gnu::noinline]] void* operator new(size_t n) {
  petrel::g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
[[gnu::noinline]] void operator delete(void* p) noexcept { std::free(p); }
[[gnu::noinline]] void operator delete(void* p, size_t) noexcept { std::free(p); }

namespace petrel {
namespace {

using testing::CommandResult;
using testing::ReadFile;
using testing::RunCommand;
using testing::TempDir;

constexpr char kGtlsClient[] = "/usr/bin/gtlsclient";

// ---- The line format ----

std::chrono::system_clock::time_point FixedTime() {
  // 2026-12-02T01:50:00.123Z
  return std::chrono::system_clock::time_point(std::chrono::milliseconds(1796176200123));
}

TEST(AccessLogFormatTest, JsonEscapesQuotesBackslashesControlsAndBadUtf8) {
  Request req;
  req.set_method(*Method::Parse("GET"));
  req.set_version(HttpVersion::k11);
  req.set_path(std::string("/a\"b\\c\x01\n\x7f\xc3\xa9\xff/", 14));
  req.set_query("q=\"1\"");
  const SocketAddress peer = *SocketAddress::Parse("127.0.0.1", 4321);
  RequestRecord r;
  r.protocol = HttpProtocol::kHttp1;
  r.request = &req;
  r.peer = &peer;
  r.status = 404;
  r.body_bytes = 10;
  r.completed = true;
  std::string line;
  server::FormatAccessLogLine(AccessLogFormat::kJson, r, FixedTime(),
                              std::chrono::microseconds(1234567), &line);
  EXPECT_EQ(
      line,
      "{\"time\":\"2026-12-02T01:50:00.123Z\",\"client\":\"127.0.0.1\",\"method\":\"GET\","
      "\"path\":\"/a\\\"b\\\\c\\u0001\\n\\u007f\xc3\xa9\\u00ff/\\u0000\",\"query\":\"q=\\\"1\\\"\","
      "\"protocol\":\"HTTP/1.1\",\"status\":404,\"bytes\":10,\"duration\":1.234567,"
      "\"completed\":true}\n");
  // An independent parser agrees: the path comes back byte for byte (0xff as U+00FF, and the
  // NUL at its end survives).
  TempDir dir;
  const std::string file = dir.path().string() + "/line.json";
  {
    std::FILE* f = std::fopen(file.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fwrite(line.data(), 1, line.size(), f);
    std::fclose(f);
  }
  const CommandResult py = RunCommand(absl::StrCat(
      "python3 -c 'import json,sys; o=json.loads(open(sys.argv[1]).read()); "
      "print(o[\"path\"].encode(\"unicode_escape\").decode(), o[\"status\"], o[\"protocol\"])' ",
      file));
  ASSERT_EQ(py.exit_code, 0) << py.output;
  EXPECT_EQ(py.output, "/a\"b\\\\c\\x01\\n\\x7f\\xe9\\xff/\\x00 404 HTTP/1.1\n");
}

TEST(AccessLogFormatTest, CommonLogFormatWithProtocolAndDuration) {
  Request req;
  req.set_method(*Method::Parse("POST"));
  req.set_version(HttpVersion::k3);
  req.set_path("/up\"load");
  const SocketAddress peer = *SocketAddress::Parse("::1", 443);
  RequestRecord r;
  r.protocol = HttpProtocol::kHttp3;
  r.request = &req;
  r.peer = &peer;
  r.status = 201;
  r.body_bytes = 0;
  std::string line;
  server::FormatAccessLogLine(AccessLogFormat::kCommon, r, FixedTime(),
                              std::chrono::microseconds(250), &line);
  EXPECT_EQ(line,
            "::1 - - [02/Dec/2026:01:50:00 +0000] \"POST /up\\x22load HTTP/3\" 201 - 0.000250\n");
  // No request at all (an h1 parse error): dashes, still one line.
  RequestRecord bare;
  bare.peer = &peer;
  bare.status = 400;
  bare.body_bytes = 12;
  line.clear();
  server::FormatAccessLogLine(AccessLogFormat::kCommon, bare, FixedTime(), Duration::zero(), &line);
  EXPECT_EQ(line, "::1 - - [02/Dec/2026:01:50:00 +0000] \"-\" 400 12 0.000000\n");
  line.clear();
  server::FormatAccessLogLine(AccessLogFormat::kOff, bare, FixedTime(), Duration::zero(), &line);
  EXPECT_EQ(line, "");
}

// ---- End to end ----

// Prometheus text: "name{labels} value" per sample, labels as rendered (sorted by name).
std::map<std::string, double> ParseSamples(const std::string& text) {
  std::map<std::string, double> out;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (line.empty() || line[0] == '#') continue;
    const size_t space = line.rfind(' ');
    if (space == absl::string_view::npos) continue;
    double v = 0;
    if (!absl::SimpleAtod(line.substr(space + 1), &v)) continue;
    out[std::string(line.substr(0, space))] = v;
  }
  return out;
}

double Get(const std::map<std::string, double>& m, const std::string& key) {
  auto it = m.find(key);
  return it == m.end() ? -1 : it->second;
}

// A blocking TCP socket connected to 127.0.0.1:`port` (reads time out after 10 s); -1 on failure.
int ConnectLoopback(uint16_t port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    close(fd);
    return -1;
  }
  timeval tv{10, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  return fd;
}

// The sum of the samples whose key starts with `prefix` and contains `part`.
double SumPrefix(const std::map<std::string, double>& m, const std::string& prefix,
                 const std::string& part = "") {
  double sum = 0;
  for (const auto& [k, v] : m) {
    if (absl::StartsWith(k, prefix) && absl::StrContains(k, part)) sum += v;
  }
  return sum;
}

class MetricsEndToEndTest : public ::testing::Test {
 protected:
  void SetUp() override {
    HttpServerConfig c;
    c.http_port = 0;
    c.https_port = 0;
    c.metrics_listen = "127.0.0.1:0";
    c.access_log = AccessLogFormat::kJson;
    c.access_log_file = log_file_;
    c.idle_timeout = std::chrono::seconds(5);
    server_ = std::make_unique<HttpServer>(c);
    ASSERT_TRUE(
        server_->router()
            .Get("/hello", [](Request&, Response& res) { res.Send(200, "hello", "text/plain"); })
            .ok());
    ASSERT_TRUE(server_->router()
                    .Get("/big",
                         [](Request&, Response& res) {
                           res.Send(200, std::string(kBigBody, 'x'), "text/plain");
                         })
                    .ok());
    ASSERT_TRUE(server_->Start().ok());
    ASSERT_NE(server_->metrics_port(), 0);
    ASSERT_NE(server_->metrics_port(), server_->http_port());
  }

  // curl's status code for one request.
  std::string Curl(bool tls, const std::string& flags, const std::string& path) const {
    const CommandResult r = RunCommand(
        absl::StrCat("curl -sS --max-time 30 -o /dev/null -w '%{http_code}' ", flags,
                     tls ? " -k https" : " http",
                     "://127.0.0.1:", tls ? server_->https_port() : server_->http_port(), path));
    return r.exit_code == 0 ? r.output : absl::StrCat("error: ", r.output);
  }

  std::string Scrape(const std::string& path = "/metrics", std::string* headers = nullptr) const {
    const CommandResult r =
        RunCommand(absl::StrCat("curl -sS --max-time 30 -D ", dir_.path().string(), "/scrape.h ",
                                "http://127.0.0.1:", server_->metrics_port(), path));
    if (headers != nullptr) *headers = ReadFile(dir_.path().string() + "/scrape.h");
    return r.exit_code == 0 ? r.output : "";
  }

  // Scrapes until no TCP connection is open and every state gauge is back to 0 (closes finish
  // a moment after the client's exit); the last scrape either way.
  std::map<std::string, double> ScrapeWhenAllClosed() const {
    std::map<std::string, double> m;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    do {
      m = ParseSamples(Scrape());
      if (Get(m, "petrel_tcp_connections_open") == 0 && SumPrefix(m, kStates, kTcp) == 0) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    } while (std::chrono::steady_clock::now() < deadline);
    return m;
  }

  // The petrel_connections gauge of `transport` for `state`.
  static double StateOf(const std::map<std::string, double>& m, const char* transport,
                        const char* state) {
    return Get(
        m, absl::StrCat("petrel_connections{state=\"", state, "\",transport=\"", transport, "\"}"));
  }

  // Scrapes until the `transport` state gauges read `want` (bounded: 20 s), then expects them;
  // the last scrape.
  std::map<std::string, double> WaitForStates(
      const char* transport, const std::vector<std::pair<const char*, double>>& want) const {
    std::map<std::string, double> m;
    auto reached = [&] {
      for (const auto& [state, value] : want) {
        if (StateOf(m, transport, state) != value) return false;
      }
      return true;
    };
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    do {
      m = ParseSamples(Scrape());
      if (reached()) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    } while (std::chrono::steady_clock::now() < deadline);
    for (const auto& [state, value] : want) {
      EXPECT_EQ(StateOf(m, transport, state), value) << transport << " " << state;
    }
    return m;
  }

  static constexpr size_t kBigBody = 100000;
  static constexpr char kStates[] = "petrel_connections{";
  static constexpr char kTcp[] = "transport=\"tcp\"";

  TempDir dir_;
  TempDir downloads_;
  const std::string log_file_ = dir_.path().string() + "/access.log";
  std::unique_ptr<HttpServer> server_;
};

TEST_F(MetricsEndToEndTest, CountersAndAccessLogMatchTheRequestsPerProtocol) {
  // h1: 3 × 200 (2 cleartext, 1 TLS), 2 × 404 (one of them /metrics on the public port).
  EXPECT_EQ(Curl(false, "--http1.1", "/hello"), "200");
  EXPECT_EQ(Curl(false, "--http1.1", "/hello"), "200");
  EXPECT_EQ(Curl(true, "--http1.1", "/hello"), "200");
  EXPECT_EQ(Curl(false, "--http1.1", "/missing"), "404");
  EXPECT_EQ(Curl(false, "--http1.1", "/metrics"), "404");
  // h2: 2 × 200 (h2c and TLS), 2 × 404 (/metrics on the TLS port).
  EXPECT_EQ(Curl(false, "--http2-prior-knowledge", "/hello"), "200");
  EXPECT_EQ(Curl(true, "--http2", "/hello"), "200");
  EXPECT_EQ(Curl(false, "--http2-prior-knowledge", "/missing"), "404");
  EXPECT_EQ(Curl(true, "--http2", "/metrics"), "404");
  // h3: 1 × 200, 1 × 404.
  const bool h3 = access(kGtlsClient, X_OK) == 0;
  if (h3) {
    for (const char* path : {"/hello", "/missing"}) {
      const CommandResult r =
          RunCommand(absl::StrCat(kGtlsClient, " -q --exit-on-all-streams-close --download ",
                                  downloads_.path().string(), " 127.0.0.1 ", server_->https_port(),
                                  " https://127.0.0.1:", server_->https_port(), path),
                     60);
      ASSERT_EQ(r.exit_code, 0) << r.output;
    }
    EXPECT_EQ(ReadFile(downloads_.path().string() + "/hello"), "hello");
  }
  const double h3_requests = h3 ? 2 : 0;

  // h1 and h2 are counted before their last byte goes out; an h3 stream ends when QUIC has
  // closed it, which may follow the client's exit by a moment: wait for that (bounded).
  std::string headers;
  std::map<std::string, double> m;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  do {
    m = ParseSamples(Scrape("/metrics", &headers));
    if (Get(m, "petrel_http_requests_total{protocol=\"h3\"}") == h3_requests) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  } while (std::chrono::steady_clock::now() < deadline);
  EXPECT_TRUE(absl::StrContains(headers, "text/plain; version=0.0.4")) << headers;

  const struct {
    const char* protocol;
    double requests, ok, not_found;
  } want[] = {
      {"h1", 5, 3, 2}, {"h2", 4, 2, 2}, {"h3", h3_requests, h3_requests / 2, h3_requests / 2}};
  for (const auto& w : want) {
    const std::string p = absl::StrCat("protocol=\"", w.protocol, "\"");
    EXPECT_EQ(Get(m, absl::StrCat("petrel_http_requests_total{", p, "}")), w.requests) << p;
    EXPECT_EQ(Get(m, absl::StrCat("petrel_http_responses_total{code=\"2xx\",", p, "}")), w.ok) << p;
    EXPECT_EQ(Get(m, absl::StrCat("petrel_http_responses_total{code=\"4xx\",", p, "}")),
              w.not_found)
        << p;
    for (const char* code : {"1xx", "3xx", "5xx"}) {
      EXPECT_EQ(Get(m, absl::StrCat("petrel_http_responses_total{code=\"", code, "\",", p, "}")), 0)
          << p << " " << code;
    }
    EXPECT_EQ(Get(m, absl::StrCat("petrel_http_requests_incomplete_total{", p, "}")), 0) << p;
    EXPECT_EQ(Get(m, absl::StrCat("petrel_http_request_duration_seconds_count{", p, "}")),
              w.requests)
        << p;
    EXPECT_EQ(
        Get(m, absl::StrCat("petrel_http_request_duration_seconds_bucket{", p, ",le=\"+Inf\"}")),
        w.requests)
        << p;
  }
  // Connections: every curl run is one connection; two of each kind were TLS over TCP.
  EXPECT_EQ(Get(m, "petrel_http_connections_total{protocol=\"h1\"}"), 5);
  EXPECT_EQ(Get(m, "petrel_http_connections_total{protocol=\"h2\"}"), 4);
  EXPECT_EQ(Get(m, "petrel_http_connections_total{protocol=\"h3\"}"), h3_requests);
  EXPECT_EQ(Get(m, "petrel_tcp_connections_accepted_total{listener=\"http\"}"), 6);
  EXPECT_EQ(Get(m, "petrel_tcp_connections_accepted_total{listener=\"https\"}"), 3);
  EXPECT_EQ(Get(m, "petrel_tls_handshakes_total{transport=\"tcp\"}"), 3);
  EXPECT_EQ(Get(m, "petrel_tls_handshakes_total{transport=\"quic\"}"), h3_requests);
  EXPECT_EQ(Get(m, "petrel_tls_handshake_failures_total{transport=\"tcp\"}"), 0);
  if (h3) {
    EXPECT_EQ(SumPrefix(m, "petrel_quic_handshakes_completed_total{"), 2);
    EXPECT_EQ(SumPrefix(m, "petrel_quic_connections_accepted_total{"), 2);
    EXPECT_GE(Get(m, "petrel_quic_datagrams_received_total"), 4);
    EXPECT_GE(SumPrefix(m, "petrel_quic_worker_datagrams_received_total{"), 4);
    EXPECT_GE(SumPrefix(m, "petrel_quic_worker_datagrams_sent_total{"), 4);
    EXPECT_GT(SumPrefix(m, "petrel_quic_worker_bytes_sent_total{"), 2400);
  }
  EXPECT_GE(Get(m, "petrel_quic_master_drops_total{reason=\"ring_full\"}"), 0);

  // The admin address serves nothing else, and its own requests are not counted.
  EXPECT_TRUE(Scrape("/other").find("petrel_") == std::string::npos);
  const std::map<std::string, double> again = ParseSamples(Scrape());
  EXPECT_EQ(Get(again, "petrel_http_requests_total{protocol=\"h1\"}"), 5);

  // The access log: one JSON object per request, with the protocol, status and body bytes the
  // metrics counted.
  const CommandResult py = RunCommand(absl::StrCat(
      "python3 -c 'import json,sys\n"
      "for l in open(sys.argv[1]):\n"
      "  o=json.loads(l)\n"
      "  print(o[\"protocol\"], o[\"status\"], o[\"bytes\"], o[\"path\"], o[\"method\"], "
      "o[\"client\"], o[\"completed\"], o[\"duration\"] >= 0)' ",
      log_file_));
  ASSERT_EQ(py.exit_code, 0) << py.output << "\n" << ReadFile(log_file_);
  std::map<std::string, int> lines;
  std::map<std::string, double> bytes_by_protocol;
  int total = 0;
  for (absl::string_view l : absl::StrSplit(py.output, '\n', absl::SkipEmpty())) {
    const std::vector<std::string> f = absl::StrSplit(l, ' ');
    ASSERT_EQ(f.size(), 8u) << l;
    EXPECT_EQ(f[4], "GET");
    EXPECT_EQ(f[5], "127.0.0.1");
    EXPECT_EQ(f[6], "True");
    EXPECT_EQ(f[7], "True");
    ++lines[absl::StrCat(f[0], " ", f[1], " ", f[3])];
    if (f[3] == "/hello") {
      EXPECT_EQ(f[2], "5") << l;
    }
    bytes_by_protocol[f[0]] += std::stod(f[2]);
    ++total;
  }
  EXPECT_EQ(total, 9 + h3_requests) << py.output;
  EXPECT_EQ(lines["HTTP/1.1 200 /hello"], 3);
  EXPECT_EQ(lines["HTTP/1.1 404 /missing"], 1);
  EXPECT_EQ(lines["HTTP/1.1 404 /metrics"], 1);
  EXPECT_EQ(lines["HTTP/2 200 /hello"], 2);
  EXPECT_EQ(lines["HTTP/2 404 /missing"], 1);
  EXPECT_EQ(lines["HTTP/2 404 /metrics"], 1);
  EXPECT_EQ(lines["HTTP/3 200 /hello"], h3 ? 1 : 0);
  EXPECT_EQ(lines["HTTP/3 404 /missing"], h3 ? 1 : 0);
  EXPECT_EQ(Get(m, "petrel_http_response_body_bytes_total{protocol=\"h1\"}"),
            bytes_by_protocol["HTTP/1.1"]);
  EXPECT_EQ(Get(m, "petrel_http_response_body_bytes_total{protocol=\"h2\"}"),
            bytes_by_protocol["HTTP/2"]);
  if (h3) {
    EXPECT_EQ(Get(m, "petrel_http_response_body_bytes_total{protocol=\"h3\"}"),
              bytes_by_protocol["HTTP/3"]);
  }
  if (!h3) GTEST_SKIP() << "gtlsclient (ngtcp2-client) missing: h3 not checked";
}

TEST_F(MetricsEndToEndTest, MalformedH1RequestIsCountedAndLoggedWithoutARequest) {
  // Bytes that never become a request still get a 400, a count and a log line.
  const CommandResult r = RunCommand(absl::StrCat(
      "printf 'GET / HTTP/1.1\\r\\nHost: x\\r\\nBad Header: y\\r\\n\\r\\n' | "
      "timeout 10 python3 -c 'import socket,sys; s=socket.create_connection((\"127.0.0.1\",",
      server_->http_port(),
      ")); s.sendall(sys.stdin.buffer.read()); print(s.recv(100).split(b\" \")[1].decode())'"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output, "400\n");
  const std::map<std::string, double> m = ParseSamples(Scrape());
  EXPECT_EQ(Get(m, "petrel_http_requests_total{protocol=\"h1\"}"), 1);
  EXPECT_EQ(Get(m, "petrel_http_responses_total{code=\"4xx\",protocol=\"h1\"}"), 1);
  const std::string log = ReadFile(log_file_);
  EXPECT_TRUE(absl::StrContains(log, "\"protocol\":\"HTTP/1.1\",\"status\":400")) << log;
  EXPECT_FALSE(absl::StrContains(log, "\"method\"")) << log;
}

// A peer that floods an h2 connection with PINGs is closed (GOAWAY ENHANCE_YOUR_CALM) and
// counted under the limit it ran into.
TEST_F(MetricsEndToEndTest, PeerLimitsAreCountedByProtocolAndLimit) {
  const CommandResult r = RunCommand(absl::StrCat(
      "timeout 20 python3 -c 'import socket; s=socket.create_connection((\"127.0.0.1\",",
      server_->http_port(),
      ")); s.sendall(b\"PRI * HTTP/2.0\\r\\n\\r\\nSM\\r\\n\\r\\n\" + "
      "b\"\\0\\0\\0\\x04\\0\\0\\0\\0\\0\" + "
      "(b\"\\0\\0\\x08\\x06\\0\\0\\0\\0\\0\" + bytes(8)) * 300); "
      "print(sum(len(b) for b in iter(lambda: s.recv(65536), b\"\")) > 0)'"));
  ASSERT_EQ(r.exit_code, 0) << r.output;  // the server closed the connection
  EXPECT_EQ(r.output, "True\n");
  const std::map<std::string, double> m = ParseSamples(Scrape());
  EXPECT_EQ(Get(m, "petrel_http_peer_limits_total{limit=\"ping_flood\",protocol=\"h2\"}"), 1);
  EXPECT_EQ(Get(m, "petrel_http_peer_limits_total{limit=\"rapid_reset\",protocol=\"h3\"}"), 0);
}

double Delta(const std::map<std::string, double>& after,
             const std::map<std::string, double>& before, const std::string& key) {
  return Get(after, key) - Get(before, key);
}

std::string BytesKey(const char* direction, const char* protocol) {
  return absl::StrCat("petrel_tcp_bytes_", direction, "_total{protocol=\"", protocol, "\"}");
}

TEST_F(MetricsEndToEndTest, TcpBytesPerProtocolCoverTheDownloads) {
  std::map<std::string, double> before = ScrapeWhenAllClosed();
  for (const char* p : {"h1", "h2", "none"}) {
    ASSERT_EQ(Get(before, BytesKey("received", p)), 0) << p;
    ASSERT_EQ(Get(before, BytesKey("sent", p)), 0) << p;
  }
  const struct {
    bool tls;
    const char* flags;
    const char* protocol;
    const char* other;
  } downloads[] = {
      {false, "--http1.1", "h1", "h2"},
      {true, "--http1.1", "h1", "h2"},
      {true, "--http2", "h2", "h1"},
  };
  for (const auto& d : downloads) {
    const std::string what = absl::StrCat(d.tls ? "https " : "http ", d.flags);
    ASSERT_EQ(Curl(d.tls, d.flags, "/big"), "200") << what;
    const std::map<std::string, double> after = ScrapeWhenAllClosed();
    // The body plus heads, framing and (TLS) records and handshake: well under 20 kB more.
    const double sent = Delta(after, before, BytesKey("sent", d.protocol));
    EXPECT_GE(sent, kBigBody) << what;
    EXPECT_LT(sent, kBigBody + 20000) << what;
    // A request head; under TLS the client's handshake flight too (a ClientHello alone is more
    // than 200 bytes).
    const double received = Delta(after, before, BytesKey("received", d.protocol));
    EXPECT_GT(received, d.tls ? 200 : 30) << what;
    EXPECT_LT(received, 20000) << what;
    EXPECT_EQ(Delta(after, before, BytesKey("sent", d.other)), 0) << what;
    EXPECT_EQ(Delta(after, before, BytesKey("received", d.other)), 0) << what;
    before = after;
  }
  EXPECT_EQ(Get(before, BytesKey("received", "none")), 0);

  // A connection no engine ever took (its TLS handshake fails): its bytes count as "none".
  constexpr char kJunk[] = "not a TLS record\r\n\r\n";
  const int fd = ConnectLoopback(server_->https_port());
  ASSERT_GE(fd, 0);
  ASSERT_EQ(send(fd, kJunk, sizeof(kJunk) - 1, 0), static_cast<ssize_t>(sizeof(kJunk) - 1));
  char buf[256];
  while (recv(fd, buf, sizeof(buf), 0) > 0) {  // the server's alert, then its close
  }
  close(fd);
  const std::map<std::string, double> after = ScrapeWhenAllClosed();
  EXPECT_EQ(Get(after, BytesKey("received", "none")), sizeof(kJunk) - 1);
  EXPECT_LT(Get(after, BytesKey("sent", "none")), 100);  // at most an alert
  EXPECT_EQ(Delta(after, before, BytesKey("received", "h1")), 0);
  EXPECT_EQ(Delta(after, before, BytesKey("received", "h2")), 0);
  EXPECT_EQ(Get(after, "petrel_tls_handshake_failures_total{transport=\"tcp\"}"), 1);
}

// An h2c client on a raw socket: the preface, empty SETTINGS and GET `path` on stream 1 (HPACK:
// indexed :method GET and :scheme http, literal :authority and :path).
std::string H2cGet(absl::string_view path) {
  std::string block = "\x82\x86";
  absl::StrAppend(&block, "\x41\x01x", "\x44", std::string(1, static_cast<char>(path.size())),
                  path);
  std::string out = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
  out += std::string("\x00\x00\x00\x04\x00\x00\x00\x00\x00", 9);                  // SETTINGS
  const char head[] = {0, 0, static_cast<char>(block.size()), 1, 5, 0, 0, 0, 1};  // HEADERS
  out.append(head, sizeof(head));  // END_STREAM | END_HEADERS, stream 1
  out += block;
  return out;
}

TEST_F(MetricsEndToEndTest, ConnectionStatesFollowHeldConnectionsAndReturnToZero) {
  auto wait_for = [this](double handshake, double idle, double active, double closing) {
    return WaitForStates(
        "tcp",
        {{"handshake", handshake}, {"idle", idle}, {"active", active}, {"closing", closing}});
  };
  wait_for(0, 0, 0, 0);

  // Keep-alive h1 after one exchange: idle.
  const int idle = ConnectLoopback(server_->http_port());
  ASSERT_GE(idle, 0);
  constexpr char kGet[] = "GET /hello HTTP/1.1\r\nHost: x\r\n\r\n";
  ASSERT_EQ(send(idle, kGet, sizeof(kGet) - 1, 0), static_cast<ssize_t>(sizeof(kGet) - 1));
  std::string response;
  char buf[4096];
  while (!absl::EndsWith(response, "hello")) {
    const ssize_t n = recv(idle, buf, sizeof(buf), 0);
    ASSERT_GT(n, 0) << response;
    response.append(buf, static_cast<size_t>(n));
  }
  // Half a request head: active.
  const int partial = ConnectLoopback(server_->http_port());
  ASSERT_GE(partial, 0);
  constexpr char kHalf[] = "GET /hello HTTP/1.1\r\n";
  ASSERT_EQ(send(partial, kHalf, sizeof(kHalf) - 1, 0), static_cast<ssize_t>(sizeof(kHalf) - 1));
  // TLS, nothing sent: handshake.
  const int handshake = ConnectLoopback(server_->https_port());
  ASSERT_GE(handshake, 0);
  // h2c with a stream open: the body is larger than the client's initial window (64 KiB - 1)
  // and the client never grants more, so the stream stays open.
  const int h2 = ConnectLoopback(server_->http_port());
  ASSERT_GE(h2, 0);
  const std::string get_big = H2cGet("/big");
  ASSERT_EQ(send(h2, get_big.data(), get_big.size(), 0), static_cast<ssize_t>(get_big.size()));
  std::map<std::string, double> m = wait_for(1, 1, 2, 0);
  EXPECT_EQ(Get(m, "petrel_tcp_connections_open"), 4);

  // The h2 client says GOAWAY: the connection finishes its stream and takes no new one.
  const char goaway[] = {0, 0, 8, 7, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
  ASSERT_EQ(send(h2, goaway, sizeof(goaway), 0), static_cast<ssize_t>(sizeof(goaway)));
  wait_for(1, 1, 1, 1);

  // The client cancels the stream (RST_STREAM CANCEL): with GOAWAY seen and no stream left,
  // the server finishes the connection, and the client reads to its EOF. (A stream left
  // waiting for window would keep the server's side open after the client's close: the
  // stream can never complete.)
  const char cancel[] = {0, 0, 4, 3, 0, 0, 0, 0, 1, 0, 0, 0, 8};
  ASSERT_EQ(send(h2, cancel, sizeof(cancel), 0), static_cast<ssize_t>(sizeof(cancel)));
  ssize_t n;
  while ((n = recv(h2, buf, sizeof(buf), 0)) > 0) {
  }
  ASSERT_EQ(n, 0) << "no EOF from the server after RST_STREAM";
  for (int fd : {idle, partial, handshake, h2}) close(fd);
  m = ScrapeWhenAllClosed();
  EXPECT_EQ(SumPrefix(m, kStates, kTcp), 0);
  EXPECT_EQ(Get(m, "petrel_tcp_connections_open"), 0);
  for (const char* s : {"handshake", "idle", "active", "closing"}) {
    EXPECT_EQ(StateOf(m, "tcp", s), 0) << s;
  }
}

// QUIC connections by state: a client that holds its connection open after a request is
// established (its handshake gauge back at 0); once it closes, every QUIC state returns to 0.
TEST_F(MetricsEndToEndTest, QuicConnectionStatesFollowAClient) {
  auto wait_for = [this](double handshake, double established, double closing) {
    return WaitForStates(
        "quic", {{"handshake", handshake}, {"established", established}, {"closing", closing}});
  };
  wait_for(0, 0, 0);
  Http3ClientConfig config;
  config.server = *SocketAddress::Parse("127.0.0.1", server_->https_port());
  config.verify_peer = false;
  auto client = Http3Client::Create(config);
  ASSERT_TRUE(client.ok()) << client.status();
  Http3Client& c = **client;
  std::atomic<int> status{0};
  Http3Request get;
  get.path = "/hello";
  ASSERT_TRUE(c.Fetch(std::move(get), [&](absl::StatusOr<Http3Response> r) {
                 status = r.ok() ? r->status : -1;
               }).ok());
  ASSERT_TRUE(c.Connect().ok());
  std::thread loop([&c] {
    Timer deadline(c.loop(), [&c] { c.Stop(); });
    deadline.StartAfter(std::chrono::seconds(60));
    c.Run();
    deadline.Cancel();
  });
  const auto answered_by = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (status.load() == 0 && std::chrono::steady_clock::now() < answered_by) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(status.load(), 200);
  wait_for(0, 1, 0);
  c.loop()->RunInLoop([&c] { c.CloseWhenDone(); });
  loop.join();
  const std::map<std::string, double> m = wait_for(0, 0, 0);
  EXPECT_EQ(SumPrefix(m, "petrel_quic_connections_open"), 0);
}

// With QUIC workers, the master→worker rings and the per-worker series are exported.
TEST(MetricsWorkersTest, PerWorkerQuicSeriesAndRingDepth) {
  if (access(kGtlsClient, X_OK) != 0) GTEST_SKIP() << "gtlsclient (ngtcp2-client) missing";
  HttpServerConfig c;
  c.http_port.reset();
  c.https_port = 0;
  c.tcp_loops = 2;
  c.quic_workers = 2;
  c.metrics_listen = "127.0.0.1:0";
  HttpServer server(c);
  ASSERT_TRUE(
      server.router().Get("/hello", [](Request&, Response& res) { res.Send(200, "hi"); }).ok());
  ASSERT_TRUE(server.Start().ok());
  TempDir downloads;
  for (int i = 0; i < 3; ++i) {
    const CommandResult r =
        RunCommand(absl::StrCat(kGtlsClient, " -q --exit-on-all-streams-close --download ",
                                downloads.path().string(), " 127.0.0.1 ", server.https_port(),
                                " https://127.0.0.1:", server.https_port(), "/hello"),
                   60);
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }
  std::map<std::string, double> m;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  do {
    const CommandResult r = RunCommand(absl::StrCat(
        "curl -sS --max-time 30 http://127.0.0.1:", server.metrics_port(), "/metrics"));
    m = ParseSamples(r.output);
    if (Get(m, "petrel_http_requests_total{protocol=\"h3\"}") == 3) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  } while (std::chrono::steady_clock::now() < deadline);
  EXPECT_EQ(Get(m, "petrel_http_requests_total{protocol=\"h3\"}"), 3);
  EXPECT_EQ(Get(m, "petrel_http_responses_total{code=\"2xx\",protocol=\"h3\"}"), 3);
  for (const char* w : {"0", "1"}) {
    const std::string label = absl::StrCat("{worker=\"", w, "\"}");
    EXPECT_GE(Get(m, absl::StrCat("petrel_quic_ring_depth", label)), 0) << w;
    EXPECT_GE(Get(m, absl::StrCat("petrel_quic_worker_datagrams_received_total", label)), 0) << w;
    EXPECT_GE(Get(m, absl::StrCat("petrel_quic_connections_open", label)), 0) << w;
  }
  EXPECT_EQ(SumPrefix(m, "petrel_quic_handshakes_completed_total{"), 3);
  EXPECT_EQ(SumPrefix(m, "petrel_quic_connections_accepted_total{"), 3);
  // Workers handle what the master routed (a datagram may still be in a ring at the scrape).
  const double routed = Get(m, "petrel_quic_datagrams_received_total") -
                        SumPrefix(m, "petrel_quic_master_drops_total{");
  EXPECT_GT(SumPrefix(m, "petrel_quic_worker_datagrams_received_total{"), 0);
  EXPECT_LE(SumPrefix(m, "petrel_quic_worker_datagrams_received_total{"), routed);
}

// Allocations the server makes for `n` keep-alive GET /hello requests on one h1 connection.
// The client side allocates nothing inside the measured loop (one buffer, raw syscalls).
uint64_t AllocationsForRequests(uint16_t port, int n) {
  const int fd = ConnectLoopback(port);
  if (fd < 0) return ~uint64_t{0};
  static constexpr char kRequest[] = "GET /hello HTTP/1.1\r\nHost: x\r\n\r\n";
  char buf[4096];
  uint64_t before = 0;
  constexpr int kWarmUp = 50;  // buffers, shards and caches settle first
  for (int i = 0; i < kWarmUp + n; ++i) {
    if (i == kWarmUp) before = g_allocations.load();
    if (send(fd, kRequest, sizeof(kRequest) - 1, 0) != sizeof(kRequest) - 1) break;
    size_t got = 0;
    while (got < 5 || std::memcmp(buf + got - 5, "hello", 5) != 0) {
      const ssize_t r = recv(fd, buf + got, sizeof(buf) - got, 0);
      if (r <= 0 || got + static_cast<size_t>(r) >= sizeof(buf)) {
        close(fd);
        return ~uint64_t{0};
      }
      got += static_cast<size_t>(r);
    }
  }
  const uint64_t used = g_allocations.load() - before;
  close(fd);
  return used;
}

// The observer (metrics + JSON access log) adds no allocation per h1 request: the engine's own
// allocations are the same with it on and off.
TEST(MetricsAllocationTest, ObserverAddsNoAllocationPerH1Request) {
  constexpr int kRequests = 500;
  uint64_t allocations[2] = {0, 0};
  TempDir dir;
  for (int on = 0; on < 2; ++on) {
    HttpServerConfig c;
    c.http_port = 0;
    c.https_port.reset();
    if (on == 1) {
      c.metrics_listen = "127.0.0.1:0";
      c.access_log = AccessLogFormat::kJson;
      c.access_log_file = dir.path().string() + "/access.log";
    }
    HttpServer server(c);
    ASSERT_TRUE(server.router()
                    .Get("/hello", [](Request&, Response& res) { res.Send(200, "hello"); })
                    .ok());
    ASSERT_TRUE(server.Start().ok());
    allocations[on] = AllocationsForRequests(server.http_port(), kRequests);
    ASSERT_NE(allocations[on], ~uint64_t{0});
  }
  const double off_per_request = static_cast<double>(allocations[0]) / kRequests;
  const double on_per_request = static_cast<double>(allocations[1]) / kRequests;
  std::printf("allocations per h1 request: observer off %.3f, on %.3f\n", off_per_request,
              on_per_request);
  // Loop-internal allocations (timers, posted tasks) vary a little between runs, never by one
  // per request.
  EXPECT_LT(on_per_request - off_per_request, 0.5);
}

}  // namespace
}  // namespace petrel
