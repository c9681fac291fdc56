// A 100 MB hq-interop transfer over loopback, checked by SHA-256 (label `nosan`: too slow for
// sanitizer builds).
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "quic/hq/hq_client.h"
#include "quic/hq_test_util.h"

namespace petrel::hq {
namespace {

using testing::FileSha256;
using testing::RunningHqServer;
using testing::TempDir;

class LargeTransferTest : public ::testing::TestWithParam<size_t> {};

TEST_P(LargeTransferTest, HundredMegabytes) {
  TempDir root;
  TempDir download;
  testing::WriteRandomFile(root.path() + "/100m.bin", 100'000'000);
  QuicServerConfig c;
  c.workers = GetParam();
  RunningHqServer server(std::move(c), root.path());
  ASSERT_TRUE(server.ok());
  HqClientOptions o;
  o.quic.server = server.address();
  o.quic.verify_peer = false;
  o.quic.limits.idle_timeout_ms = 10'000;
  o.download_dir = download.path();
  o.paths = {"/100m.bin"};
  absl::StatusOr<HqClientResult> r = RunHqClient(o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->completed, 1u);
  EXPECT_EQ(FileSha256(download.path() + "/100m.bin"), FileSha256(root.path() + "/100m.bin"));
}

INSTANTIATE_TEST_SUITE_P(Modes, LargeTransferTest, ::testing::Values(0, 2),
                         [](const ::testing::TestParamInfo<size_t>& p) {
                           return absl::StrCat("workers", p.param);
                         });

}  // namespace
}  // namespace petrel::hq
