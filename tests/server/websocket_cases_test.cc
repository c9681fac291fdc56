// WebSocket conformance against the real server, after the Autobahn testsuite's sections that
// apply to a server: framing, pings and pongs, reserved bits, opcodes, fragmentation, UTF-8,
// the closing handshake and the message size limit. One table of cases; each runs over
// HTTP/1.1 (RFC 6455 Upgrade on a raw TCP socket) and over HTTP/3 (RFC 9220 extended CONNECT
// with Http3Client), so the two transports are held to the same wire behaviour.
//
// A case is the bytes the client sends (masked frames built here, independently of wslay) and
// the exact frames the echo route must answer with, ending with the server's close and then the
// end of the connection (h1) or stream (h3). A case that leaves the WebSocket open is closed by
// the client with 1000 once everything expected arrived, and must be answered with 1000.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "petrel/common/socket_address.h"
#include "petrel/common/timer.h"
#include "petrel/http/http3_client.h"
#include "petrel/http/http_server.h"
#include "petrel/http/websocket.h"

namespace petrel {
namespace {

constexpr uint8_t kContinuation = 0x0;
constexpr uint8_t kText = 0x1;
constexpr uint8_t kBinary = 0x2;
constexpr uint8_t kClose = 0x8;
constexpr uint8_t kPing = 0x9;
constexpr uint8_t kPong = 0xA;

constexpr uint8_t kRsv1 = 0x40;
constexpr uint8_t kRsv2 = 0x20;
constexpr uint8_t kRsv3 = 0x10;

// The echo route's limit: large enough for the framing cases' 100000-byte messages, small
// enough to test cheaply.
constexpr size_t kMaxMessage = 128 * 1024;

// How a case ends.
constexpr int kStillOpen = -1;   // no close from the server: the client closes with 1000
constexpr int kCloseNoCode = 0;  // a close frame with an empty payload

// One frame as it is on the wire: the first byte (FIN, RSV, opcode) and the payload.
struct WireFrame {
  uint8_t head = 0;
  std::string payload;
};

// A client frame; masked unless `mask` is false. The length takes the shortest encoding, as
// RFC 6455 §5.2 requires.
std::string Frame(bool fin, uint8_t rsv, uint8_t opcode, absl::string_view payload,
                  bool mask = true) {
  std::string f;
  f += static_cast<char>((fin ? 0x80 : 0) | rsv | opcode);
  const uint8_t mask_bit = mask ? 0x80 : 0;
  const uint64_t n = payload.size();
  if (n < 126) {
    f += static_cast<char>(mask_bit | n);
  } else if (n <= 0xffff) {
    f += static_cast<char>(mask_bit | 126);
    f += static_cast<char>(n >> 8);
    f += static_cast<char>(n & 0xff);
  } else {
    f += static_cast<char>(mask_bit | 127);
    for (int shift = 56; shift >= 0; shift -= 8) f += static_cast<char>((n >> shift) & 0xff);
  }
  if (!mask) return f + std::string(payload);
  const char key[4] = {0x37, static_cast<char>(0xfa), 0x21, 0x3d};  // RFC 6455 §5.7's
  f.append(key, 4);
  for (size_t i = 0; i < payload.size(); ++i) f += static_cast<char>(payload[i] ^ key[i % 4]);
  return f;
}

// A whole message in one frame.
std::string Message(uint8_t opcode, absl::string_view payload) {
  return Frame(true, 0, opcode, payload);
}

// `payload` as a message of fragments of the given sizes (the last takes the rest).
std::string Fragments(uint8_t opcode, absl::string_view payload, std::vector<size_t> sizes) {
  std::string out;
  size_t at = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    const bool last = i + 1 == sizes.size();
    const size_t n = last ? payload.size() - at : sizes[i];
    out += Frame(last, 0, i == 0 ? opcode : kContinuation, payload.substr(at, n));
    at += n;
  }
  return out;
}

std::string ClosePayload(uint16_t code, absl::string_view reason = {}) {
  std::string p;
  p += static_cast<char>(code >> 8);
  p += static_cast<char>(code & 0xff);
  return p + std::string(reason);
}

std::string CloseFrame(uint16_t code, absl::string_view reason = {}) {
  return Message(kClose, ClosePayload(code, reason));
}

// What the server must send back.
WireFrame Echo(uint8_t opcode, absl::string_view payload) {
  return {static_cast<uint8_t>(0x80 | opcode), std::string(payload)};
}
WireFrame Pong(absl::string_view payload) { return Echo(kPong, payload); }

// `n` bytes of printable ASCII (valid UTF-8 for text), position-dependent so that a lost or
// reordered piece shows.
std::string Ascii(size_t n) {
  std::string s(n, ' ');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>('!' + (i * 7 + i / 94) % 94);
  return s;
}

// `n` bytes of every value.
std::string Bytes(size_t n) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>((i * 131 + i / 251) & 0xff);
  return s;
}

