// The WebSocket session over an in-memory stream: client frames written by hand (masked, or
// deliberately broken) go in as the request body, the server's frames are read back from the
// session as the engine would and parsed here. Echo, fragmentation, ping/pong, the closing
// handshake, RFC 6455's rules on hostile input (each with its close code), limits,
// backpressure both ways, input split at every byte boundary, and permessage-deflate (RFC 7692)
// with compressed frames made here with zlib.
#include "http/websocket/websocket_session.h"

#include <zlib.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "http/websocket/handshake.h"
#include "petrel/common/event_loop.h"

namespace petrel::http_internal {
namespace {

// A client frame: FIN, opcode, payload, masked with a fixed key unless `mask` is false.
std::string Frame(bool fin, uint8_t opcode, absl::string_view payload, bool mask = true) {
  std::string f;
  f += static_cast<char>((fin ? 0x80 : 0) | opcode);
  const uint8_t mask_bit = mask ? 0x80 : 0;
  if (payload.size() < 126) {
    f += static_cast<char>(mask_bit | payload.size());
  } else if (payload.size() < 65536) {
    f += static_cast<char>(mask_bit | 126);
    f += static_cast<char>(payload.size() >> 8);
    f += static_cast<char>(payload.size() & 0xff);
  } else {
    f += static_cast<char>(mask_bit | 127);
    for (int i = 7; i >= 0; --i)
      f += static_cast<char>((uint64_t{payload.size()} >> (8 * i)) & 0xff);
  }
  const char key[4] = {0x12, 0x34, 0x56, 0x78};
  if (mask) f.append(key, 4);
  for (size_t i = 0; i < payload.size(); ++i)
    f += mask ? static_cast<char>(payload[i] ^ key[i % 4]) : payload[i];
  return f;
}

std::string CloseFrame(uint16_t code, absl::string_view reason = {}) {
  std::string p;
  p += static_cast<char>(code >> 8);
  p += static_cast<char>(code & 0xff);
  p.append(reason.data(), reason.size());
  return Frame(true, 0x8, p);
}

// A server frame as parsed.
struct Got {
  bool fin;
  uint8_t opcode;
  std::string payload;
  bool rsv1 = false;
  uint16_t close_code() const {
    return payload.size() >= 2 ? static_cast<uint16_t>((static_cast<uint8_t>(payload[0]) << 8) |
                                                       static_cast<uint8_t>(payload[1]))
                               : 0;
  }
};

// Parses whole frames off the front of `bytes` (server frames are never masked).
std::vector<Got> Parse(std::string* bytes) {
  std::vector<Got> frames;
  for (;;) {
    if (bytes->size() < 2) return frames;
    const auto* b = reinterpret_cast<const uint8_t*>(bytes->data());
    EXPECT_EQ(b[1] & 0x80, 0) << "server frames are not masked";
    uint64_t len = b[1] & 0x7f;
    size_t header = 2;
    if (len == 126) {
      if (bytes->size() < 4) return frames;
      len = (uint64_t{b[2]} << 8) | b[3];
      header = 4;
    } else if (len == 127) {
      if (bytes->size() < 10) return frames;
      len = 0;
      for (int i = 0; i < 8; ++i) len = (len << 8) | b[2 + i];
      header = 10;
    }
    if (bytes->size() < header + len) return frames;
    frames.push_back({(b[0] & 0x80) != 0, static_cast<uint8_t>(b[0] & 0x0f),
                      bytes->substr(header, len), (b[0] & 0x40) != 0});
    bytes->erase(0, header + len);
  }
}

// Records what the handler saw; echoes unless told otherwise.
struct Seen {
  bool opened = false;
  std::vector<std::pair<WebSocketMessageType, std::string>> messages;
  int writable = 0;
  int closes = 0;
  uint16_t close_code = 0;
  std::string close_reason;
};

class Recorder : public WebSocketHandler {
 public:
  Recorder(Seen* seen, bool echo, bool pause_on_message = false)
      : seen_(seen), echo_(echo), pause_(pause_on_message) {}
  void OnOpen(WebSocket&) override { seen_->opened = true; }
  void OnMessage(WebSocket& ws, WebSocketMessageType type, absl::string_view data) override {
    seen_->messages.emplace_back(type, std::string(data));
    if (echo_) type == WebSocketMessageType::kText ? ws.SendText(data) : ws.SendBinary(data);
    if (pause_) ws.PauseReading();
  }
  void OnWritable(WebSocket&) override { ++seen_->writable; }
  void OnClose(WebSocket&, uint16_t code, absl::string_view reason) override {
    ++seen_->closes;
    seen_->close_code = code;
    seen_->close_reason = std::string(reason);
  }

