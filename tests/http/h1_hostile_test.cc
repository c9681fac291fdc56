// Hostile input for the h1 parser and chunked decoder: random bytes and mutations, megabytes of
// junk that the limits must cut off early, and request-smuggling vectors.
#include <random>
#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "h1_test_util.h"
#include "http/h1/chunked_decoder.h"
#include "http/h1/request_parser.h"

namespace petrel::h1 {
namespace {

using testing::ParseAllWays;
using testing::ParseBytewise;
using testing::ParseWhole;
using testing::StatusOf;

const std::set<int> kStatuses = {400, 413, 414, 431, 501, 505};

void ExpectSane(const std::string& msg) {
  RequestParser p;
  const RequestParser::Result r = p.Parse(msg);
  if (r == RequestParser::Result::kError) {
    EXPECT_TRUE(kStatuses.count(p.error_status())) << p.error_status();
    EXPECT_FALSE(p.error_reason().empty());
  } else if (r == RequestParser::Result::kComplete) {
    EXPECT_LE(p.head_bytes(), msg.size());
  }
  EXPECT_EQ(ParseBytewise(msg), ParseWhole(msg)) << msg;
}

TEST(H1HostileTest, RandomBytes) {
  std::mt19937 rng(1);
  for (int i = 0; i < 2000; ++i) {
    std::string msg(std::uniform_int_distribution<size_t>(0, 200)(rng), '\0');
    for (char& c : msg) c = static_cast<char>(std::uniform_int_distribution<int>(0, 255)(rng));
    ExpectSane(msg);
  }
}

TEST(H1HostileTest, RandomMutationsOfAValidRequest) {
  const std::string valid =
      "POST /p?q HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\nConnection: close\r\n"
      "Transfer-Encoding: chunked\r\nExpect: 100-continue\r\n\r\n";
  const std::string alphabet = std::string("\r\n \t:,;\0\x7f\x80Hh01-+", 17);
  std::mt19937 rng(2);
  for (int i = 0; i < 3000; ++i) {
    std::string msg = valid;
    const int edits = std::uniform_int_distribution<int>(1, 4)(rng);
    for (int e = 0; e < edits; ++e) {
      const size_t at = std::uniform_int_distribution<size_t>(0, msg.size() - 1)(rng);
      const char c = alphabet[std::uniform_int_distribution<size_t>(0, alphabet.size() - 1)(rng)];
      switch (std::uniform_int_distribution<int>(0, 2)(rng)) {
        case 0:
          msg[at] = c;
          break;
        case 1:
          msg.insert(at, 1, c);
          break;
        default:
          msg.erase(at, 1);
          break;
      }
    }
    ExpectSane(msg);
  }
}

TEST(H1HostileTest, RandomChunkedBodies) {
  const std::string alphabet = "0123456789abcdefABCDEFxX;= \t\r\n\r\n\r\n";
  std::mt19937 rng(3);
  for (int i = 0; i < 3000; ++i) {
    std::string input(std::uniform_int_distribution<size_t>(0, 64)(rng), ' ');
    for (char& c : input) {
      c = alphabet[std::uniform_int_distribution<size_t>(0, alphabet.size() - 1)(rng)];
    }
    ChunkedDecoder whole;
    ChunkedDecoder bytewise;
    // Whole, then byte by byte (consuming as a caller would): same final status.
    absl::string_view rest = input;
    ChunkedDecoder::Result r;
    do {
      r = whole.Decode(rest);
      ASSERT_LE(r.consumed, rest.size());
      rest.remove_prefix(r.consumed);
    } while (r.status == ChunkedDecoder::Status::kData);
    std::string pending;
    ChunkedDecoder::Result b;
    for (char c : input) {
      pending.push_back(c);
      do {
        b = bytewise.Decode(pending);
        pending.erase(0, b.consumed);
      } while (b.status == ChunkedDecoder::Status::kData);
      if (b.status != ChunkedDecoder::Status::kNeedMore) break;
    }
    if (input.empty()) continue;
    EXPECT_EQ(static_cast<int>(b.status), static_cast<int>(r.status)) << input;
    EXPECT_EQ(bytewise.error_status(), whole.error_status()) << input;
  }
}

// Feeds `junk` in 4 KiB reads and returns the buffered size when the parser gave up.
size_t BytesBufferedAtError(const std::string& junk, int expected_status) {
  RequestParser p;
  std::string buffered;
  for (size_t at = 0; at < junk.size(); at += 4096) {
    buffered.append(junk, at, 4096);
    const RequestParser::Result r = p.Parse(buffered);
    if (r == RequestParser::Result::kError) {
      EXPECT_EQ(p.error_status(), expected_status);
      return buffered.size();
    }
    EXPECT_EQ(r, RequestParser::Result::kNeedMore);
  }
  ADD_FAILURE() << "no error after " << junk.size() << " bytes";
  return junk.size();
}

TEST(H1HostileTest, AMegabyteOfJunkIsCutOffByTheLimits) {
  const size_t mb = 1 << 20;
  std::string fields = "GET / HTTP/1.1\r\n";
  while (fields.size() < mb) fields += "X-Junk-Header-Name: some junk value\r\n";
  // Too many fields long before 64 KiB.
  EXPECT_LE(BytesBufferedAtError(fields, 431), 8192u);
  // A single huge field: cut off at the section limit.
  const std::string huge = "GET / HTTP/1.1\r\nX: " + std::string(mb, 'v');
  EXPECT_LE(BytesBufferedAtError(huge, 431), 64u * 1024 + 4096 + 32);
  // Large fields: the section limit.
  std::string big = "GET / HTTP/1.1\r\n";
  while (big.size() < mb) big += "X-Big: " + std::string(2000, 'v') + "\r\n";
  EXPECT_LE(BytesBufferedAtError(big, 431), 64u * 1024 + 4096 + 32);
  // No line end at all: the request-line limit.
  EXPECT_LE(BytesBufferedAtError(std::string(mb, 'A'), 414), 8192u + 4096);
  // Empty lines forever.
  std::string crlfs;
  while (crlfs.size() < mb) crlfs += "\r\n";
  EXPECT_LE(BytesBufferedAtError(crlfs, 400), 4096u);
  // Random non-CRLF bytes.
  std::mt19937 rng(4);
  std::string noise(mb, 'x');
  for (char& c : noise) c = static_cast<char>(std::uniform_int_distribution<int>(14, 255)(rng));
  EXPECT_LE(BytesBufferedAtError(noise, 414), 8192u + 4096);
}

TEST(H1HostileTest, HugeChunkSizes) {
  ChunkedDecoder d;
  EXPECT_EQ(d.Decode("ffffffffffffffffff\r\n").status, ChunkedDecoder::Status::kError);
  EXPECT_EQ(d.error_status(), 400);
  ChunkedDecoder e;
  EXPECT_EQ(e.Decode("fffffffffffffff\r\n").status, ChunkedDecoder::Status::kError);
  EXPECT_EQ(e.error_status(), 413);
  // A 16-digit size that would wrap a 64-bit running total.
  ChunkedLimits unlimited;
  unlimited.max_body = UINT64_MAX;
  ChunkedDecoder g(unlimited);
  ASSERT_EQ(g.Decode("1\r\na\r\n").status, ChunkedDecoder::Status::kData);
  EXPECT_EQ(g.Decode("\r\nffffffffffffffff\r\n").status, ChunkedDecoder::Status::kError);
  EXPECT_EQ(g.error_status(), 413);
}

std::string Post(const std::string& fields) {
  return "POST / HTTP/1.1\r\nHost: h\r\n" + fields + "\r\n";
}

TEST(H1HostileTest, ContentLengthVectors) {
  EXPECT_EQ(StatusOf(Post("Content-Length: -1\r\n")), 400);
  EXPECT_EQ(StatusOf(Post("Content-Length: +5\r\n")), 400);
  EXPECT_EQ(StatusOf(Post("Content-Length: 0x5\r\n")), 400);
  EXPECT_EQ(StatusOf(Post("Content-Length: 5\r\nContent-Length: 6\r\n")), 400);
  EXPECT_EQ(StatusOf(Post("Content-Length: 5, 6\r\n")), 400);
  EXPECT_EQ(StatusOf(Post("Content-Length: 1, 1\r\n")), 400);
  EXPECT_EQ(StatusOf(Post("Content-Length: \"5\"\r\n")), 400);
  EXPECT_EQ(StatusOf(Post("Content-Length: 5\x0b\r\n")), 400);
}

TEST(H1HostileTest, TransferEncodingVectors) {
  EXPECT_EQ(StatusOf(Post("Transfer-Encoding: chunked, identity\r\n")), 400);
  EXPECT_EQ(StatusOf(Post("Transfer-Encoding: identity\r\n")), 501);
  EXPECT_EQ(StatusOf(Post("Transfer-Encoding: xchunked\r\n")), 501);
  EXPECT_EQ(StatusOf(Post("Transfer-Encoding: chunkedx\r\n")), 501);
  EXPECT_EQ(StatusOf(Post("Transfer-Encoding: \"chunked\"\r\n")), 400);
  EXPECT_EQ(StatusOf(Post("Transfer-Encoding : chunked\r\n")), 400);
  EXPECT_EQ(StatusOf(Post("Transfer-Encoding\t: chunked\r\n")), 400);
  EXPECT_EQ(StatusOf(Post(" Transfer-Encoding: chunked\r\n")), 400);
  EXPECT_EQ(StatusOf(Post("X: 1\r\n Transfer-Encoding: chunked\r\n")), 400);
  EXPECT_EQ(StatusOf(Post("Transfer-Encoding: chunked\r\nTransfer-Encoding: x\r\n")), 400);
  EXPECT_EQ(StatusOf(Post("Transfer-Encoding: x\r\nTransfer-Encoding: chunked\r\n")), 501);
  EXPECT_EQ(StatusOf(Post("Transfer-Encoding: chunked\x0b\r\n")), 400);
  EXPECT_EQ(StatusOf(Post("Transfer-Encoding: chun\tked\r\n")), 400);
  EXPECT_EQ(StatusOf(Post("Transfer_Encoding: chunked\r\nContent-Length: 3\r\n")), 0);
  // Valid spellings: OWS around the value, any case.
  for (const char* te : {"Transfer-Encoding:\tchunked\r\n", "Transfer-Encoding:chunked\r\n",
                         "Transfer-Encoding:   chunked \t\r\n", "transfer-encoding: Chunked\r\n"}) {
    RequestParser p;
    ASSERT_EQ(p.Parse(Post(te)), RequestParser::Result::kComplete) << te;
    EXPECT_EQ(p.framing().kind, BodyFraming::Kind::kChunked) << te;
  }
}

TEST(H1HostileTest, SmugglingClTe) {
  // CL.TE / TE.CL: both framings in one request, in either order, with obfuscations.
  EXPECT_EQ(StatusOf(Post("Content-Length: 6\r\nTransfer-Encoding: chunked\r\n")), 400);
  EXPECT_EQ(StatusOf(Post("Transfer-Encoding: chunked\r\nContent-Length: 3\r\n")), 400);
  EXPECT_EQ(StatusOf(Post("Content-Length: 6\r\nTransfer-Encoding:\tchunked\r\n")), 400);
  EXPECT_EQ(StatusOf(Post("Content-Length: 6\r\ntransfer-encoding: CHUNKED\r\n")), 400);
  EXPECT_EQ(StatusOf(Post("Content-Length: 6\r\nTransfer-Encoding: xchunked\r\n")), 400);
  EXPECT_EQ(StatusOf(Post("Content-Length : 6\r\nTransfer-Encoding: chunked\r\n")), 400);
}

TEST(H1HostileTest, HeadersThatMustNotParse) {
  EXPECT_EQ(StatusOf("GET / HTTP/1.1\r\nHost: h\r\nHost: h\r\n\r\n"), 400);
  EXPECT_EQ(StatusOf("GET / HTTP/1.1\r\nHost: h\r\nX\"y: 1\r\n\r\n"), 400);
  EXPECT_EQ(StatusOf("GET / HTTP/1.1\r\nHost: h\r\nX@y: 1\r\n\r\n"), 400);
  EXPECT_EQ(StatusOf("GET / HTTP/1.1\r\nHost: h\r\nX[y]: 1\r\n\r\n"), 400);
  EXPECT_EQ(StatusOf(std::string("GET / HTTP/1.1\r\nHost: h\r\nX: a\0b\r\n\r\n", 35)), 400);
  EXPECT_EQ(StatusOf(std::string("GET / HTTP/1.1\r\nHost: h\0\r\n\r\n", 27)), 400);
  std::string fields;
  for (int i = 0; i < 100; ++i) fields += "F" + std::to_string(i) + ": v\r\n";
  EXPECT_EQ(StatusOf("GET / HTTP/1.1\r\nHost: h\r\n" + fields + "\r\n"), 431);  // 101 fields.
}

}  // namespace
}  // namespace petrel::h1
