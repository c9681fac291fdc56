// WebSocket routes end to end: HTTP/1.1 Upgrade (RFC 6455) driven by Python's websockets and
// raw sockets, cleartext and TLS; HTTP/2 extended CONNECT (RFC 8441) driven by python-h2 with
// frames built in Python, over h2c and TLS; HTTP/3 extended CONNECT (RFC 9220) driven by
// Petrel's Http3Client with frames built here.
#include "petrel/http/websocket.h"

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "petrel/common/socket_address.h"
#include "petrel/common/timer.h"
#include "petrel/http/http3_client.h"
#include "petrel/http/http_server.h"
#include "support/command.h"

namespace petrel {
namespace {

using testing::CommandResult;
using testing::RunCommand;

class Echo : public WebSocketHandler {
 public:
  void OnMessage(WebSocket& ws, WebSocketMessageType type, absl::string_view data) override {
    if (type == WebSocketMessageType::kText) {
      ws.SendText(data);
    } else {
      ws.SendBinary(data);
    }
  }
};

// What the /hold route's handlers saw, across the server's threads.
struct HoldRecord {
  std::mutex mu;
  std::condition_variable cv;
  int opened = 0;
  std::vector<uint16_t> close_codes;  // as OnClose reported them

  bool WaitOpened(int n) {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, std::chrono::seconds(30), [&] { return opened >= n; });
  }
};

// Holds the WebSocket open and says nothing: only a server stop ends it.
class Hold : public WebSocketHandler {
 public:
  explicit Hold(HoldRecord* record) : record_(record) {}
  void OnOpen(WebSocket&) override {
    std::lock_guard<std::mutex> lock(record_->mu);
    ++record_->opened;
    record_->cv.notify_all();
  }
  void OnMessage(WebSocket&, WebSocketMessageType, absl::string_view) override {}
  void OnClose(WebSocket&, uint16_t code, absl::string_view) override {
    std::lock_guard<std::mutex> lock(record_->mu);
    record_->close_codes.push_back(code);
  }

 private:
  HoldRecord* record_;
};

class WebSocketTest : public ::testing::Test {
 protected:
  void SetUp() override {
    HttpServerConfig c;
    c.http_port = 0;
    c.https_port = 0;
    c.metrics_listen = "127.0.0.1:0";
    server_ = std::make_unique<HttpServer>(c);
    Router& r = server_->router();
    ASSERT_TRUE(r.WebSocket("/echo", [](Request&) { return std::make_unique<Echo>(); }).ok());
    WebSocketOptions chat;
    chat.subprotocols = {"chat.v2", "chat"};
    ASSERT_TRUE(r.WebSocket(
                     "/chat", [](Request&) { return std::make_unique<Echo>(); }, chat)
                    .ok());
    ASSERT_TRUE(r.WebSocket("/refuse", [](Request&) { return nullptr; }).ok());
    ASSERT_TRUE(
        r.WebSocket("/hold", [this](Request&) { return std::make_unique<Hold>(&hold_); }).ok());
    // A handler that answers 101 to a request that did not ask to upgrade.
    ASSERT_TRUE(r.Get("/switch", [](Request&, Response& res) { res.Send(101, ""); }).ok());
    const absl::Status started = server_->Start();
    ASSERT_TRUE(started.ok()) << started;
  }

  // A client script's verdict: ws_h1_client.py (Python's websockets) or ws_h2_client.py
  // (python-h2).
  std::string Run(const std::string& script, const std::string& mode, const std::string& scenario) {
    const uint16_t port = mode == "tls" ? server_->https_port() : server_->http_port();
    const CommandResult r =
        RunCommand(absl::StrCat("timeout 90 /usr/bin/python3 ", PETREL_WS_SCRIPT_DIR, "/", script,
                                " ", port, " ", mode, " ", scenario));
    return r.output;
  }
  std::string H1(const std::string& mode, const std::string& scenario) {
    return Run("ws_h1_client.py", mode, scenario);
  }
  std::string H2(const std::string& mode, const std::string& scenario) {
    return Run("ws_h2_client.py", mode, scenario);
  }

  // Stops the server (grace: 30 s) once the first /hold WebSocket is open, from a thread of
  // its own as an operator's signal would.
  std::thread StopOnceHeld() {
    return std::thread([this] {
      if (hold_.WaitOpened(1)) server_->Stop(std::chrono::seconds(30));
    });
  }
  // After the stop: the server heard the client answer its close with 1001 — not 1006, which
  // is what a WebSocket cut at the end of the grace period reports.
  void ExpectClosedWith1001() {
    server_->Wait();
    std::lock_guard<std::mutex> lock(hold_.mu);
    EXPECT_EQ(hold_.close_codes, std::vector<uint16_t>{WebSocketClose::kGoingAway});
  }

  // Scrapes /metrics until `sample` (a whole line, "name{labels} value") is there, for at most
  // 20 s: a WebSocket is counted when the engine lets go of it, a moment after the client saw
  // its end. The last scrape either way.
  std::string ScrapeUntil(const std::string& sample) {
    std::string text;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    do {
      text = RunCommand(absl::StrCat("curl -sS --max-time 10 http://127.0.0.1:",
                                     server_->metrics_port(), "/metrics"))
                 .output;
      if (absl::StrContains(text, "\n" + sample + "\n")) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    } while (std::chrono::steady_clock::now() < deadline);
    return text;
  }