 private:
  Seen* seen_;
  bool echo_;
  bool pause_;
};

class SessionTest : public ::testing::Test {
 protected:
  void Open(WebSocketOptions options = {}, bool echo = true, bool pause = false,
            std::optional<PermessageDeflateParams> deflate = std::nullopt) {
    options.idle_timeout = Duration::zero();
    session_ = std::make_unique<WebSocketSession>(
        req_, std::make_unique<Recorder>(&seen_, echo, pause), options, "", nullptr, deflate);
    session_->SetResumeCallback([] {});
    session_->Start();
  }
  void Send(absl::string_view bytes, bool last = false) { req_.body().Deliver(bytes, last); }
  // What the engine would send now, parsed.
  std::vector<Got> Drain(size_t chunk = 16384) {
    for (;;) {
      BodyReadResult r = session_->Read(chunk, &wire_);
      last_ = r.status;
      if (r.status != BodyReadStatus::kData) break;
    }
    return Parse(&wire_);
  }

  Request req_;
  Seen seen_;
  std::unique_ptr<WebSocketSession> session_;
  std::string wire_;
  BodyReadStatus last_ = BodyReadStatus::kData;
};

TEST_F(SessionTest, EchoesTextAndBinaryAndReassemblesFragments) {
  Open();
  EXPECT_TRUE(seen_.opened);
  Send(Frame(true, 0x1, "hello"));
  Send(Frame(true, 0x2, std::string("\0\1\2", 3)));
  Send(Frame(false, 0x1, "frag") + Frame(true, 0x9, "between") + Frame(false, 0x0, "men") +
       Frame(true, 0x0, "ted"));
  std::vector<Got> out = Drain();
  ASSERT_EQ(seen_.messages.size(), 3u);
  EXPECT_EQ(seen_.messages[2].second, "fragmented");
  ASSERT_EQ(out.size(), 4u);
  EXPECT_EQ(out[0].opcode, 0x1);
  EXPECT_EQ(out[0].payload, "hello");
  EXPECT_EQ(out[1].opcode, 0x2);
  EXPECT_EQ(out[1].payload, std::string("\0\1\2", 3));
  EXPECT_EQ(out[2].opcode, 0xA);  // the pong, with the ping's payload
  EXPECT_EQ(out[2].payload, "between");
  EXPECT_EQ(out[3].payload, "fragmented");
  EXPECT_EQ(last_, BodyReadStatus::kWouldBlock);
}

// Bytes that arrived with the opening reach OnMessage after OnOpen.
class OrderRecorder : public WebSocketHandler {
 public:
  explicit OrderRecorder(std::vector<std::string>* events) : events_(events) {}
  void OnOpen(WebSocket&) override { events_->push_back("open"); }
  void OnMessage(WebSocket&, WebSocketMessageType, absl::string_view data) override {
    events_->push_back(std::string(data));
  }

 private:
  std::vector<std::string>* events_;
};

TEST(WebSocketOrderTest, OpenComesBeforeMessagesThatCameWithTheOpening) {
  Request req;
  req.body().Deliver(Frame(true, 0x1, "early"), false);  // buffered before the session starts
  std::vector<std::string> events;
  WebSocketOptions options;
  options.idle_timeout = Duration::zero();
  WebSocketSession session(req, std::make_unique<OrderRecorder>(&events), options, "", nullptr);
  session.SetResumeCallback([] {});
  session.Start();
  EXPECT_EQ(events, (std::vector<std::string>{"open", "early"}));
}

TEST_F(SessionTest, ClosingHandshakeEndsTheStream) {
  Open();
  Send(CloseFrame(1000, "bye"));
  std::vector<Got> out = Drain();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].opcode, 0x8);
  EXPECT_EQ(out[0].close_code(), 1000);
  EXPECT_EQ(seen_.closes, 1);
  EXPECT_EQ(seen_.close_code, 1000);
  EXPECT_EQ(seen_.close_reason, "bye");
  EXPECT_EQ(last_, BodyReadStatus::kEnd);
  EXPECT_FALSE(session_->SendText("too late"));
}

