// Compression end to end, over every protocol (curl for HTTP/1.1, cleartext and TLS, and
// HTTP/2, h2c and TLS; Http3Client for HTTP/3): CompressionMiddleware on handler, stream and file
// bodies, what it leaves alone, and StaticFiles' precompressed siblings. What arrives encoded is
// decoded by Python's gzip and brotli modules and compared byte for byte; curl --compressed and
// nghttp check the same from their side.
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "petrel/http/compression.h"
#include "petrel/http/http_server.h"
#include "petrel/http/static_files.h"
#include "support/command.h"
#include "support/protocol_fetch.h"

namespace petrel {
namespace {

using testing::CommandResult;
using testing::FetchOver;
using testing::Got;
using testing::NameOf;
using testing::Protocol;
using testing::ReadFile;
using testing::RunCommand;
using testing::TempDir;

std::string Text(size_t size, absl::string_view word) {
  std::string text;
  for (size_t i = 0; text.size() < size; ++i) absl::StrAppend(&text, word, " ", i, "\n");
  text.resize(size);
  return text;
}

// Equal bytes; on a difference, sizes and where it starts rather than megabytes of text.
::testing::AssertionResult Same(const std::string& got, const std::string& want) {
  if (got == want) return ::testing::AssertionSuccess();
  size_t at = 0;
  while (at < got.size() && at < want.size() && got[at] == want[at]) ++at;
  return ::testing::AssertionFailure()
         << got.size() << " bytes, want " << want.size() << "; first difference at " << at << ": \""
         << got.substr(at, 80) << "\"";
}

void WriteFile(const std::filesystem::path& path, absl::string_view bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

class CompressionTest : public ::testing::TestWithParam<Protocol> {
 protected:
  void SetUp() override {
    // Files: originals, and siblings compressed by Python (not by Petrel).
    std::filesystem::create_directories(dir_ / "pre");
    std::filesystem::create_directories(dir_ / "fresh");
    WriteFile(dir_ / "pre/app.js", Text(50000, "function f() { return"));
    WriteFile(dir_ / "pre/only-gz.css", Text(30000, ".rule { color: red }"));
    WriteFile(dir_ / "pre/plain.txt", Text(60000, "plain text line"));
    WriteFile(dir_ / "pre/index.html", Text(20000, "<p>index</p>"));
    WriteFile(dir_ / "pre/orphan.js.br", "not a real brotli stream");
    WriteFile(dir_ / "fresh/app.js", Text(40000, "fresh"));
    const CommandResult made = RunCommand(
        absl::StrCat("/usr/bin/python3 -c 'import sys, gzip, brotli\n"
                     "for name in sys.argv[1:]:\n"
                     "    data = open(name, \"rb\").read()\n"
                     "    if not name.endswith(\".css\"): open(name + \".br\", "
                     "\"wb\").write(brotli.compress(data, quality=11))\n"
                     "    open(name + \".gz\", \"wb\").write(gzip.compress(data, mtime=0))\n' ",
                     (dir_ / "pre/app.js").string(), " ", (dir_ / "pre/only-gz.css").string(), " ",
                     (dir_ / "pre/index.html").string(), " ", (dir_ / "fresh/app.js").string()));
    ASSERT_EQ(made.exit_code, 0) << made.output;

    HttpServerConfig c;
    c.http_port = 0;
    c.https_port = 0;
    server_ = std::make_unique<HttpServer>(c);
    Router& r = server_->router();
    r.Use("/dyn/", CompressionMiddleware());
    ASSERT_TRUE(r.Get("/dyn/text", [](Request&, Response& res) {
                   res.Send(200, Text(20000, "text"), "text/plain; charset=utf-8");
                 }).ok());
    ASSERT_TRUE(r.Get("/dyn/json", [](Request&, Response& res) {
                   res.Send(200, Text(5000, "{\"k\": 1}"), "application/json");
                 }).ok());
    ASSERT_TRUE(r.Get("/dyn/small", [](Request&, Response& res) {
                   res.Send(200, Text(500, "small"), "text/plain");
                 }).ok());
    ASSERT_TRUE(r.Get("/dyn/png", [](Request&, Response& res) {
                   res.Send(200, Text(20000, "png"), "image/png");
                 }).ok());
    ASSERT_TRUE(r.Get("/dyn/no-transform", [](Request&, Response& res) {
                   res.SetHeader("cache-control", "public, no-transform");
                   res.Send(200, Text(20000, "text"), "text/plain");
                 }).ok());
    ASSERT_TRUE(r.Get("/dyn/encoded", [](Request&, Response& res) {
                   res.SetHeader("content-encoding", "x-own");
                   res.Send(200, Text(20000, "own"), "text/plain");
                 }).ok());
    // 2 MB of text written with backpressure: on_writable writes the next 64 KiB.
    ASSERT_TRUE(r.Get("/dyn/stream", [](Request&, Response& res) {
                   res.SetHeader("content-type", "text/event-stream");
                   StreamingBody& out = res.Stream(200);
                   auto written = std::make_shared<size_t>(0);
                   auto pump = [&out, written] {
                     while (*written < kStreamSize) {
                       const std::string chunk = StreamText().substr(
                           *written, std::min<size_t>(65536, kStreamSize - *written));
                       *written += chunk.size();
                       if (!out.Write(chunk)) return;
                     }
                     out.Finish();
                   };
                   out.SetOnWritable(pump);
                   res.SetOnCancel([&out] { out.SetOnWritable(nullptr); });
                   pump();
                 }).ok());
    StaticFilesOptions plain;
    ASSERT_TRUE(r.Get("/dyn/files/*", StaticFiles((dir_ / "pre").string(), plain)).ok());
    StaticFilesOptions pre;
    pre.precompressed = true;
    ASSERT_TRUE(r.Get("/pre/*", StaticFiles((dir_ / "pre").string(), pre)).ok());
    pre.file_cache_revalidate = absl::ZeroDuration();
    ASSERT_TRUE(r.Get("/fresh/*", StaticFiles((dir_ / "fresh").string(), pre)).ok());
    const absl::Status started = server_->Start();
    ASSERT_TRUE(started.ok()) << started;
  }

  static constexpr size_t kStreamSize = 2 * 1024 * 1024;
  static const std::string& StreamText() {
    static const std::string* text = new std::string(Text(kStreamSize, "streamed event"));
    return *text;
  }

  Got Fetch(const std::string& method, const std::string& path,
            const std::vector<std::pair<std::string, std::string>>& fields = {}) {
    return FetchOver(GetParam(), {server_->http_port(), server_->https_port()}, method, path,
                     fields);
  }
  Got Get(const std::string& path, const std::string& accept_encoding) {
    if (accept_encoding.empty()) return Fetch("GET", path);
    return Fetch("GET", path, {{"accept-encoding", accept_encoding}});
  }

  // `encoded` decoded by Python's `coding` module ("gzip" or "br").
  std::string Decode(const std::string& coding, const std::string& encoded) {
    const std::filesystem::path file = dir_ / absl::StrCat("decode-", ++decodes_);
    WriteFile(file, encoded);
    const CommandResult r = RunCommand(absl::StrCat(
        "/usr/bin/python3 -c 'import sys, gzip, brotli\n"
        "data = open(sys.argv[2], \"rb\").read()\n"
        "sys.stdout.buffer.write(gzip.decompress(data) if sys.argv[1] == \"gzip\" else "
        "brotli.decompress(data))' ",
        coding, " ", file.string()));
    return r.exit_code == 0 ? r.output : absl::StrCat("decode failed: ", r.output);
  }

  std::string Original(absl::string_view name) { return ReadFile(dir_ / std::string(name)); }

  TempDir dir_;
  std::unique_ptr<HttpServer> server_;
  int decodes_ = 0;
};

TEST_P(CompressionTest, HandlerBodiesFollowAcceptEncoding) {
  const std::string text = Text(20000, "text");
  Got got = Get("/dyn/text", "gzip");
  ASSERT_EQ(got.error, "");
  EXPECT_EQ(got.status, 200);
  EXPECT_EQ(got.Field("content-encoding"), "gzip");
  EXPECT_EQ(got.Field("vary"), "Accept-Encoding");
  EXPECT_EQ(got.Field("content-type"), "text/plain; charset=utf-8");
  EXPECT_LT(got.body.size(), text.size() / 4);
  EXPECT_TRUE(Same(Decode("gzip", got.body), text));

  got = Get("/dyn/text", "br;q=1, gzip;q=0.5");
  EXPECT_EQ(got.Field("content-encoding"), "br");
  EXPECT_TRUE(Same(Decode("br", got.body), text));
  got = Get("/dyn/json", "gzip, deflate, br");
  EXPECT_EQ(got.Field("content-encoding"), "br");
  EXPECT_TRUE(Same(Decode("br", got.body), Text(5000, "{\"k\": 1}")));
  got = Get("/dyn/json", "x-gzip;q=0.8, br;q=0.2");
  EXPECT_EQ(got.Field("content-encoding"), "gzip");
  EXPECT_TRUE(Same(Decode("gzip", got.body), Text(5000, "{\"k\": 1}")));

  // Refused or not asked for: identity, but the response says it varies.
  for (const std::string accept : {"br;q=0, gzip;q=0", "identity", "deflate", ""}) {
    got = Get("/dyn/text", accept);
    EXPECT_FALSE(got.Has("content-encoding")) << accept;
    EXPECT_EQ(got.Field("vary"), "Accept-Encoding") << accept;
    EXPECT_TRUE(Same(got.body, text)) << accept;
  }
}

TEST_P(CompressionTest, LeavesAloneWhatMustNotBeCompressed) {
  // Below the threshold; a type not listed.
  Got got = Get("/dyn/small", "gzip, br");
  EXPECT_EQ(got.status, 200);
  EXPECT_FALSE(got.Has("content-encoding"));
  EXPECT_TRUE(Same(got.body, Text(500, "small")));
  got = Get("/dyn/png", "gzip, br");
  EXPECT_FALSE(got.Has("content-encoding"));
  EXPECT_FALSE(got.Has("vary"));
  EXPECT_TRUE(Same(got.body, Text(20000, "png")));
  // HEAD: the head of an identity GET (Vary included, as a GET's would be), no body.
  got = Fetch("HEAD", "/dyn/text", {{"accept-encoding", "gzip, br"}});
  EXPECT_EQ(got.status, 200);
  EXPECT_FALSE(got.Has("content-encoding"));
  EXPECT_EQ(got.Field("vary"), "Accept-Encoding");
  EXPECT_TRUE(Same(got.body, ""));
  EXPECT_EQ(Fetch("GET", "/dyn/text", {}).Field("vary"), "Accept-Encoding");
  // no-transform, from the response or from the request.
  got = Get("/dyn/no-transform", "gzip, br");
  EXPECT_FALSE(got.Has("content-encoding"));
  EXPECT_TRUE(Same(got.body, Text(20000, "text")));
  got = Fetch("GET", "/dyn/text", {{"accept-encoding", "gzip"}, {"cache-control", "no-transform"}});
  EXPECT_FALSE(got.Has("content-encoding"));
  EXPECT_TRUE(Same(got.body, Text(20000, "text")));
  got = Fetch("GET", "/dyn/text",
              {{"cache-control", "max-age=0"},
               {"accept-encoding", "gzip"},
               {"cache-control", "No-Transform"}});
  EXPECT_FALSE(got.Has("content-encoding"));
  // Accept-Encoding over two lines is one list (RFC 9110 §5.3).
  got = Fetch("GET", "/dyn/text", {{"accept-encoding", "identity"}, {"accept-encoding", "gzip"}});
  EXPECT_EQ(got.Field("content-encoding"), "gzip");
  // Already encoded by the handler: sent as it is, never twice.
  got = Get("/dyn/encoded", "gzip, br");
  EXPECT_EQ(got.Field("content-encoding"), "x-own");
  EXPECT_TRUE(Same(got.body, Text(20000, "own")));
}

TEST_P(CompressionTest, StreamsAreCompressedAsTheyAreSent) {
  for (const std::string coding : {"br", "gzip"}) {
    Got got = Get("/dyn/stream", coding);
    ASSERT_EQ(got.error, "");
    EXPECT_EQ(got.status, 200);
    EXPECT_EQ(got.Field("content-encoding"), coding);
    EXPECT_FALSE(got.Has("content-length"));
    EXPECT_LT(got.body.size(), kStreamSize / 4);
    EXPECT_TRUE(Same(Decode(coding, got.body), StreamText()));
  }
}

TEST_P(CompressionTest, FilesAreCompressedOnTheFlyWithWeakValidators) {
  const std::string plain = Original("pre/plain.txt");
  Got got = Get("/dyn/files/plain.txt", "gzip");
  ASSERT_EQ(got.error, "");
  EXPECT_EQ(got.status, 200);
  EXPECT_EQ(got.Field("content-encoding"), "gzip");
  EXPECT_FALSE(got.Has("accept-ranges"));
  EXPECT_FALSE(got.Has("content-length") &&
               got.Field("content-length") == absl::StrCat(plain.size()));
  const std::string etag = got.Field("etag");
  EXPECT_TRUE(absl::StartsWith(etag, "W/\"")) << etag;
  EXPECT_TRUE(Same(Decode("gzip", got.body), plain));

  // Revalidation with the weak tag: 304, still marked as varying and weak.
  got =
      Fetch("GET", "/dyn/files/plain.txt", {{"accept-encoding", "gzip"}, {"if-none-match", etag}});
  EXPECT_EQ(got.status, 304);
  EXPECT_EQ(got.Field("etag"), etag);
  EXPECT_EQ(got.Field("vary"), "Accept-Encoding");

  // A range is never compressed: 206 of the identity bytes, strong tag.
  got = Fetch("GET", "/dyn/files/plain.txt",
              {{"accept-encoding", "gzip"}, {"range", "bytes=100-199"}});
  EXPECT_EQ(got.status, 206);
  EXPECT_FALSE(got.Has("content-encoding"));
  EXPECT_TRUE(Same(got.body, plain.substr(100, 100)));
  EXPECT_EQ(got.Field("etag"), etag.substr(2));

  // Identity for a client that does not accept a coding: the strong tag, ranges offered.
  got = Get("/dyn/files/plain.txt", "");
  EXPECT_TRUE(Same(got.body, plain));
  EXPECT_EQ(got.Field("etag"), etag.substr(2));
  EXPECT_EQ(got.Field("accept-ranges"), "bytes");
  EXPECT_EQ(got.Field("vary"), "Accept-Encoding");
}

TEST_P(CompressionTest, StaticFilesServePrecompressedSiblings) {
  // Twice: the second time from the open-file cache (missing siblings remembered too).
  for (int round = 0; round < 2; ++round) {
    SCOPED_TRACE(round);
    Got br = Get("/pre/app.js", "gzip, deflate, br");
    ASSERT_EQ(br.error, "");
    EXPECT_EQ(br.status, 200);
    EXPECT_EQ(br.Field("content-encoding"), "br");
    EXPECT_EQ(br.Field("content-type"), "text/javascript; charset=utf-8");
    EXPECT_EQ(br.Field("vary"), "Accept-Encoding");
    EXPECT_TRUE(Same(br.body, Original("pre/app.js.br")));  // the sibling's bytes, exactly
    EXPECT_TRUE(Same(Decode("br", br.body), Original("pre/app.js")));

    Got gz = Get("/pre/app.js", "gzip");
    EXPECT_EQ(gz.Field("content-encoding"), "gzip");
    EXPECT_TRUE(Same(gz.body, Original("pre/app.js.gz")));
    Got identity = Get("/pre/app.js", "");
    EXPECT_FALSE(identity.Has("content-encoding"));
    EXPECT_EQ(identity.Field("vary"), "Accept-Encoding");
    EXPECT_TRUE(Same(identity.body, Original("pre/app.js")));
    // Three representations, three strong tags.
    EXPECT_TRUE(absl::StartsWith(br.Field("etag"), "\""));
    EXPECT_NE(br.Field("etag"), gz.Field("etag"));
    EXPECT_NE(br.Field("etag"), identity.Field("etag"));
    EXPECT_NE(gz.Field("etag"), identity.Field("etag"));

    // A range of the encoded representation.
    const std::string gz_bytes = Original("pre/app.js.gz");
    Got part = Fetch("GET", "/pre/app.js", {{"accept-encoding", "gzip"}, {"range", "bytes=10-19"}});
    EXPECT_EQ(part.status, 206);
    EXPECT_EQ(part.Field("content-encoding"), "gzip");
    EXPECT_EQ(part.Field("content-range"), absl::StrCat("bytes 10-19/", gz_bytes.size()));
    EXPECT_TRUE(Same(part.body, gz_bytes.substr(10, 10)));
    // Revalidating the br representation.
    Got not_modified = Fetch("GET", "/pre/app.js",
                             {{"accept-encoding", "br"}, {"if-none-match", br.Field("etag")}});
    EXPECT_EQ(not_modified.status, 304);
    EXPECT_EQ(not_modified.Field("vary"), "Accept-Encoding");

    // Only a .gz: gzip even for a client that prefers br.
    Got css = Get("/pre/only-gz.css", "br, gzip");
    EXPECT_EQ(css.Field("content-encoding"), "gzip");
    EXPECT_TRUE(Same(css.body, Original("pre/only-gz.css.gz")));
    // No sibling: identity (no compressing middleware on /pre/).
    Got plain = Get("/pre/plain.txt", "br, gzip");
    EXPECT_FALSE(plain.Has("content-encoding"));
    EXPECT_TRUE(Same(plain.body, Original("pre/plain.txt")));
    // The index file's sibling for the directory.
    Got index = Get("/pre/", "br");
    EXPECT_EQ(index.Field("content-encoding"), "br");
    EXPECT_EQ(index.Field("content-type"), "text/html; charset=utf-8");
    EXPECT_TRUE(Same(index.body, Original("pre/index.html.br")));
    // A sibling by its own name is an ordinary file; one without its original is not served.
    Got direct = Get("/pre/app.js.br", "br");
    EXPECT_FALSE(direct.Has("content-encoding"));
    EXPECT_TRUE(Same(direct.body, Original("pre/app.js.br")));
    EXPECT_EQ(Get("/pre/orphan.js", "br").status, 404);
  }
}

TEST_P(CompressionTest, SiblingsThatComeAndGoAreNoticed) {
  EXPECT_EQ(Get("/fresh/app.js", "br, gzip").Field("content-encoding"), "br");
  std::filesystem::remove(dir_ / "fresh/app.js.br");
  Got got = Get("/fresh/app.js", "br, gzip");
  EXPECT_EQ(got.Field("content-encoding"), "gzip");
  EXPECT_TRUE(Same(got.body, Original("fresh/app.js.gz")));
  std::filesystem::remove(dir_ / "fresh/app.js.gz");
  got = Get("/fresh/app.js", "br, gzip");
  EXPECT_FALSE(got.Has("content-encoding"));
  EXPECT_TRUE(Same(got.body, Original("fresh/app.js")));
  WriteFile(dir_ / "fresh/app.js.br", "a new sibling");
  EXPECT_TRUE(Same(Get("/fresh/app.js", "br").body, "a new sibling"));
}

// Clients that decode for themselves: curl --compressed (it offers deflate, gzip, br, zstd) and,
// on HTTP/2, nghttp.
TEST_P(CompressionTest, CurlAndNghttpDecodeWhatTheyGet) {
  if (GetParam() == Protocol::kH3) GTEST_SKIP() << "Debian's curl and nghttp speak no HTTP/3";
  const Got got = FetchOver(GetParam(), {server_->http_port(), server_->https_port()}, "GET",
                            "/dyn/stream", {}, "--compressed");
  ASSERT_EQ(got.error, "");
  EXPECT_EQ(got.Field("content-encoding"), "br");
  EXPECT_TRUE(Same(got.body, StreamText()));
  EXPECT_EQ(FetchOver(GetParam(), {server_->http_port(), server_->https_port()}, "GET",
                      "/pre/index.html", {}, "--compressed")
                .body,
            Original("pre/index.html"));
  if (GetParam() != Protocol::kH2) return;
  // nghttp inflates gzip itself: its output is the file; -v shows what came on the wire.
  const std::string url =
      absl::StrCat("https://127.0.0.1:", server_->https_port(), "/dyn/files/plain.txt");
  const std::filesystem::path out = dir_ / "nghttp.out";
  CommandResult r = RunCommand(absl::StrCat("bash -c \"nghttp -H 'accept-encoding: gzip' ", url,
                                            " 2>/dev/null >", out.string(), "\""));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(Same(ReadFile(out), Original("pre/plain.txt")));
  r = RunCommand(absl::StrCat("nghttp -nv -H 'accept-encoding: gzip' ", url));
  EXPECT_TRUE(absl::StrContains(r.output, "content-encoding: gzip")) << r.output;
}

INSTANTIATE_TEST_SUITE_P(Protocols, CompressionTest,
                         ::testing::Values(Protocol::kH1, Protocol::kH1Tls, Protocol::kH2c,
                                           Protocol::kH2, Protocol::kH3),
                         [](const ::testing::TestParamInfo<Protocol>& p) {
                           return NameOf(p.param);
                         });

}  // namespace
}  // namespace petrel
