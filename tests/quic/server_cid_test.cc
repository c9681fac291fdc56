#include "quic/cid/server_cid.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <set>
#include <string>

#include "quic/cid/stateless_reset.h"

namespace petrel::quic {
namespace {

TEST(ServerCidTest, LayoutFollowsQuicLbPlaintext) {
  ServerCidConfig config;
  config.config_rotation = 2;
  config.server_id_len = 2;
  config.server_id[0] = 0xab;
  config.server_id[1] = 0xcd;
  config.cid_len = 18;
  auto codec = ServerCidCodec::Create(config);
  ASSERT_TRUE(codec.ok()) << codec.status();
  uint8_t cid[20];
  codec->Generate(7, cid);
  EXPECT_EQ(cid[0], (2 << 5) | 17);  // rotation bits, then length - 1
  EXPECT_EQ(cid[1], 0xab);
  EXPECT_EQ(cid[2], 0xcd);
  EXPECT_EQ(cid[3], 7);
  EXPECT_EQ(codec->WorkerOf(absl::MakeConstSpan(cid, 18)), 7);
}

TEST(ServerCidTest, EveryWorkerRoundTripsAndRandomPartDiffers) {
  auto codec = ServerCidCodec::Create(ServerCidConfig{});
  ASSERT_TRUE(codec.ok());
  std::set<std::string> seen;
  for (int w = 0; w < 256; ++w) {
    uint8_t cid[20];
    codec->Generate(static_cast<uint8_t>(w), cid);
    EXPECT_EQ(codec->WorkerOf(absl::MakeConstSpan(cid, codec->cid_len())), w);
    seen.emplace(reinterpret_cast<char*>(cid), codec->cid_len());
  }
  EXPECT_EQ(seen.size(), 256u);
}

TEST(ServerCidTest, ForeignCidsAreNotRouted) {
  auto codec = ServerCidCodec::Create(ServerCidConfig{});
  ASSERT_TRUE(codec.ok());
  uint8_t cid[20];
  codec->Generate(3, cid);
  EXPECT_EQ(codec->WorkerOf(absl::MakeConstSpan(cid, 8)), std::nullopt);  // client-chosen length
  uint8_t other_server[20];
  std::copy(cid, cid + 20, other_server);
  other_server[1] ^= 1;
  EXPECT_EQ(codec->WorkerOf(absl::MakeConstSpan(other_server, codec->cid_len())), std::nullopt);
  uint8_t other_rotation[20];
  std::copy(cid, cid + 20, other_rotation);
  other_rotation[0] ^= 0x20;
  EXPECT_EQ(codec->WorkerOf(absl::MakeConstSpan(other_rotation, codec->cid_len())), std::nullopt);
}

TEST(ServerCidTest, RejectsLayoutsWithoutEnoughEntropy) {
  ServerCidConfig config;
  config.cid_len = 10;  // 1 + 1 + 1 + 7 random
  EXPECT_FALSE(ServerCidCodec::Create(config).ok());
  config.cid_len = 21;
  EXPECT_FALSE(ServerCidCodec::Create(config).ok());
  config.cid_len = 16;
  config.config_rotation = 7;
  EXPECT_FALSE(ServerCidCodec::Create(config).ok());
  config.config_rotation = 0;
  config.server_id_len = 0;
  EXPECT_FALSE(ServerCidCodec::Create(config).ok());
}

TEST(StatelessResetTest, TokensAreKeyedAndDeterministic) {
  StatelessResetKey key{};
  key[0] = 1;
  StatelessResetTokens a(key);
  StatelessResetTokens b(key);
  const uint8_t cid1[] = {1, 2, 3, 4, 5, 6, 7, 8};
  const uint8_t cid2[] = {1, 2, 3, 4, 5, 6, 7, 9};
  uint8_t t1[16], t1_again[16], t2[16], t_other_key[16];
  a.Compute(cid1, t1);
  b.Compute(cid1, t1_again);
  a.Compute(cid2, t2);
  a.Compute(cid1, t1_again);  // the same context reused gives the same token
  EXPECT_EQ(0, std::memcmp(t1, t1_again, 16));
  EXPECT_NE(0, std::memcmp(t1, t2, 16));
  key[0] = 2;
  StatelessResetTokens c(key);
  c.Compute(cid1, t_other_key);
  EXPECT_NE(0, std::memcmp(t1, t_other_key, 16));
}

}  // namespace
}  // namespace petrel::quic
