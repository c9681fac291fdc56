// The h3 engine end to end: a QuicServer with H3ServerCallbacks (workers 0 and 2) and ngtcp2's
// gtlsclient (HTTP/3 over ngtcp2 + GnuTLS, written by others) as the peer. Transfers are checked
// byte for byte by SHA-256.
#include <gtest/gtest.h>
#include <openssl/sha.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <regex>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "h3_test_server.h"
#include "support/command.h"

namespace petrel::http {
namespace {

using ::petrel::testing::CommandResult;
using ::petrel::testing::ReadFile;
using ::petrel::testing::RunCommand;
using ::petrel::testing::Sha256Hex;
using ::petrel::testing::TempDir;

constexpr char kClient[] = "/usr/bin/gtlsclient";

// Deterministic, incompressible-looking content.
std::string MakeContent(size_t size, uint32_t seed) {
  std::string s(size, '\0');
  uint32_t x = seed * 2654435761u + 1;
  for (size_t i = 0; i < size; ++i) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    s[i] = static_cast<char>(x);
  }
  return s;
}

void WriteFile(const std::filesystem::path& path, absl::string_view bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

class H3EngineTest : public ::testing::TestWithParam<size_t> {
 protected:
  void SetUp() override {
    if (access(kClient, X_OK) != 0) GTEST_SKIP() << "gtlsclient (ngtcp2-client) not installed";
    ASSERT_FALSE(files_.path().empty());
    ASSERT_FALSE(downloads_.path().empty());
    H3TestServer::Options options;
    options.workers = GetParam();
    options.files_dir = files_.path().string();
    options.h3.max_request_body = 64 << 20;
    server_ = std::make_unique<H3TestServer>(options);
    ASSERT_TRUE(server_->ok());
  }

  std::string Url(absl::string_view path) const {
    return absl::StrCat("https://127.0.0.1:", server_->port(), path);
  }

  // One gtlsclient connection fetching `paths` (in one run, so on one connection); `extra` goes
  // before the address. Bodies land in downloads_ under the last path segment.
  CommandResult Fetch(const std::vector<std::string>& paths, const std::string& extra = "",
                      bool quiet = true) {
    std::vector<std::string> urls;
    for (const std::string& p : paths) urls.push_back(Url(p));
    return RunCommand(absl::StrCat(kClient, quiet ? " -q" : " --no-quic-dump --no-http-dump",
                                   " --exit-on-all-streams-close --max-streams-bidi=0",
                                   " --download ", downloads_.path().string(), " ", extra,
                                   " 127.0.0.1 ", server_->port(), " ", absl::StrJoin(urls, " ")));
  }

  std::string Downloaded(absl::string_view name) const {
    return ReadFile(downloads_.path() / std::string(name));
  }

  TempDir files_;
  TempDir downloads_;
  std::unique_ptr<H3TestServer> server_;
};

TEST_P(H3EngineTest, GetHello) {
  const CommandResult r = Fetch({"/hello"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(Downloaded("hello"), "hello");
}

TEST_P(H3EngineTest, StatusAndTrailersAsTheClientSawThem) {
  // Without -q, gtlsclient prints the fields it decoded, trailers included.
  const CommandResult r = Fetch({"/trailers"}, "", /*quiet=*/false);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(Downloaded("trailers"), "body");
  EXPECT_NE(r.output.find("[:status: 200]"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("[x-checksum: 42]"), std::string::npos) << r.output;
}

TEST_P(H3EngineTest, ResponsesCarryADateUnlessTheHandlerSetOne) {
  // RFC 9110 §6.6.1: the engine adds Date (IMF-fixdate); a handler's own Date is sent instead.
  const CommandResult r = Fetch({"/hello", "/dated"}, "", /*quiet=*/false);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::regex imf_fixdate(
      R"(\[date: (Mon|Tue|Wed|Thu|Fri|Sat|Sun), \d\d (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|)"
      R"(Dec) \d{4} \d\d:\d\d:\d\d GMT\])");
  int dates = 0;
  for (auto it = std::sregex_iterator(r.output.begin(), r.output.end(), imf_fixdate);
       it != std::sregex_iterator(); ++it) {
    ++dates;
  }
  EXPECT_EQ(dates, 2) << r.output;  // one per response, the handler's included
  EXPECT_NE(r.output.find("[date: Sun, 06 Nov 1994 08:49:37 GMT]"), std::string::npos) << r.output;
  EXPECT_EQ(Downloaded("dated"), "dated");
}

TEST_P(H3EngineTest, NotFound) {
  const CommandResult r = Fetch({"/files/missing", "/nope"}, "", /*quiet=*/false);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(Downloaded("missing"), "no such file\n");
  EXPECT_NE(r.output.find("[:status: 404]"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("[:status: 200]"), std::string::npos) << r.output;
}

TEST_P(H3EngineTest, FileDownloadsAreByteExact) {
  const std::string small = MakeContent(1024, 1);
  const std::string big = MakeContent(10 << 20, 2);
  WriteFile(files_.path() / "1k", small);
  WriteFile(files_.path() / "10m", big);
  const CommandResult r = Fetch({"/files/1k", "/files/10m"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(Sha256Hex(Downloaded("1k")), Sha256Hex(small));
  const std::string got = Downloaded("10m");
  EXPECT_EQ(got.size(), big.size());
  EXPECT_EQ(Sha256Hex(got), Sha256Hex(big));
}

TEST_P(H3EngineTest, LossyDownloadsAreByteExact) {
  // gtlsclient drops 10% of what it receives and 5% of what it sends: the server resends lost
  // STREAM data from the bytes it wrote by reference (nghttp3's frames, the body chunks), which
  // must still be intact until the client acknowledges them.
  const std::string small = MakeContent(3000, 5);
  const std::string big = MakeContent(3 << 20, 6);
  WriteFile(files_.path() / "3k", small);
  WriteFile(files_.path() / "3m", big);
  const CommandResult r =
      Fetch({"/files/3k", "/files/3m", "/trailers", "/files/3k"}, "--rx-loss=0.1 --tx-loss=0.05");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(Sha256Hex(Downloaded("3k")), Sha256Hex(small));
  EXPECT_EQ(Downloaded("trailers"), "body");
  const std::string got = Downloaded("3m");
  EXPECT_EQ(got.size(), big.size());
  EXPECT_EQ(Sha256Hex(got), Sha256Hex(big));
}

TEST_P(H3EngineTest, HundredMegabyteDownload) {
#if defined(PETREL_SANITIZED)
  GTEST_SKIP() << "100 MB is too slow under sanitizers (nosan)";
#endif
  const std::string big = MakeContent(100 << 20, 3);
  WriteFile(files_.path() / "100m", big);
  const CommandResult r = Fetch({"/files/100m"}, "", true);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string got = Downloaded("100m");
  EXPECT_EQ(got.size(), big.size());
  EXPECT_EQ(Sha256Hex(got), Sha256Hex(big));
}

TEST_P(H3EngineTest, UploadIsHashedByTheHandler) {
  const std::string body = MakeContent(10 << 20, 4);
  const std::filesystem::path upload = files_.path() / "upload";
  WriteFile(upload, body);
  const CommandResult r = Fetch({"/sha256"}, absl::StrCat("-m POST -d ", upload.string()));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(Downloaded("sha256"), absl::StrCat(Sha256Hex(body), " ", body.size()));
  EXPECT_EQ(server_->uploads_hashed(), 1);
}

TEST_P(H3EngineTest, ManyRequestsOnOneConnection) {
  std::vector<std::string> paths;
  std::vector<std::string> contents;
  for (int i = 0; i < 24; ++i) {
    contents.push_back(MakeContent(1000 + 997 * i, 100 + i));
    WriteFile(files_.path() / absl::StrCat("f", i), contents.back());
    paths.push_back(absl::StrCat("/files/f", i));
  }
  const CommandResult r = Fetch(paths);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (int i = 0; i < 24; ++i) {
    EXPECT_EQ(Sha256Hex(Downloaded(absl::StrCat("f", i))), Sha256Hex(contents[i])) << i;
  }
}

TEST_P(H3EngineTest, ParkedProducerResumes) {
  // /gate sends "gate:" and parks (NGHTTP3_ERR_WOULDBLOCK); /release, later on the same
  // connection, resumes it (nghttp3_conn_resume_stream) and the body completes.
  const CommandResult r = Fetch({"/gate", "/release"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(Downloaded("gate"), "gate:open");
  EXPECT_EQ(Downloaded("release"), "released 1");
  EXPECT_EQ(server_->gates_opened(), 1);
}

INSTANTIATE_TEST_SUITE_P(Workers, H3EngineTest, ::testing::Values(size_t{0}, size_t{2}),
                         [](const ::testing::TestParamInfo<size_t>& p) {
                           return absl::StrCat("workers", p.param);
                         });

// A body limit the Content-Length already exceeds: 413 before the handler runs.
TEST(H3EngineLimitsTest, OversizedUploadGets413) {
  if (access(kClient, X_OK) != 0) GTEST_SKIP() << "gtlsclient (ngtcp2-client) not installed";
  TempDir dir;
  TempDir downloads;
  H3TestServer::Options options;
  options.files_dir = dir.path().string();
  options.h3.max_request_body = 256 * 1024;
  H3TestServer server(options);
  ASSERT_TRUE(server.ok());
  const std::filesystem::path upload = dir.path() / "upload";
  WriteFile(upload, MakeContent(1 << 20, 5));
  const CommandResult r = RunCommand(absl::StrCat(
      kClient, " --no-quic-dump --no-http-dump --exit-on-all-streams-close --download ",
      downloads.path().string(), " -m POST -d ", upload.string(), " 127.0.0.1 ", server.port(),
      " https://127.0.0.1:", server.port(), "/sha256"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("[:status: 413]"), std::string::npos) << r.output;
  EXPECT_EQ(ReadFile(downloads.path() / "sha256"), "413 Content Too Large\n");
  EXPECT_EQ(server.uploads_hashed(), 0);
}

}  // namespace
}  // namespace petrel::http
