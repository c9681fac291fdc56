#include "petrel/common/socket_address.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

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

// An address is a value copied with every received datagram: the size of the larger family's
// sockaddr, not of sockaddr_storage. The kernel fills it whole through mutable_sockaddr().
TEST(SocketAddressTest, HoldsEitherFamilyInASockaddrIn6) {
  static_assert(sizeof(SocketAddress) == sizeof(sockaddr_in6));
  static_assert(SocketAddress::capacity() == sizeof(sockaddr_in6));
  sockaddr_in6 v6{};
  v6.sin6_family = AF_INET6;
  v6.sin6_port = htons(4433);
  v6.sin6_addr.s6_addr[15] = 1;
  v6.sin6_scope_id = 7;
  const SocketAddress a(reinterpret_cast<const sockaddr*>(&v6), sizeof(v6));
  EXPECT_EQ(a.ToString(), "[::1]:4433");
  EXPECT_EQ(a.length(), sizeof(sockaddr_in6));
  EXPECT_EQ(std::memcmp(a.sockaddr_ptr(), &v6, sizeof(v6)), 0);  // the scope id too
  // Too short for its family: empty.
  EXPECT_TRUE(SocketAddress(reinterpret_cast<const sockaddr*>(&v6), sizeof(sockaddr_in)).empty());

  const int fd = socket(AF_INET6, SOCK_DGRAM, 0);
  ASSERT_GE(fd, 0);
  const SocketAddress any = *SocketAddress::Parse("::1", 0);
  ASSERT_EQ(bind(fd, any.sockaddr_ptr(), any.length()), 0);
  SocketAddress bound;
  socklen_t len = SocketAddress::capacity();
  ASSERT_EQ(getsockname(fd, bound.mutable_sockaddr(), &len), 0);
  close(fd);
  EXPECT_EQ(len, sizeof(sockaddr_in6));
  EXPECT_TRUE(bound.is_v6());
  EXPECT_NE(bound.port(), 0);
  EXPECT_EQ(bound.HostString(), "::1");
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