  HoldRecord hold_;
  std::unique_ptr<HttpServer> server_;
};

// The lines of `text` that start with `prefix`.
std::vector<absl::string_view> Lines(absl::string_view text, absl::string_view prefix) {
  std::vector<absl::string_view> out;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (absl::StartsWith(line, prefix)) out.push_back(line);
  }
  return out;
}

// Each WebSocket is counted when it opens, and when it ends by the close code Petrel sent:
// bad input (an unmasked frame: 1002), an answered close (1000), a transport that ended
// without one (1006).
TEST_F(WebSocketTest, OpensAndClosesAreCountedByCode) {
  EXPECT_EQ(H1("clear", "raw"), "PASS raw\n");
  EXPECT_EQ(H2("clear", "echo"), "PASS echo\n");  // /echo closes with 1000, /chat is dropped
  const std::string text =
      ScrapeUntil(R"(petrel_websocket_closed_total{code="1006",protocol="h2"} 1)");
  for (const char* sample : {
           R"(petrel_websocket_opened_total{protocol="h1"} 1)",
           R"(petrel_websocket_closed_total{code="1002",protocol="h1"} 1)",
           R"(petrel_websocket_closed_total{code="1000",protocol="h1"} 0)",
           R"(petrel_websocket_opened_total{protocol="h2"} 2)",
           R"(petrel_websocket_closed_total{code="1000",protocol="h2"} 1)",
           R"(petrel_websocket_closed_total{code="1006",protocol="h2"} 1)",
           R"(petrel_websocket_opened_total{protocol="h3"} 0)",
       }) {
    EXPECT_TRUE(absl::StrContains(text, absl::StrCat("\n", sample, "\n")))
        << sample << "\nin:\n"
        << absl::StrJoin(Lines(text, "petrel_websocket_"), "\n");
  }
}

// A graceful stop closes every WebSocket with 1001 and waits for the peer's answer, within the
// grace period, on each protocol.
TEST_F(WebSocketTest, GracefulStopClosesWith1001OverH1) {
  std::thread stopper = StopOnceHeld();
  const CommandResult r =
      RunCommand(absl::StrCat("timeout 90 /usr/bin/python3 ", PETREL_WS_SCRIPT_DIR,
                              "/ws_going_away.py ", server_->http_port(), " h1 clear"));
  stopper.join();
  EXPECT_EQ(r.output, "PASS going-away\n");
  ExpectClosedWith1001();
}

TEST_F(WebSocketTest, GracefulStopClosesWith1001OverH2) {
  std::thread stopper = StopOnceHeld();
  const CommandResult r =
      RunCommand(absl::StrCat("timeout 90 /usr/bin/python3 ", PETREL_WS_SCRIPT_DIR,
                              "/ws_going_away.py ", server_->https_port(), " h2 tls"));
  stopper.join();
  EXPECT_EQ(r.output, "PASS going-away\n");
  ExpectClosedWith1001();
}

TEST_F(WebSocketTest, H1EchoSubprotocolAndCloseWithPythonWebsockets) {
  EXPECT_EQ(H1("clear", "echo"), "PASS echo\n");
  EXPECT_EQ(H1("tls", "echo"), "PASS echo\n");
}

TEST_F(WebSocketTest, H1RefusedOpenings) {
  EXPECT_EQ(H1("clear", "refused"), "PASS refused\n");
  EXPECT_EQ(H1("tls", "refused"), "PASS refused\n");
}

TEST_F(WebSocketTest, H1UnmaskedFrameGets1002) { EXPECT_EQ(H1("clear", "raw"), "PASS raw\n"); }

TEST_F(WebSocketTest, H2EchoSubprotocolAndClose) {
  EXPECT_EQ(H2("clear", "echo"), "PASS echo\n");
  EXPECT_EQ(H2("tls", "echo"), "PASS echo\n");
}

TEST_F(WebSocketTest, H2RefusedOpenings) { EXPECT_EQ(H2("clear", "refused"), "PASS refused\n"); }

TEST_F(WebSocketTest, H2BadFrameClosesOnlyItsStream) {
  EXPECT_EQ(H2("tls", "bad-frame"), "PASS bad-frame\n");
}

// 101 is for a request that asked to upgrade (HTTP/1.1 only): anything else gets 500.
TEST_F(WebSocketTest, A101ForAnOrdinaryRequestIs500) {
  for (const char* flags : {"--http1.1", "--http2-prior-knowledge"}) {
    const CommandResult r =
        RunCommand(absl::StrCat("curl -sS --max-time 20 -o /dev/null -w '%{http_code}' ", flags,
                                " http://127.0.0.1:", server_->http_port(), "/switch"));
    EXPECT_EQ(r.output, "500") << flags;
  }
}

