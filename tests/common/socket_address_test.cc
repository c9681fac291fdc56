#include "petrel/common/socket_address.h"

#include <gtest/gtest.h>

#include <cstring>

#include "absl/container/flat_hash_set.h"
#include "absl/hash/hash.h"

namespace petrel {
namespace {

TEST(SocketAddressTest, ParsesAndPrintsBothFamilies) {
  auto v4 = SocketAddress::ParseHostPort("127.0.0.1:8443");
  ASSERT_TRUE(v4.ok()) << v4.status();
  EXPECT_EQ(v4->family(), AF_INET);
  EXPECT_EQ(v4->port(), 8443);
  EXPECT_EQ(v4->ToString(), "127.0.0.1:8443");
  EXPECT_EQ(v4->length(), sizeof(sockaddr_in));

  auto v6 = SocketAddress::ParseHostPort("[::1]:443");
  ASSERT_TRUE(v6.ok()) << v6.status();
  EXPECT_TRUE(v6->is_v6());
  EXPECT_EQ(v6->ToString(), "[::1]:443");
  EXPECT_EQ(v6->HostString(), "::1");
  EXPECT_EQ(v6->length(), sizeof(sockaddr_in6));
}

TEST(SocketAddressTest, RejectsBadInput) {
  EXPECT_FALSE(SocketAddress::ParseHostPort("127.0.0.1").ok());
  EXPECT_FALSE(SocketAddress::ParseHostPort("127.0.0.1:99999").ok());
  EXPECT_FALSE(SocketAddress::ParseHostPort("::1:443").ok());
  EXPECT_FALSE(SocketAddress::ParseHostPort("localhost:80").ok());
  EXPECT_FALSE(SocketAddress::Parse("1.2.3", 1).ok());
}

TEST(SocketAddressTest, EqualityAndHashAgree) {
  auto a = *SocketAddress::Parse("10.0.0.1", 1);
  auto b = *SocketAddress::Parse("10.0.0.1", 1);
  auto c = *SocketAddress::Parse("10.0.0.1", 2);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  // The same address through the sockaddr constructor, with different padding in the source.
  sockaddr_in raw{};
  std::memset(&raw, 0xff, sizeof(raw));
  std::memcpy(&raw, a.sockaddr_ptr(), a.length());
  SocketAddress d(reinterpret_cast<const sockaddr*>(&raw), sizeof(raw));
  EXPECT_EQ(a, d);
  absl::flat_hash_set<SocketAddress> set = {a, b, c, d};
  EXPECT_EQ(set.size(), 2u);
  c.set_port(1);
  EXPECT_EQ(a, c);
  EXPECT_TRUE(SocketAddress().empty());
}

TEST(SocketAddressTest, ClearedIsEmptyLikeADefaultOne) {
  for (const char* host : {"192.0.2.7", "2001:db8::7"}) {
    SocketAddress a = *SocketAddress::Parse(host, 443);
    a.Clear();
    EXPECT_TRUE(a.empty()) << host;
    EXPECT_EQ(a.length(), 0u) << host;
    EXPECT_EQ(a.port(), 0) << host;
    EXPECT_EQ(a, SocketAddress()) << host;
    EXPECT_EQ(absl::Hash<SocketAddress>{}(a), absl::Hash<SocketAddress>{}(SocketAddress())) << host;
  }
}

}  // namespace
}  // namespace petrel
