#include "quic/token/address_token.h"

#include <gtest/gtest.h>

#include <vector>

namespace petrel::quic {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

class AddressTokenTest : public ::testing::Test {
 protected:
  AddressTokenKey key_ = AddressTokenCodec::RandomKey();
  AddressTokenCodec codec_{key_};
  SocketAddress client_ = *SocketAddress::Parse("192.0.2.7", 4433);
  WallTime now_ = std::chrono::system_clock::now();
  const std::vector<uint8_t> odcid_ = {1, 2, 3, 4, 5, 6, 7, 8, 9};
};

TEST_F(AddressTokenTest, RetryTokenRoundTrip) {
  uint8_t token[AddressTokenCodec::kMaxTokenLen];
  const size_t len = codec_.MakeRetryToken(client_, odcid_, now_, token);
  ASSERT_GT(len, 0u);
  RetryTokenContents contents;
  EXPECT_EQ(codec_.CheckRetryToken(absl::MakeConstSpan(token, len), client_, now_ + seconds(1),
                                   seconds(10), &contents),
            TokenCheck::kValid);
  EXPECT_EQ(
      std::vector<uint8_t>(contents.odcid.begin(), contents.odcid.begin() + contents.odcid_len),
      odcid_);
}

TEST_F(AddressTokenTest, RetryTokenBoundToAddressPortKeyKindAndTime) {
  uint8_t token[AddressTokenCodec::kMaxTokenLen];
  const size_t len = codec_.MakeRetryToken(client_, odcid_, now_, token);
  auto span = absl::MakeConstSpan(token, len);
  SocketAddress other_port = client_;
  other_port.set_port(4434);
  EXPECT_EQ(codec_.CheckRetryToken(span, other_port, now_, seconds(10), nullptr),
            TokenCheck::kMalformed);
  EXPECT_EQ(codec_.CheckRetryToken(span, *SocketAddress::Parse("192.0.2.8", 4433), now_,
                                   seconds(10), nullptr),
            TokenCheck::kMalformed);
  EXPECT_EQ(codec_.CheckRetryToken(span, client_, now_ + seconds(11), seconds(10), nullptr),
            TokenCheck::kExpired);
  EXPECT_EQ(codec_.CheckNewToken(span, client_, now_, seconds(10)), TokenCheck::kMalformed);
  AddressTokenCodec other_key(AddressTokenCodec::RandomKey());
  EXPECT_EQ(other_key.CheckRetryToken(span, client_, now_, seconds(10), nullptr),
            TokenCheck::kMalformed);
  for (size_t i = 0; i < len; ++i) {
    uint8_t flipped[AddressTokenCodec::kMaxTokenLen];
    std::copy(token, token + len, flipped);
    flipped[i] ^= 0x01;
    EXPECT_EQ(codec_.CheckRetryToken(absl::MakeConstSpan(flipped, len), client_, now_, seconds(10),
                                     nullptr),
              TokenCheck::kMalformed)
        << "bit flip at " << i;
  }
  for (size_t cut = 0; cut < len; ++cut) {
    EXPECT_EQ(codec_.CheckRetryToken(absl::MakeConstSpan(token, cut), client_, now_, seconds(10),
                                     nullptr),
              TokenCheck::kMalformed);
  }
}

TEST_F(AddressTokenTest, NewTokenIgnoresPortButNotAddress) {
  uint8_t token[AddressTokenCodec::kMaxTokenLen];
  const size_t len = codec_.MakeNewToken(client_, now_, token);
  ASSERT_GT(len, 0u);
  auto span = absl::MakeConstSpan(token, len);
  SocketAddress later = client_;
  later.set_port(50000);
  EXPECT_EQ(codec_.CheckNewToken(span, later, now_ + seconds(60), seconds(3600)),
            TokenCheck::kValid);
  EXPECT_EQ(
      codec_.CheckNewToken(span, *SocketAddress::Parse("2001:db8::7", 4433), now_, seconds(3600)),
      TokenCheck::kMalformed);
  EXPECT_EQ(codec_.CheckNewToken(span, later, now_ + seconds(3601), seconds(3600)),
            TokenCheck::kExpired);
  EXPECT_EQ(codec_.CheckNewToken(span, later, now_ - seconds(3601), seconds(3600)),
            TokenCheck::kExpired);
  EXPECT_EQ(codec_.CheckRetryToken(span, client_, now_, seconds(10), nullptr),
            TokenCheck::kMalformed);
}

TEST_F(AddressTokenTest, Ipv6AndEmptyOdcid) {
  SocketAddress v6 = *SocketAddress::Parse("::1", 443);
  uint8_t token[AddressTokenCodec::kMaxTokenLen];
  const size_t len = codec_.MakeRetryToken(v6, {}, now_, token);
  RetryTokenContents contents;
  EXPECT_EQ(codec_.CheckRetryToken(absl::MakeConstSpan(token, len), v6, now_, milliseconds(100),
                                   &contents),
            TokenCheck::kValid);
  EXPECT_EQ(contents.odcid_len, 0u);
  const std::vector<uint8_t> too_long(21, 1);
  EXPECT_EQ(codec_.MakeRetryToken(v6, too_long, now_, token), 0u);
}

}  // namespace
}  // namespace petrel::quic