struct Case {
  std::string name;  // a gtest name: letters, digits, '_'
  std::string client;
  std::vector<WireFrame> expect;  // before the server's close
  int close = kStillOpen;         // the code of the server's close, kCloseNoCode or kStillOpen
};

// gtest prints parameters on failure: the name says enough.
void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

std::vector<Case> AllCases() {
  std::vector<Case> cases;
  const auto add = [&cases](std::string name, std::string client, std::vector<WireFrame> expect,
                            int close) {
    cases.push_back({std::move(name), std::move(client), std::move(expect), close});
    return &cases.back();
  };
  constexpr uint16_t kProtocol = WebSocketClose::kProtocolError;
  constexpr uint16_t kBadData = WebSocketClose::kInvalidPayload;
  constexpr uint16_t kTooBig = WebSocketClose::kTooBig;

  // 1. Framing: each length encoding (7-bit up to 125, 16-bit up to 65535, 64-bit beyond) and
  // its edges, echoed byte-exact.
  for (size_t n : {0, 1, 125, 126, 127, 128, 65535, 65536, 100000}) {
    add(absl::StrCat("Framing_Text", n), Message(kText, Ascii(n)), {Echo(kText, Ascii(n))},
        kStillOpen);
    add(absl::StrCat("Framing_Binary", n), Message(kBinary, Bytes(n)), {Echo(kBinary, Bytes(n))},
        kStillOpen);
  }
  add("Framing_ManyMessagesInOneWrite",
      Message(kText, "one") + Message(kBinary, Bytes(300)) + Message(kText, "three"),
      {Echo(kText, "one"), Echo(kBinary, Bytes(300)), Echo(kText, "three")}, kStillOpen);
  add("Framing_UnmaskedFrame", Frame(true, 0, kText, "hello", /*mask=*/false), {}, kProtocol);

  // 2. Pings and pongs. RFC 6455 §5.5: control payloads are at most 125 bytes; §5.5.3: a pong
  // nobody asked for is allowed and needs no answer.
  add("Ping_Empty", Message(kPing, ""), {Pong("")}, kStillOpen);
  add("Ping_125", Message(kPing, Bytes(125)), {Pong(Bytes(125))}, kStillOpen);
  add("Ping_126", Message(kPing, Bytes(126)), {}, kProtocol);
  add(
      "Ping_TenInARow",
      [] {
        std::string s;
        for (int i = 0; i < 10; ++i) s += Message(kPing, absl::StrCat("ping ", i));
        return s;
      }(),
      [] {
        std::vector<WireFrame> v;
        for (int i = 0; i < 10; ++i) v.push_back(Pong(absl::StrCat("ping ", i)));
        return v;
      }(),
      kStillOpen);
  add("Pong_Unsolicited", Message(kPong, "unsolicited"), {}, kStillOpen);
  add("Pong_UnsolicitedThenPing", Message(kPong, "unsolicited") + Message(kPing, "solicited"),
      {Pong("solicited")}, kStillOpen);

  // 3. Reserved bits: no extension is agreed on this route, so any RSV bit fails the connection
  // (§5.2). A message before the bad frame is still echoed; a ping after it is not answered.
  add("Rsv1_Text", Frame(true, kRsv1, kText, "rsv1"), {}, kProtocol);
  add("Rsv2_Text", Frame(true, kRsv2, kText, "rsv2"), {}, kProtocol);
  add("Rsv3_Text", Frame(true, kRsv3, kText, "rsv3"), {}, kProtocol);
  add("Rsv1_Binary", Frame(true, kRsv1, kBinary, Bytes(10)), {}, kProtocol);
  add("Rsv2_Ping", Frame(true, kRsv2, kPing, "p"), {}, kProtocol);
  add("Rsv3_Close", Frame(true, kRsv3, kClose, ClosePayload(1000)), {}, kProtocol);
  add("Rsv123_Binary", Frame(true, kRsv1 | kRsv2 | kRsv3, kBinary, Bytes(10)), {}, kProtocol);
  add("Rsv2_AfterMessageBeforePing",
      Message(kText, "first") + Frame(true, kRsv2, kText, "bad") + Message(kPing, "after"),
      {Echo(kText, "first")}, kProtocol);

  // 4. Opcodes: 3-7 are reserved data opcodes, 0xB-0xF reserved control opcodes (§5.2).
  for (uint8_t op : {3, 4, 5, 6, 7, 0xB, 0xC, 0xD, 0xE, 0xF}) {
    add(absl::StrFormat("Opcode_Reserved%X", op), Frame(true, 0, op, ""), {}, kProtocol);
  }
  add("Opcode_Reserved5WithPayloadAfterMessage",
      Message(kText, "first") + Frame(true, 0, 5, "payload") + Message(kPing, "after"),
      {Echo(kText, "first")}, kProtocol);

  // 5. Fragmentation (§5.4): one echo for the whole message; control frames may come between
  // fragments and are answered first; anything else out of order fails the connection.
  add("Fragments_Text2", Fragments(kText, "fragmented", {4, 0}), {Echo(kText, "fragmented")},
      kStillOpen);
  add("Fragments_Binary3", Fragments(kBinary, Bytes(3000), {1000, 1000, 0}),
      {Echo(kBinary, Bytes(3000))}, kStillOpen);
  add("Fragments_Text100x1", Fragments(kText, Ascii(100), std::vector<size_t>(100, 1)),
      {Echo(kText, Ascii(100))}, kStillOpen);
  add("Fragments_TextAllEmpty",
      Frame(false, 0, kText, "") + Frame(false, 0, kContinuation, "") +
          Frame(true, 0, kContinuation, ""),
      {Echo(kText, "")}, kStillOpen);
  add("Fragments_PingBetween",
      Frame(false, 0, kText, "frag") + Message(kPing, "between") +
          Frame(true, 0, kContinuation, "mented"),
      {Pong("between"), Echo(kText, "fragmented")}, kStillOpen);
  add("Fragments_PongBetween",
      Frame(false, 0, kBinary, "frag") + Message(kPong, "between") +
          Frame(true, 0, kContinuation, "mented"),
      {Echo(kBinary, "fragmented")}, kStillOpen);
  add("Fragments_ContinuationWithoutStart", Frame(true, 0, kContinuation, "orphan"), {}, kProtocol);
  add("Fragments_UnfinishedContinuationWithoutStart", Frame(false, 0, kContinuation, "orphan"), {},
      kProtocol);
  add("Fragments_ContinuationAfterAWholeMessage",
      Message(kText, "whole") + Frame(true, 0, kContinuation, "orphan"), {Echo(kText, "whole")},
      kProtocol);
  add("Fragments_TextInsideText", Frame(false, 0, kText, "a") + Frame(true, 0, kText, "b"), {},
      kProtocol);
  add("Fragments_BinaryInsideText", Frame(false, 0, kText, "a") + Frame(true, 0, kBinary, "b"), {},
      kProtocol);
  add("Fragments_PingWithoutFin", Frame(false, 0, kPing, "a") + Frame(true, 0, kContinuation, "b"),
      {}, kProtocol);
  add("Fragments_CloseWithoutFin",
      Frame(false, 0, kClose, ClosePayload(1000)) + Frame(true, 0, kContinuation, ""), {},
      kProtocol);
  // §5.5.1: the close is honoured although a message is unfinished; the message is dropped.
  add("Fragments_CloseBetween", Frame(false, 0, kText, "never ") + CloseFrame(1000), {}, 1000);

  // 6. UTF-8 (§8.1): text must be valid UTF-8 (RFC 3629: no overlong forms, no surrogates,
  // nothing past U+10FFFF); failing that, 1007 (§7.4.1). Binary is not checked.
  struct Utf8 {
    const char* name;
    std::string bytes;
  };
  const std::vector<Utf8> valid = {
      {"TwoByte", "Hello-\xc2\xb5@\xc3\x9f\xc3\xb6\xc3\xa4\xc3\xbc-UTF-8!!"},
      {"Greek", "\xce\xba\xe1\xbd\xb9\xcf\x83\xce\xbc\xce\xb5"},  // κόσμε
      {"ThreeByte", "\xe2\x82\xac \xe4\xb8\xad\xe6\x96\x87"},     // € 中文
      {"FourByte", "\xf0\x9d\x84\x9e \xf0\x9f\x98\x80"},          // 𝄞 😀
      {"Boundaries",
       "\x7f\xc2\x80\xdf\xbf\xe0\xa0\x80\xed\x9f\xbf\xee\x80\x80\xef\xbf\xbf"
       "\xf0\x90\x80\x80\xf4\x8f\xbf\xbf"},  // U+7F 80 7FF 800 D7FF E000 FFFF ...
      {"Nul", std::string("a\0b", 3)},
  };
  for (const Utf8& u : valid) {
    add(absl::StrCat("Utf8_Valid", u.name), Message(kText, u.bytes), {Echo(kText, u.bytes)},
        kStillOpen);
  }
  const std::vector<Utf8> invalid = {
      {"OverlongSlash2", "\xc0\xaf"},
      {"OverlongSlash3", "\xe0\x80\xaf"},
      {"OverlongSlash4", "\xf0\x80\x80\xaf"},
      {"OverlongNul", "\xc0\x80"},
      {"OverlongMax2", "\xc1\xbf"},
      {"HighSurrogate", "\xed\xa0\x80"},
      {"LowSurrogate", "\xed\xbf\xbf"},
      {"SurrogatePair", "\xed\xa0\x80\xed\xb0\x80"},
      {"Above10FFFF", "\xf4\x90\x80\x80"},
      {"ByteF5", "\xf5\x80\x80\x80"},
      {"ByteFE", "\xfe"},
      {"ByteFF", "\xff"},
      {"TruncatedAtEnd2", "abc\xc3"},
      {"TruncatedAtEnd3", "abc\xe2\x82"},
      {"TruncatedAtEnd4", "abc\xf0\x9d\x84"},
      {"LoneContinuation", "\x80"},
      {"ContinuationAfterAscii", "abc\xbf"},
      {"StartByteThenAscii", "\xc3("},
      {"InTheMiddle",
       "\xce\xba\xe1\xbd\xb9\xcf\x83\xce\xbc\xce\xb5\xed\xa0\x80"
       "edited"},
  };
  for (const Utf8& u : invalid) {
    add(absl::StrCat("Utf8_Invalid", u.name), Message(kText, u.bytes), {}, kBadData);
  }
  add("Utf8_InvalidInBinaryIsEchoed", Message(kBinary, "\xc0\xaf\xed\xa0\x80\xff"),
      {Echo(kBinary, "\xc0\xaf\xed\xa0\x80\xff")}, kStillOpen);
  // Code points split across fragment boundaries are one message.
  const std::string split = "\xe2\x82\xac\xf0\x9d\x84\x9e\xc2\xb5";  // € 𝄞 µ
  add("Utf8_SplitAcrossFragments", Fragments(kText, split, {1, 2, 2, 1, 1, 1, 0}),
      {Echo(kText, split)}, kStillOpen);
  add("Utf8_OneByteFragments", Fragments(kText, split, std::vector<size_t>(split.size(), 1)),
      {Echo(kText, split)}, kStillOpen);
  add("Utf8_InvalidInALaterFragment",
      Frame(false, 0, kText, "valid ") + Frame(true, 0, kContinuation, "\xed\xa0\x80"), {},
      kBadData);
  add("Utf8_TruncatedAtTheLastFragment",
      Frame(false, 0, kText, "valid ") + Frame(true, 0, kContinuation, "\xe2\x82"), {}, kBadData);
  // Autobahn 6.4: the connection fails as soon as the bad byte arrives, not when the message is
  // complete — here it never is (the client sends no more), so only an early check ends it.
  add("Utf8_FailFastInAnUnfinishedMessage",
      Frame(false, 0, kText, "\xce\xba\xe1\xbd\xb9\xf4\x90\x80\x80"), {}, kBadData);
  add("Utf8_InvalidCloseReason", CloseFrame(1000, "bad \xed\xa0\x80"), {}, kBadData);
  add("Utf8_TruncatedCloseReason", CloseFrame(1000, "bad \xe2\x82"), {}, kBadData);
  add("Utf8_ValidCloseReason", CloseFrame(1000, "\xce\xba\xe1\xbd\xb9\xcf\x83\xce\xbc\xce\xb5"), {},
      1000);

  // 7. Closing handshake (§5.5.1, §7.4). A close without a payload has no code to echo: Petrel
  // (wslay) answers with an empty close too, which §5.5.1 allows ("typically echos the status
  // code it received"; there is none, and 1005 must not be sent, §7.4.1).
  add("Close_Empty", Message(kClose, ""), {}, kCloseNoCode);
  add("Close_1000", CloseFrame(1000), {}, 1000);
  add("Close_1000WithReason", CloseFrame(1000, "bye"), {}, 1000);
  add("Close_1000WithLongestReason", CloseFrame(1000, Ascii(123)), {}, 1000);
  add("Close_OverlongPayload", Message(kClose, ClosePayload(1000, Ascii(124))), {}, kProtocol);
  // §5.5.1: a close body, if any, starts with a two-byte code; one byte cannot be one.
  add("Close_OneBytePayload", Message(kClose, "\x03"), {}, kProtocol);
  // §7.4.1-2: 0-999 unused, 1004 reserved, 1005/1006/1015 never sent, 1016-2999 for future
  // RFCs, 5000+ undefined.
  for (int code : {0, 999, 1004, 1005, 1006, 1015, 1016, 1100, 2000, 2999, 5000, 65535}) {
    add(absl::StrCat("Close_InvalidCode", code), CloseFrame(code), {}, kProtocol);
  }
  for (int code : {1000, 1001, 1002, 1003, 1007, 1008, 1009, 1010, 1011, 3000, 3999, 4000, 4999}) {
    add(absl::StrCat("Close_ValidCode", code), CloseFrame(code, "reason"), {}, code);
  }
  // After the client's close nothing more of it is processed (§5.5.1).
  add("Close_ThenText", CloseFrame(1000) + Message(kText, "ignored"), {}, 1000);
  add("Close_ThenPing", CloseFrame(1000) + Message(kPing, "ignored"), {}, 1000);
  add("Close_ThenBadFrame", CloseFrame(1000) + Frame(true, 0, 5, "ignored"), {}, 1000);
  add("Close_AfterMessages",
      Message(kText, "one") + Message(kBinary, "two") + CloseFrame(1001, "going"),
      {Echo(kText, "one"), Echo(kBinary, "two")}, 1001);
  // §5.5.2: a ping received before the close is owed a pong, also when both arrive in one read
  // (as here: one write of a few bytes) — wslay stops sending control frames once its
  // answering close is queued, so the session sends each pong as soon as wslay makes it.
  add("Close_AfterPing", Message(kPing, "owed") + CloseFrame(1000), {Pong("owed")}, 1000);

  // 8. The route's max_message: at the limit is echoed, one byte over fails with 1009, whether
  // it comes in one frame or in fragments.
  add("Limit_TextAtMax", Message(kText, Ascii(kMaxMessage)), {Echo(kText, Ascii(kMaxMessage))},
      kStillOpen);
  add("Limit_BinaryOverMax", Message(kBinary, Bytes(kMaxMessage + 1)), {}, kTooBig);
  add("Limit_FragmentsAtMax", Fragments(kBinary, Bytes(kMaxMessage), {50000, 50000, 0}),
      {Echo(kBinary, Bytes(kMaxMessage))}, kStillOpen);
  add("Limit_FragmentsOverMax", Fragments(kText, Ascii(kMaxMessage + 1), {50000, 50000, 0}), {},
      kTooBig);
  add("Limit_OneByteFragmentOverMax", Fragments(kBinary, Bytes(kMaxMessage + 1), {kMaxMessage, 0}),
      {}, kTooBig);
  add("Limit_ControlFramesDoNotCount",
      Frame(false, 0, kBinary, Bytes(kMaxMessage - 100)) + Message(kPing, Bytes(125)) +
          Frame(true, 0, kContinuation, Bytes(100)),
      {Pong(Bytes(125)), Echo(kBinary, Bytes(kMaxMessage - 100) + Bytes(100))}, kStillOpen);
  return cases;
}

