// WebSocket routes end to end: HTTP/1.1 Upgrade (RFC 6455) driven by Python's websockets and
// raw sockets, cleartext and TLS; HTTP/2 extended CONNECT (RFC 8441) driven by python-h2 with
// frames built in Python, over h2c and TLS; HTTP/3 extended CONNECT (RFC 9220) driven by
// Petrel's Http3Client with frames built here.
#include "petrel/http/websocket.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
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

class WebSocketTest : public ::testing::Test {
 protected:
  void SetUp() override {
    HttpServerConfig c;
    c.http_port = 0;
    c.https_port = 0;
    server_ = std::make_unique<HttpServer>(c);
    Router& r = server_->router();
    ASSERT_TRUE(r.WebSocket("/echo", [](Request&) { return std::make_unique<Echo>(); }).ok());
    WebSocketOptions chat;
    chat.subprotocols = {"chat.v2", "chat"};
    ASSERT_TRUE(r.WebSocket(
                     "/chat", [](Request&) { return std::make_unique<Echo>(); }, chat)
                    .ok());
    ASSERT_TRUE(r.WebSocket("/refuse", [](Request&) { return nullptr; }).ok());
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

  std::unique_ptr<HttpServer> server_;
};

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

}  // namespace
}  // namespace petrel