TEST_F(SessionTest, ServerInitiatedCloseWaitsForThePeer) {
  Open();
  session_->Close(1001, "going away");
  std::vector<Got> out = Drain();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].close_code(), 1001);
  EXPECT_EQ(last_, BodyReadStatus::kWouldBlock);  // the peer has not answered yet
  Send(CloseFrame(1001));
  Drain();
  EXPECT_EQ(last_, BodyReadStatus::kEnd);
  EXPECT_EQ(seen_.close_code, 1001);
}

TEST_F(SessionTest, TransportEndWithoutCloseIs1006) {
  Open();
  Send(Frame(true, 0x1, "x"), /*last=*/true);
  Drain();
  EXPECT_EQ(seen_.closes, 1);
  EXPECT_EQ(seen_.close_code, WebSocketClose::kAbnormal);
  EXPECT_EQ(last_, BodyReadStatus::kEnd);
}

// Hostile input: each gets its close code, and nothing of it reaches the handler.
struct Hostile {
  const char* name;
  std::string bytes;
  uint16_t code;       // in the close frame sent; 0: a close without a code
  uint16_t heard = 0;  // what OnClose hears, if not `code`
};

TEST_F(SessionTest, HostileInputGetsItsCloseCode) {
  const std::string big(2000, 'b');
  const std::vector<Hostile> cases = {
      {"unmasked", Frame(true, 0x1, "plain", /*mask=*/false), 1002},
      {"reserved opcode", Frame(true, 0x3, "x"), 1002},
      {"control opcode 0xB", Frame(true, 0xB, "x"), 1002},
      // wslay's frame parser refuses these with a close without a code; it goes out as 1002.
      {"fragmented ping", Frame(false, 0x9, "x"), 1002},
      {"ping over 125 bytes", Frame(true, 0x9, std::string(126, 'p')), 1002},
      // wslay takes a one-byte close body for no code at all; a code is two bytes (§5.5.1).
      {"close with a one-byte body", Frame(true, 0x8, "\x03"), 1002},
      {"close with a bad code", CloseFrame(999), 1002},
      {"close with a bad reason", CloseFrame(1000, "\xff"), 1007},
      {"continuation without a start", Frame(true, 0x0, "x"), 1002},
      {"new message inside a fragmented one", Frame(false, 0x1, "a") + Frame(true, 0x1, "b"), 1002},
      {"invalid UTF-8", Frame(true, 0x1, "\xc3\x28"), 1007},
      {"overlong UTF-8", Frame(true, 0x1, "\xc0\xaf"), 1007},
      {"surrogate in UTF-8", Frame(true, 0x1, "\xed\xa0\x80"), 1007},
      {"message over max_message", Frame(true, 0x2, big), 1009},
      {"fragments over max_message",
       Frame(false, 0x2, big.substr(0, 600)) + Frame(true, 0x0, big.substr(0, 600)), 1009},
      {"reserved bit", std::string(1, '\xc1') + Frame(true, 0x1, "x").substr(1), 1002},
  };
  for (const Hostile& c : cases) {
    SCOPED_TRACE(c.name);
    req_.Reset();
    seen_ = Seen();
    wire_.clear();
    WebSocketOptions options;
    options.max_message = 1000;
    Open(options);
    Send(c.bytes);
    std::vector<Got> out = Drain();
    ASSERT_FALSE(out.empty());
    EXPECT_EQ(out.back().opcode, 0x8);
    EXPECT_EQ(out.back().close_code(), c.code);
    EXPECT_TRUE(seen_.messages.empty());
    // The connection is failed: the stream ends after the close frame, without waiting for the
    // peer's answer, and the handler hears the code.
    EXPECT_EQ(last_, BodyReadStatus::kEnd);
    EXPECT_EQ(seen_.closes, 1);
    EXPECT_EQ(seen_.close_code, c.heard != 0 ? c.heard : c.code);
    session_.reset();
  }
}