// The frames the server sent, taken off the front of `buf` as they complete. Server frames are
// never masked (§5.1); a masked one is reported in `error`.
void TakeFrames(std::string* buf, std::vector<WireFrame>* frames, std::string* error) {
  for (;;) {
    if (buf->size() < 2) return;
    const auto* b = reinterpret_cast<const uint8_t*>(buf->data());
    if ((b[1] & 0x80) != 0 && error->empty()) *error = "the server masked a frame";
    uint64_t len = b[1] & 0x7f;
    size_t at = 2;
    if (len == 126) {
      if (buf->size() < 4) return;
      len = (uint64_t{b[2]} << 8) | b[3];
      at = 4;
    } else if (len == 127) {
      if (buf->size() < 10) return;
      len = 0;
      for (int i = 0; i < 8; ++i) len = (len << 8) | b[2 + i];
      at = 10;
    }
    if (buf->size() < at + len) return;
    frames->push_back({b[0], buf->substr(at, len)});
    buf->erase(0, at + len);
  }
}

// One run of a case: what the client sends when, and what the server sent.
class Exchange {
 public:
  explicit Exchange(const Case& c) : case_(c) {}

  // Takes bytes from the server; returns what the client must send now: its close, once a case
  // that leaves the WebSocket open has all the frames it expects.
  std::string Receive(absl::string_view data) {
    buffer_.append(data.data(), data.size());
    TakeFrames(&buffer_, &frames_, &error_);
    if (case_.close == kStillOpen && !client_closed_ && frames_.size() >= case_.expect.size()) {
      client_closed_ = true;
      return CloseFrame(1000);
    }
    return {};
  }
  bool server_closed() const {
    for (const WireFrame& f : frames_) {
      if ((f.head & 0x0f) == kClose) return true;
    }
    return false;
  }
  bool client_closed() const { return client_closed_; }

