#include "petrel/http/method.h"

#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "gtest/gtest.h"

namespace petrel {
namespace {

struct Standard {
  const char* name;
  MethodKind kind;
  bool safe;
  bool idempotent;
};

// RFC 9110 §9.2.1 (safe) and §9.2.2 (idempotent); PATCH from RFC 5789 is neither.
constexpr Standard kStandard[] = {
    {"GET", MethodKind::kGet, true, true},         {"HEAD", MethodKind::kHead, true, true},
    {"POST", MethodKind::kPost, false, false},     {"PUT", MethodKind::kPut, false, true},
    {"DELETE", MethodKind::kDelete, false, true},  {"CONNECT", MethodKind::kConnect, false, false},
    {"OPTIONS", MethodKind::kOptions, true, true}, {"TRACE", MethodKind::kTrace, true, true},
    {"PATCH", MethodKind::kPatch, false, false},
};

TEST(MethodTest, EveryStandardMethodParses) {
  for (const Standard& s : kStandard) {
    SCOPED_TRACE(s.name);
    std::optional<Method> m = Method::Parse(s.name);
    ASSERT_TRUE(m.has_value());
    EXPECT_EQ(m->kind(), s.kind);
    EXPECT_FALSE(m->is_extension());
    EXPECT_EQ(m->name(), s.name);
    EXPECT_EQ(MethodKindName(s.kind), s.name);
    EXPECT_EQ(*m, Method(s.kind));
    EXPECT_EQ(m->IsSafe(), s.safe);
    EXPECT_EQ(m->IsIdempotent(), s.idempotent);
  }
}

TEST(MethodTest, CaseSensitive) {
  std::optional<Method> lower = Method::Parse("get");
  ASSERT_TRUE(lower.has_value());
  EXPECT_TRUE(lower->is_extension());
  EXPECT_EQ(lower->kind(), MethodKind::kExtension);
  EXPECT_EQ(lower->name(), "get");
  EXPECT_NE(*lower, Method(Method::kGet));
  EXPECT_FALSE(lower->IsSafe());

  std::optional<Method> mixed = Method::Parse("Post");
  ASSERT_TRUE(mixed.has_value());
  EXPECT_TRUE(mixed->is_extension());
}

TEST(MethodTest, NearMissesOfStandardNamesAreExtensions) {
  for (const char* name : {"GETS", "GE", "PUTT", "POS", "HEADER", "PATCHY", "DELET", "CONNECTX",
                           "OPTION", "TRACEROUTE", "PGST", "HOST"}) {
    SCOPED_TRACE(name);
    std::optional<Method> m = Method::Parse(name);
    ASSERT_TRUE(m.has_value());
    EXPECT_TRUE(m->is_extension());
    EXPECT_EQ(m->name(), name);
  }
}

TEST(MethodTest, ExtensionTokens) {
  for (const char* name : {"PROPFIND", "M-SEARCH", "BREW", "x", "!#$%&'*+-.^_`|~09azAZ"}) {
    SCOPED_TRACE(name);
    std::optional<Method> m = Method::Parse(name);
    ASSERT_TRUE(m.has_value());
    EXPECT_TRUE(m->is_extension());
    EXPECT_EQ(m->name(), name);
    EXPECT_FALSE(m->IsSafe());
    EXPECT_FALSE(m->IsIdempotent());
  }
}

TEST(MethodTest, InvalidTokensRejected) {
  const std::vector<std::string> invalid = {
      "",     "GE T", "GET ", " GET", "GET\r", "G\tT", "(GET)", "G@T",  "a/b",
      "a,b",  "a;b",  "a:b",  "a=b",  "a\"b",  "[x]",  "{x}",   "\x7f", std::string("G\0T", 3),
      "\x80", "\xff", "é",    "?",    "\\"};
  for (const std::string& token : invalid) {
    SCOPED_TRACE(token);
    EXPECT_FALSE(Method::Parse(token).has_value());
  }
}

TEST(MethodTest, DefaultAndConversions) {
  Method m;
  EXPECT_EQ(m, Method::kGet);
  m = Method::kDelete;
  EXPECT_EQ(m.kind(), MethodKind::kDelete);
  EXPECT_TRUE(m == Method::kDelete);
  EXPECT_TRUE(Method::kDelete == m);
  EXPECT_FALSE(m == Method::kPut);
}

TEST(MethodTest, OrderingStandardThenExtensions) {
  const Method get = Method::kGet;
  const Method patch = Method::kPatch;
  const Method a = *Method::Parse("AAA");
  const Method b = *Method::Parse("BBB");
  EXPECT_LT(get, patch);
  EXPECT_LT(patch, a);
  EXPECT_LT(a, b);
  EXPECT_EQ(a, *Method::Parse("AAA"));
  EXPECT_GT(b, get);
}

TEST(MethodTest, Hashable) {
  absl::flat_hash_set<Method> set = {Method::kGet, Method::kPost, *Method::Parse("X")};
  EXPECT_TRUE(set.contains(*Method::Parse("GET")));
  EXPECT_TRUE(set.contains(*Method::Parse("X")));
  EXPECT_FALSE(set.contains(*Method::Parse("Y")));
  EXPECT_FALSE(set.contains(Method::kPut));
}

}  // namespace
}  // namespace petrel
