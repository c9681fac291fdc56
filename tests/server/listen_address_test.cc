// The text forms of HttpServerConfig::listen / --listen, and which address serves which port.
#include "server/listen_address.h"

#include <gtest/gtest.h>

namespace petrel::server {
namespace {

TEST(ListenAddressTest, AddressAloneServesEveryPort) {
  for (const char* text : {"127.0.0.1", "0.0.0.0", "::1", "[::1]", "::", "[::]", "fe80::1"}) {
    absl::StatusOr<ListenAddress> a = ParseListenAddress(text);
    ASSERT_TRUE(a.ok()) << text << ": " << a.status();
    EXPECT_FALSE(a->port.has_value()) << text;
    EXPECT_TRUE(a->required) << text;
    EXPECT_EQ(a->ip.port(), 0) << text;
  }
  EXPECT_TRUE(ParseListenAddress("[::1]")->ip.is_v6());
  EXPECT_FALSE(ParseListenAddress("127.0.0.1")->ip.is_v6());
}

TEST(ListenAddressTest, AddressWithPortServesThatPortOnly) {
  absl::StatusOr<ListenAddress> v4 = ParseListenAddress("10.0.0.1:8443");
  ASSERT_TRUE(v4.ok()) << v4.status();
  EXPECT_EQ(v4->ip.HostString(), "10.0.0.1");
  EXPECT_EQ(v4->port, 8443);
  absl::StatusOr<ListenAddress> v6 = ParseListenAddress("[2001:db8::1]:8080");
  ASSERT_TRUE(v6.ok()) << v6.status();
  EXPECT_EQ(v6->ip.HostString(), "2001:db8::1");
  EXPECT_EQ(v6->port, 8080);
}

TEST(ListenAddressTest, BadFormsAreRefusedWithTheirText) {
  for (const char* text :
       {"", "localhost", "1.2.3", "[::1", "[::1]8443", "[::1]:", "1.2.3.4:", "1.2.3.4:0",
        "1.2.3.4:65536", "1.2.3.4:x", "[1.2.3.4.5]:80", "256.0.0.1"}) {
    absl::StatusOr<ListenAddress> a = ParseListenAddress(text);
    ASSERT_FALSE(a.ok()) << "'" << text << "' was accepted";
    EXPECT_NE(a.status().message().find(absl::StrCat("'", text, "'")), std::string::npos)
        << a.status();
  }
}

TEST(ListenAddressTest, DefaultIsLoopbackOnBothFamiliesWithIpv6Optional) {
  absl::StatusOr<std::vector<ListenAddress>> d = ParseListenAddresses({}, 8080, 8443);
  ASSERT_TRUE(d.ok()) << d.status();
  ASSERT_EQ(d->size(), 2u);
  EXPECT_EQ((*d)[0].ip.HostString(), "127.0.0.1");
  EXPECT_TRUE((*d)[0].required);
  EXPECT_EQ((*d)[1].ip.HostString(), "::1");
  EXPECT_FALSE((*d)[1].required);
}

TEST(ListenAddressTest, PortsOutsideTheServerAndRepeatsAreRefused) {
  absl::StatusOr<std::vector<ListenAddress>> a =
      ParseListenAddresses({"127.0.0.1:9999"}, 8080, 8443);
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().message().find("neither the http nor the https port"), std::string::npos);
  // A port that is off, or picked at bind time, cannot be named either.
  EXPECT_FALSE(ParseListenAddresses({"127.0.0.1:8080"}, std::nullopt, 8443).ok());
  EXPECT_FALSE(ParseListenAddresses({"127.0.0.1:8443"}, 8080, 0).ok());
  EXPECT_FALSE(ParseListenAddresses({"127.0.0.1", "127.0.0.1"}, 8080, 8443).ok());
  EXPECT_FALSE(ParseListenAddresses({"127.0.0.1", "127.0.0.1:8443"}, 8080, 8443).ok());
  EXPECT_FALSE(ParseListenAddresses({"[::1]", "::1"}, 8080, 8443).ok());
  // The same address for each port, once each, is fine.
  EXPECT_TRUE(ParseListenAddresses({"127.0.0.1:8080", "127.0.0.1:8443"}, 8080, 8443).ok());
}

TEST(ListenAddressTest, AddressesForAPortTakeThatPort) {
  absl::StatusOr<std::vector<ListenAddress>> a =
      ParseListenAddresses({"127.0.0.1", "[::1]:8443", "127.0.0.2:8080"}, 8080, 8443);
  ASSERT_TRUE(a.ok()) << a.status();
  std::vector<SocketAddress> https = AddressesFor(*a, 8443);
  ASSERT_EQ(https.size(), 2u);
  EXPECT_EQ(https[0].ToString(), "127.0.0.1:8443");
  EXPECT_EQ(https[1].ToString(), "[::1]:8443");
  std::vector<SocketAddress> http = AddressesFor(*a, 8080);
  ASSERT_EQ(http.size(), 2u);
  EXPECT_EQ(http[0].ToString(), "127.0.0.1:8080");
  EXPECT_EQ(http[1].ToString(), "127.0.0.2:8080");
}

TEST(ListenAddressTest, CanBindTellsLoopbackFromAForeignAddress) {
  EXPECT_TRUE(CanBind(*SocketAddress::Parse("127.0.0.1", 0)));
  // TEST-NET-3 (RFC 5737) is on no interface of a test machine.
  EXPECT_FALSE(CanBind(*SocketAddress::Parse("203.0.113.7", 0)));
}

}  // namespace
}  // namespace petrel::server
