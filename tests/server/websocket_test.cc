// WebSocket routes end to end: HTTP/1.1 Upgrade (RFC 6455) driven by Python's websockets and
// raw sockets, cleartext and TLS; HTTP/2 extended CONNECT (RFC 8441) driven by python-h2 with
// frames built in Python, over h2c and TLS; HTTP/3 extended CONNECT (RFC 9220) driven by
// Petrel's Http3Client with frames built here, and Petrel's own WebSocketClient.
// permessage-deflate (RFC 7692) on all three, the compressed frames made with zlib (Python's or
// the C library) independently of Petrel.
#include "petrel/http/websocket.h"

#include <zlib.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
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
#include "petrel/http/http_auth.h"
#include "petrel/http/http_server.h"
#include "petrel/http/websocket_client.h"
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

// What the server's side of a WebSocket heard last when it closed; its loop thread writes it.
struct ServerClose {
  std::mutex mu;
  std::condition_variable closed;
  int closes = 0;
  uint16_t code = 0;
  std::string reason;
};

// Echoes, and records its OnClose. A text message "close REASON" makes it close with 4002
// instead, "send bad utf-8" makes it send a text message that is not UTF-8.
class RecordingEcho : public Echo {
 public:
  explicit RecordingEcho(ServerClose* record) : record_(record) {}
  void OnMessage(WebSocket& ws, WebSocketMessageType type, absl::string_view data) override {
    if (type == WebSocketMessageType::kText && absl::StartsWith(data, "close ")) {
      ws.Close(4002, data.substr(6));
      return;
    }
    if (type == WebSocketMessageType::kText && data == "send bad utf-8") {
      ws.SendText("ok \xc3\x28");  // the server does not check what it is given
      return;
    }
    Echo::OnMessage(ws, type, data);
  }
  void OnClose(WebSocket&, uint16_t code, absl::string_view reason) override {
    std::lock_guard<std::mutex> lock(record_->mu);
    ++record_->closes;
    record_->code = code;
    record_->reason = std::string(reason);
    record_->closed.notify_all();
  }

 private:
  ServerClose* record_;
};

// What the /chat handlers saw of their request when they closed.
struct ChatCloses {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::pair<uint16_t, std::string>> closes;  // code, "path protocols-asked"
};

// Echoes, and on close notes the code and what its request still says: the handler may look at
// the request until OnClose returns, also when the engine drops the WebSocket.
class ChatEcho : public Echo {
 public:
  explicit ChatEcho(ChatCloses* record) : record_(record) {}
  void OnClose(WebSocket& ws, uint16_t code, absl::string_view) override {
    const Request& req = ws.request();
    std::lock_guard<std::mutex> lock(record_->mu);
    record_->closes.emplace_back(
        code, absl::StrCat(req.path(), " ",
                           req.headers().Get("sec-websocket-protocol").value_or("(none)")));
    record_->cv.notify_all();
  }

 private:
  ChatCloses* record_;
};

