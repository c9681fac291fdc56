// Units of response compression: choosing a coding from Accept-Encoding, the gzip and brotli
// encoders (decoded by zlib's inflate and brotli's decoder), and the producer that compresses a
// streamed body as the engine pulls it — paced by the engine, flushed when the body pauses.
#include <brotli/decode.h>
#include <zlib.h>

#include <random>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "http/compression/compressing_producer.h"
#include "http/compression/content_coding.h"
#include "http/compression/encoder.h"
#include "petrel/http/body.h"

namespace petrel::http_internal {
namespace {

constexpr uint8_t kBoth = kOfferBrotli | kOfferGzip;

TEST(ChooseContentCodingTest, FollowsRfc9110) {
  struct Case {
    const char* accept;
    uint8_t offered;
    ContentCoding want;
  } cases[] = {
      {"", kBoth, ContentCoding::kIdentity},
      {"identity", kBoth, ContentCoding::kIdentity},
      {"gzip", kBoth, ContentCoding::kGzip},
      {"x-gzip", kBoth, ContentCoding::kGzip},
      {"GZIP", kBoth, ContentCoding::kGzip},
      {"br", kBoth, ContentCoding::kBrotli},
      {"gzip, deflate, br", kBoth, ContentCoding::kBrotli},  // a tie: brotli
      {"gzip, deflate, br", kOfferGzip, ContentCoding::kGzip},
      {"br", kOfferGzip, ContentCoding::kIdentity},
      {"br;q=0.5, gzip", kBoth, ContentCoding::kGzip},
      {"br;q=1.0, gzip;q=0.999", kBoth, ContentCoding::kBrotli},
      {"br ; q=0 , gzip", kBoth, ContentCoding::kGzip},
      {"br;q=0, gzip;q=0", kBoth, ContentCoding::kIdentity},
      {"*", kBoth, ContentCoding::kBrotli},
      {"*;q=0.1, br;q=0", kBoth, ContentCoding::kGzip},
      {"*;q=0", kBoth, ContentCoding::kIdentity},
      {"gzip;q=0, *", kBoth, ContentCoding::kBrotli},
      {"deflate, compress", kBoth, ContentCoding::kIdentity},
      {"br;q=2", kBoth, ContentCoding::kIdentity},       // malformed qvalue: element ignored
      {"br;q=0.1234", kBoth, ContentCoding::kIdentity},  // more than three decimals
      {"br;q=abc, gzip;q=0.2", kBoth, ContentCoding::kGzip},
      {"gzip;level=1;q=0.3", kBoth, ContentCoding::kGzip},
      {"gzip;q=0, gzip;q=0.5", kBoth, ContentCoding::kGzip},  // named twice: the higher
      {" , ,gzip,, ", kBoth, ContentCoding::kGzip},
      {"br", 0, ContentCoding::kIdentity},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(ChooseContentCoding(c.accept, c.offered), c.want) << "\"" << c.accept << "\"";
  }
  HeaderMap fields;
  fields.Add("accept-encoding", "br;q=0");
  fields.Add("accept-encoding", "gzip");
  EXPECT_EQ(ChooseContentCoding(fields, kBoth), ContentCoding::kGzip);
  EXPECT_EQ(ChooseContentCoding(HeaderMap(), kBoth), ContentCoding::kIdentity);
}

// Whole or partial (flushed) streams: what zlib's and brotli's decoders make of `encoded`.
std::string Gunzip(const std::string& encoded) {
  z_stream z{};
  EXPECT_EQ(inflateInit2(&z, 15 + 16), Z_OK);
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(encoded.data()));
  z.avail_in = static_cast<uInt>(encoded.size());
  std::string out;
  char buf[16384];
  int rc;
  do {
    z.next_out = reinterpret_cast<Bytef*>(buf);
    z.avail_out = sizeof(buf);
    rc = inflate(&z, Z_SYNC_FLUSH);
    out.append(buf, sizeof(buf) - z.avail_out);
  } while (rc == Z_OK && (z.avail_in > 0 || z.avail_out == 0));
  EXPECT_TRUE(rc == Z_OK || rc == Z_STREAM_END || rc == Z_BUF_ERROR) << rc;
  inflateEnd(&z);
  return out;
}

std::string Unbrotli(const std::string& encoded) {
  BrotliDecoderState* s = BrotliDecoderCreateInstance(nullptr, nullptr, nullptr);
  size_t available_in = encoded.size();
  const uint8_t* next_in = reinterpret_cast<const uint8_t*>(encoded.data());
  std::string out;
  BrotliDecoderResult rc;
  do {
    uint8_t buf[16384];
    size_t available_out = sizeof(buf);
    uint8_t* next_out = buf;
    rc = BrotliDecoderDecompressStream(s, &available_in, &next_in, &available_out, &next_out,
                                       nullptr);
    out.append(reinterpret_cast<char*>(buf), sizeof(buf) - available_out);
  } while (rc == BROTLI_DECODER_RESULT_NEEDS_MORE_OUTPUT);
  EXPECT_NE(rc, BROTLI_DECODER_RESULT_ERROR);
  BrotliDecoderDestroyInstance(s);
  return out;
}

std::string Decode(ContentCoding coding, const std::string& encoded) {
  return coding == ContentCoding::kGzip ? Gunzip(encoded) : Unbrotli(encoded);
}

std::string Text(size_t size) {
  std::string text;
  for (size_t i = 0; text.size() < size; ++i) absl::StrAppend(&text, "line ", i, " of the text\n");
  text.resize(size);
  return text;
}

std::string Random(size_t size) {
  std::mt19937 rng(7);
  std::string bytes(size, '\0');
  for (char& c : bytes) c = static_cast<char>(rng());
  return bytes;
}

class CodingTest : public ::testing::TestWithParam<ContentCoding> {};

TEST_P(CodingTest, EncodesWholeBodies) {
  for (const std::string& input : {std::string(), Text(100), Text(300000), Random(70000)}) {
    // Without a size hint, and with the body's (deflate's window then fits the body).
    auto hinted = Encoder::Make(GetParam(), {}, input.size());
    ASSERT_NE(hinted, nullptr);
    std::string small_window;
    ASSERT_TRUE(EncodeAll(*hinted, input, &small_window).ok());
    EXPECT_EQ(Decode(GetParam(), small_window), input);
    auto encoder = Encoder::Make(GetParam(), {});
    ASSERT_NE(encoder, nullptr);
    std::string encoded;
    ASSERT_TRUE(EncodeAll(*encoder, input, &encoded).ok());
    EXPECT_EQ(Decode(GetParam(), encoded), input);
    if (input.size() == 300000) {
      EXPECT_LT(encoded.size(), input.size() / 5);
    }
    // Nothing more after the end.
    EXPECT_FALSE(encoder->Encode("x", Encoder::Flush::kNone, &encoded).ok());
  }
}

// The engine's side of a producer: pulls `max` bytes at a time until it would block or ends.
struct Puller {
  BodyProducer& producer;
  std::string got;
  BodyReadStatus last = BodyReadStatus::kData;
  int resumes = 0;

