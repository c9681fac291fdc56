// Every DESIGN §7 rule of the h1 request head, each with the status it must produce. Every test
// parses whole, byte by byte and split at every boundary (ParseAllWays / StatusOf).
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "gtest/gtest.h"
#include "h1_test_util.h"
#include "http/h1/request_parser.h"

namespace petrel::h1 {
namespace {

using testing::ParseAllWays;
using testing::ReasonOf;
using testing::StatusOf;

// A valid 1.1 request with `fields` (each ending in CRLF) after the Host line.
std::string Req(const std::string& fields, const std::string& line = "GET / HTTP/1.1") {
  return line + "\r\nHost: h\r\n" + fields + "\r\n";
}
// Same, without the Host line.
std::string Bare(const std::string& fields, const std::string& line = "GET / HTTP/1.1") {
  return line + "\r\n" + fields + "\r\n";
}

TEST(H1RequestParserTest, SimpleGet) {
  const std::string msg =
      "GET /index.html?q=1 HTTP/1.1\r\nHost: example.com\r\nAccept: */*\r\n\r\n";
  RequestParser p;
  ASSERT_EQ(p.Parse(msg), RequestParser::Result::kComplete);
  EXPECT_EQ(p.head_bytes(), msg.size());
  EXPECT_EQ(p.method(), Method::kGet);
  EXPECT_EQ(p.method_token(), "GET");
  EXPECT_EQ(p.target(), "/index.html?q=1");
  EXPECT_EQ(p.version(), HttpVersion::k11);
  EXPECT_EQ(p.host(), "example.com");
  ASSERT_EQ(p.field_count(), 2u);
  EXPECT_EQ(p.field(1).name, "Accept");
  EXPECT_EQ(p.field(1).value, "*/*");
  EXPECT_EQ(p.framing().kind, BodyFraming::Kind::kNone);
  EXPECT_TRUE(p.keep_alive());
  EXPECT_FALSE(p.expect_continue());
  // Zero-copy: the views point into the caller's buffer.
  EXPECT_EQ(p.target().data(), msg.data() + 4);
  HeaderMap map;
  p.AppendFieldsTo(map);
  EXPECT_EQ(map.Get("accept"), "*/*");
  EXPECT_EQ(StatusOf(msg), 0);
}

TEST(H1RequestParserTest, NeedsMoreUntilTheEmptyLine) {
  RequestParser p;
  EXPECT_EQ(p.Parse("GET / HTTP/1.1\r\nHost: h\r\n"), RequestParser::Result::kNeedMore);
  EXPECT_EQ(p.Parse("GET / HTTP/1.1\r\nHost: h\r\n\r"), RequestParser::Result::kNeedMore);
  EXPECT_EQ(p.Parse("GET / HTTP/1.1\r\nHost: h\r\n\r\nBODY"), RequestParser::Result::kComplete);
  EXPECT_EQ(p.head_bytes(), 27u);
  // Sticky until Reset.
  EXPECT_EQ(p.Parse("GET / HTTP/1.1\r\nHost: h\r\n\r\nBODY"), RequestParser::Result::kComplete);
  p.Reset();
  EXPECT_EQ(p.Parse("POST /x HTTP/1.0\r\n\r\n"), RequestParser::Result::kComplete);
  EXPECT_EQ(p.method(), Method::kPost);
  EXPECT_EQ(p.field_count(), 0u);
}

TEST(H1RequestParserTest, RebaseAfterTheCallerMovesTheBytes) {
  std::string a = "GET /r HTTP/1.1\r\nHost: h\r\n\r\n";
  RequestParser p;
  ASSERT_EQ(p.Parse(a), RequestParser::Result::kComplete);
  std::string b = a + "more";
  a.assign(a.size(), 'x');  // The old bytes are gone.
  p.Rebase(b);
  EXPECT_EQ(p.target(), "/r");
  EXPECT_EQ(p.host(), "h");
  EXPECT_EQ(p.target().data(), b.data() + 4);
}

TEST(H1RequestParserTest, AcceptedLinesAreNeverScannedAgain) {
  // White-box check of "rescan only new bytes": after the first call accepted two lines, the
  // second call gets different bytes in their place (a contract violation no caller may commit).
  // The parser must not look at them again: it still reports the spans it recorded.
  RequestParser p;
  const std::string first = "GET /a HTTP/1.1\r\nHost: h\r\n";
  ASSERT_EQ(p.Parse(first), RequestParser::Result::kNeedMore);
  std::string second(first.size(), '\x01');
  second += "X: 1\r\n\r\n";
  ASSERT_EQ(p.Parse(second), RequestParser::Result::kComplete);
  EXPECT_EQ(p.field_count(), 2u);
  EXPECT_EQ(p.field(1).name, "X");
  EXPECT_EQ(p.target(), "\x01\x01");  // The old span, over the new bytes.
}

TEST(H1RequestParserTest, ShrinkingInputIsRefused) {
  RequestParser p;
  ASSERT_EQ(p.Parse("GET / HTTP/1.1\r\nHo"), RequestParser::Result::kNeedMore);
  EXPECT_EQ(p.Parse("GET"), RequestParser::Result::kError);
  EXPECT_EQ(p.error_status(), 500);
}

// ---- CRLF only (400) ----
TEST(H1RequestParserTest, BareLfIsRejected) {
  EXPECT_EQ(StatusOf("GET / HTTP/1.1\nHost: h\r\n\r\n"), 400);
  EXPECT_EQ(StatusOf("GET / HTTP/1.1\r\nHost: h\n\r\n"), 400);
  EXPECT_EQ(StatusOf("GET / HTTP/1.1\r\nHost: h\r\n\n"), 400);
  EXPECT_EQ(ReasonOf("GET / HTTP/1.1\r\nHost: h\nX: 1\r\n\r\n"), "bare LF");
  EXPECT_EQ(StatusOf("\nGET / HTTP/1.1\r\nHost: h\r\n\r\n"), 400);
}

TEST(H1RequestParserTest, BareCrIsRejected) {
  EXPECT_EQ(StatusOf("GET / HTTP/1.1\rHost: h\r\n\r\n"), 400);
  EXPECT_EQ(StatusOf("GET / HTTP/1.1\r\nHost: h\r\r\n\r\n"), 400);
  EXPECT_EQ(StatusOf("GET / HTTP/1.1\r\nX: a\rb\r\nHost: h\r\n\r\n"), 400);
  EXPECT_EQ(StatusOf("GET / HTTP/1.1\r\nHost: h\r\n\r\r"), 400);
  EXPECT_EQ(ReasonOf("GET / HTTP/1.1\r\nX: a\rb\r\nHost: h\r\n\r\n"), "bare CR");
  EXPECT_EQ(ReasonOf("GET / HTTP/1.1\rHost: h\r\n\r\n"), "bare CR");
  // A CR at the very end may still be followed by LF.
  EXPECT_EQ(StatusOf("GET / HTTP/1.1\r\nHost: h\r"), -1);
}

// ---- Request line ≤ 8 KiB (414) ----
TEST(H1RequestParserTest, RequestLineLimit) {
  const std::string prefix = "GET /";
  const std::string suffix = " HTTP/1.1";
  const std::string at_limit =
      prefix + std::string(8192 - prefix.size() - suffix.size(), 'a') + suffix;
  ASSERT_EQ(at_limit.size(), 8192u);
  EXPECT_EQ(StatusOf(at_limit + "\r\nHost: h\r\n\r\n"), 0);
  const std::string over = prefix + std::string(8193 - prefix.size() - suffix.size(), 'a') + suffix;
  EXPECT_EQ(StatusOf(over + "\r\nHost: h\r\n\r\n"), 414);
  // Detected before the line ends: the peer cannot make us buffer more.
  RequestParser p;
  EXPECT_EQ(p.Parse(std::string(8192, 'A')), RequestParser::Result::kNeedMore);
  EXPECT_EQ(p.Parse(std::string(8193, 'A')), RequestParser::Result::kError);
  EXPECT_EQ(p.error_status(), 414);
  // Configurable.
  RequestLimits small;
  small.max_request_line = 16;
  EXPECT_EQ(StatusOf("GET /0123456789 HTTP/1.1\r\nHost: h\r\n\r\n", small), 414);
  EXPECT_EQ(StatusOf("GET /01 HTTP/1.1\r\nHost: h\r\n\r\n", small), 0);
}

// A bad byte past a limit gets the limit's status however the bytes arrive: had they stopped
// just before it, the limit would have been the error (found by h1_request_fuzz, which saw 400
// whole and 414 split).
TEST(H1RequestParserTest, BadByteBeyondALimitGetsTheLimitsStatus) {
  RequestLimits small;
  small.max_request_line = 16;
  small.max_header_section = 32;
  EXPECT_EQ(StatusOf("GET /0123456789abcdef\rX HTTP/1.1\r\nHost: h\r\n\r\n", small), 414);
  EXPECT_EQ(StatusOf("GET /0123456789abcdef\nX HTTP/1.1\r\nHost: h\r\n\r\n", small), 414);
  EXPECT_EQ(StatusOf("GET / HTTP/1.1\r\nX: 0123456789abcdefghijklmnopqrstuvwxyz\rb\r\n\r\n", small),
            431);
  // Within the limits the bad byte is the error.
  EXPECT_EQ(StatusOf("GET /01\rX HTTP/1.1\r\nHost: h\r\n\r\n", small), 400);
  EXPECT_EQ(StatusOf("GET / HTTP/1.1\r\nX: 01\rb\r\n\r\n", small), 400);
}

// ---- Header section ≤ 64 KiB, ≤ 100 fields (431) ----
TEST(H1RequestParserTest, HeaderSectionSizeLimit) {
  // Host line (9) + filler field line + final CRLF (2) == 65536 exactly.
  const std::string filler_name = "X-Filler: ";
  const size_t value_size = 65536 - 9 - 2 - filler_name.size() - 2;
  const std::string fields = filler_name + std::string(value_size, 'v') + "\r\n";
  EXPECT_EQ(StatusOf(Req(fields)), 0);
  EXPECT_EQ(StatusOf(Req("X-Filler: v" + std::string(value_size, 'v') + "\r\n")), 431);
  // Before the head ends, too.
  RequestParser p;
  EXPECT_EQ(p.Parse("GET / HTTP/1.1\r\nX: " + std::string(70000, 'v')),
            RequestParser::Result::kError);
  EXPECT_EQ(p.error_status(), 431);
}

TEST(H1RequestParserTest, FieldCountLimit) {
  std::string fields;
  for (int i = 0; i < 99; ++i) fields += "X-" + std::to_string(i) + ": v\r\n";
  EXPECT_EQ(StatusOf(Req(fields)), 0);  // 99 + Host = 100.
  EXPECT_EQ(StatusOf(Req(fields + "X-last: v\r\n")), 431);
  RequestLimits small;
  small.max_fields = 2;
  EXPECT_EQ(StatusOf(Req("A: 1\r\n"), small), 0);
  EXPECT_EQ(StatusOf(Req("A: 1\r\nB: 2\r\n"), small), 431);
}

// ---- Version (505 / 400) ----
TEST(H1RequestParserTest, Version) {
  EXPECT_EQ(StatusOf(Req("", "GET / HTTP/1.1")), 0);
  EXPECT_EQ(StatusOf(Req("", "GET / HTTP/1.0")), 0);
  EXPECT_EQ(StatusOf(Req("", "GET / HTTP/1.2")), 505);
  EXPECT_EQ(StatusOf(Req("", "GET / HTTP/2.0")), 505);
  EXPECT_EQ(StatusOf(Req("", "GET / HTTP/0.9")), 505);
  EXPECT_EQ(StatusOf(Req("", "PRI * HTTP/2.0")), 505);
  EXPECT_EQ(StatusOf(Req("", "GET / http/1.1")), 400);
  EXPECT_EQ(StatusOf(Req("", "GET / HTTP/1")), 400);
  EXPECT_EQ(StatusOf(Req("", "GET / HTTP/1.10")), 400);
  EXPECT_EQ(StatusOf(Req("", "GET / HTTP/1.1 ")), 400);
  EXPECT_EQ(StatusOf(Req("", "GET / HTTP/a.b")), 400);
  EXPECT_EQ(StatusOf(Req("", "GET /")), 400);  // HTTP/0.9 form.
  EXPECT_EQ(StatusOf(Req("", "GET / ")), 400);
}

// ---- Method is a token (400) ----
TEST(H1RequestParserTest, Method) {
  EXPECT_EQ(StatusOf(Req("", "G@T / HTTP/1.1")), 400);
  EXPECT_EQ(StatusOf(Req("", " / HTTP/1.1")), 400);
  EXPECT_EQ(StatusOf(Req("", "GET\t/ HTTP/1.1")), 400);
  EXPECT_EQ(StatusOf(Req("", std::string("G\0T / HTTP/1.1", 14))), 400);
  RequestParser p;
  ASSERT_EQ(p.Parse(Req("", "get / HTTP/1.1")), RequestParser::Result::kComplete);
  EXPECT_TRUE(p.method().is_extension());  // Case-sensitive (RFC 9110 §9.1).
  EXPECT_EQ(p.method().name(), "get");
}

// ---- Target: visible ASCII, no spaces (400) ----
TEST(H1RequestParserTest, Target) {
  EXPECT_EQ(StatusOf(Req("", "GET /a b HTTP/1.1")), 400);
  EXPECT_EQ(StatusOf(Req("", "GET  / HTTP/1.1")), 400);
  EXPECT_EQ(StatusOf(Req("", "GET /a\tb HTTP/1.1")), 400);
  EXPECT_EQ(StatusOf(Req("", "GET /a\x7f HTTP/1.1")), 400);
  EXPECT_EQ(StatusOf(Req("", "GET /\x80 HTTP/1.1")), 400);
  EXPECT_EQ(StatusOf(Req("", std::string("GET /\0 HTTP/1.1", 16))), 400);
  EXPECT_EQ(StatusOf(Req("", "GET /~!$&'()*+,;=:@%20?a=b#f HTTP/1.1")), 0);
  EXPECT_EQ(StatusOf(Req("", "OPTIONS * HTTP/1.1")), 0);
  EXPECT_EQ(StatusOf(Req("", "GET http://h/x HTTP/1.1")), 0);
}

// ---- Field names, colon, obs-fold (400) ----
TEST(H1RequestParserTest, FieldNames) {
  EXPECT_EQ(StatusOf(Req("X(y): 1\r\n")), 400);
  EXPECT_EQ(StatusOf(Req("X y: 1\r\n")), 400);
  EXPECT_EQ(StatusOf(Req(": 1\r\n")), 400);
  EXPECT_EQ(StatusOf(Req("NoColon\r\n")), 400);
  EXPECT_EQ(StatusOf(Req("X\x80: 1\r\n")), 400);
  EXPECT_EQ(StatusOf(Req("X-Ok_#$%&'*+-.^`|~9: 1\r\n")), 0);
}

TEST(H1RequestParserTest, WhitespaceBeforeColon) {
  EXPECT_EQ(StatusOf(Req("X-A : 1\r\n")), 400);
  EXPECT_EQ(StatusOf(Req("X-A\t: 1\r\n")), 400);
  EXPECT_EQ(StatusOf(Bare("Host : h\r\n")), 400);
  EXPECT_EQ(StatusOf(Req("X-A: 1\r\n")), 0);
  EXPECT_EQ(ReasonOf(Req("X-A : 1\r\n")), "whitespace before colon");
}

TEST(H1RequestParserTest, ObsFoldIsRejected) {
  EXPECT_EQ(StatusOf(Req("X-A: 1\r\n 2\r\n")), 400);
  EXPECT_EQ(StatusOf(Req("X-A: 1\r\n\t2\r\n")), 400);
  EXPECT_EQ(StatusOf(Bare(" Host: h\r\n")), 400);  // Whitespace after the request line.
  EXPECT_EQ(ReasonOf(Req("X-A: 1\r\n\t2: 3\r\n")), "obs-fold or whitespace before field name");
}

// ---- Values trimmed; CTLs other than HTAB (400) ----
TEST(H1RequestParserTest, FieldValues) {
  RequestParser p;
  const std::string msg = Req("X-A: \t a \t b\t \r\nX-E:\r\nX-F:   \r\n");  // Outlives the views.
  ASSERT_EQ(p.Parse(msg), RequestParser::Result::kComplete);
  EXPECT_EQ(p.field(1).value, "a \t b");
  EXPECT_EQ(p.field(2).value, "");
  EXPECT_EQ(p.field(3).value, "");
  EXPECT_EQ(StatusOf(Req(std::string("X-A: a\0b\r\n", 10))), 400);
  EXPECT_EQ(StatusOf(Req("X-A: a\x01"
                         "b\r\n")),
            400);
  EXPECT_EQ(StatusOf(Req("X-A: a\x7f\r\n")), 400);
  EXPECT_EQ(StatusOf(Req("X-A: a\x1b[0m\r\n")), 400);
  EXPECT_EQ(ReasonOf(Req("X-A: a\x01b\r\n")), "invalid character in field value");
  EXPECT_EQ(StatusOf(Req("X-A: caf\xc3\xa9\r\n")), 0);  // obs-text is allowed in values.
}

// The line scan tests eight bytes at a time for control bytes and tells the field parser whether
// a line holds any: a bad byte at every position of values long and short is still found, an HTAB
// still passes, and the request line's target keeps its own rule.
TEST(H1RequestParserTest, ControlBytesAtEveryPosition) {
  for (size_t len = 1; len <= 20; ++len) {
    for (size_t at = 0; at < len; ++at) {
      for (const char bad : {'\x01', '\x1f', '\x7f', '\0'}) {
        std::string value(len, 'v');
        value[at] = bad;
        EXPECT_EQ(ReasonOf(Req("X-A: " + value + "\r\n")), "invalid character in field value")
            << "len " << len << " at " << at;
        EXPECT_EQ(ReasonOf(Req("", "GET /" + value + " HTTP/1.1")), "invalid request target")
            << "len " << len << " at " << at;
      }
      std::string tabbed(len, 'v');
      if (at != 0 && at + 1 != len) tabbed[at] = '\t';  // Inside: part of the value.
      EXPECT_EQ(StatusOf(Req("X-A: " + tabbed + "\r\n")), 0) << "len " << len << " at " << at;
    }
  }
  EXPECT_EQ(ReasonOf(Req("", "GET /a\x01")), "malformed request line");
  EXPECT_EQ(ReasonOf(Req("", "G\x01T / HTTP/1.1")), "method is not a token");
  EXPECT_EQ(ReasonOf(Req("X\x01: 1\r\n")), "invalid character in field name");
}

// ---- Transfer-Encoding ----
TEST(H1RequestParserTest, TransferEncodingWithContentLength) {
  EXPECT_EQ(StatusOf(Req("Transfer-Encoding: chunked\r\nContent-Length: 5\r\n")), 400);
  EXPECT_EQ(StatusOf(Req("Content-Length: 5\r\nTransfer-Encoding: chunked\r\n")), 400);
  EXPECT_EQ(StatusOf(Req("Content-Length: 0\r\nTransfer-Encoding: chunked\r\n")), 400);
}

TEST(H1RequestParserTest, TransferEncodingOnHttp10) {
  EXPECT_EQ(StatusOf(Req("Transfer-Encoding: chunked\r\n", "POST / HTTP/1.0")), 400);
  EXPECT_EQ(StatusOf(Req("Transfer-Encoding: chunked\r\n", "POST / HTTP/1.1")), 0);
}

TEST(H1RequestParserTest, ChunkedExactlyOnceAndLast) {
  RequestParser p;
  ASSERT_EQ(p.Parse(Req("Transfer-Encoding: chunked\r\n")), RequestParser::Result::kComplete);
  EXPECT_EQ(p.framing().kind, BodyFraming::Kind::kChunked);
  EXPECT_EQ(StatusOf(Req("Transfer-Encoding: CHUNKED\r\n")), 0);
  EXPECT_EQ(StatusOf(Req("Transfer-Encoding: ,chunked,\r\n")), 0);  // Empty elements are ignored.
  EXPECT_EQ(StatusOf(Req("Transfer-Encoding: chunked, chunked\r\n")), 400);
  EXPECT_EQ(StatusOf(Req("Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n")), 400);
  EXPECT_EQ(StatusOf(Req("Transfer-Encoding: chunked, gzip\r\n")), 400);
  EXPECT_EQ(StatusOf(Req("Transfer-Encoding: chunked\r\nTransfer-Encoding: x\r\n")), 400);
  EXPECT_EQ(StatusOf(Req("Transfer-Encoding: chunked;q=1\r\n")), 400);
  EXPECT_EQ(StatusOf(Req("Transfer-Encoding:\r\n")), 400);
  EXPECT_EQ(StatusOf(Req("Transfer-Encoding: chu nked\r\n")), 400);
}

TEST(H1RequestParserTest, OtherFinalCodingIsNotImplemented) {
  EXPECT_EQ(StatusOf(Req("Transfer-Encoding: gzip\r\n")), 501);
  EXPECT_EQ(StatusOf(Req("Transfer-Encoding: identity\r\n")), 501);
  EXPECT_EQ(StatusOf(Req("Transfer-Encoding: xchunked\r\n")), 501);
  // Codings before chunked are not implemented either (we would hand the handler gzip bytes).
  EXPECT_EQ(StatusOf(Req("Transfer-Encoding: gzip, chunked\r\n")), 501);
  EXPECT_EQ(StatusOf(Req("Transfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n")), 501);
}

// ---- Content-Length ----
TEST(H1RequestParserTest, ContentLengthDigitsOnly) {
  RequestParser p;
  ASSERT_EQ(p.Parse(Req("Content-Length: 42\r\n", "POST / HTTP/1.1")),
            RequestParser::Result::kComplete);
  EXPECT_EQ(p.framing(), (BodyFraming{BodyFraming::Kind::kContentLength, 42}));
  EXPECT_EQ(StatusOf(Req("Content-Length: +5\r\n")), 400);
  EXPECT_EQ(StatusOf(Req("Content-Length: -5\r\n")), 400);
  EXPECT_EQ(StatusOf(Req("Content-Length: 0x5\r\n")), 400);
  EXPECT_EQ(StatusOf(Req("Content-Length: 5 5\r\n")), 400);
  EXPECT_EQ(StatusOf(Req("Content-Length: 1, 1\r\n")), 400);
  EXPECT_EQ(StatusOf(Req("Content-Length: 1,1\r\n")), 400);
  EXPECT_EQ(StatusOf(Req("Content-Length:\r\n")), 400);
  EXPECT_EQ(StatusOf(Req("Content-Length: 5e2\r\n")), 400);
  EXPECT_EQ(StatusOf(Req("Content-Length:  7 \r\n")), 0);  // OWS is trimmed.
}

TEST(H1RequestParserTest, DuplicateContentLength) {
  RequestParser p;
  ASSERT_EQ(p.Parse(Req("Content-Length: 5\r\ncontent-length: 5\r\n")),
            RequestParser::Result::kComplete);
  EXPECT_EQ(p.framing().content_length, 5u);
  EXPECT_EQ(StatusOf(Req("Content-Length: 5\r\nContent-Length: 6\r\n")), 400);
  EXPECT_EQ(StatusOf(Req("Content-Length: 5\r\nContent-Length: 05\r\n")), 400);
}

TEST(H1RequestParserTest, ContentLengthOverflowAndLimit) {
  EXPECT_EQ(StatusOf(Req("Content-Length: 18446744073709551616\r\n")), 400);
  EXPECT_EQ(StatusOf(Req("Content-Length: 99999999999999999999999999\r\n")), 400);
  EXPECT_EQ(StatusOf(Req("Content-Length: 18446744073709551615\r\n")), 413);
  EXPECT_EQ(StatusOf(Req("Content-Length: 10485761\r\n")), 413);
  EXPECT_EQ(StatusOf(Req("Content-Length: 10485760\r\n")), 0);
  RequestLimits small;
  small.max_content_length = 10;
  EXPECT_EQ(StatusOf(Req("Content-Length: 11\r\n"), small), 413);
}

// ---- Host ----
TEST(H1RequestParserTest, Host) {
  EXPECT_EQ(StatusOf(Req("Host: h\r\n")), 400);  // Same value twice.
  EXPECT_EQ(StatusOf(Req("host: other\r\n")), 400);
  EXPECT_EQ(StatusOf(Bare("")), 400);  // Missing on 1.1.
  EXPECT_EQ(StatusOf(Bare("", "GET / HTTP/1.0")), 0);
  EXPECT_EQ(StatusOf(Bare("Host:\r\n")), 0);  // Empty is allowed (RFC 9112 §3.2).
}

// ---- Leading empty lines ----
TEST(H1RequestParserTest, LeadingEmptyLines) {
  RequestParser p;
  const std::string msg = "\r\n\r\nGET / HTTP/1.1\r\nHost: h\r\n\r\n";
  ASSERT_EQ(p.Parse(msg), RequestParser::Result::kComplete);
  EXPECT_EQ(p.head_bytes(), msg.size());
  EXPECT_EQ(p.target(), "/");
  std::string eight;
  for (int i = 0; i < 8; ++i) eight += "\r\n";
  EXPECT_EQ(StatusOf(eight + Req("")), 0);
  EXPECT_EQ(StatusOf(eight + "\r\n" + Req("")), 400);
  EXPECT_EQ(StatusOf("\r\n\n" + Req("")), 400);
}

// ---- Framing, keep-alive, Expect ----
TEST(H1RequestParserTest, KeepAlive) {
  auto keep_alive = [](const std::string& msg) {
    RequestParser p;
    EXPECT_EQ(p.Parse(msg), RequestParser::Result::kComplete) << msg;
    return p.keep_alive();
  };
  EXPECT_TRUE(keep_alive(Req("")));
  EXPECT_FALSE(keep_alive(Req("Connection: close\r\n")));
  EXPECT_FALSE(keep_alive(Req("Connection: keep-alive, Close\r\n")));
  EXPECT_FALSE(keep_alive(Req("Connection: x\r\nConnection: close\r\n")));
  EXPECT_TRUE(keep_alive(Req("Connection: closed\r\n")));
  EXPECT_FALSE(keep_alive(Req("", "GET / HTTP/1.0")));
  EXPECT_TRUE(keep_alive(Req("Connection: Keep-Alive\r\n", "GET / HTTP/1.0")));
  EXPECT_FALSE(keep_alive(Req("Connection: keep-alive, close\r\n", "GET / HTTP/1.0")));
}

TEST(H1RequestParserTest, ExpectContinue) {
  auto expect = [](const std::string& msg) {
    RequestParser p;
    EXPECT_EQ(p.Parse(msg), RequestParser::Result::kComplete) << msg;
    return p.expect_continue();
  };
  EXPECT_TRUE(expect(Req("Expect: 100-continue\r\nContent-Length: 3\r\n", "PUT / HTTP/1.1")));
  EXPECT_TRUE(expect(Req("Expect: 100-Continue\r\n")));
  EXPECT_FALSE(expect(Req("Expect: 100-continue\r\n", "PUT / HTTP/1.0")));
  EXPECT_FALSE(expect(Req("Expect: 200-ok\r\n")));
  EXPECT_FALSE(expect(Req("")));
}

TEST(H1RequestParserTest, UpgradeIsIgnored) {
  RequestParser p;
  ASSERT_EQ(p.Parse(Req("Connection: Upgrade\r\nUpgrade: websocket\r\n")),
            RequestParser::Result::kComplete);
  EXPECT_EQ(p.framing().kind, BodyFraming::Kind::kNone);
  EXPECT_TRUE(p.keep_alive());
}

TEST(H1RequestParserTest, ErrorsAreSticky) {
  RequestParser p;
  EXPECT_EQ(p.Parse("GET / HTTP/1.1\n"), RequestParser::Result::kError);
  EXPECT_EQ(p.Parse("GET / HTTP/1.1\nHost: h\r\n\r\n"), RequestParser::Result::kError);
  EXPECT_EQ(p.error_status(), 400);
  EXPECT_EQ(p.error_reason(), "bare LF");
  p.Reset();
  EXPECT_EQ(p.Parse(Req("")), RequestParser::Result::kComplete);
}

}  // namespace
}  // namespace petrel::h1