  const std::vector<WireFrame>& frames() const { return frames_; }
  const std::string& error() const { return error_; }
  size_t leftover() const { return buffer_.size(); }

 private:
  const Case& case_;
  std::string buffer_;
  std::vector<WireFrame> frames_;
  std::string error_;
  bool client_closed_ = false;
};

// How a run ended.
struct Outcome {
  bool ended = false;  // h1: the server closed the connection; h3: the response completed
  std::string how;     // details for the failure message
};

std::string Describe(const WireFrame& f) {
  static constexpr const char* kNames[16] = {"cont", "text", "binary", "op3",  "op4",  "op5",
                                             "op6",  "op7",  "close",  "ping", "pong", "opB",
                                             "opC",  "opD",  "opE",    "opF"};
  std::string s = kNames[f.head & 0x0f];
  if ((f.head & 0x80) == 0) s += "(no FIN)";
  if ((f.head & 0x70) != 0) absl::StrAppend(&s, "(RSV ", (f.head >> 4) & 7, ")");
  if ((f.head & 0x0f) == kClose) {
    if (f.payload.empty()) return s + " without code";
    if (f.payload.size() == 1) return s + " with a 1-byte payload";
    const int code = (static_cast<uint8_t>(f.payload[0]) << 8) | static_cast<uint8_t>(f.payload[1]);
    return absl::StrCat(s, " ", code, " \"", absl::CHexEscape(f.payload.substr(2)), "\"");
  }
  absl::StrAppend(&s, "[", f.payload.size(), "] \"",
                  absl::CHexEscape(absl::string_view(f.payload).substr(0, 24)),
                  f.payload.size() > 24 ? "\"..." : "\"");
  return s;
}