TEST_F(SessionTest, InputSplitAtEveryByteBoundary) {
  const std::string bytes = Frame(true, 0x1, "héllo wörld") +
                            Frame(false, 0x2, std::string(300, 'z')) + Frame(true, 0x0, "!") +
                            CloseFrame(1000, "done");
  for (size_t split = 1; split < bytes.size(); ++split) {
    SCOPED_TRACE(split);
    req_.Reset();
    seen_ = Seen();
    wire_.clear();
    Open(WebSocketOptions(), /*echo=*/false);
    Send(bytes.substr(0, split));
    Drain();
    Send(bytes.substr(split));
    Drain();
    ASSERT_EQ(seen_.messages.size(), 2u);
    EXPECT_EQ(seen_.messages[0].second, "héllo wörld");
    EXPECT_EQ(seen_.messages[1].second, std::string(300, 'z') + "!");
    EXPECT_EQ(seen_.close_code, 1000);
    EXPECT_EQ(last_, BodyReadStatus::kEnd);
    session_.reset();
  }
}

TEST_F(SessionTest, SendsAreRefusedOverTheBufferAndOnWritableFollows) {
  WebSocketOptions options;
  options.send_buffer = 100 * 1024;
  Open(options, /*echo=*/false);
  const std::string chunk(40 * 1024, 'c');
  EXPECT_TRUE(session_->SendBinary(chunk));
  EXPECT_TRUE(session_->SendBinary(chunk));
  EXPECT_TRUE(session_->SendBinary(chunk));  // 80 KiB were buffered: accepted, now 120
  EXPECT_FALSE(session_->SendBinary(chunk));
  EXPECT_GE(session_->buffered_amount(), 120u * 1024);
  EXPECT_EQ(seen_.writable, 0);
  std::vector<Got> out = Drain(4096);
  EXPECT_EQ(seen_.writable, 1);
  EXPECT_EQ(out.size(), 3u);
  EXPECT_EQ(session_->buffered_amount(), 0u);
}

TEST_F(SessionTest, PausedReadingHoldsMessagesBack) {
  Open(WebSocketOptions(), /*echo=*/false, /*pause=*/true);
  Send(Frame(true, 0x1, "one"));
  EXPECT_EQ(seen_.messages.size(), 1u);
  Send(Frame(true, 0x1, "two"));
  EXPECT_EQ(seen_.messages.size(), 1u);
  EXPECT_GT(req_.body().buffered_bytes(), 0u);  // not read: the transport holds the peer back
  session_->ResumeReading();
  EXPECT_EQ(seen_.messages.size(), 2u);
  EXPECT_EQ(seen_.messages[1].second, "two");
}

// Several messages in one arrival: a pause in OnMessage holds back the ones after it too, though
// wslay has already read them (it buffers what it takes from the body); ResumeReading delivers
// them in order.
TEST_F(SessionTest, PausedReadingHoldsBackMessagesThatCameInTheSameChunk) {
  Open(WebSocketOptions(), /*echo=*/false, /*pause=*/true);
  Send(Frame(true, 0x1, "one") + Frame(true, 0x1, "two") + Frame(true, 0x2, "three"));
  ASSERT_EQ(seen_.messages.size(), 1u);
  EXPECT_EQ(seen_.messages[0].second, "one");
  session_->ResumeReading();  // pauses again in OnMessage("two")
  ASSERT_EQ(seen_.messages.size(), 2u);
  EXPECT_EQ(seen_.messages[1].second, "two");
  session_->ResumeReading();
  ASSERT_EQ(seen_.messages.size(), 3u);
  EXPECT_EQ(seen_.messages[2].second, "three");
  EXPECT_EQ(seen_.messages[2].first, WebSocketMessageType::kBinary);
  Send(CloseFrame(1000));
  session_->ResumeReading();
  Drain();
  EXPECT_EQ(seen_.close_code, 1000);
}

// The idle ping: after a quiet idle_timeout a ping goes out; a peer that answers nothing for
// another one is gone (OnClose 1006, the stream fails). Waits on the loop's timers, bounded.
TEST(WebSocketIdleTest, PingsThenGivesUpOnASilentPeer) {
  EventLoop loop;
  Request req;
  Seen seen;
  WebSocketOptions options;
  options.idle_timeout = std::chrono::milliseconds(20);
  WebSocketSession session(req, std::make_unique<Recorder>(&seen, false), options, "", &loop);
  session.SetResumeCallback([] {});
  session.Start();
  std::string wire;
  BodyReadStatus last = BodyReadStatus::kWouldBlock;
  bool pinged = false;
  const TimePoint give_up = MonotonicNow() + std::chrono::seconds(10);
  while (last != BodyReadStatus::kError && MonotonicNow() < give_up) {
    loop.RunOnce(std::chrono::milliseconds(5));
    do {
      last = session.Read(4096, &wire).status;
    } while (last == BodyReadStatus::kData);
    for (const Got& f : Parse(&wire)) pinged |= f.opcode == 0x9;
  }
  EXPECT_TRUE(pinged);
  EXPECT_EQ(last, BodyReadStatus::kError);
  EXPECT_EQ(seen.closes, 1);
  EXPECT_EQ(seen.close_code, WebSocketClose::kAbnormal);
}

