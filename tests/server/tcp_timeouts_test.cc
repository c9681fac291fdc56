// TCP peers that stall get closed by a timeout, whatever phase they stall in: before the
// protocol is known (no bytes, part of a TLS ClientHello, too few bytes to tell h1 from h2c), an
// h2 connection with no stream open, and an h2 peer that leaves in the middle of a request head.
// Each would otherwise hold its socket and a max_connections slot forever. The tests wait for the
// server to close (recv returns end of stream), bounded by a receive timeout far above the
// configured one; nothing asserts how long it took.
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <future>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "gtest/gtest.h"
#include "petrel/common/event_loop.h"
#include "petrel/common/timer.h"
#include "petrel/http/http_server.h"
#include "petrel/http/websocket.h"

namespace petrel {
namespace {

constexpr absl::string_view kH2Preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
// An empty SETTINGS frame (RFC 9113 §6.5).
const std::string kEmptySettings("\0\0\0\4\0\0\0\0\0", 9);

// A raw TCP connection to 127.0.0.1:`port` with a 30 s receive timeout.
class RawConnection {
 public:
  explicit RawConnection(uint16_t port) {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    timeval tv{30, 0};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = connect(fd_, reinterpret_cast<const sockaddr*>(&a), sizeof(a)) == 0;
  }
  ~RawConnection() { close(fd_); }
  bool connected() const { return connected_; }
  bool Send(absl::string_view bytes) {
    return send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL) ==
           static_cast<ssize_t>(bytes.size());
  }
  void FinishSending() { shutdown(fd_, SHUT_WR); }
  // Reads once: false if the server closed or the receive timeout ran out.
  bool ReadSome(std::string* received) {
    char buf[4096];
    const ssize_t n = recv(fd_, buf, sizeof(buf), 0);
    if (n <= 0) return false;
    received->append(buf, static_cast<size_t>(n));
    return true;
  }
  // Reads until the server closes: true with everything it sent, false if the receive timeout
  // ran out first (the server kept the connection open).
  bool ReadUntilClosed(std::string* received) {
    char buf[4096];
    for (;;) {
      const ssize_t n = recv(fd_, buf, sizeof(buf), 0);
      if (n > 0) {
        received->append(buf, static_cast<size_t>(n));
        continue;
      }
      return n == 0 || errno == ECONNRESET;
    }
  }

 private:
  int fd_ = -1;
  bool connected_ = false;
};

// The h2 frames in `bytes` (a stream of whole frames): their types, in order.
std::string FrameTypes(absl::string_view bytes, uint32_t* goaway_error) {
  std::string types;
  while (bytes.size() >= 9) {
    const size_t length = (static_cast<uint8_t>(bytes[0]) << 16) |
                          (static_cast<uint8_t>(bytes[1]) << 8) | static_cast<uint8_t>(bytes[2]);
    const uint8_t type = static_cast<uint8_t>(bytes[3]);
    if (bytes.size() < 9 + length) break;
    types += std::to_string(type) + " ";
    if (type == 7 && length >= 8) {  // GOAWAY: last stream id (4), error code (4)
      const absl::string_view p = bytes.substr(9 + 4, 4);
      *goaway_error = (static_cast<uint32_t>(static_cast<uint8_t>(p[0])) << 24) |
                      (static_cast<uint8_t>(p[1]) << 16) | (static_cast<uint8_t>(p[2]) << 8) |
                      static_cast<uint8_t>(p[3]);
    }
    bytes.remove_prefix(9 + length);
  }
  return types;
}

// The RST_STREAM frames in `bytes` (a stream of whole frames): stream id → error code.
std::map<uint32_t, uint32_t> Resets(absl::string_view bytes) {
  std::map<uint32_t, uint32_t> resets;
  auto u32 = [](absl::string_view p) {
    return (static_cast<uint32_t>(static_cast<uint8_t>(p[0])) << 24) |
           (static_cast<uint8_t>(p[1]) << 16) | (static_cast<uint8_t>(p[2]) << 8) |
           static_cast<uint8_t>(p[3]);
  };
  while (bytes.size() >= 9) {
    const size_t length = (static_cast<uint8_t>(bytes[0]) << 16) |
                          (static_cast<uint8_t>(bytes[1]) << 8) | static_cast<uint8_t>(bytes[2]);
    if (bytes.size() < 9 + length) break;
    if (bytes[3] == 3 && length == 4) {
      resets[u32(bytes.substr(5, 4)) & 0x7fffffff] = u32(bytes.substr(9, 4));
    }
    bytes.remove_prefix(9 + length);
  }
  return resets;
}

// Sends 64 KiB messages for as long as the WebSocket takes them, and records how it ended.
class Flood : public WebSocketHandler {
 public:
  explicit Flood(std::promise<uint16_t>* closed) : closed_(closed) {}
  void OnOpen(WebSocket& ws) override { OnWritable(ws); }
  void OnWritable(WebSocket& ws) override {
    while (ws.SendBinary(std::string(64 * 1024, 'f'))) {
    }
  }
  void OnMessage(WebSocket&, WebSocketMessageType, absl::string_view) override {}
  void OnClose(WebSocket&, uint16_t code, absl::string_view) override { closed_->set_value(code); }