std::string Describe(const std::vector<WireFrame>& frames) {
  std::string s;
  for (const WireFrame& f : frames) absl::StrAppend(&s, "\n  ", Describe(f));
  return s.empty() ? "\n  (none)" : s;
}

// Whether `got` is the server's close `close` (kCloseNoCode or a code). The reason, which
// Petrel may echo, is not compared, but must be valid for a close: at most 123 bytes.
bool IsClose(const WireFrame& got, int close) {
  if (got.head != (0x80 | kClose)) return false;
  if (close == kCloseNoCode) return got.payload.empty();
  if (got.payload.size() < 2 || got.payload.size() > 125) return false;
  return ((static_cast<uint8_t>(got.payload[0]) << 8) | static_cast<uint8_t>(got.payload[1])) ==
         close;
}

// Whether the server's frames are those of the case, ending with the close `close`.
bool Matches(const std::vector<WireFrame>& expect, const std::vector<WireFrame>& got, int close) {
  if (got.size() != expect.size() + 1) return false;
  for (size_t i = 0; i < expect.size(); ++i) {
    if (got[i].head != expect[i].head || got[i].payload != expect[i].payload) return false;
  }
  return IsClose(got.back(), close == kStillOpen ? 1000 : close);
}

constexpr auto kDeadline = std::chrono::seconds(20);