// A client frame with RSV1 set: a compressed message's first frame (RFC 7692 §6).
std::string Rsv1Frame(bool fin, uint8_t opcode, absl::string_view payload) {
  std::string f = Frame(fin, opcode, payload);
  f[0] = static_cast<char>(f[0] | 0x40);
  return f;
}

// The client's side of permessage-deflate, straight on zlib: what a conforming peer sends and
// how it reads what the server sends.
class ClientDeflate {
 public:
  explicit ClientDeflate(bool reset_each_message = false) : reset_(reset_each_message) {
    EXPECT_EQ(deflateInit2(&def_, 6, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY), Z_OK);
    EXPECT_EQ(inflateInit2(&inf_, -15), Z_OK);
  }
  ~ClientDeflate() {
    deflateEnd(&def_);
    inflateEnd(&inf_);
  }
  // A message compressed and flushed, the trailing 00 00 FF FF removed (§7.2.1).
  std::string Compress(absl::string_view message) {
    std::string out(deflateBound(&def_, message.size()) + 64, '\0');
    def_.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(message.data()));
    def_.avail_in = static_cast<uInt>(message.size());
    def_.next_out = reinterpret_cast<Bytef*>(out.data());
    def_.avail_out = static_cast<uInt>(out.size());
    EXPECT_EQ(deflate(&def_, Z_SYNC_FLUSH), Z_OK);
    EXPECT_EQ(def_.avail_in, 0u);
    out.resize(out.size() - def_.avail_out);
    EXPECT_EQ(out.substr(out.size() - 4), std::string("\0\0\xff\xff", 4));
    out.resize(out.size() - 4);
    if (reset_) deflateReset(&def_);
    return out;
  }
  // A server message inflated, the tail appended back (§7.2.2); context kept between calls.
  std::string Inflate(absl::string_view payload) {
    std::string in(payload);
    in.append("\0\0\xff\xff", 4);
    std::string out;
    inf_.next_in = reinterpret_cast<Bytef*>(in.data());
    inf_.avail_in = static_cast<uInt>(in.size());
    char buf[4096];
    do {
      inf_.next_out = reinterpret_cast<Bytef*>(buf);
      inf_.avail_out = sizeof(buf);
      const int rv = inflate(&inf_, Z_SYNC_FLUSH);
      EXPECT_TRUE(rv == Z_OK || rv == Z_BUF_ERROR) << rv;
      out.append(buf, sizeof(buf) - inf_.avail_out);
    } while (inf_.avail_in > 0 || inf_.avail_out == 0);
    if (reset_) inflateReset(&inf_);
    return out;
  }

 private:
  bool reset_;
  z_stream def_{};
  z_stream inf_{};
};

std::string Compressible(size_t n, char seed) {
  std::string s;
  while (s.size() < n)
    absl::StrAppend(&s, "petrel ", std::string(1, seed), " message ", s.size() % 97, "; ");
  s.resize(n);
  return s;
}