  explicit Puller(BodyProducer& p) : producer(p) {
    producer.SetResumeCallback([this] { ++resumes; });
  }
  void PullAll(size_t max) {
    do {
      BodyReadResult r = producer.Read(max, &got);
      last = r.status;
    } while (last == BodyReadStatus::kData);
  }
};

TEST_P(CodingTest, StreamsAtTheEnginesPaceAndFlushesWhenTheBodyPauses) {
  auto owned = std::make_unique<StreamingBody>(8 * 1024 * 1024);
  StreamingBody& body = *owned;
  CompressingProducer producer(std::move(owned), Encoder::Make(GetParam(), {}));
  Puller engine(producer);

  // A first write, then the body pauses: what was written comes out decodable at once.
  const std::string first = Text(5000);
  body.Write(first);
  engine.PullAll(1 << 20);
  EXPECT_EQ(engine.last, BodyReadStatus::kWouldBlock);
  EXPECT_EQ(Decode(GetParam(), engine.got), first);

  // The engine has room for 100 bytes: the producer takes input chunks from the body until the
  // encoder has output — what the encoder holds is bounded by its window (deflate's 32 KiB,
  // brotli's 256 KiB), not by the body — and leaves the rest in the body.
  const std::string random = Random(4 * 1024 * 1024);
  body.Write(random);
  ASSERT_EQ(producer.Read(100, &engine.got).status, BodyReadStatus::kData);
  EXPECT_GE(body.buffered(), random.size() - 512 * 1024);
  EXPECT_EQ(engine.resumes, 1);  // the write woke the parked engine

  // The rest, with trailers, and the end.
  engine.PullAll(1000);
  EXPECT_EQ(engine.last, BodyReadStatus::kWouldBlock);
  const std::string last = Text(200000);
  body.Write(last);
  HeaderMap trailers;
  trailers.Add("x-sum", "42");
  body.Finish(std::move(trailers));
  engine.PullAll(16384);
  EXPECT_EQ(engine.last, BodyReadStatus::kEnd);
  EXPECT_EQ(Decode(GetParam(), engine.got), first + random + last);
  const HeaderMap got_trailers = producer.TakeTrailers();
  EXPECT_EQ(got_trailers.Get("x-sum").value_or(""), "42");
}

TEST_P(CodingTest, ABodyThatFailsFailsTheResponse) {
  auto owned = std::make_unique<StreamingBody>();
  StreamingBody& body = *owned;
  CompressingProducer producer(std::move(owned), Encoder::Make(GetParam(), {}));
  Puller engine(producer);
  body.Write(Text(3000));
  body.Fail(absl::DataLossError("disk gone"));
  engine.PullAll(1000);
  EXPECT_EQ(engine.last, BodyReadStatus::kError);
}

TEST_P(CodingTest, WrapsBufferAndFileBodies) {
  const std::string text = Text(100000);
  ResponseBody buffer{std::string(text)};
  CompressingProducer producer(buffer.ReleaseAsProducer(), Encoder::Make(GetParam(), {}));
  Puller engine(producer);
  engine.PullAll(1200);
  EXPECT_EQ(engine.last, BodyReadStatus::kEnd);
  EXPECT_EQ(Decode(GetParam(), engine.got), text);
}

INSTANTIATE_TEST_SUITE_P(Codings, CodingTest,
                         ::testing::Values(ContentCoding::kGzip, ContentCoding::kBrotli),
                         [](const ::testing::TestParamInfo<ContentCoding>& p) {
                           return std::string(ContentCodingName(p.param));
                         });

}  // namespace
}  // namespace petrel::http_internal
