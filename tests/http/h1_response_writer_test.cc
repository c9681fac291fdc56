// Golden bytes of the h1 response writer and the Date cache.
#include <chrono>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "http/date_cache.h"
#include "http/h1/response_writer.h"

namespace petrel::h1 {
namespace {

using http_internal::DateCache;

using std::chrono::seconds;
using std::chrono::system_clock;

std::string Str(const ByteBuffer& b) { return std::string(b.Readable()); }

TEST(H1DateCacheTest, FormatsImfFixdate) {
  DateCache cache;
  // RFC 9110 §5.6.7's example.
  EXPECT_EQ(cache.Get(system_clock::time_point(seconds(784111777))),
            "Sun, 06 Nov 1994 08:49:37 GMT");
  EXPECT_EQ(cache.Get(system_clock::time_point(seconds(0))), "Thu, 01 Jan 1970 00:00:00 GMT");
  EXPECT_EQ(cache.Get(system_clock::time_point(seconds(951782400))),  // Leap day.
            "Tue, 29 Feb 2000 00:00:00 GMT");
  EXPECT_EQ(cache.Get(system_clock::time_point(seconds(1798761599))),
            "Thu, 31 Dec 2026 23:59:59 GMT");
  EXPECT_EQ(cache.Get().size(), DateCache::kLength);
}

TEST(H1DateCacheTest, RecomputesOnlyWhenTheSecondChanges) {
  DateCache cache;
  const system_clock::time_point t(seconds(784111777));
  const absl::string_view a = cache.Get(t);
  EXPECT_EQ(cache.format_count(), 1u);
  const absl::string_view b = cache.Get(t + std::chrono::milliseconds(999));
  EXPECT_EQ(cache.format_count(), 1u);
  EXPECT_EQ(a.data(), b.data());
  EXPECT_EQ(cache.Get(t + seconds(1)), "Sun, 06 Nov 1994 08:49:38 GMT");
  EXPECT_EQ(cache.format_count(), 2u);
}

TEST(H1ResponseWriterTest, HeadGoldenBytes) {
  ByteBuffer out;
  HeaderMap headers{{"Content-Type", "text/plain"}, {"Content-Length", "5"}};
  ASSERT_TRUE(WriteResponseHead(200, headers, "Sun, 06 Nov 1994 08:49:37 GMT", out).ok());
  EXPECT_EQ(Str(out),
            "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n"
            "Date: Sun, 06 Nov 1994 08:49:37 GMT\r\n\r\n");
  out.ConsumeAll();
  ASSERT_TRUE(WriteResponseHead(404, HeaderMap(), "", out).ok());
  EXPECT_EQ(Str(out), "HTTP/1.1 404 Not Found\r\n\r\n");
  out.ConsumeAll();
  // The handler's own Date wins.
  ASSERT_TRUE(WriteResponseHead(599, HeaderMap{{"date", "x"}}, "y", out).ok());
  EXPECT_EQ(Str(out), "HTTP/1.1 599 Unknown\r\ndate: x\r\n\r\n");
}

TEST(H1ResponseWriterTest, RefusesResponseSplitting) {
  ByteBuffer out;
  EXPECT_FALSE(WriteResponseHead(200, HeaderMap{{"X", "a\r\nSet-Cookie: evil"}}, "", out).ok());
  EXPECT_FALSE(WriteResponseHead(200, HeaderMap{{"X Y", "a"}}, "", out).ok());
  EXPECT_FALSE(WriteResponseHead(200, HeaderMap{{"X", " padded"}}, "", out).ok());
  EXPECT_FALSE(WriteResponseHead(99, HeaderMap(), "", out).ok());
  EXPECT_FALSE(WriteResponseHead(600, HeaderMap(), "", out).ok());
  EXPECT_TRUE(out.empty());
}

// The writer refuses exactly the values IsValidFieldValue refuses, for a bad byte at every
// position of values long and short (the check goes eight bytes at a time).
TEST(H1ResponseWriterTest, ValueCheckAgreesWithIsValidFieldValue) {
  for (size_t len = 1; len <= 24; ++len) {
    for (size_t at = 0; at < len; ++at) {
      for (const char bad : {'\0', '\r', '\n', '\x1f', '\x7f', '\t', '\x80', '\xff', ' '}) {
        std::string value(len, 'v');
        value[at] = bad;
        ByteBuffer out;
        const bool ok = WriteResponseHead(200, HeaderMap{{"X", value}}, "", out).ok();
        EXPECT_EQ(ok, IsValidFieldValue(value))
            << "len " << len << " at " << at << " byte " << static_cast<int>(bad);
        out.ConsumeAll();
        EXPECT_EQ(WriteResponseHead(200, HeaderMap{{"X", value}}, HeadFraming{}, "", out).ok(),
                  IsValidFieldValue(value));
      }
    }
  }
}

// The same for names: refused exactly when IsValidFieldName refuses them.
TEST(H1ResponseWriterTest, NameCheckAgreesWithIsValidFieldName) {
  for (size_t len = 1; len <= 12; ++len) {
    for (size_t at = 0; at < len; ++at) {
      for (const char bad : {'\0', ' ', ':', '(', '\x7f', '\x80', '-', '~'}) {
        std::string name(len, 'n');
        name[at] = bad;
        ByteBuffer out;
        EXPECT_EQ(WriteResponseHead(200, HeaderMap{{name, "v"}}, HeadFraming{}, "", out).ok(),
                  IsValidFieldName(name))
            << "len " << len << " at " << at << " byte " << static_cast<int>(bad);
      }
    }
  }
  ByteBuffer out;
  EXPECT_FALSE(WriteResponseHead(200, HeaderMap{{"", "v"}}, HeadFraming{}, "", out).ok());
}

TEST(H1ResponseWriterTest, EngineFormDropsEngineFieldsAddsFraming) {
  ByteBuffer out;
  HeaderMap headers{{"Content-Type", "text/plain"}, {"connection", "x"},
                    {"Content-Length", "9"},        {"X-A", "1"},
                    {"transfer-encoding", "gzip"},  {"TE", "t"}};
  HeadFraming framing;
  framing.content_length = 12345678901;
  framing.connection = "close";
  ASSERT_TRUE(WriteResponseHead(200, headers, framing, "D", out).ok());
  EXPECT_EQ(Str(out),
            "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nX-A: 1\r\n"
            "Content-Length: 12345678901\r\nConnection: close\r\nDate: D\r\n\r\n");
  out.ConsumeAll();
  HeadFraming chunked;
  chunked.chunked = true;
  ASSERT_TRUE(WriteResponseHead(204, HeaderMap(), chunked, "", out).ok());
  EXPECT_EQ(Str(out), "HTTP/1.1 204 No Content\r\nTransfer-Encoding: chunked\r\n\r\n");
  out.ConsumeAll();
  framing.content_length = 0;
  framing.connection = {};
  ASSERT_TRUE(WriteResponseHead(200, HeaderMap(), framing, "", out).ok());
  EXPECT_EQ(Str(out), "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
}

// With a HeadMemo, every head is byte for byte what a write without one gives, whether its inputs
// repeat the remembered head's or differ from them in any one part (one field's value among
// them); a field that differs only in a forbidden byte is still refused.
TEST(H1ResponseWriterTest, MemoWritesWhatAFreshWriteWrites) {
  struct Head {
    int status;
    HeaderMap headers;
    HeadFraming framing;
    absl::string_view date;
  };
  HeadFraming length;
  length.content_length = 12;
  HeadFraming other_length;
  other_length.content_length = 13;
  HeadFraming closing = length;
  closing.connection = "close";
  HeadFraming chunked;
  chunked.chunked = true;
  const HeaderMap base{{"ETag", "\"abc\""}, {"Content-Type", "text/plain"}};
  // The same fields, but not back to back in the map's storage (Set appends the new bytes).
  HeaderMap rewritten{{"ETag", "\"old\""}, {"Content-Type", "text/plain"}};
  rewritten.Set("ETag", "\"abc\"");
  HeaderMap rewritten_other = rewritten;
  rewritten_other.Set("Content-Type", "text/plaim");
  const auto with_id = [&base](absl::string_view id) {
    HeaderMap h = base;
    h.Add("X-Request-Id", id);
    return h;
  };
  const std::vector<Head> heads = {
      {200, base, length, "D1"},
      {200, base, length, "D1"},  // a repeat
      {200, base, length, "D2"},  // a new second
      {404, base, length, "D2"},
      {200, base, other_length, "D2"},
      {200, base, closing, "D2"},
      {200, base, chunked, "D2"},
      {200, HeaderMap{{"ETag", "\"abd\""}, {"Content-Type", "text/plain"}}, length, "D2"},
      {200, HeaderMap{{"ETAG", "\"abc\""}, {"Content-Type", "text/plain"}}, length, "D2"},
      {200, HeaderMap{{"ETag", "\"abc\""}}, length, "D2"},
      {200, HeaderMap{{"ETag", "\"abc\""}, {"Date", "mine"}}, length, "D2"},
      {200, HeaderMap{{"ETag", "\"abc\""}, {"Date", "mine"}}, length, "D3"},
      {200, base, length, ""},
      {200, base, length, "D2"},
      {200, HeaderMap{{"ETag", "\"ab\r\""}, {"Content-Type", "text/plain"}}, length, "D2"},
      {200, base, length, "D2"},
      {200, base, length, "D2"},
      {200, rewritten, length, "D2"},
      {200, rewritten, length, "D2"},
      {200, rewritten_other, length, "D2"},
      {200, base, length, "D2"},
      // One field's value differs from response to response (a request id): written in the
      // remembered value's place, whatever its length, but checked all the same.
      {200, with_id("0123456789abcdef0123456789abcdef"), length, "D2"},
      {200, with_id("fedcba9876543210fedcba9876543210"), length, "D2"},
      {200, with_id("7"), length, "D3"},
      {200, with_id("a\r\nSet-Cookie: x=1"), length, "D3"},
      {200, with_id("fedcba9876543210fedcba9876543210"), length, ""},
      {200, HeaderMap{{"ETag", "\"abd\""}, {"Content-Type", "text/plain"}, {"X-Request-Id", "1"}},
       length, "D3"},
      {200, with_id("0123456789abcdef0123456789abcdef"), closing, "D3"},
      {200, with_id("0123456789abcdef0123456789abcdef"), length, "D3"},
      // A handler's own framing field is dropped: its value differing changes nothing.
      {200, HeaderMap{{"ETag", "\"abc\""}, {"Content-Length", "5"}}, length, "D3"},
      {200, HeaderMap{{"ETag", "\"abc\""}, {"Content-Length", "66"}}, length, "D3"},
      {200, HeaderMap{{"ETag", "\"abd\""}, {"Content-Length", "66"}}, length, "D3"},
  };
  HeadMemo memo;
  for (size_t i = 0; i < heads.size(); ++i) {
    const Head& h = heads[i];
    ByteBuffer fresh;
    ByteBuffer memoized;
    const bool ok = WriteResponseHead(h.status, h.headers, h.framing, h.date, fresh).ok();
    EXPECT_EQ(WriteResponseHead(h.status, h.headers, h.framing, h.date, memoized, &memo).ok(), ok)
        << "head " << i;
    EXPECT_EQ(Str(memoized), Str(fresh)) << "head " << i;
    // The memo covers what it just wrote: as remembered, or with that one value in its place.
    if (ok) {
      EXPECT_NE(memo.Compare(h.status, h.headers, h.framing), HeadMemo::kNoMatch) << i;
    } else {
      EXPECT_TRUE(memoized.empty()) << "head " << i;
    }
  }
}

TEST(H1ResponseWriterTest, ChunkedGoldenBytes) {
  ByteBuffer out;
  WriteContinue(out);
  WriteChunk("hello", out);
  WriteChunk("", out);  // Would read as the last chunk: nothing written.
  WriteChunk(std::string(255, 'x'), out);
  HeaderMap trailers{{"X-Sum", "abc"}, {"Content-Length", "1"}};
  ASSERT_TRUE(WriteLastChunk(&trailers, out).ok());
  EXPECT_EQ(Str(out), "HTTP/1.1 100 Continue\r\n\r\n5\r\nhello\r\nff\r\n" + std::string(255, 'x') +
                          "\r\n0\r\nX-Sum: abc\r\n\r\n");
  out.ConsumeAll();
  ASSERT_TRUE(WriteLastChunk(nullptr, out).ok());
  EXPECT_EQ(Str(out), "0\r\n\r\n");
  HeaderMap bad{{"X", "a\nb"}};
  out.ConsumeAll();
  EXPECT_FALSE(WriteLastChunk(&bad, out).ok());
  EXPECT_TRUE(out.empty());
  WriteChunk(std::string(0x10000, 'y'), out);
  EXPECT_EQ(Str(out).substr(0, 7), "10000\r\n");
}

TEST(H1ResponseWriterTest, NoGrowthWhenTheBufferHasRoom) {
  ByteBuffer out(4096);
  const size_t capacity = out.capacity();
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(
        WriteResponseHead(200, HeaderMap{{"A", "b"}}, "Sun, 06 Nov 1994 08:49:37 GMT", out).ok());
    WriteChunk("data", out);
    ASSERT_TRUE(WriteLastChunk(nullptr, out).ok());
    out.ConsumeAll();
  }
  EXPECT_EQ(out.capacity(), capacity);
}

}  // namespace
}  // namespace petrel::h1