TEST_F(SessionTest, DeflateRoundTripWithContextTakeover) {
  ClientDeflate client;
  Open(WebSocketOptions(), /*echo=*/true, /*pause=*/false, PermessageDeflateParams());
  const std::string text = "κόσμε " + Compressible(5000, 't');
  const std::string binary = Compressible(3000, 'b');
  // The second copy of `text` refers back into the first (context takeover): it is tiny.
  const std::string first = client.Compress(text);
  const std::string second = client.Compress(text);
  EXPECT_LT(second.size(), first.size() / 4);
  Send(Rsv1Frame(true, 0x1, first));
  Send(Rsv1Frame(true, 0x1, second));
  Send(Rsv1Frame(true, 0x2, client.Compress(binary)));
  // A compressed message may come in fragments: RSV1 on the first only.
  const std::string fragmented = client.Compress(binary);
  Send(Rsv1Frame(false, 0x2, fragmented.substr(0, 10)) + Frame(true, 0x9, "ping") +
       Frame(false, 0x0, fragmented.substr(10, 7)) + Frame(true, 0x0, fragmented.substr(17)));
  Send(Frame(true, 0x1, "plain"));  // uncompressed messages stay allowed
  // Fragmented compressed text: the continuation frames carry no RSV1, yet their bytes are
  // compressed, not UTF-8, and must not be checked as such before inflating.
  const std::string fragmented_text = client.Compress(text);
  Send(Rsv1Frame(false, 0x1, fragmented_text.substr(0, 9)) +
       Frame(false, 0x0, fragmented_text.substr(9, 40)) +
       Frame(true, 0x0, fragmented_text.substr(49)));
  ASSERT_EQ(seen_.messages.size(), 6u);
  EXPECT_EQ(seen_.messages[5], std::make_pair(WebSocketMessageType::kText, text));
  EXPECT_EQ(seen_.messages[0], std::make_pair(WebSocketMessageType::kText, text));
  EXPECT_EQ(seen_.messages[1], std::make_pair(WebSocketMessageType::kText, text));
  EXPECT_EQ(seen_.messages[2], std::make_pair(WebSocketMessageType::kBinary, binary));
  EXPECT_EQ(seen_.messages[3], std::make_pair(WebSocketMessageType::kBinary, binary));
  EXPECT_EQ(seen_.messages[4].second, "plain");

  std::vector<Got> out = Drain();
  ASSERT_EQ(out.size(), 7u);
  std::vector<std::string> echoed;
  for (const Got& f : out) {
    if (f.opcode == 0xA) {
      EXPECT_FALSE(f.rsv1);  // never on control frames
      continue;
    }
    EXPECT_EQ(f.rsv1, f.payload != "plain") << f.payload.size();  // "plain" is under min_size
    echoed.push_back(f.rsv1 ? client.Inflate(f.payload) : f.payload);
    if (echoed.size() == 2) {
      EXPECT_LT(f.payload.size(), out[0].payload.size() / 4);  // the server keeps context too
    }
  }
  EXPECT_EQ(echoed, (std::vector<std::string>{text, text, binary, binary, "plain", text}));
  EXPECT_LT(out[0].payload.size(), text.size() / 3);
}

TEST_F(SessionTest, DeflateWithoutContextTakeover) {
  ClientDeflate client(/*reset_each_message=*/true);
  PermessageDeflateParams params;
  params.server_no_context_takeover = true;
  params.client_no_context_takeover = true;
  params.server_max_window_bits = 10;
  Open(WebSocketOptions(), /*echo=*/true, /*pause=*/false, params);
  const std::string text = Compressible(4000, 'n');
  Send(Rsv1Frame(true, 0x1, client.Compress(text)));
  Send(Rsv1Frame(true, 0x1, client.Compress(text)));
  ASSERT_EQ(seen_.messages.size(), 2u);
  EXPECT_EQ(seen_.messages[1].second, text);
  std::vector<Got> out = Drain();
  ASSERT_EQ(out.size(), 2u);
  // Each message compressed on its own: the same bytes twice, each inflating from scratch.
  EXPECT_TRUE(out[0].rsv1);
  EXPECT_EQ(out[0].payload, out[1].payload);
  EXPECT_EQ(client.Inflate(out[0].payload), text);
  EXPECT_EQ(client.Inflate(out[1].payload), text);

  // With client_no_context_takeover agreed the server starts each message afresh: a message
  // that refers back into the previous one cannot inflate.
  ClientDeflate takeover;
  takeover.Compress(text);  // history the server never saw as such
  Send(Rsv1Frame(true, 0x1, takeover.Compress(text)));
  out = Drain();
  ASSERT_FALSE(out.empty());
  EXPECT_EQ(out.back().close_code(), WebSocketClose::kInvalidPayload);
  EXPECT_EQ(seen_.messages.size(), 2u);
}