// A masked client frame.
std::string Frame(uint8_t opcode, absl::string_view payload) {
  std::string f;
  f += static_cast<char>(0x80 | opcode);
  if (payload.size() < 126) {
    f += static_cast<char>(0x80 | payload.size());
  } else {
    f += static_cast<char>(0x80 | 126);
    f += static_cast<char>(payload.size() >> 8);
    f += static_cast<char>(payload.size() & 0xff);
  }
  const char key[4] = {0x0a, 0x0b, 0x0c, 0x0d};
  f.append(key, 4);
  for (size_t i = 0; i < payload.size(); ++i) f += static_cast<char>(payload[i] ^ key[i % 4]);
  return f;
}

TEST_F(WebSocketTest, H3EchoAndCloseWithHttp3Client) {
  Http3ClientConfig config;
  config.server = *SocketAddress::Parse("127.0.0.1", server_->https_port());
  config.verify_peer = false;
  absl::StatusOr<std::unique_ptr<Http3Client>> client = Http3Client::Create(std::move(config));
  ASSERT_TRUE(client.ok()) << client.status();
  Http3Client& c = **client;

  Http3Request request;
  request.method = "CONNECT";
  request.protocol = "websocket";
  request.path = "/echo";
  request.headers.Add("sec-websocket-version", "13");
  auto out = std::make_unique<StreamingBody>();
  StreamingBody* to_server = out.get();
  request.body = ResponseBody(std::move(out));

  int status = 0;
  std::string received;
  absl::Status done = absl::UnknownError("not done");
  bool closing = false;
  const std::string text = "hello over h3";
  const std::string binary(3000, '\x7f');
  const std::string echoes = [&] {
    std::string e;
    e += '\x81';
    e += static_cast<char>(text.size());
    e += text;
    e += '\x82';
    e += static_cast<char>(126);
    e += static_cast<char>(binary.size() >> 8);
    e += static_cast<char>(binary.size() & 0xff);
    e += binary;
    return e;
  }();
  Http3ResponseHandler handler;
  handler.on_head = [&](int s, const HeaderMap&) {
    status = s;
    to_server->Write(Frame(0x1, text) + Frame(0x2, binary));
  };
  handler.on_data = [&](absl::string_view data) {
    received.append(data.data(), data.size());
    if (!closing && received.size() >= echoes.size()) {
      closing = true;
      to_server->Write(Frame(0x8, std::string("\x03\xe8", 2)));
      to_server->Finish();
    }
  };
  handler.on_complete = [&](absl::Status s, const HeaderMap&) {
    done = s;
    c.CloseWhenDone();
  };
  ASSERT_TRUE(c.Submit(std::move(request), std::move(handler)).ok());
  ASSERT_TRUE(c.Connect().ok());
  Timer deadline(c.loop(), [&c] { c.Stop(); });
  deadline.StartAfter(std::chrono::seconds(30));
  c.Run();
  deadline.Cancel();
  EXPECT_TRUE(done.ok()) << done;
  EXPECT_EQ(status, 200);
  ASSERT_GE(received.size(), echoes.size());
  EXPECT_EQ(received.substr(0, echoes.size()), echoes);
  // Then the server's close, 1000.
  EXPECT_EQ(received.substr(echoes.size()), std::string("\x88\x02\x03\xe8", 4));
}

TEST_F(WebSocketTest, GracefulStopClosesWith1001OverH3) {
  Http3ClientConfig config;
  config.server = *SocketAddress::Parse("127.0.0.1", server_->https_port());
  config.verify_peer = false;
  absl::StatusOr<std::unique_ptr<Http3Client>> client = Http3Client::Create(std::move(config));
  ASSERT_TRUE(client.ok()) << client.status();
  Http3Client& c = **client;

  Http3Request request;
  request.method = "CONNECT";
  request.protocol = "websocket";
  request.path = "/hold";
  request.headers.Add("sec-websocket-version", "13");
  auto out = std::make_unique<StreamingBody>();
  StreamingBody* to_server = out.get();
  request.body = ResponseBody(std::move(out));

  const std::string close_1001 = std::string("\x88\x11\x03\xe9", 4) + "server stopping";
  std::string received;
  absl::Status done = absl::UnknownError("not done");
  bool answered = false;
  Http3ResponseHandler handler;
  handler.on_data = [&](absl::string_view data) {
    received.append(data.data(), data.size());
    if (!answered && received.size() >= close_1001.size()) {
      answered = true;
      to_server->Write(Frame(0x8, std::string("\x03\xe9", 2)));
      to_server->Finish();
    }
  };
  handler.on_complete = [&](absl::Status s, const HeaderMap&) {
    done = s;
    c.CloseWhenDone();
  };
  ASSERT_TRUE(c.Submit(std::move(request), std::move(handler)).ok());
  ASSERT_TRUE(c.Connect().ok());
  std::thread stopper = StopOnceHeld();
  Timer deadline(c.loop(), [&c] { c.Stop(); });
  deadline.StartAfter(std::chrono::seconds(60));
  c.Run();
  deadline.Cancel();
  stopper.join();
  EXPECT_TRUE(done.ok()) << done;
  EXPECT_EQ(received, close_1001);
  ExpectClosedWith1001();
}

}  // namespace
}  // namespace petrel