enum class Transport { kH1, kH3 };

void PrintTo(Transport t, std::ostream* os) { *os << (t == Transport::kH1 ? "h1" : "h3"); }

class WebSocketCasesTest : public ::testing::TestWithParam<std::tuple<Case, Transport>> {
 protected:
  static void SetUpTestSuite() {
    HttpServerConfig c;
    c.http_port = 0;
    c.https_port = 0;
    server_ = new HttpServer(c);
    WebSocketOptions options;
    options.max_message = kMaxMessage;
    ASSERT_TRUE(server_->router()
                    .WebSocket(
                        "/cases", [](Request&) { return std::make_unique<EchoHandler>(); }, options)
                    .ok());
    const absl::Status started = server_->Start();
    ASSERT_TRUE(started.ok()) << started;
  }
  static void TearDownTestSuite() {
    if (server_ != nullptr) {
      server_->Stop(std::chrono::seconds(5));
      server_->Wait();
    }
    delete server_;
    server_ = nullptr;
  }

  // The echo route: whole messages back as they came, same type.
  class EchoHandler : public WebSocketHandler {
   public:
    void OnMessage(WebSocket& ws, WebSocketMessageType type, absl::string_view data) override {
      if (type == WebSocketMessageType::kText) {
        ws.SendText(data);
      } else {
        ws.SendBinary(data);
      }
    }
  };

