// A keep-alive connection's worth of requests (GET; Content-Length POST; chunked POST with
// extensions and trailers; Connection: close) run through head parser and body decoders the way
// the h1 engine drives them, fed whole, split at every byte boundary, byte by byte and in random
// pieces: the results must be identical every time (DESIGN §10).
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "h1_test_util.h"
#include "http/h1/body_framing.h"
#include "http/h1/chunked_decoder.h"
#include "http/h1/request_parser.h"

namespace petrel::h1 {
namespace {

const std::string kStream =
    "GET /a?x=1 HTTP/1.1\r\nHost: example.com\r\nUser-Agent: t\r\n\r\n"
    "POST /cl HTTP/1.1\r\nHost: example.com\r\nContent-Length: 11\r\n\r\nhello world"
    "\r\n"  // A stray CRLF after a body, which RFC 9112 §2.2 lets us ignore.
    "POST /chunked HTTP/1.1\r\nHost: example.com\r\nTransfer-Encoding: chunked\r\n\r\n"
    "5;name=value\r\nhello\r\n6;a;b=\"q\"\r\n world\r\n0\r\nX-Checksum: abc\r\nX-Other: 1\r\n\r\n"
    "GET /last HTTP/1.1\r\nHost: example.com\r\nConnection: close\r\n\r\n";

// Feeds `pieces` as a connection would: append to the input buffer, parse a head, consume it,
// decode its body zero-copy, consume that, Reset, repeat. Returns one line per event.
std::vector<std::string> Drive(const std::vector<std::string>& pieces) {
  std::vector<std::string> events;
  RequestParser parser;
  std::optional<FixedLengthBody> fixed;
  std::optional<ChunkedDecoder> chunked;
  std::string buffer;  // The connection's input; erasing the front moves the bytes.
  std::string body;
  auto finish = [&](std::string what) {
    events.push_back(absl::StrCat("body=", body, what));
    body.clear();
    fixed.reset();
    chunked.reset();
    parser.Reset();
  };
  for (const std::string& piece : pieces) {
    buffer += piece;
    bool progress = true;
    while (progress) {
      progress = false;
      if (fixed) {
        const absl::string_view data = fixed->Take(buffer);
        body.append(data.data(), data.size());
        buffer.erase(0, data.size());
        if (fixed->done()) {
          finish("");
          progress = true;
        }
      } else if (chunked) {
        const ChunkedDecoder::Result r = chunked->Decode(buffer);
        if (r.status == ChunkedDecoder::Status::kData) body.append(r.data.data(), r.data.size());
        buffer.erase(0, r.consumed);
        if (r.status == ChunkedDecoder::Status::kError) {
          events.push_back(absl::StrCat("body error ", chunked->error_status()));
          return events;
        }
        if (r.status == ChunkedDecoder::Status::kDone) {
          std::string trailers;
          for (const HeaderField f : chunked->trailers()) {
            absl::StrAppend(&trailers, " [", f.name, "|", f.value, "]");
          }
          finish(trailers);
          progress = true;
        } else if (r.status == ChunkedDecoder::Status::kData) {
          progress = true;
        }
      } else {
        const RequestParser::Result r = parser.Parse(buffer);
        if (r == RequestParser::Result::kNeedMore) break;
        events.push_back(testing::Describe(parser, r));
        if (r == RequestParser::Result::kError) return events;
        const BodyFraming framing = parser.framing();
        buffer.erase(0, parser.head_bytes());  // The head's views die here; Describe copied them.
        switch (framing.kind) {
          case BodyFraming::Kind::kNone:
            finish("");
            break;
          case BodyFraming::Kind::kContentLength:
            fixed.emplace(framing.content_length);
            if (fixed->done()) finish("");
            break;
          case BodyFraming::Kind::kChunked:
            chunked.emplace();
            break;
        }
        progress = true;
      }
    }
  }
  events.push_back(absl::StrCat("pending=", buffer));
  return events;
}

TEST(H1KeepAliveSequenceTest, WholeStream) {
  const std::vector<std::string> events = Drive({kStream});
  ASSERT_EQ(events.size(), 9u);
  EXPECT_EQ(events[0],
            "complete bytes=57 method=GET target=/a?x=1 version=HTTP/1.1 host=example.com "
            "[Host|example.com] [User-Agent|t] framing=0:0 keep_alive=1 expect=0");
  EXPECT_EQ(events[1], "body=");
  EXPECT_EQ(events[2],
            "complete bytes=60 method=POST target=/cl version=HTTP/1.1 host=example.com "
            "[Host|example.com] [Content-Length|11] framing=1:11 keep_alive=1 expect=0");
  EXPECT_EQ(events[3], "body=hello world");
  EXPECT_EQ(events[4],
            // 2 of them are the stray CRLF before the request line.
            "complete bytes=75 method=POST target=/chunked version=HTTP/1.1 host=example.com "
            "[Host|example.com] [Transfer-Encoding|chunked] framing=2:0 keep_alive=1 expect=0");
  EXPECT_EQ(events[5], "body=hello world [X-Checksum|abc] [X-Other|1]");
  EXPECT_EQ(events[6],
            "complete bytes=60 method=GET target=/last version=HTTP/1.1 host=example.com "
            "[Host|example.com] [Connection|close] framing=0:0 keep_alive=0 expect=0");
  EXPECT_EQ(events[7], "body=");
  EXPECT_EQ(events[8], "pending=");
}

TEST(H1KeepAliveSequenceTest, SplitAtEveryByteBoundary) {
  const std::vector<std::string> whole = Drive({kStream});
  for (size_t at = 0; at <= kStream.size(); ++at) {
    EXPECT_EQ(Drive({kStream.substr(0, at), kStream.substr(at)}), whole) << "split at " << at;
  }
}

TEST(H1KeepAliveSequenceTest, ByteByByte) {
  std::vector<std::string> bytes;
  for (char c : kStream) bytes.emplace_back(1, c);
  EXPECT_EQ(Drive(bytes), Drive({kStream}));
}

TEST(H1KeepAliveSequenceTest, RandomPieces) {
  const std::vector<std::string> whole = Drive({kStream});
  std::mt19937 rng(20261201);
  for (int round = 0; round < 300; ++round) {
    std::vector<std::string> pieces;
    for (size_t at = 0; at < kStream.size();) {
      const size_t n = std::uniform_int_distribution<size_t>(1, 24)(rng);
      pieces.push_back(kStream.substr(at, n));
      at += n;
    }
    ASSERT_EQ(Drive(pieces), whole) << "round " << round;
  }
}

TEST(H1KeepAliveSequenceTest, EachMessageAloneAllWays) {
  // The heads alone, through the generic whole / split / byte-by-byte checker.
  for (const std::string& head :
       {std::string("GET /a?x=1 HTTP/1.1\r\nHost: example.com\r\nUser-Agent: t\r\n\r\n"),
        std::string("POST /cl HTTP/1.1\r\nHost: example.com\r\nContent-Length: 11\r\n\r\n"),
        std::string("POST /chunked HTTP/1.1\r\nHost: example.com\r\n"
                    "Transfer-Encoding: chunked\r\n\r\n"),
        std::string("GET /last HTTP/1.1\r\nHost: example.com\r\nConnection: close\r\n\r\n")}) {
    EXPECT_EQ(testing::ParseAllWays(head).substr(0, 8), "complete") << head;
  }
}

}  // namespace
}  // namespace petrel::h1