 private:
  std::promise<uint16_t>* closed_;
};

class TcpTimeoutsTest : public ::testing::Test {
 protected:
  void StartServer(std::chrono::seconds header_timeout, std::chrono::seconds idle_timeout,
                   std::chrono::seconds body_timeout = std::chrono::seconds(60),
                   std::chrono::seconds send_timeout = std::chrono::seconds(60)) {
    HttpServerConfig c;
    c.http_port = 0;
    c.https_port = 0;
    c.h3 = false;
    c.header_timeout = header_timeout;
    c.idle_timeout = idle_timeout;
    c.body_timeout = body_timeout;
    c.send_timeout = send_timeout;
    c.metrics_listen = "127.0.0.1:0";
    server_ = std::make_unique<HttpServer>(c);
    ASSERT_TRUE(server_->router()
                    .Get("/hello", [](Request&, Response& res) { res.Send(200, "hello\n"); })
                    .ok());
    ASSERT_TRUE(server_->router()
                    .Post("/echo",
                          [](Request& req, Response& res) {
                            req.body().ReadAll(1 << 20, [&res](absl::StatusOr<std::string> body) {
                              if (!body.ok()) return res.Send(400, "no whole body\n");
                              res.Send(200, *std::move(body));
                            });
                          })
                    .ok());
    ASSERT_TRUE(server_->router()
                    .Get("/big",
                         [](Request&, Response& res) {
                           res.Send(200, std::string(kBigBody, 'x'), "application/octet-stream");
                         })
                    .ok());
    // Answers two idle timeouts after the request came: the stream is open across a firing of
    // the idle timer.
    ASSERT_TRUE(server_->router()
                    .Get("/slow",
                         [this, idle_timeout](Request&, Response& res) {
                           auto timer = std::make_unique<Timer>(
                               EventLoop::Current(), [&res] { res.Send(200, "slow\n"); });
                           timer->StartAfter(idle_timeout * 2);
                           timers_.push_back(std::move(timer));
                         })
                    .ok());
    ASSERT_TRUE(server_->router()
                    .WebSocket("/flood",
                               [this](Request&) { return std::make_unique<Flood>(&flood_closed_); })
                    .ok());
    const absl::Status started = server_->Start();
    ASSERT_TRUE(started.ok()) << started;
  }
  // petrel_http_peer_limits_total{protocol,limit} from the metrics address; -1 if absent.
  double PeerLimits(absl::string_view protocol, absl::string_view limit) {
    RawConnection scrape(server_->metrics_port());
    std::string text;
    if (!scrape.connected() ||
        !scrape.Send("GET /metrics HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n") ||
        !scrape.ReadUntilClosed(&text)) {
      return -1;
    }
    const std::string key = absl::StrCat("petrel_http_peer_limits_total{limit=\"", limit,
                                         "\",protocol=\"", protocol, "\"} ");
    const size_t at = text.find(key);
    if (at == std::string::npos) return -1;
    double value = -1;
    if (!absl::SimpleAtod(text.substr(at + key.size(), text.find('\n', at) - at - key.size()),
                          &value)) {
      return -1;
    }
    return value;
  }
  // Scrapes until the counter reaches `want` (bounded: 30 s); whether it did.
  bool WaitForPeerLimits(absl::string_view protocol, absl::string_view limit, double want) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (std::chrono::steady_clock::now() < deadline) {
      if (PeerLimits(protocol, limit) >= want) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }

  static constexpr size_t kBigBody = 32 << 20;

  void TearDown() override {
    if (server_ != nullptr) server_->Stop();
  }

  std::promise<uint16_t> flood_closed_;  // set by the /flood handler's OnClose
  std::unique_ptr<HttpServer> server_;
  std::vector<std::unique_ptr<Timer>> timers_;  // /slow's, touched on the server's loop only
};

TEST_F(TcpTimeoutsTest, ConnectionsWithoutAProtocolAreClosedAfterTheHeaderTimeout) {
  StartServer(std::chrono::seconds(1), std::chrono::seconds(60));
  struct Case {
    const char* what;
    bool tls;
    std::string bytes;
  };
  const Case cases[] = {
      {"cleartext, nothing sent", false, ""},
      {"cleartext, too little to tell h1 from h2c", false, "P"},
      {"TLS, nothing sent", true, ""},
      {"TLS, part of a ClientHello", true, std::string("\x16\x03\x01\x02\x00", 5)},
  };
  for (const Case& c : cases) {
    RawConnection conn(c.tls ? server_->https_port() : server_->http_port());
    ASSERT_TRUE(conn.connected()) << c.what;
    ASSERT_TRUE(conn.Send(c.bytes)) << c.what;
    std::string received;
    EXPECT_TRUE(conn.ReadUntilClosed(&received)) << c.what << ": still open after 30 s";
  }
}

TEST_F(TcpTimeoutsTest, IdleH2ConnectionGetsGoawayThenClose) {
  StartServer(std::chrono::seconds(10), std::chrono::seconds(1));
  RawConnection conn(server_->http_port());
  ASSERT_TRUE(conn.connected());
  ASSERT_TRUE(conn.Send(std::string(kH2Preface) + kEmptySettings));
  std::string received;
  ASSERT_TRUE(conn.ReadUntilClosed(&received)) << "still open after 30 s";
  uint32_t error = 0xffffffff;
  const std::string types = FrameTypes(received, &error);
  // SETTINGS (4), the SETTINGS ACK (4), maybe WINDOW_UPDATE (8), then GOAWAY (7) NO_ERROR.
  EXPECT_NE(types.find("7 "), std::string::npos) << types;
  EXPECT_EQ(error, 0u) << types;
}

// The idle timeout counts from the end of the last stream: a stream open for longer than the
// timeout is not cut short by a GOAWAY, and the connection is closed only after it, when idle.
TEST_F(TcpTimeoutsTest, H2StreamOpenLongerThanTheIdleTimeoutIsNotCutShort) {
  StartServer(std::chrono::seconds(10), std::chrono::seconds(1));
  RawConnection conn(server_->http_port());
  ASSERT_TRUE(conn.connected());
  // HEADERS (END_STREAM | END_HEADERS) on stream 1: GET /slow, authority "a".
  const std::string headers(
      "\0\0\x0c\1\5\0\0\0\1\x82\x86\x44\x05/slow\x41\x01"
      "a",
      21);
  // The request goes once the server has acknowledged the client's SETTINGS (so the connection
  // has been idle, with the idle timer armed, before the stream opens).
  ASSERT_TRUE(conn.Send(std::string(kH2Preface) + kEmptySettings));
  const std::string settings_ack("\0\0\0\4\1\0\0\0\0", 9);
  std::string received;
  while (received.find(settings_ack) == std::string::npos) {
    ASSERT_TRUE(conn.ReadSome(&received)) << "no SETTINGS ACK";
  }
  ASSERT_TRUE(conn.Send(headers));
  ASSERT_TRUE(conn.ReadUntilClosed(&received)) << "still open after 30 s";
  uint32_t error = 0xffffffff;
  const std::string types = FrameTypes(received, &error);
  // The response (HEADERS 1, DATA 0) comes before the GOAWAY (7), which says NO_ERROR.
  const size_t goaway = types.find("7 ");
  ASSERT_NE(goaway, std::string::npos) << types;
  EXPECT_LT(types.find("1 "), goaway) << types;
  EXPECT_LT(types.find("0 "), goaway) << types;
  EXPECT_EQ(error, 0u) << types;
  EXPECT_NE(received.find("slow\n"), std::string::npos);
}

// The peer sends the first 9 octets of a HEADERS frame (its header block never comes) and
// stops sending: no handler can ever run for that stream, so nothing is left to answer.
TEST_F(TcpTimeoutsTest, H2PeerThatLeavesInsideARequestHeadIsClosed) {
  StartServer(std::chrono::seconds(60), std::chrono::seconds(60));
  RawConnection conn(server_->http_port());
  ASSERT_TRUE(conn.connected());
  const std::string headers_frame_header("\0\0\5\1\4\0\0\0\1", 9);  // 5 octets, END_HEADERS, #1
  ASSERT_TRUE(conn.Send(std::string(kH2Preface) + kEmptySettings + headers_frame_header));
  conn.FinishSending();
  std::string received;
  EXPECT_TRUE(conn.ReadUntilClosed(&received)) << "still open after 30 s";
}

// A peer that stops sending inside a request body: the handler waiting for the body learns that
// it will not come (and answers), and the connection closes. On h1 the body is chunked and stops
// inside a trailer line, which the decoder keeps unconsumed while it waits for the line's end.
TEST_F(TcpTimeoutsTest, PeerThatLeavesInsideARequestBodyIsAnsweredAndClosed) {
  StartServer(std::chrono::seconds(60), std::chrono::seconds(60));
  {
    RawConnection conn(server_->http_port());
    ASSERT_TRUE(conn.connected());
    ASSERT_TRUE(
        conn.Send("POST /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
                  "3\r\nabc\r\n0\r\nX-Trailer: unfinish"));
    conn.FinishSending();
    std::string received;
    EXPECT_TRUE(conn.ReadUntilClosed(&received)) << "h1: still open after 30 s";
    EXPECT_EQ(received.substr(0, 12), "HTTP/1.1 400") << received;
  }
  {
    RawConnection conn(server_->http_port());
    ASSERT_TRUE(conn.connected());
    // HEADERS (END_HEADERS, no END_STREAM) for POST /echo, then 3 octets of DATA, no END_STREAM.
    const std::string headers(
        "\0\0\x0c\1\4\0\0\0\1\x83\x86\x44\x05/echo\x41\x01"
        "a",
        21);
    const std::string data(
        "\0\0\3\0\0\0\0\0\1"
        "abc",
        12);
    ASSERT_TRUE(conn.Send(std::string(kH2Preface) + kEmptySettings + headers + data));
    conn.FinishSending();
    std::string received;
    EXPECT_TRUE(conn.ReadUntilClosed(&received)) << "h2: still open after 30 s";
    uint32_t error = 0;
    // The handler's answer: HEADERS (1) and DATA (0) on stream 1.
    const std::string types = FrameTypes(received, &error);
    EXPECT_NE(types.find("1 "), std::string::npos) << types;
  }
}

// An h2 peer that stays connected but stops inside a request head (a HEADERS frame without
// END_HEADERS, its CONTINUATION never sent): the header timeout ends the connection.
TEST_F(TcpTimeoutsTest, H2StalledRequestHeadEndsTheConnection) {
  StartServer(std::chrono::seconds(1), std::chrono::seconds(60));
  RawConnection conn(server_->http_port());
  ASSERT_TRUE(conn.connected());
  // HEADERS without END_HEADERS on stream 1: GET, https, :path "/hello" (its header block is
  // not finished: :authority would follow in a CONTINUATION).
  const std::string headers("\0\0\x09\1\1\0\0\0\1\x82\x87\x44\x06/hello", 18);
  ASSERT_TRUE(conn.Send(std::string(kH2Preface) + kEmptySettings + headers));
  std::string received;
  ASSERT_TRUE(conn.ReadUntilClosed(&received)) << "still open after 30 s";
  uint32_t error = 0xffffffff;
  const std::string types = FrameTypes(received, &error);
  EXPECT_NE(types.find("7 "), std::string::npos) << types;  // GOAWAY
  EXPECT_EQ(types.find("1 "), std::string::npos) << types;  // no response
}

// An h2 request body that stops while the peer stays connected: its stream is reset (the
// handler's read fails) and the connection goes on serving. A body the peer leaves unfinished
// after its response is done is reset with NO_ERROR.
TEST_F(TcpTimeoutsTest, H2StalledRequestBodyResetsOnlyItsStream) {
  StartServer(std::chrono::seconds(60), std::chrono::seconds(60), std::chrono::seconds(1));
  RawConnection conn(server_->http_port());
  ASSERT_TRUE(conn.connected());
  // Stream 1: POST /echo, 3 octets of DATA, no END_STREAM (the handler reads the whole body).
  // Stream 3: POST /hello (no such route for POST: answered at once), no END_STREAM either.
  const std::string echo(
      "\0\0\x0c\1\4\0\0\0\1\x83\x86\x44\x05/echo\x41\x01"
      "a"
      "\0\0\3\0\0\0\0\0\1"
      "abc",
      33);
  const std::string hello(
      "\0\0\x0d\1\4\0\0\0\3\x83\x86\x44\x06/hello\x41\x01"
      "a",
      22);
  ASSERT_TRUE(conn.Send(std::string(kH2Preface) + kEmptySettings + echo + hello));
  // Two RST_STREAM frames (type 3): stream 1 CANCEL (8), stream 3 NO_ERROR (0).
  std::string received;
  std::map<uint32_t, uint32_t> resets;
  while (resets.size() < 2) {
    ASSERT_TRUE(conn.ReadSome(&received)) << "closed, or no resets after 30 s";
    resets = Resets(received);
  }
  EXPECT_EQ(resets[1], 8u);
  EXPECT_EQ(resets[3], 0u);
  // The connection still serves: GET /hello on stream 5.
  const std::string get(
      "\0\0\x0d\1\5\0\0\0\5\x82\x86\x44\x06/hello\x41\x01"
      "a",
      22);
  ASSERT_TRUE(conn.Send(get));
  while (received.find("hello\n") == std::string::npos) {
    ASSERT_TRUE(conn.ReadSome(&received)) << "no answer on stream 5";
  }
}

// h1: a request body that stops while the handler reads it gets 408, then the close.
TEST_F(TcpTimeoutsTest, H1StalledRequestBodyGets408) {
  StartServer(std::chrono::seconds(60), std::chrono::seconds(60), std::chrono::seconds(1));
  RawConnection conn(server_->http_port());
  ASSERT_TRUE(conn.connected());
  ASSERT_TRUE(conn.Send("POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\nabc"));
  std::string received;
  ASSERT_TRUE(conn.ReadUntilClosed(&received)) << "still open after 30 s";
  EXPECT_EQ(received.substr(0, 12), "HTTP/1.1 408") << received;
}

// A WebSocket client (HTTP/1.1, the connection is the tunnel) that stops reading while the
// handler sends: the send timeout closes the connection as for any response, and the handler
// hears 1006.
TEST_F(TcpTimeoutsTest, WebSocketClientThatStopsReadingIsClosedAfterTheSendTimeout) {
  StartServer(std::chrono::seconds(60), std::chrono::seconds(60), std::chrono::seconds(60),
              std::chrono::seconds(1));
  RawConnection conn(server_->http_port());
  ASSERT_TRUE(conn.connected());
  ASSERT_TRUE(conn.Send(
      "GET /flood HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
      "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"));
  ASSERT_TRUE(WaitForPeerLimits("h1", "send_timeout", 1));
  std::string received;
  EXPECT_TRUE(conn.ReadUntilClosed(&received)) << "still open after 30 s";
  EXPECT_EQ(received.substr(0, 12), "HTTP/1.1 101") << received.substr(0, 200);
  std::future<uint16_t> closed = flood_closed_.get_future();
  ASSERT_EQ(closed.wait_for(std::chrono::seconds(30)), std::future_status::ready);
  EXPECT_EQ(closed.get(), WebSocketClose::kAbnormal);
}

// A client that stops reading a large response: once the output has stayed blocked for the
// send timeout the connection closes (the response is cut short), on h1 and on h2. The client
// reads only after the server counted the timeout.
TEST_F(TcpTimeoutsTest, ClientThatStopsReadingIsClosedAfterTheSendTimeout) {
  StartServer(std::chrono::seconds(60), std::chrono::seconds(60), std::chrono::seconds(60),
              std::chrono::seconds(1));
  {
    RawConnection conn(server_->http_port());
    ASSERT_TRUE(conn.connected());
    ASSERT_TRUE(conn.Send("GET /big HTTP/1.1\r\nHost: a\r\n\r\n"));
    ASSERT_TRUE(WaitForPeerLimits("h1", "send_timeout", 1));
    std::string received;
    EXPECT_TRUE(conn.ReadUntilClosed(&received)) << "h1: still open after 30 s";
    EXPECT_EQ(received.substr(0, 15), "HTTP/1.1 200 OK");
    EXPECT_LT(received.size(), kBigBody);
  }
  {
    RawConnection conn(server_->http_port());
    ASSERT_TRUE(conn.connected());
    // SETTINGS_INITIAL_WINDOW_SIZE 2^31-1 and a connection WINDOW_UPDATE to match, so that
    // only TCP holds the response back; then GET /big on stream 1.
    const std::string settings("\0\0\6\4\0\0\0\0\0\0\4\x7f\xff\xff\xff", 15);
    const std::string window_update("\0\0\4\x8\0\0\0\0\0\x7f\xff\0\0", 13);
    const std::string get(
        "\0\0\x0b\1\5\0\0\0\1\x82\x86\x44\x04/big\x41\x01"
        "a",
        20);
    ASSERT_TRUE(conn.Send(std::string(kH2Preface) + settings + window_update + get));
    ASSERT_TRUE(WaitForPeerLimits("h2", "send_timeout", 1));
    std::string received;
    EXPECT_TRUE(conn.ReadUntilClosed(&received)) << "h2: still open after 30 s";
    EXPECT_LT(received.size(), kBigBody);
  }
}

// An h2 client that reads but never reopens a stream's flow-control window: the response it
// holds back is reset after the send timeout (TCP never blocks, so only the stream's window
// shows the stall), and the connection goes on serving.
TEST_F(TcpTimeoutsTest, H2ResponseHeldBackByAShutWindowIsReset) {
  StartServer(std::chrono::seconds(60), std::chrono::seconds(60), std::chrono::seconds(60),
              std::chrono::seconds(1));
  RawConnection conn(server_->http_port());
  ASSERT_TRUE(conn.connected());
  // SETTINGS_INITIAL_WINDOW_SIZE 100: the server sends 100 octets of /big, then waits for a
  // WINDOW_UPDATE that never comes.
  const std::string settings("\0\0\6\4\0\0\0\0\0\0\4\0\0\0\x64", 15);
  const std::string get_big(
      "\0\0\x0b\1\5\0\0\0\1\x82\x86\x44\x04/big\x41\x01"
      "a",
      20);
  ASSERT_TRUE(conn.Send(std::string(kH2Preface) + settings + get_big));
  std::string received;
  std::map<uint32_t, uint32_t> resets;
  while (resets.count(1) == 0) {
    ASSERT_TRUE(conn.ReadSome(&received)) << "closed, or no reset after 30 s";
    resets = Resets(received);
  }
  EXPECT_EQ(resets[1], 8u);  // CANCEL
  EXPECT_EQ(PeerLimits("h2", "send_timeout"), 1);
  // GET /hello on stream 3 still gets its answer (6 octets fit the window).
  const std::string get_hello(
      "\0\0\x0d\1\5\0\0\0\3\x82\x86\x44\x06/hello\x41\x01"
      "a",
      22);
  ASSERT_TRUE(conn.Send(get_hello));
  while (received.find("hello\n") == std::string::npos) {
    ASSERT_TRUE(conn.ReadSome(&received)) << "no answer on stream 3";
  }
}

// Stalls only count before a request: a normal exchange on a fresh connection still works.
TEST_F(TcpTimeoutsTest, ARequestInTimeIsAnswered) {
  StartServer(std::chrono::seconds(1), std::chrono::seconds(1));
  RawConnection conn(server_->http_port());
  ASSERT_TRUE(conn.connected());
  ASSERT_TRUE(conn.Send("GET /hello HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n"));
  std::string received;
  ASSERT_TRUE(conn.ReadUntilClosed(&received));
  EXPECT_EQ(received.substr(0, 15), "HTTP/1.1 200 OK") << received;
  EXPECT_EQ(received.substr(received.size() - 6), "hello\n");
}

}  // namespace
}  // namespace petrel