TEST_F(SessionTest, DeflateBombClosesWith1009WithinTheLimit) {
  WebSocketOptions options;
  options.max_message = 64 * 1024;
  Open(options, /*echo=*/true, /*pause=*/false, PermessageDeflateParams());
  ClientDeflate client;
  const std::string bomb = client.Compress(std::string(32 << 20, '\0'));  // 32 MiB of zeros
  ASSERT_LT(bomb.size(), options.max_message);                            // ~32 KiB on the wire
  Send(Rsv1Frame(true, 0x2, bomb));
  std::vector<Got> out = Drain();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].close_code(), WebSocketClose::kTooBig);
  EXPECT_TRUE(seen_.messages.empty());
  EXPECT_EQ(seen_.close_code, WebSocketClose::kTooBig);
  EXPECT_EQ(last_, BodyReadStatus::kEnd);
  // Inflating stopped one byte past the limit, not 32 MiB later.
  EXPECT_LE(session_->inflate_buffer_bytes(), options.max_message + 1);
}

TEST_F(SessionTest, DeflateHostileInput) {
  ClientDeflate client;
  const std::string compressed_hello = client.Compress("hello, compressed");
  ClientDeflate bad_text_client;
  const std::vector<Hostile> cases = {
      {"corrupt DEFLATE data", Rsv1Frame(true, 0x2, "\xff\xff\xff\xff\xff"), 1007},
      {"reserved block type", Rsv1Frame(true, 0x1, "\x07"), 1007},
      {"bytes after a final block", Rsv1Frame(true, 0x2, std::string("\x03\x00\x00", 3) + "x"),
       1007},
      {"invalid UTF-8 once inflated", Rsv1Frame(true, 0x1, bad_text_client.Compress("ok \xc3\x28")),
       1007},
      {"uncompressed message over max_message", Frame(true, 0x2, std::string(1001, 'u')), 1009},
      {"RSV1 on a ping", Rsv1Frame(true, 0x9, "p"), 1002},
      {"RSV1 on a continuation",
       Rsv1Frame(false, 0x2, compressed_hello.substr(0, 3)) +
           Rsv1Frame(true, 0x0, compressed_hello.substr(3)),
       1002},
      {"RSV2", std::string(1, '\xa2') + Frame(true, 0x2, "x").substr(1), 1002},
  };
  for (const Hostile& c : cases) {
    SCOPED_TRACE(c.name);
    req_.Reset();
    seen_ = Seen();
    wire_.clear();
    WebSocketOptions options;
    options.max_message = 1000;
    Open(options, /*echo=*/true, /*pause=*/false, PermessageDeflateParams());
    Send(c.bytes);
    std::vector<Got> out = Drain();
    ASSERT_FALSE(out.empty());
    EXPECT_EQ(out.back().opcode, 0x8);
    EXPECT_EQ(out.back().close_code(), c.code);
    EXPECT_TRUE(seen_.messages.empty());
    EXPECT_EQ(last_, BodyReadStatus::kEnd);
    EXPECT_EQ(seen_.close_code, c.code);
    session_.reset();
  }
}

// Without the extension agreed, a compressed message is a protocol error (RFC 6455 §5.2).
TEST_F(SessionTest, Rsv1WithoutTheExtensionIs1002) {
  Open();
  ClientDeflate client;
  Send(Rsv1Frame(true, 0x1, client.Compress(Compressible(500, 'x'))));
  std::vector<Got> out = Drain();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].close_code(), WebSocketClose::kProtocolError);
  EXPECT_TRUE(seen_.messages.empty());
}

TEST_F(SessionTest, DeflateSendsShortMessagesPlainAndHonoursMinSize) {
  WebSocketOptions options;
  options.deflate.min_size = 1;
  Open(options, /*echo=*/false, /*pause=*/false, PermessageDeflateParams());
  ASSERT_TRUE(session_->SendText("a"));
  ASSERT_TRUE(session_->SendBinary(std::string(100000, 'z')));
  ASSERT_TRUE(session_->SendText(""));  // nothing to compress: sent plain
  ASSERT_TRUE(session_->Ping("p"));
  std::vector<Got> out = Drain();
  ASSERT_EQ(out.size(), 4u);
  ClientDeflate client;
  EXPECT_TRUE(out[0].rsv1);
  EXPECT_EQ(client.Inflate(out[0].payload), "a");
  EXPECT_TRUE(out[1].rsv1);
  EXPECT_LT(out[1].payload.size(), 1000u);
  EXPECT_EQ(client.Inflate(out[1].payload), std::string(100000, 'z'));
  EXPECT_FALSE(out[2].rsv1);
  EXPECT_FALSE(out[3].rsv1);
}