class WebSocketTest : public ::testing::Test {
 protected:
  void SetUp() override {
    HttpServerConfig c;
    c.http_port = 0;
    c.https_port = 0;
    c.metrics_listen = "127.0.0.1:0";
    // Below what the echo tests send over one WebSocket (h2: 147 kB, h3: 300 kB): its bytes are
    // the CONNECT's request body on h2 and h3, and must not be held to the body limit.
    c.max_request_body = 100 * 1024;
    server_ = std::make_unique<HttpServer>(c);
    Router& r = server_->router();
    ASSERT_TRUE(r.WebSocket("/echo", [](Request&) { return std::make_unique<Echo>(); }).ok());
    WebSocketOptions chat;
    chat.subprotocols = {"chat.v2", "chat"};
    ASSERT_TRUE(r.WebSocket(
                     "/chat", [this](Request&) { return std::make_unique<ChatEcho>(&chat_); }, chat)
                    .ok());
    ASSERT_TRUE(r.WebSocket("/refuse", [](Request&) { return nullptr; }).ok());
    WebSocketOptions deflate;
    deflate.deflate.enabled = true;
    deflate.max_message = 1 << 21;
    ASSERT_TRUE(r.WebSocket(
                     "/deflate", [](Request&) { return std::make_unique<Echo>(); }, deflate)
                    .ok());
    deflate.deflate.server_no_context_takeover = true;
    deflate.deflate.client_no_context_takeover = true;
    deflate.deflate.server_max_window_bits = 10;
    deflate.deflate.client_max_window_bits = 12;
    ASSERT_TRUE(r.WebSocket(
                     "/deflate-fresh", [](Request&) { return std::make_unique<Echo>(); }, deflate)
                    .ok());
    ASSERT_TRUE(
        r.WebSocket("/hold", [this](Request&) { return std::make_unique<Hold>(&hold_); }).ok());
    ASSERT_TRUE(r.WebSocket(
                     "/record",
                     [this](Request&) { return std::make_unique<RecordingEcho>(&server_close_); },
                     chat)
                    .ok());
    // Behind a route's middleware: a Bearer token check before the opening is answered.
    RouteOptions guarded;
    guarded.middleware.push_back(
        BearerAuthMiddleware("ws", [](absl::string_view token) { return token == "s3cret"; }));
    ASSERT_TRUE(
        r.WebSocket(
             "/private", [](Request&) { return std::make_unique<Echo>(); }, {}, std::move(guarded))
            .ok());
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

  // An Http3Client on the server's QUIC port that trusts any certificate.
  std::unique_ptr<Http3Client> H3Client() {
    Http3ClientConfig config;
    config.server = *SocketAddress::Parse("127.0.0.1", server_->https_port());
    config.verify_peer = false;
    absl::StatusOr<std::unique_ptr<Http3Client>> client = Http3Client::Create(std::move(config));
    EXPECT_TRUE(client.ok()) << client.status();
    return client.ok() ? *std::move(client) : nullptr;
  }
  // Runs `c` until its connection is over, for at most 30 s.
  static void RunBounded(Http3Client& c) {
    ASSERT_TRUE(c.Connect().ok());
    Timer deadline(c.loop(), [&c] { c.Stop(); });
    deadline.StartAfter(std::chrono::seconds(30));
    c.Run();
    EXPECT_TRUE(deadline.armed()) << "the deadline stopped the client";
    deadline.Cancel();
  }

  ServerClose server_close_;
  ChatCloses chat_;
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

// The h2 client drops its connection with /chat open: the handler hears 1006, and its request
// is still whole while OnClose runs (the engine lets go of the WebSocket before the request).
TEST_F(WebSocketTest, H2ConnectionLostLeavesTheRequestWholeForOnClose) {
  EXPECT_EQ(H2("clear", "echo"), "PASS echo\n");
  std::unique_lock<std::mutex> lock(chat_.mu);
  ASSERT_TRUE(chat_.cv.wait_for(lock, std::chrono::seconds(20), [this] {
    for (const auto& [code, seen] : chat_.closes) {
      if (code == WebSocketClose::kAbnormal) return true;
    }
    return false;
  }));
  for (const auto& [code, seen] : chat_.closes) {
    if (code == WebSocketClose::kAbnormal) {
      EXPECT_EQ(seen, "/chat chat, chat.v2");
    }
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

// permessage-deflate against websockets' own implementation and Python's zlib.
TEST_F(WebSocketTest, H1PermessageDeflateWithPythonWebsockets) {
  EXPECT_EQ(H1("clear", "deflate"), "PASS deflate\n");
  EXPECT_EQ(H1("tls", "deflate"), "PASS deflate\n");
}

TEST_F(WebSocketTest, H1UnmaskedFrameGets1002) { EXPECT_EQ(H1("clear", "raw"), "PASS raw\n"); }

TEST_F(WebSocketTest, H2EchoSubprotocolAndClose) {
  EXPECT_EQ(H2("clear", "echo"), "PASS echo\n");
  EXPECT_EQ(H2("tls", "echo"), "PASS echo\n");
}

TEST_F(WebSocketTest, H2RefusedOpenings) { EXPECT_EQ(H2("clear", "refused"), "PASS refused\n"); }

TEST_F(WebSocketTest, H2PermessageDeflateAndABombOnAnotherStream) {
  EXPECT_EQ(H2("clear", "deflate"), "PASS deflate\n");
}

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

// A message of `n` bytes where every byte depends on its position, so a lost, repeated or
// reordered piece shows.
std::string Pattern(size_t n) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>((i * 131 + i / 251) & 0xff);
  return s;
}

// Petrel's client against Petrel's server over h3: a subprotocol chosen from the offer, text,
// a binary message of many QUIC packets, a ping, and a closing handshake the client starts,
// whose code and reason the server's side hears and whose code comes back.
TEST_F(WebSocketTest, H3ClientEchoPingSubprotocolAndClose) {
  std::unique_ptr<Http3Client> c = H3Client();
  ASSERT_NE(c, nullptr);
  const std::string text = "hello over h3 \xc3\xa9";
  const std::string binary = Pattern(300 * 1000);
  absl::Status opened = absl::UnknownError("on_open did not run");
  std::string chosen;
  std::vector<std::pair<WebSocketMessageType, std::string>> messages;
  int closes = 0;
  uint16_t close_code = 0;
  std::string close_reason;
  std::unique_ptr<WebSocketClient> ws;

  WebSocketClientOptions options;
  options.path = "/record";
  options.subprotocols = {"nope", "chat"};
  WebSocketClientCallbacks cb;
  cb.on_open = [&](absl::Status s, absl::string_view subprotocol) {
    opened = s;
    chosen = std::string(subprotocol);
    if (!s.ok()) return c->CloseWhenDone();
    EXPECT_TRUE(ws->is_open());
    EXPECT_TRUE(ws->SendText(text));
    EXPECT_TRUE(ws->Ping("are you there"));
    EXPECT_TRUE(ws->SendBinary(binary));
  };
  cb.on_message = [&](WebSocketMessageType type, absl::string_view data) {
    messages.emplace_back(type, std::string(data));
    if (messages.size() == 2) ws->Close(4001, "done here");
  };
  cb.on_close = [&](uint16_t code, absl::string_view reason) {
    ++closes;
    close_code = code;
    close_reason = std::string(reason);
    EXPECT_FALSE(ws->is_open());
    EXPECT_FALSE(ws->SendText("too late"));
    c->CloseWhenDone();
  };
  absl::StatusOr<std::unique_ptr<WebSocketClient>> opening =
      WebSocketClient::Open(*c, std::move(options), std::move(cb));
  ASSERT_TRUE(opening.ok()) << opening.status();
  ws = *std::move(opening);
  RunBounded(*c);

  EXPECT_TRUE(opened.ok()) << opened;
  EXPECT_EQ(chosen, "chat");
  EXPECT_EQ(ws->subprotocol(), "chat");
  ASSERT_EQ(messages.size(), 2u);
  EXPECT_EQ(messages[0].first, WebSocketMessageType::kText);
  EXPECT_EQ(messages[0].second, text);
  EXPECT_EQ(messages[1].first, WebSocketMessageType::kBinary);
  EXPECT_TRUE(messages[1].second == binary)
      << "binary echo differs; " << messages[1].second.size() << " bytes";
  EXPECT_EQ(closes, 1);
  EXPECT_EQ(close_code, 4001);  // the server's answer repeats the code
  EXPECT_EQ(ws->buffered_amount(), 0u);
  std::lock_guard<std::mutex> lock(server_close_.mu);
  EXPECT_EQ(server_close_.closes, 1);
  EXPECT_EQ(server_close_.code, 4001);
  EXPECT_EQ(server_close_.reason, "done here");
}

// The server starts the closing handshake: the client hears its code and reason, and its
// answer reaches the server's side.
TEST_F(WebSocketTest, H3ClientHearsTheServersClose) {
  std::unique_ptr<Http3Client> c = H3Client();
  ASSERT_NE(c, nullptr);
  int closes = 0;
  uint16_t close_code = 0;
  std::string close_reason;
  std::unique_ptr<WebSocketClient> ws;
  WebSocketClientOptions options;
  options.path = "/record";
  WebSocketClientCallbacks cb;
  cb.on_open = [&](absl::Status s, absl::string_view subprotocol) {
    EXPECT_TRUE(s.ok()) << s;
    EXPECT_EQ(subprotocol, "");  // none offered, none chosen
    if (!s.ok()) return c->CloseWhenDone();
    EXPECT_TRUE(ws->SendText("close server says bye"));
  };
  cb.on_message = [&](WebSocketMessageType, absl::string_view data) {
    ADD_FAILURE() << "unexpected message " << data;
  };
  cb.on_close = [&](uint16_t code, absl::string_view reason) {
    ++closes;
    close_code = code;
    close_reason = std::string(reason);
    ws.reset();  // dropping the handle in on_close must not cut the answer off
    c->CloseWhenDone();
  };
  absl::StatusOr<std::unique_ptr<WebSocketClient>> opening =
      WebSocketClient::Open(*c, std::move(options), std::move(cb));
  ASSERT_TRUE(opening.ok()) << opening.status();
  ws = *std::move(opening);
  RunBounded(*c);

  EXPECT_EQ(closes, 1);
  EXPECT_EQ(close_code, 4002);
  EXPECT_EQ(close_reason, "server says bye");
  std::lock_guard<std::mutex> lock(server_close_.mu);
  EXPECT_EQ(server_close_.closes, 1);
  EXPECT_EQ(server_close_.code, 4002);  // the client's answer repeats the code
}

// An opening the route refuses (403) or no route at all (404) reaches on_open as an error that
// names the status; no other callback runs.
TEST_F(WebSocketTest, H3ClientReportsRefusedOpenings) {
  std::unique_ptr<Http3Client> c = H3Client();
  ASSERT_NE(c, nullptr);
  std::vector<absl::Status> results;
  std::vector<std::unique_ptr<WebSocketClient>> sockets;
  for (const char* path : {"/refuse", "/no-such-route"}) {
    WebSocketClientOptions options;
    options.path = path;
    WebSocketClientCallbacks cb;
    cb.on_open = [&](absl::Status s, absl::string_view) {
      results.push_back(s);
      if (results.size() == 2) c->CloseWhenDone();
    };
    cb.on_message = [](WebSocketMessageType, absl::string_view) { ADD_FAILURE() << "message"; };
    cb.on_close = [](uint16_t, absl::string_view) { ADD_FAILURE() << "on_close"; };
    absl::StatusOr<std::unique_ptr<WebSocketClient>> opening =
        WebSocketClient::Open(*c, std::move(options), std::move(cb));
    ASSERT_TRUE(opening.ok()) << opening.status();
    sockets.push_back(*std::move(opening));
  }
  RunBounded(*c);
  ASSERT_EQ(results.size(), 2u);
  // Both streams go out together; either answer may come first.
  const bool forbidden_first = absl::IsPermissionDenied(results[0]);
  const absl::Status& forbidden = forbidden_first ? results[0] : results[1];
  const absl::Status& missing = forbidden_first ? results[1] : results[0];
  EXPECT_TRUE(absl::IsPermissionDenied(forbidden)) << forbidden;
  EXPECT_TRUE(absl::StrContains(forbidden.message(), "403")) << forbidden;
  EXPECT_TRUE(absl::IsNotFound(missing)) << missing;
  EXPECT_TRUE(absl::StrContains(missing.message(), "404")) << missing;
  EXPECT_FALSE(sockets[0]->SendText("x"));
  EXPECT_EQ(c->pending_requests(), 0u);
}

// A small send buffer: Send* refuses once it is full and on_writable says when to go on; every
// message still comes back whole and in order.
TEST_F(WebSocketTest, H3ClientSendBufferRefusesAndReportsWritable) {
  std::unique_ptr<Http3Client> c = H3Client();
  ASSERT_NE(c, nullptr);
  constexpr size_t kMessages = 64;
  constexpr size_t kSize = 8000;
  size_t sent = 0;
  size_t refusals = 0;
  size_t writables = 0;
  std::vector<std::string> echoes;
  std::unique_ptr<WebSocketClient> ws;
  auto message = [](size_t i) { return Pattern(kSize + i); };
  auto send_more = [&] {
    while (sent < kMessages) {
      if (!ws->SendBinary(message(sent))) {
        ++refusals;
        EXPECT_GE(ws->buffered_amount(), 16u * 1024);
        return;
      }
      ++sent;
    }
  };
  WebSocketClientOptions options;
  options.path = "/echo";
  options.send_buffer = 16 * 1024;
  WebSocketClientCallbacks cb;
  cb.on_open = [&](absl::Status s, absl::string_view) {
    EXPECT_TRUE(s.ok()) << s;
    if (!s.ok()) return c->CloseWhenDone();
    send_more();
  };
  cb.on_writable = [&] {
    ++writables;
    EXPECT_LE(ws->buffered_amount(), 8u * 1024);
    send_more();
  };
  cb.on_message = [&](WebSocketMessageType, absl::string_view data) {
    echoes.emplace_back(data);
    if (echoes.size() == kMessages) ws->Close();
  };
  cb.on_close = [&](uint16_t code, absl::string_view) {
    EXPECT_EQ(code, WebSocketClose::kNormal);
    c->CloseWhenDone();
  };
  absl::StatusOr<std::unique_ptr<WebSocketClient>> opening =
      WebSocketClient::Open(*c, std::move(options), std::move(cb));
  ASSERT_TRUE(opening.ok()) << opening.status();
  ws = *std::move(opening);
  RunBounded(*c);

  EXPECT_EQ(sent, kMessages);
  EXPECT_GT(refusals, 0u);
  EXPECT_EQ(writables, refusals);
  ASSERT_EQ(echoes.size(), kMessages);
  for (size_t i = 0; i < kMessages; ++i) EXPECT_TRUE(echoes[i] == message(i)) << "message " << i;
}

// A message from the server over the client's max_message: the client closes with 1009, and
// the server's side hears it.
TEST_F(WebSocketTest, H3ClientClosesWith1009OnAnOversizeMessage) {
  std::unique_ptr<Http3Client> c = H3Client();
  ASSERT_NE(c, nullptr);
  int closes = 0;
  uint16_t close_code = 0;
  std::unique_ptr<WebSocketClient> ws;
  WebSocketClientOptions options;
  options.path = "/record";
  options.max_message = 1000;
  WebSocketClientCallbacks cb;
  cb.on_open = [&](absl::Status s, absl::string_view) {
    EXPECT_TRUE(s.ok()) << s;
    if (!s.ok()) return c->CloseWhenDone();
    EXPECT_TRUE(ws->SendBinary(Pattern(1001)));
  };
  cb.on_message = [&](WebSocketMessageType, absl::string_view data) {
    ADD_FAILURE() << "a message of " << data.size() << " bytes";
  };
  cb.on_close = [&](uint16_t code, absl::string_view) {
    ++closes;
    close_code = code;
    c->CloseWhenDone();
  };
  absl::StatusOr<std::unique_ptr<WebSocketClient>> opening =
      WebSocketClient::Open(*c, std::move(options), std::move(cb));
  ASSERT_TRUE(opening.ok()) << opening.status();
  ws = *std::move(opening);
  RunBounded(*c);

  EXPECT_EQ(closes, 1);
  EXPECT_EQ(close_code, WebSocketClose::kTooBig);
  std::lock_guard<std::mutex> lock(server_close_.mu);
  EXPECT_EQ(server_close_.closes, 1);
  EXPECT_EQ(server_close_.code, WebSocketClose::kTooBig);
}

// A text message from the server that is not UTF-8 is not delivered: the client closes with
// 1007, and the server's side hears it.
TEST_F(WebSocketTest, H3ClientClosesWith1007OnTextThatIsNotUtf8) {
  std::unique_ptr<Http3Client> c = H3Client();
  ASSERT_NE(c, nullptr);
  int closes = 0;
  uint16_t close_code = 0;
  std::unique_ptr<WebSocketClient> ws;
  WebSocketClientOptions options;
  options.path = "/record";
  WebSocketClientCallbacks cb;
  cb.on_open = [&](absl::Status s, absl::string_view) {
    EXPECT_TRUE(s.ok()) << s;
    if (!s.ok()) return c->CloseWhenDone();
    EXPECT_TRUE(ws->SendText("send bad utf-8"));
  };
  cb.on_message = [&](WebSocketMessageType, absl::string_view data) {
    ADD_FAILURE() << "delivered: " << data;
  };
  cb.on_close = [&](uint16_t code, absl::string_view) {
    ++closes;
    close_code = code;
    c->CloseWhenDone();
  };
  absl::StatusOr<std::unique_ptr<WebSocketClient>> opening =
      WebSocketClient::Open(*c, std::move(options), std::move(cb));
  ASSERT_TRUE(opening.ok()) << opening.status();
  ws = *std::move(opening);
  RunBounded(*c);

  EXPECT_EQ(closes, 1);
  EXPECT_EQ(close_code, WebSocketClose::kInvalidPayload);
  std::unique_lock<std::mutex> lock(server_close_.mu);
  server_close_.closed.wait_for(lock, std::chrono::seconds(20),
                                [this] { return server_close_.closes > 0; });
  EXPECT_EQ(server_close_.code, WebSocketClose::kInvalidPayload);
}

// Dropping the handle of an open WebSocket cancels its stream: no callback runs for it any
// more, the request completes, and the server's side ends with 1006.
TEST_F(WebSocketTest, H3ClientDroppedHandleCancelsTheStream) {
  std::unique_ptr<Http3Client> c = H3Client();
  ASSERT_NE(c, nullptr);
  std::unique_ptr<WebSocketClient> ws;
  std::unique_ptr<Timer> poll;
  WebSocketClientOptions options;
  options.path = "/record";
  WebSocketClientCallbacks cb;
  cb.on_open = [&](absl::Status s, absl::string_view) {
    EXPECT_TRUE(s.ok()) << s;
    if (s.ok()) {
      EXPECT_TRUE(ws->SendText("never echoed to anyone"));
    }
    ws.reset();
    c->CloseWhenDone();
  };
  cb.on_message = [](WebSocketMessageType, absl::string_view) { ADD_FAILURE() << "message"; };
  cb.on_close = [](uint16_t, absl::string_view) { ADD_FAILURE() << "on_close"; };
  absl::StatusOr<std::unique_ptr<WebSocketClient>> opening =
      WebSocketClient::Open(*c, std::move(options), std::move(cb));
  ASSERT_TRUE(opening.ok()) << opening.status();
  ws = *std::move(opening);
  RunBounded(*c);
  EXPECT_EQ(ws, nullptr);
  EXPECT_EQ(c->pending_requests(), 0u);
  // The reset reaches the server's loop thread on its own time: wait for its OnClose.
  std::unique_lock<std::mutex> lock(server_close_.mu);
  server_close_.closed.wait_for(lock, std::chrono::seconds(20),
                                [this] { return server_close_.closes > 0; });
  EXPECT_EQ(server_close_.closes, 1);
  EXPECT_EQ(server_close_.code, WebSocketClose::kAbnormal);
}

// A subprotocol that is no token is refused before anything is sent.
TEST_F(WebSocketTest, H3ClientRefusesABadSubprotocol) {
  std::unique_ptr<Http3Client> c = H3Client();
  ASSERT_NE(c, nullptr);
  WebSocketClientOptions options;
  options.subprotocols = {"two words"};
  absl::StatusOr<std::unique_ptr<WebSocketClient>> opening =
      WebSocketClient::Open(*c, std::move(options), {});
  EXPECT_TRUE(absl::IsInvalidArgument(opening.status())) << opening.status();
  EXPECT_EQ(c->pending_requests(), 0u);
}

// Whole unmasked server frames off the front of `buf`: (first byte, payload).
std::vector<std::pair<uint8_t, std::string>> TakeFrames(std::string* buf) {
  std::vector<std::pair<uint8_t, std::string>> frames;
  for (;;) {
    if (buf->size() < 2) return frames;
    const auto* b = reinterpret_cast<const uint8_t*>(buf->data());
    uint64_t len = b[1] & 0x7f;
    size_t at = 2;
    if (len == 126) {
      if (buf->size() < 4) return frames;
      len = (uint64_t{b[2]} << 8) | b[3];
      at = 4;
    } else if (len == 127) {
      if (buf->size() < 10) return frames;
      len = 0;
      for (int i = 0; i < 8; ++i) len = (len << 8) | b[2 + i];
      at = 10;
    }
    if (buf->size() < at + len) return frames;
    frames.emplace_back(b[0], buf->substr(at, len));
    buf->erase(0, at + len);
  }
}

// Sends `payloads` (compressed messages, RSV1 set) as text frames over HTTP/3 to /deflate
// (context takeover both ways) and checks that each comes back compressed (smaller than
// `max_echo`) and inflates to `text`; then closes with 1000.
void ExpectH3DeflateEchoes(uint16_t port, const std::vector<std::string>& payloads,
                           const std::string& text, size_t max_echo) {
  Http3ClientConfig config;
  config.server = *SocketAddress::Parse("127.0.0.1", port);
  config.verify_peer = false;
  absl::StatusOr<std::unique_ptr<Http3Client>> client = Http3Client::Create(std::move(config));
  ASSERT_TRUE(client.ok()) << client.status();
  Http3Client& c = **client;

  z_stream inf{};
  ASSERT_EQ(inflateInit2(&inf, -15), Z_OK);
  const auto inflate_message = [&inf](std::string payload) {
    payload.append("\0\0\xff\xff", 4);
    std::string out(1 << 20, '\0');
    inf.next_in = reinterpret_cast<Bytef*>(payload.data());
    inf.avail_in = static_cast<uInt>(payload.size());
    inf.next_out = reinterpret_cast<Bytef*>(out.data());
    inf.avail_out = static_cast<uInt>(out.size());
    EXPECT_EQ(inflate(&inf, Z_SYNC_FLUSH), Z_OK);
    out.resize(out.size() - inf.avail_out);
    return out;
  };

  Http3Request request;
  request.method = "CONNECT";
  request.protocol = "websocket";
  request.path = "/deflate";
  request.headers.Add("sec-websocket-version", "13");
  request.headers.Add("sec-websocket-extensions", "permessage-deflate; client_max_window_bits");
  auto out = std::make_unique<StreamingBody>();
  StreamingBody* to_server = out.get();
  request.body = ResponseBody(std::move(out));

  int status = 0;
  std::string extensions;
  std::string received;
  std::vector<std::pair<uint8_t, std::string>> frames;
  absl::Status done = absl::UnknownError("not done");
  bool closing = false;
  Http3ResponseHandler handler;
  handler.on_head = [&](int s, const HeaderMap& fields) {
    status = s;
    extensions = std::string(fields.Get("sec-websocket-extensions").value_or(""));
    std::string all;
    for (const std::string& payload : payloads) {
      std::string frame = Frame(0x1, payload);
      frame[0] = static_cast<char>(frame[0] | 0x40);  // RSV1: compressed
      all += frame;
    }
    to_server->Write(all);
  };
  handler.on_data = [&](absl::string_view data) {
    received.append(data.data(), data.size());
    for (auto& f : TakeFrames(&received)) frames.push_back(std::move(f));
    if (!closing && frames.size() >= payloads.size()) {
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
  EXPECT_EQ(extensions, "permessage-deflate");
  ASSERT_EQ(frames.size(), payloads.size() + 1);
  for (size_t i = 0; i < payloads.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(frames[i].first, 0xC1);  // FIN, RSV1, text
    EXPECT_LT(frames[i].second.size(), max_echo);
    EXPECT_EQ(inflate_message(frames[i].second), text);
  }
  EXPECT_EQ(frames.back(), std::make_pair(uint8_t{0x88}, std::string("\x03\xe8", 2)));
  inflateEnd(&inf);
}

std::string DeflateTestText() {
  std::string text;
  for (int i = 0; i < 2000; ++i) absl::StrAppend(&text, "h3 deflate ", i % 50, "; ");
  return text;
}

// permessage-deflate over HTTP/3 (the same Sec-WebSocket-Extensions field, RFC 9220 §3): two
// messages compressed here with zlib (the second against the first's context) come back
// compressed, RSV1 set, and inflate to the same bytes.
TEST_F(WebSocketTest, H3PermessageDeflateWithHttp3Client) {
  z_stream def{};
  ASSERT_EQ(deflateInit2(&def, 6, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY), Z_OK);
  const auto compress = [&def](absl::string_view message) {
    std::string out(deflateBound(&def, message.size()) + 64, '\0');
    def.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(message.data()));
    def.avail_in = static_cast<uInt>(message.size());
    def.next_out = reinterpret_cast<Bytef*>(out.data());
    def.avail_out = static_cast<uInt>(out.size());
    EXPECT_EQ(deflate(&def, Z_SYNC_FLUSH), Z_OK);
    out.resize(out.size() - def.avail_out - 4);  // without the flush's 00 00 FF FF
    return out;
  };
  const std::string text = DeflateTestText();
  const std::string first = compress(text);
  const std::string second = compress(text);
  deflateEnd(&def);
  ExpectH3DeflateEchoes(server_->https_port(), {first, second}, text, text.size() / 10);
}

// RFC 7692 §7.2.3.4: a sender may end each message with a final block (BFINAL) instead of an
// empty stored one, and with context takeover its next message may still refer back into the
// messages before. Here each message is its own DEFLATE stream (Z_FINISH), the second made
// against the first's bytes as its dictionary: the server must keep its window across the end
// of a stream.
TEST_F(WebSocketTest, H3PermessageDeflateFinalBlocksKeepTheContext) {
  const auto compress_final = [](absl::string_view message, absl::string_view dictionary) {
    z_stream def{};
    EXPECT_EQ(deflateInit2(&def, 6, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY), Z_OK);
    if (!dictionary.empty()) {
      EXPECT_EQ(deflateSetDictionary(&def, reinterpret_cast<const Bytef*>(dictionary.data()),
                                     static_cast<uInt>(dictionary.size())),
                Z_OK);
    }
    std::string out(deflateBound(&def, message.size()) + 64, '\0');
    def.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(message.data()));
    def.avail_in = static_cast<uInt>(message.size());
    def.next_out = reinterpret_cast<Bytef*>(out.data());
    def.avail_out = static_cast<uInt>(out.size());
    EXPECT_EQ(deflate(&def, Z_FINISH), Z_STREAM_END);
    out.resize(out.size() - def.avail_out);
    deflateEnd(&def);
    return out;
  };
  // Letters that repeat little within the message, so that only the dictionary makes the
  // second one small.
  std::string text(6000, ' ');
  uint32_t state = 12345;
  for (char& ch : text) {
    state = state * 1103515245 + 12345;
    ch = static_cast<char>('a' + (state >> 16) % 26);
  }
  const std::string first = compress_final(text, "");
  const std::string second = compress_final(text, text);
  ASSERT_LT(second.size(), first.size() / 10);  // it does refer back into the first message
  ExpectH3DeflateEchoes(server_->https_port(), {first, second}, text, text.size());
}

// A WebSocket route's middleware runs before the opening is answered: without the token the
// client gets the middleware's 401 (h1: no 101; h3: the WebSocketClient's opening fails), with
// it the WebSocket opens and echoes.
TEST_F(WebSocketTest, RouteMiddlewareGuardsTheOpening) {
  const CommandResult h1 = RunCommand(
      absl::StrCat("curl -sS --max-time 20 -o /dev/null -w '%{http_code}' -H 'Upgrade: websocket' "
                   "-H 'Connection: Upgrade' -H 'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==' "
                   "-H 'Sec-WebSocket-Version: 13' http://127.0.0.1:",
                   server_->http_port(), "/private"));
  EXPECT_EQ(h1.output, "401");

  std::unique_ptr<Http3Client> c = H3Client();
  ASSERT_NE(c, nullptr);
  std::vector<absl::Status> opened;
  std::vector<std::string> echoes;
  std::vector<std::unique_ptr<WebSocketClient>> sockets;
  for (const char* token : {"", "wrong", "s3cret"}) {
    WebSocketClientOptions options;
    options.path = "/private";
    if (*token != '\0') options.headers.Add("authorization", absl::StrCat("Bearer ", token));
    WebSocketClientCallbacks cb;
    const size_t i = sockets.size();
    cb.on_open = [&, i](absl::Status s, absl::string_view) {
      opened.push_back(s);
      if (s.ok()) {
        EXPECT_TRUE(sockets[i]->SendText("let me in"));
      }
      if (opened.size() == 3 && echoes.size() == 1) c->CloseWhenDone();
    };
    cb.on_message = [&, i](WebSocketMessageType, absl::string_view data) {
      echoes.emplace_back(data);
      sockets[i]->Close();
    };
    cb.on_close = [&](uint16_t, absl::string_view) {
      if (opened.size() == 3) c->CloseWhenDone();
    };
    absl::StatusOr<std::unique_ptr<WebSocketClient>> opening =
        WebSocketClient::Open(*c, std::move(options), std::move(cb));
    ASSERT_TRUE(opening.ok()) << opening.status();
    sockets.push_back(*std::move(opening));
  }
  RunBounded(*c);
  ASSERT_EQ(opened.size(), 3u);
  int refused = 0;
  for (const absl::Status& s : opened) {
    if (!s.ok()) {
      ++refused;
      EXPECT_TRUE(absl::IsPermissionDenied(s)) << s;
      EXPECT_TRUE(absl::StrContains(s.message(), "401")) << s;
    }
  }
  EXPECT_EQ(refused, 2);
  EXPECT_EQ(echoes, std::vector<std::string>{"let me in"});
}

}  // namespace
}  // namespace petrel