  Outcome RunOverH1(const Case& c, Exchange& exchange);
  Outcome RunOverH3(const Case& c, Exchange& exchange);

  static HttpServer* server_;
};

HttpServer* WebSocketCasesTest::server_ = nullptr;

// RFC 6455 §1.3's example key and the accept value it must produce.
constexpr absl::string_view kKey = "dGhlIHNhbXBsZSBub25jZQ==";
constexpr absl::string_view kAccept = "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=";

// The opening handshake and the case on a raw TCP connection; reads until the server closes it
// or the deadline passes.
Outcome WebSocketCasesTest::RunOverH1(const Case& c, Exchange& exchange) {
  Outcome outcome;
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    ADD_FAILURE() << "socket: " << errno;
    return outcome;
  }
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(server_->http_port());
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ADD_FAILURE() << "connect: " << errno;
    close(fd);
    return outcome;
  }
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);

  std::string out = absl::StrCat(
      "GET /cases HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
      "Sec-WebSocket-Key: ",
      kKey, "\r\nSec-WebSocket-Version: 13\r\n\r\n");
  size_t out_at = 0;
  bool upgraded = false;
  std::string head;
  bool can_write = true;
  const auto deadline = std::chrono::steady_clock::now() + kDeadline;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      outcome.how = "the deadline passed before the server closed the connection";
      break;
    }
    pollfd p{fd, static_cast<short>(POLLIN | (can_write && out_at < out.size() ? POLLOUT : 0)), 0};
    if (poll(&p, 1, static_cast<int>(left.count())) < 0 && errno != EINTR) {
      outcome.how = absl::StrCat("poll: ", errno);
      break;
    }
    if ((p.revents & POLLOUT) != 0) {
      const ssize_t n = send(fd, out.data() + out_at, out.size() - out_at, MSG_NOSIGNAL);
      if (n > 0) {
        out_at += static_cast<size_t>(n);
      } else if (n < 0 && errno != EAGAIN && errno != EINTR) {
        can_write = false;  // the server is gone; what it sent may still be read
      }
    }
    if ((p.revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
    char buf[64 * 1024];
    const ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n == 0) {
      outcome.ended = true;
      outcome.how = "the server closed the connection";
      break;
    }
    if (n < 0) {
      if (errno == EAGAIN || errno == EINTR) continue;
      // A reset after the close frame still ends the connection: the kernel sends one instead
      // of a FIN if the server closes with bytes unread (the tail of an oversize message that
      // was still arriving), which RFC 6455 §7.1.7 allows when failing the connection.
      outcome.ended = errno == ECONNRESET;
      outcome.how = absl::StrCat("recv: ", strerror(errno));
      break;
    }
    absl::string_view data(buf, static_cast<size_t>(n));
    if (!upgraded) {
      head.append(data.data(), data.size());
      const size_t end = head.find("\r\n\r\n");
      if (end == std::string::npos) continue;
      const std::string rest = head.substr(end + 4);
      head.resize(end);
      std::vector<std::string> lines = absl::StrSplit(head, "\r\n");
      EXPECT_TRUE(absl::StartsWith(lines[0], "HTTP/1.1 101")) << head;
      bool accepted = false;
      for (const std::string& line : lines) {
        const size_t colon = line.find(':');
        if (colon == std::string::npos) continue;
        if (absl::EqualsIgnoreCase(line.substr(0, colon), "sec-websocket-accept")) {
          accepted = absl::StripAsciiWhitespace(line.substr(colon + 1)) == kAccept;
        }
      }
      EXPECT_TRUE(accepted) << head;
      if (!absl::StartsWith(lines[0], "HTTP/1.1 101") || !accepted) break;
      upgraded = true;
      out += c.client;
      head = rest;
      data = head;
    }
    out += exchange.Receive(data);
  }
  close(fd);
  return outcome;
}

