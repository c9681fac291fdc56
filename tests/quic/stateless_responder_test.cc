#include "quic/stateless/stateless_responder.h"

#include <gtest/gtest.h>
#include <ngtcp2/ngtcp2.h>

#include <algorithm>
#include <cstring>
#include <vector>

namespace petrel::quic {
namespace {

StatelessResetKey TestKey() {
  StatelessResetKey key{};
  key[3] = 9;
  return key;
}

TEST(StatelessResponderTest, VersionNegotiationListsOurVersionsAndSwapsCids) {
  StatelessResponder r(TestKey(), 10, 10);
  std::vector<uint8_t> d = {0xc0, 0x0a, 0x0a, 0x0a, 0x0a, 4, 1, 2, 3, 4, 2, 9, 8};
  d.resize(1200);
  InvariantHeader h;
  ASSERT_EQ(ParseInvariantHeader(d, 16, &h), HeaderParse::kUnsupportedVersion);
  uint8_t out[StatelessResponder::kMaxReplyLen];
  const size_t n = r.WriteVersionNegotiation(h, d.size(), out);
  ASSERT_GT(n, 0u);
  EXPECT_NE(out[0] & 0x80, 0);
  EXPECT_EQ(0, std::memcmp(out + 1, "\0\0\0\0", 4));  // version 0
  EXPECT_EQ(out[5], 2);                               // DCID = the client's SCID
  EXPECT_EQ(out[6], 9);
  EXPECT_EQ(out[8], 4);  // SCID = the client's DCID
  EXPECT_EQ(out[9], 1);
  std::vector<uint32_t> listed;
  for (size_t off = 13; off + 4 <= n; off += 4) {
    listed.push_back((uint32_t{out[off]} << 24) | (uint32_t{out[off + 1]} << 16) |
                     (uint32_t{out[off + 2]} << 8) | out[off + 3]);
  }
  auto ours = SupportedVersions();
  for (uint32_t v : ours) {
    EXPECT_NE(std::find(listed.begin(), listed.end(), v), listed.end()) << std::hex << v;
  }
  // A short datagram gets no reply: it could be spoofed to amplify.
  EXPECT_EQ(r.WriteVersionNegotiation(h, 1199, out), 0u);
}

TEST(StatelessResponderTest, ResetIsShorterThanTriggerAndEndsWithTheToken) {
  StatelessResponder r(TestKey(), 1000, 100);
  const uint8_t dcid[16] = {0x0f, 1, 0, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17};
  uint8_t out[StatelessResponder::kMaxReplyLen];
  const TimePoint now = MonotonicNow();
  for (size_t trigger : {22u, 30u, 43u, 44u, 1200u}) {
    const size_t n = r.WriteStatelessReset(dcid, trigger, now, out);
    ASSERT_GT(n, 0u) << trigger;
    EXPECT_LT(n, trigger);
    EXPECT_GE(n, StatelessResponder::kMinResetLen);
    EXPECT_EQ(out[0] & 0xc0, 0x40);  // looks like a short header
    uint8_t token[kStatelessResetTokenLen];
    StatelessResetTokens tokens(TestKey());
    tokens.Compute(dcid, token);
    EXPECT_EQ(0, std::memcmp(out + n - kStatelessResetTokenLen, token, kStatelessResetTokenLen));
  }
  EXPECT_EQ(r.WriteStatelessReset(dcid, 21, now, out), 0u);
  EXPECT_EQ(r.WriteStatelessReset(dcid, 5, now, out), 0u);
}

TEST(StatelessResponderTest, ResetsAreRateLimited) {
  StatelessResponder r(TestKey(), /*resets_per_second=*/10, /*burst=*/5);
  const uint8_t dcid[16] = {};
  uint8_t out[StatelessResponder::kMaxReplyLen];
  TimePoint now = MonotonicNow();
  int sent = 0;
  for (int i = 0; i < 20; ++i) sent += r.WriteStatelessReset(dcid, 100, now, out) > 0;
  EXPECT_EQ(sent, 5);
  EXPECT_EQ(r.resets_rate_limited(), 15u);
  now += std::chrono::milliseconds(300);  // refills three
  sent = 0;
  for (int i = 0; i < 20; ++i) sent += r.WriteStatelessReset(dcid, 100, now, out) > 0;
  EXPECT_EQ(sent, 3);
}

}  // namespace
}  // namespace petrel::quic
