// The chunked body decoder: framing rules of DESIGN §7 with their statuses, trailers, limits,
// and identical results for every way the input can be split.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "http/h1/chunked_decoder.h"

namespace petrel::h1 {
namespace {

// Feeds `pieces` one after another as a connection would (append, decode until it needs more,
// drop what was consumed) and describes the outcome: body, trailers, leftover, status.
std::string Feed(const std::vector<std::string>& pieces, const ChunkedLimits& limits = {}) {
  ChunkedDecoder d(limits);
  std::string pending;
  std::string body;
  std::string done;
  for (const std::string& piece : pieces) {
    pending += piece;
    while (done.empty()) {
      const ChunkedDecoder::Result r = d.Decode(pending);
      if (r.status == ChunkedDecoder::Status::kData) {
        EXPECT_FALSE(r.data.empty());
        // Zero-copy: the data lies inside the consumed prefix of the input.
        EXPECT_GE(r.data.data(), pending.data());
        EXPECT_LE(r.data.data() + r.data.size(), pending.data() + r.consumed);
        body.append(r.data.data(), r.data.size());
      }
      EXPECT_LE(r.consumed, pending.size());
      pending.erase(0, r.consumed);
      if (r.status == ChunkedDecoder::Status::kError) {
        return absl::StrCat("error ", d.error_status(), " ", d.error_reason());
      }
      if (r.status == ChunkedDecoder::Status::kDone) {
        std::string s = absl::StrCat("done body=", body, " bytes=", d.body_bytes());
        for (const HeaderField f : d.trailers())
          absl::StrAppend(&s, " [", f.name, "|", f.value, "]");
        absl::StrAppend(&s, " dropped=", d.dropped_trailers(), " rest=");
        done = s;  // What is still to come is the rest, too.
        break;
      }
      if (r.status == ChunkedDecoder::Status::kNeedMore) break;
    }
  }
  if (!done.empty()) return done + pending;
  return absl::StrCat("need-more body=", body);
}

// Whole, split at every byte, and byte by byte must agree.
std::string RunAllWays(const std::string& input, const ChunkedLimits& limits = {}) {
  const std::string whole = Feed({input}, limits);
  for (size_t at = 0; at <= input.size(); ++at) {
    EXPECT_EQ(Feed({input.substr(0, at), input.substr(at)}, limits), whole) << "split at " << at;
  }
  std::vector<std::string> bytes;
  for (char c : input) bytes.emplace_back(1, c);
  EXPECT_EQ(Feed(bytes, limits), whole) << "byte by byte";
  return whole;
}

int StatusOf(const std::string& input, const ChunkedLimits& limits = {}) {
  const std::string r = RunAllWays(input, limits);
  if (r.rfind("done", 0) == 0) return 0;
  if (r.rfind("need-more", 0) == 0) return -1;
  return std::stoi(r.substr(6, 3));
}

TEST(H1ChunkedDecoderTest, DecodesChunksExtensionsAndTrailers) {
  EXPECT_EQ(RunAllWays("5;name=value\r\nhello\r\n6;a;b=\"q r\"\r\n world\r\n"
                       "A\r\n0123456789\r\n0;last\r\nX-Sum: abc\r\nX-Two:  2 \r\n\r\nNEXT"),
            "done body=hello world0123456789 bytes=21 [X-Sum|abc] [X-Two|2] dropped=0 rest=NEXT");
  EXPECT_EQ(RunAllWays("0\r\n\r\n"), "done body= bytes=0 dropped=0 rest=");
  EXPECT_EQ(RunAllWays("3 ;x\r\nabc\r\n0\r\n\r\n"), "done body=abc bytes=3 dropped=0 rest=");
  EXPECT_EQ(RunAllWays("3\r\nabc\r\n"), "need-more body=abc");
}

TEST(H1ChunkedDecoderTest, HexDigitsAndOverflow) {
  EXPECT_EQ(RunAllWays("00000000000000a\r\n0123456789\r\n0\r\n\r\n"),
            "done body=0123456789 bytes=10 dropped=0 rest=");
  EXPECT_EQ(RunAllWays("aB\r\n" + std::string(0xab, 'x') + "\r\n0\r\n\r\n").substr(0, 4), "done");
  // 16 digits are accepted by the parser (and hit the body limit); 17 are not.
  EXPECT_EQ(StatusOf("ffffffffffffffff\r\n"), 413);
  EXPECT_EQ(StatusOf("0000000000000000\r\n\r\n"), 0);
  EXPECT_EQ(StatusOf("00000000000000000\r\n\r\n"), 400);
  EXPECT_EQ(StatusOf("ffffffffffffffffff\r\n"), 400);
  EXPECT_EQ(StatusOf("10000000000000000\r\n"), 400);
}

TEST(H1ChunkedDecoderTest, MalformedSizeLine) {
  EXPECT_EQ(StatusOf("\r\n"), 400);  // No digits.
  EXPECT_EQ(StatusOf(";x\r\n"), 400);
  EXPECT_EQ(StatusOf("-1\r\n"), 400);
  EXPECT_EQ(StatusOf("+1\r\n"), 400);
  EXPECT_EQ(StatusOf("0x5\r\n"), 400);
  EXPECT_EQ(StatusOf("5 \r\nhello\r\n0\r\n\r\n"), 400);  // BWS only before ';'.
  EXPECT_EQ(StatusOf(" 5\r\nhello\r\n0\r\n\r\n"), 400);
  EXPECT_EQ(StatusOf("5\nhello\r\n0\r\n\r\n"), 400);  // Bare LF.
  EXPECT_EQ(StatusOf("5\rhello\r\n0\r\n\r\n"), 400);  // Bare CR.
  EXPECT_EQ(StatusOf("5;a\nb\r\nhello\r\n"), 400);    // Bare LF inside an extension.
  EXPECT_EQ(StatusOf(std::string("5;a\0\r\nhello\r\n", 13)), 400);
  EXPECT_EQ(StatusOf("5;a\tb=c\r\nhello\r\n0\r\n\r\n"), 0);
  EXPECT_EQ(Feed({"5\nhello"}), "error 400 bare LF in chunk size line");
  EXPECT_EQ(Feed({"5\rhello"}), "error 400 bare CR in chunk size line");
}

TEST(H1ChunkedDecoderTest, SizeLineLimit) {
  const std::string ext_at_limit = ";" + std::string(1024 - 1 - 1 - 2, 'e');  // 5 + ext + CRLF.
  EXPECT_EQ(StatusOf("5" + ext_at_limit + "\r\nhello\r\n0\r\n\r\n"), 0);
  EXPECT_EQ(StatusOf("5" + ext_at_limit + "e\r\nhello\r\n0\r\n\r\n"), 400);
  // Bounded before the line ends.
  EXPECT_EQ(Feed({"5;" + std::string(5000, 'e')}).substr(0, 9), "error 400");
}

TEST(H1ChunkedDecoderTest, StrictCrlfAfterData) {
  EXPECT_EQ(StatusOf("5\r\nhelloX\r\n0\r\n\r\n"), 400);
  EXPECT_EQ(StatusOf("5\r\nhelloX\n0\r\n\r\n"), 400);  // The CR itself is required.
  EXPECT_EQ(StatusOf("5\r\nhello\rX0\r\n\r\n"), 400);  // And the LF.
  EXPECT_EQ(StatusOf("5\r\nhello\n0\r\n\r\n"), 400);
  EXPECT_EQ(StatusOf("5\r\nhello\rX0\r\n\r\n"), 400);
  EXPECT_EQ(StatusOf("5\r\nhello\r\n0\r\n\n"), 400);
  EXPECT_EQ(StatusOf("5\r\nhello\r\n0\r\nX: 1\n\r\n"), 400);
}

TEST(H1ChunkedDecoderTest, BodyLimit) {
  ChunkedLimits limits;
  limits.max_body = 10;
  EXPECT_EQ(StatusOf("5\r\nhello\r\n5\r\nworld\r\n0\r\n\r\n", limits), 0);
  EXPECT_EQ(StatusOf("5\r\nhello\r\n6\r\nworld!\r\n0\r\n\r\n", limits), 413);
  EXPECT_EQ(StatusOf("b\r\n", limits), 413);
}

TEST(H1ChunkedDecoderTest, TrailerLimits) {
  // "0\r\n" then a trailer line and the final CRLF: 8192 bytes of trailer section exactly.
  const std::string name = "X-T: ";
  const std::string at_limit = name + std::string(8192 - name.size() - 2 - 2, 'v') + "\r\n";
  EXPECT_EQ(StatusOf("0\r\n" + at_limit + "\r\n"), 0);
  EXPECT_EQ(StatusOf("0\r\n" + name + "v" + at_limit.substr(name.size()) + "\r\n"), 431);
  // Bounded before the line ends.
  EXPECT_EQ(Feed({"0\r\nX: " + std::string(9000, 'v')}).substr(0, 9), "error 431");
  std::string many;
  for (int i = 0; i < 100; ++i) many += "T" + std::to_string(i) + ": v\r\n";
  EXPECT_EQ(StatusOf("0\r\n" + many + "\r\n"), 0);
  EXPECT_EQ(StatusOf("0\r\n" + many + "T: v\r\n\r\n"), 431);
}

// A bad byte past the trailer limit gets 431 however the bytes arrive (found by
// chunked_body_fuzz, which saw 400 whole and 431 split).
TEST(H1ChunkedDecoderTest, BadByteBeyondTheTrailerLimitGets431) {
  ChunkedLimits small;
  small.max_trailer_section = 16;
  EXPECT_EQ(StatusOf("0\r\nX: 0123456789abcdef\rz\r\n\r\n", small), 431);
  EXPECT_EQ(StatusOf("0\r\nX: 0123456789abcdef\nz\r\n\r\n", small), 431);
  EXPECT_EQ(StatusOf("0\r\nX: 01\rz\r\n\r\n", small), 400);
}

TEST(H1ChunkedDecoderTest, TrailersAreValidatedLikeFields) {
  EXPECT_EQ(StatusOf("0\r\nX : 1\r\n\r\n"), 400);
  EXPECT_EQ(StatusOf("0\r\nX(: 1\r\n\r\n"), 400);
  EXPECT_EQ(StatusOf("0\r\nX: 1\r\n 2\r\n\r\n"), 400);  // obs-fold.
  EXPECT_EQ(StatusOf(std::string("0\r\nX: a\0\r\n\r\n", 12)), 400);
  EXPECT_EQ(StatusOf("0\r\nX: a\rb\r\n\r\n"), 400);
  EXPECT_EQ(StatusOf("0\r\nNoColon\r\n\r\n"), 400);
}

TEST(H1ChunkedDecoderTest, ForbiddenTrailersAreDropped) {
  EXPECT_EQ(RunAllWays("0\r\nContent-Length: 5\r\nX-Ok: 1\r\nTransfer-Encoding: chunked\r\n"
                       "HOST: evil\r\nAuthorization: x\r\n\r\n"),
            "done body= bytes=0 [X-Ok|1] dropped=4 rest=");
  EXPECT_TRUE(IsForbiddenTrailer("Content-Length"));
  EXPECT_TRUE(IsForbiddenTrailer("set-cookie"));
  EXPECT_FALSE(IsForbiddenTrailer("X-Checksum"));
}

TEST(H1ChunkedDecoderTest, ErrorsAndDoneAreSticky) {
  ChunkedDecoder d;
  EXPECT_EQ(d.Decode("zz").status, ChunkedDecoder::Status::kError);
  EXPECT_EQ(d.Decode("0\r\n\r\n").status, ChunkedDecoder::Status::kError);
  ChunkedDecoder done;
  EXPECT_EQ(done.Decode("0\r\n\r\n").status, ChunkedDecoder::Status::kDone);
  const ChunkedDecoder::Result again = done.Decode("5\r\nhello\r\n");
  EXPECT_EQ(again.status, ChunkedDecoder::Status::kDone);
  EXPECT_EQ(again.consumed, 0u);
}

}  // namespace
}  // namespace petrel::h1