TEST_F(SessionTest, DeflateHonoursLevelAndMemLevel) {
  std::string text;
  for (int i = 0; i < 3000; ++i) absl::StrAppend(&text, "word", i * 7919 % 1000, " ");
  const auto compressed_with = [&](int level, int mem_level) -> std::string {
    req_.Reset();
    seen_ = Seen();
    wire_.clear();
    WebSocketOptions options;
    options.deflate.level = level;
    options.deflate.mem_level = mem_level;
    Open(options, /*echo=*/false, /*pause=*/false, PermessageDeflateParams());
    EXPECT_TRUE(session_->SendText(text));
    std::vector<Got> out = Drain();
    session_.reset();
    if (out.size() != 1) {
      ADD_FAILURE() << out.size() << " frames";
      return {};
    }
    ClientDeflate client;
    EXPECT_EQ(client.Inflate(out[0].payload), text);
    return out[0].payload;
  };
  const std::string smallest = compressed_with(9, 9);
  const std::string fastest = compressed_with(1, 1);
  EXPECT_LT(smallest.size(), fastest.size());
}

TEST(WebSocketHandshakeTest, AcceptKeyIsRfc6455s) {
  // RFC 6455 §1.3's example.
  EXPECT_EQ(WebSocketAccept("dGhlIHNhbXBsZSBub25jZQ=="), "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
}

TEST(WebSocketHandshakeTest, Utf8) {
  EXPECT_TRUE(IsValidUtf8(""));
  EXPECT_TRUE(IsValidUtf8("plain"));
  EXPECT_TRUE(IsValidUtf8("κόσμε"));
  EXPECT_TRUE(IsValidUtf8("\xf0\x9f\x98\x80"));   // U+1F600
  EXPECT_TRUE(IsValidUtf8("\xf4\x8f\xbf\xbf"));   // U+10FFFF
  EXPECT_FALSE(IsValidUtf8("\xf4\x90\x80\x80"));  // above U+10FFFF
  EXPECT_FALSE(IsValidUtf8("\xe0\x80\xaf"));      // overlong
  EXPECT_FALSE(IsValidUtf8("\xed\xbf\xbf"));      // surrogate
  EXPECT_FALSE(IsValidUtf8("\xce\xba\xe1"));      // cut short
  EXPECT_FALSE(IsValidUtf8("\x80"));              // a continuation byte alone
  EXPECT_FALSE(IsValidUtf8("\xfe"));
}

TEST(WebSocketHandshakeTest, ChecksTheOpening) {
  Request req;
  req.set_method(Method::kGet);
  req.set_version(HttpVersion::k11);
  req.AssignUpgrade("websocket");  // the engine's: Upgrade, listed in Connection
  req.headers().Add("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ==");
  req.headers().Add("sec-websocket-version", "13");
  req.headers().Add("sec-websocket-protocol", "chat, superchat");
  absl::StatusOr<WebSocketOpening> o = CheckWebSocketOpening(req, {"superchat", "chat"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_TRUE(o->upgrade);
  EXPECT_EQ(o->accept, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
  EXPECT_EQ(o->subprotocol, "superchat");

  req.headers().Set("sec-websocket-version", "8");
  EXPECT_TRUE(absl::IsFailedPrecondition(CheckWebSocketOpening(req, {}).status()));
  req.headers().Set("sec-websocket-version", "13");
  req.headers().Set("sec-websocket-key", "c2hvcnQ=");
  EXPECT_TRUE(absl::IsInvalidArgument(CheckWebSocketOpening(req, {}).status()));
  req.AssignUpgrade("h2c");
  EXPECT_TRUE(absl::IsNotFound(CheckWebSocketOpening(req, {}).status()));

  Request h2;
  h2.set_method(Method::kConnect);
  h2.set_version(HttpVersion::k2);
  h2.headers().Add("sec-websocket-version", "13");
  EXPECT_TRUE(absl::IsNotFound(CheckWebSocketOpening(h2, {}).status()));  // no :protocol
  h2.AssignProtocol("websocket");
  o = CheckWebSocketOpening(h2, {});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_FALSE(o->upgrade);
  h2.AssignProtocol("webtransport");
  EXPECT_TRUE(absl::IsInvalidArgument(CheckWebSocketOpening(h2, {}).status()));
}

}  // namespace
}  // namespace petrel::http_internal
