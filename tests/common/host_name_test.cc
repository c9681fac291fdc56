#include "common/host_name.h"

#include "gtest/gtest.h"

namespace petrel {
namespace {

TEST(HostOfAuthorityTest, StripsPortBracketsAndTrailingDot) {
  EXPECT_EQ(HostOfAuthority("Example.COM:8443"), "Example.COM");
  EXPECT_EQ(HostOfAuthority("a.example"), "a.example");
  EXPECT_EQ(HostOfAuthority("a.example.:443"), "a.example");
  EXPECT_EQ(HostOfAuthority("[::1]:8443"), "::1");
  EXPECT_EQ(HostOfAuthority("[::1]"), "::1");
  EXPECT_EQ(HostOfAuthority("127.0.0.1:80"), "127.0.0.1");
  EXPECT_EQ(HostOfAuthority("::1"), "::1");  // unbracketed IPv6: no port to strip
  EXPECT_EQ(HostOfAuthority("[::1"), "");
  EXPECT_EQ(HostOfAuthority(""), "");
}

TEST(HostTableTest, ExactNamesCaseInsensitiveAndBeforeWildcards) {
  HostTable t;
  ASSERT_TRUE(t.Add("a.example", 0).ok());
  ASSERT_TRUE(t.Add("*.b.example", 1).ok());
  ASSERT_TRUE(t.Add("WWW.B.example", 2).ok());
  ASSERT_TRUE(t.Add("127.0.0.1", 3).ok());
  EXPECT_EQ(t.Find("a.example"), 0u);
  EXPECT_EQ(t.Find("A.Example."), 0u);
  EXPECT_EQ(t.Find("x.b.example"), 1u);
  EXPECT_EQ(t.Find("www.b.example"), 2u);
  EXPECT_EQ(t.Find("127.0.0.1"), 3u);
  // A wildcard is one leftmost label, never the bare parent or two labels.
  EXPECT_EQ(t.Find("b.example"), std::nullopt);
  EXPECT_EQ(t.Find("y.x.b.example"), std::nullopt);
  EXPECT_EQ(t.Find(".b.example"), std::nullopt);
  EXPECT_EQ(t.Find("c.example"), std::nullopt);
  EXPECT_EQ(t.Find(""), std::nullopt);
  EXPECT_EQ(t.Find(std::string(300, 'a')), std::nullopt);
}

TEST(HostTableTest, RejectsMalformedAndDuplicatePatterns) {
  HostTable t;
  EXPECT_FALSE(t.Add("", 0).ok());
  EXPECT_FALSE(t.Add("*", 0).ok());
  EXPECT_FALSE(t.Add("*.", 0).ok());
  EXPECT_FALSE(t.Add("a.*.example", 0).ok());
  EXPECT_FALSE(t.Add("a b", 0).ok());
  EXPECT_FALSE(t.Add(std::string(254, 'a'), 0).ok());
  ASSERT_TRUE(t.Add("a.example", 0).ok());
  EXPECT_EQ(t.Add("A.EXAMPLE", 1).code(), absl::StatusCode::kAlreadyExists);
  EXPECT_TRUE(t.Add("*.a.example", 1).ok());
  EXPECT_EQ(t.Add("*.a.example.", 2).code(), absl::StatusCode::kAlreadyExists);
}

TEST(SameHostTest, IgnoresCaseAndTrailingDot) {
  EXPECT_TRUE(SameHost("A.example.", "a.EXAMPLE"));
  EXPECT_FALSE(SameHost("a.example", "b.example"));
}

}  // namespace
}  // namespace petrel
