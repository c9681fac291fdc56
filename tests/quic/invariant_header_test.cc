#include "quic/packet/invariant_header.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

namespace petrel::quic {
namespace {

std::vector<uint8_t> Bytes(std::initializer_list<int> list) {
  std::vector<uint8_t> out;
  for (int b : list) out.push_back(static_cast<uint8_t>(b));
  return out;
}

// A v1 Initial: the header of RFC 9001 Appendix A.2 with a 5-octet token inserted, and a payload
// of exactly the Length it declares.
std::vector<uint8_t> InitialWithToken(uint8_t first_octet, uint32_t version) {
  std::vector<uint8_t> p =
      Bytes({first_octet, 0,    0, 0,    0,    8,    0x83, 0x94, 0xc8, 0xf0, 0x3e, 0x51,
             0x57,        0x08, 3, 0xaa, 0xbb, 0xcc, 5,    't',  'o',  'k',  'e',  'n'});
  p[1] = static_cast<uint8_t>(version >> 24);
  p[2] = static_cast<uint8_t>(version >> 16);
  p[3] = static_cast<uint8_t>(version >> 8);
  p[4] = static_cast<uint8_t>(version);
  // Length 1182 as a 2-octet varint, then that many octets of packet number and payload.
  p.push_back(0x44);
  p.push_back(0x9e);
  p.resize(p.size() + 1182, 0x5a);
  return p;
}

TEST(InvariantHeaderTest, ParsesRfc9001ClientInitialHeader) {
  std::vector<uint8_t> p = Bytes(
      {0xc3, 0, 0, 0, 1, 8, 0x83, 0x94, 0xc8, 0xf0, 0x3e, 0x51, 0x57, 0x08, 0, 0, 0x44, 0x9e});
  p.resize(p.size() + 1182);
  InvariantHeader h;
  ASSERT_EQ(ParseInvariantHeader(p, 16, &h), HeaderParse::kOk);
  EXPECT_TRUE(h.long_form);
  EXPECT_EQ(h.version, kVersion1);
  EXPECT_EQ(h.type, LongPacketType::kInitial);
  EXPECT_EQ(h.dcid.size(), 8u);
  EXPECT_EQ(h.dcid[0], 0x83);
  EXPECT_TRUE(h.scid.empty());
  EXPECT_TRUE(h.token.empty());
}

TEST(InvariantHeaderTest, InitialTokenAndScid) {
  std::vector<uint8_t> p = InitialWithToken(0xc0, kVersion1);
  InvariantHeader h;
  ASSERT_EQ(ParseInvariantHeader(p, 16, &h), HeaderParse::kOk);
  EXPECT_EQ(h.scid.size(), 3u);
  EXPECT_EQ(h.scid[2], 0xcc);
  ASSERT_EQ(h.token.size(), 5u);
  EXPECT_EQ(std::string(h.token.begin(), h.token.end()), "token");
}

TEST(InvariantHeaderTest, Version2RotatesPacketTypes) {
  if (!IsSupportedVersion(kVersion2Draft)) GTEST_SKIP() << "ngtcp2 lacks provisional v2";
  // In v2 the type bits 0b01 mean Initial (in v1 they mean 0-RTT).
  std::vector<uint8_t> p = InitialWithToken(0xd0, kVersion2Draft);
  InvariantHeader h;
  ASSERT_EQ(ParseInvariantHeader(p, 16, &h), HeaderParse::kOk);
  EXPECT_EQ(h.type, LongPacketType::kInitial);
  EXPECT_EQ(h.token.size(), 5u);
  EXPECT_EQ(LongTypeFromBits(kVersion2Draft, 0), LongPacketType::kRetry);
  EXPECT_EQ(LongTypeFromBits(kVersion2Draft, 2), LongPacketType::kZeroRtt);
  EXPECT_EQ(LongTypeFromBits(kVersion2Draft, 3), LongPacketType::kHandshake);
  EXPECT_EQ(LongTypeFromBits(kVersion1, 1), LongPacketType::kZeroRtt);
  EXPECT_EQ(LongTypeFromBits(kVersion1, 3), LongPacketType::kRetry);
}

TEST(InvariantHeaderTest, EveryTruncationIsMalformed) {
  const std::vector<uint8_t> p = InitialWithToken(0xc0, kVersion1);
  for (size_t len = 0; len < p.size(); ++len) {
    InvariantHeader h;
    EXPECT_EQ(ParseInvariantHeader(absl::MakeConstSpan(p.data(), len), 16, &h),
              HeaderParse::kMalformed)
        << "prefix of " << len << " octets";
  }
}

TEST(InvariantHeaderTest, UnknownVersionKeepsLongConnectionIds) {
  // RFC 8999: a version-independent header may carry CIDs of up to 255 octets.
  std::vector<uint8_t> p = Bytes({0xc0, 0x1a, 0x2a, 0x3a, 0x4a, 255});
  p.resize(p.size() + 255, 0x11);
  p.push_back(200);
  p.resize(p.size() + 200, 0x22);
  p.resize(1200, 0);
  InvariantHeader h;
  ASSERT_EQ(ParseInvariantHeader(p, 16, &h), HeaderParse::kUnsupportedVersion);
  EXPECT_EQ(h.version, 0x1a2a3a4au);
  EXPECT_EQ(h.dcid.size(), 255u);
  EXPECT_EQ(h.scid.size(), 200u);
}

TEST(InvariantHeaderTest, VersionNegotiationAndBadFixedBit) {
  std::vector<uint8_t> vn = Bytes({0x80, 0, 0, 0, 0, 1, 0xaa, 1, 0xbb, 0, 0, 0, 1});
  InvariantHeader h;
  EXPECT_EQ(ParseInvariantHeader(vn, 16, &h), HeaderParse::kVersionNegotiation);

  // A later Initial with the fixed bit greased (RFC 9287) parses; the master refuses it only
  // as the first packet of a new connection.
  std::vector<uint8_t> p = InitialWithToken(0x80, kVersion1);
  ASSERT_EQ(ParseInvariantHeader(p, 16, &h), HeaderParse::kOk);
  EXPECT_FALSE(h.fixed_bit);
  p[0] = 0xc0;
  ASSERT_EQ(ParseInvariantHeader(p, 16, &h), HeaderParse::kOk);
  EXPECT_TRUE(h.fixed_bit);
  std::vector<uint8_t> long_cid = InitialWithToken(0xc0, kVersion1);
  long_cid[5] = 21;  // v1 limits CIDs to 20 octets
  EXPECT_EQ(ParseInvariantHeader(long_cid, 16, &h), HeaderParse::kMalformed);
}

TEST(InvariantHeaderTest, ShortHeader) {
  std::vector<uint8_t> p(40, 0x77);
  p[0] = 0x41;
  InvariantHeader h;
  ASSERT_EQ(ParseInvariantHeader(p, 16, &h), HeaderParse::kOk);
  EXPECT_FALSE(h.long_form);
  EXPECT_EQ(h.dcid.size(), 16u);
  EXPECT_EQ(h.dcid.data(), p.data() + 1);
  EXPECT_EQ(ParseInvariantHeader(absl::MakeConstSpan(p.data(), 16), 16, &h),
            HeaderParse::kMalformed);
  p[0] = 0x01;  // fixed bit clear: greased (RFC 9287), still routable
  EXPECT_EQ(ParseInvariantHeader(p, 16, &h), HeaderParse::kOk);
}

TEST(InvariantHeaderTest, Varints) {
  const std::vector<uint8_t> v = Bytes({0xc2, 0x19, 0x7c, 0x5e, 0xff, 0x14, 0xe8, 0x8c,  // 8 octets
                                        0x9d, 0x7f, 0x3e, 0x7d,                          // 4 octets
                                        0x7b, 0xbd,                                      // 2 octets
                                        0x25});                                          // 1 octet
  size_t pos = 0;
  uint64_t x = 0;
  ASSERT_TRUE(ReadVarint(v, &pos, &x));
  EXPECT_EQ(x, 151288809941952652u);
  ASSERT_TRUE(ReadVarint(v, &pos, &x));
  EXPECT_EQ(x, 494878333u);
  ASSERT_TRUE(ReadVarint(v, &pos, &x));
  EXPECT_EQ(x, 15293u);
  ASSERT_TRUE(ReadVarint(v, &pos, &x));
  EXPECT_EQ(x, 37u);
  EXPECT_FALSE(ReadVarint(v, &pos, &x));
  size_t short_pos = 0;
  EXPECT_FALSE(ReadVarint(absl::MakeConstSpan(v.data(), 7), &short_pos, &x));
}

// Hostile input: random datagrams and random mutations of a valid Initial never make the parser
// read out of bounds (ASan checks) and every span it returns lies inside the datagram.
TEST(InvariantHeaderTest, RandomInputStaysInBounds) {
  std::mt19937 rng(12345);
  const std::vector<uint8_t> valid = InitialWithToken(0xc0, kVersion1);
  for (int iter = 0; iter < 200000; ++iter) {
    std::vector<uint8_t> d;
    if (iter % 2 == 0) {
      d.resize(rng() % 64);
      for (auto& b : d) b = static_cast<uint8_t>(rng());
    } else {
      d = valid;
      for (int m = 0; m < 3; ++m) d[rng() % 30] = static_cast<uint8_t>(rng());
      d.resize(rng() % d.size());
    }
    InvariantHeader h;
    const HeaderParse r = ParseInvariantHeader(d, 16, &h);
    if (r == HeaderParse::kMalformed) continue;
    for (absl::Span<const uint8_t> s : {h.dcid, h.scid, h.token}) {
      if (s.empty()) continue;
      ASSERT_GE(s.data(), d.data());
      ASSERT_LE(s.data() + s.size(), d.data() + d.size());
    }
  }
}

}  // namespace
}  // namespace petrel::quic