// The case on an RFC 9220 extended CONNECT stream; runs until the response completes or the
// deadline passes.
Outcome WebSocketCasesTest::RunOverH3(const Case& c, Exchange& exchange) {
  Outcome outcome;
  Http3ClientConfig config;
  config.server = *SocketAddress::Parse("127.0.0.1", server_->https_port());
  config.verify_peer = false;
  absl::StatusOr<std::unique_ptr<Http3Client>> client = Http3Client::Create(std::move(config));
  if (!client.ok()) {
    ADD_FAILURE() << client.status();
    return outcome;
  }
  Http3Client& h3 = **client;

  Http3Request request;
  request.method = "CONNECT";
  request.protocol = "websocket";
  request.path = "/cases";
  request.headers.Add("sec-websocket-version", "13");
  auto body = std::make_unique<StreamingBody>();
  StreamingBody* to_server = body.get();
  request.body = ResponseBody(std::move(body));

  // The client's side ends once both closes are on their way: its own (a case's bytes may hold
  // it) or the server's, which the server does not wait to have answered after a failure.
  const auto finish_when_closed = [&] {
    if (!to_server->closed() && (exchange.server_closed() || exchange.client_closed())) {
      to_server->Finish();
    }
  };
  Http3ResponseHandler handler;
  handler.on_head = [&](int status, const HeaderMap&) {
    EXPECT_EQ(status, 200);
    // A case that expects nothing before the client's close sends it right away.
    to_server->Write(c.client + exchange.Receive({}));
    finish_when_closed();
  };
  handler.on_data = [&](absl::string_view data) {
    const std::string reply = exchange.Receive(data);
    if (!reply.empty()) to_server->Write(reply);
    finish_when_closed();
  };
  handler.on_complete = [&](absl::Status s, const HeaderMap&) {
    outcome.ended = true;
    outcome.how = absl::StrCat("the response completed: ", s.ToString());
    h3.CloseWhenDone();
  };
  if (!h3.Submit(std::move(request), std::move(handler)).ok() || !h3.Connect().ok()) {
    ADD_FAILURE() << "could not start the request";
    return outcome;
  }
  Timer deadline(h3.loop(), [&h3] { h3.Stop(); });
  deadline.StartAfter(kDeadline);
  h3.Run();
  if (!deadline.armed()) outcome.how = "the deadline passed before the response completed";
  deadline.Cancel();
  return outcome;
}

TEST_P(WebSocketCasesTest, ServerAnswers) {
  const Case& c = std::get<0>(GetParam());
  const Transport transport = std::get<1>(GetParam());
  ASSERT_NE(server_, nullptr);
  Exchange exchange(c);
  const Outcome outcome =
      transport == Transport::kH1 ? RunOverH1(c, exchange) : RunOverH3(c, exchange);

  std::vector<WireFrame> want = c.expect;
  const int close = c.close == kStillOpen ? 1000 : c.close;
  want.push_back({0x80 | kClose, close == kCloseNoCode ? "" : ClosePayload(close)});
  const std::string report =
      absl::StrCat("expected:", Describe(want), "\nthe server sent:", Describe(exchange.frames()),
                   "\nthen: ", outcome.how);
  EXPECT_EQ(exchange.error(), "") << report;
  EXPECT_EQ(exchange.leftover(), 0u) << "bytes of an incomplete frame\n" << report;

  EXPECT_TRUE(Matches(c.expect, exchange.frames(), c.close)) << report;
  EXPECT_TRUE(outcome.ended) << report;
}

std::string CaseName(const testing::TestParamInfo<std::tuple<Case, Transport>>& info) {
  return absl::StrCat(std::get<0>(info.param).name,
                      std::get<1>(info.param) == Transport::kH1 ? "_h1" : "_h3");
}

INSTANTIATE_TEST_SUITE_P(Autobahn, WebSocketCasesTest,
                         testing::Combine(testing::ValuesIn(AllCases()),
                                          testing::Values(Transport::kH1, Transport::kH3)),
                         CaseName);

}  // namespace
}  // namespace petrel