namespace petrel::h1 {
namespace {

// Everything a parser reports, for comparing two parsers.
std::string Observed(const RequestParser& p, RequestParser::Result r) {
  std::string out = std::to_string(static_cast<int>(r));
  if (r == RequestParser::Result::kError) {
    return out + " " + std::to_string(p.error_status()) + " " + std::string(p.error_reason());
  }
  if (r != RequestParser::Result::kComplete) return out;
  out += " head=" + std::to_string(p.head_bytes());
  out += " method=" + std::string(p.method().name()) + "/" + std::string(p.method_token());
  out += " target=" + std::string(p.target());
  out += " version=" + std::to_string(static_cast<int>(p.version()));
  out += " host=" + std::string(p.host());
  out += " framing=" + std::to_string(static_cast<int>(p.framing().kind)) + "/" +
         std::to_string(p.framing().content_length);
  out += " keep_alive=" + std::to_string(p.keep_alive());
  out += " expect=" + std::to_string(p.expect_continue());
  for (size_t i = 0; i < p.field_count(); ++i) {
    out += " [" + std::string(p.field(i).name) + ":" + std::string(p.field(i).value) + "]";
  }
  return out;
}

// Feeds `msg` as a growing prefix, one byte more per call, as a connection would.
RequestParser::Result FeedByteByByte(RequestParser& p, const std::string& msg) {
  RequestParser::Result r = RequestParser::Result::kNeedMore;
  for (size_t n = 1; n <= msg.size() && r == RequestParser::Result::kNeedMore; ++n) {
    r = p.Parse(absl::string_view(msg).substr(0, n));
  }
  return r;
}

// Reset() restores every member by hand (it runs once per request); a member it forgets shows
// up as a request parsed differently after some other request than by a fresh parser.
TEST(H1RequestParserTest, ResetParserMatchesAFreshOneAfterAnyRequest) {
  const std::vector<std::string> corpus = {
      Req(""),
      Req("Accept: */*\r\nX-Long: " + std::string(300, 'v') + "\r\n"),
      Req("Content-Length: 12\r\n", "POST /upload?x=1 HTTP/1.1"),
      Req("Transfer-Encoding: gzip, chunked\r\n", "PUT /t HTTP/1.1"),
      Req("Transfer-Encoding: gzip\r\n", "PUT /t HTTP/1.1"),  // 501
      Req("Expect: 100-continue\r\nContent-Length: 5\r\n", "POST / HTTP/1.1"),
      Req("Connection: close\r\n"),
      Bare("Connection: keep-alive\r\n", "GET /old HTTP/1.0"),
      Bare("Host: a\r\nHost: b\r\n"),  // 400
      Req("Content-Length: 1\r\nContent-Length: 2\r\n", "POST / HTTP/1.1"),
      "\r\n\r\nOPTIONS * HTTP/1.1\r\nHost: h\r\n\r\n",
      Req("", "PATCH /p HTTP/1.1"),
      Req("", "CUSTOM-METHOD /c HTTP/1.1"),
      Req("Bad Name: x\r\n"),               // 400
      "GET / HTTP/9.9\r\nHost: h\r\n\r\n",  // 505
      Req("X: a\rb\r\n"),                   // 400
  };
  for (const std::string& before : corpus) {
    for (const std::string& msg : corpus) {
      SCOPED_TRACE("after: " + absl::CEscape(before) + "\nparsing: " + absl::CEscape(msg));
      RequestParser fresh;
      const std::string want = Observed(fresh, fresh.Parse(msg));
      RequestParser reused;
      reused.Parse(before);
      reused.Reset();
      EXPECT_EQ(Observed(reused, reused.Parse(msg)), want);
      RequestParser incremental;
      FeedByteByByte(incremental, before);
      incremental.Reset();
      EXPECT_EQ(Observed(incremental, FeedByteByByte(incremental, msg)), want);
    }
  }
}

}  // namespace
}  // namespace petrel::h1
