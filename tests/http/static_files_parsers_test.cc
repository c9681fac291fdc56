// The parsers and helpers behind StaticFiles, with hostile input: HTTP dates in the three RFC 9110
// forms, entity tags and their lists, Range, request paths, MIME types, directory listings.
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "http/http_date.h"
#include "http/static/conditional.h"
#include "http/static/directory_listing.h"
#include "http/static/mime_types.h"
#include "http/static/range.h"
#include "http/static/request_path.h"

namespace petrel {
namespace {

using http_internal::RangeDecision;
using ::testing::HasSubstr;
using ::testing::Optional;

TEST(HttpDateTest, ThreeFormsAndFormatting) {
  constexpr int64_t kNow = 1764547200;  // 2025-12-01
  constexpr int64_t kSunday = 784111777;
  EXPECT_THAT(http_internal::ParseHttpDate("Sun, 06 Nov 1994 08:49:37 GMT", kNow),
              Optional(kSunday));
  EXPECT_THAT(http_internal::ParseHttpDate("Sunday, 06-Nov-94 08:49:37 GMT", kNow),
              Optional(kSunday));
  EXPECT_THAT(http_internal::ParseHttpDate("Sun Nov  6 08:49:37 1994", kNow), Optional(kSunday));
  EXPECT_THAT(http_internal::ParseHttpDate("Sun Nov 16 08:49:37 1994", kNow),
              Optional(kSunday + 10 * 86400));
  EXPECT_EQ(http_internal::FormatHttpDate(kSunday), "Sun, 06 Nov 1994 08:49:37 GMT");
  EXPECT_EQ(http_internal::FormatHttpDate(0), "Thu, 01 Jan 1970 00:00:00 GMT");
  EXPECT_EQ(http_internal::FormatHttpDate(-1), "Wed, 31 Dec 1969 23:59:59 GMT");
  EXPECT_EQ(http_internal::FormatHttpDate(INT64_MAX), "Fri, 31 Dec 9999 23:59:59 GMT");
  EXPECT_EQ(http_internal::FormatHttpDate(INT64_MIN), "Mon, 01 Jan 0001 00:00:00 GMT");
  for (int64_t t : {int64_t{0}, kSunday, int64_t{951782400} /* 2000-02-29 */, kNow,
                    http_internal::kMaxHttpDate, http_internal::kMinHttpDate}) {
    EXPECT_THAT(http_internal::ParseHttpDate(http_internal::FormatHttpDate(t), kNow), Optional(t));
  }
  // Leap second counts as :59.
  EXPECT_THAT(http_internal::ParseHttpDate("Sat, 31 Dec 2016 23:59:60 GMT", kNow),
              Optional(int64_t{1483228799}));
  // RFC 850 years: more than 50 years ahead of 2025 means the last century.
  EXPECT_THAT(http_internal::ParseHttpDate("Thursday, 01-Jan-70 00:00:00 GMT", kNow),
              Optional(int64_t{3155760000}));  // 2070
  EXPECT_THAT(http_internal::ParseHttpDate("Saturday, 01-Jan-77 00:00:00 GMT", kNow),
              Optional(int64_t{220924800}));  // 1977
}

TEST(HttpDateTest, RejectsHostileInput) {
  constexpr int64_t kNow = 1764547200;
  for (absl::string_view bad : {
           absl::string_view(""),
           absl::string_view(" "),
           absl::string_view("Sun, 06 Nov 1994 08:49:37 GMT "),
           absl::string_view(" Sun, 06 Nov 1994 08:49:37 GMT"),
           absl::string_view("sun, 06 Nov 1994 08:49:37 GMT"),
           absl::string_view("Sun, 06 nov 1994 08:49:37 GMT"),
           absl::string_view("Sun, 06 Nov 1994 08:49:37 UTC"),
           absl::string_view("Sun, 6 Nov 1994 08:49:37 GMT"),
           absl::string_view("Sun, 06 Nov 94 08:49:37 GMT"),
           absl::string_view("Sun, 31 Feb 1994 08:49:37 GMT"),
           absl::string_view("Sun, 29 Feb 1900 08:49:37 GMT"),
           absl::string_view("Sun, 00 Nov 1994 08:49:37 GMT"),
           absl::string_view("Sun, 06 Nov 1994 24:00:00 GMT"),
           absl::string_view("Sun, 06 Nov 1994 08:60:00 GMT"),
           absl::string_view("Sun, 06 Nov 1994 08:49:61 GMT"),
           absl::string_view("Sun, 06 Nov 0000 08:49:37 GMT"),
           absl::string_view("Sun, +6 Nov 1994 08:49:37 GMT"),
           absl::string_view("Sun, 06 Nov 1994 08:49:3 GMT"),
           absl::string_view("Sun, 06 Nov 1994 08:49:37 GMT\0", 30),
           absl::string_view("Sun, 06 Nov 1994 08:49\0:37 GMT", 30),
           absl::string_view("Sun, 06 Nov 1994"),
           absl::string_view("Sun,"),
           absl::string_view("Funday, 06-Nov-94 08:49:37 GMT"),
           absl::string_view("Sun, 06-Nov-94 08:49:37 GMT"),
           absl::string_view("Sunday, 06-Nov-1994 08:49:37 GMT"),
           absl::string_view("Sunday, 06-Nov-94 08:49:37"),
           absl::string_view("Sun Nov 6 08:49:37 1994"),
           absl::string_view("Sun Nov  6 08:49:37 94"),
           absl::string_view("Sun Nov  6 08:49:37 1994 "),
           absl::string_view("Sun Nov 06 08:49:37 1994x"),
           absl::string_view("1994-11-06T08:49:37Z"),
           absl::string_view("784111777"),
       }) {
    EXPECT_EQ(http_internal::ParseHttpDate(bad, kNow), std::nullopt) << bad;
  }
  EXPECT_EQ(http_internal::ParseHttpDate(std::string(100000, 'S'), kNow), std::nullopt);
  EXPECT_EQ(http_internal::ParseHttpDate(std::string(40, ','), kNow), std::nullopt);
}

TEST(EntityTagTest, ParseAndCompare) {
  using http_internal::EntityTag;
  EXPECT_THAT(http_internal::ParseEntityTag("\"abc\"").has_value(), true);
  EXPECT_TRUE(http_internal::ParseEntityTag("W/\"abc\"")->weak);
  EXPECT_EQ(http_internal::ParseEntityTag("W/\"abc\"")->opaque, "\"abc\"");
  EXPECT_TRUE(http_internal::ParseEntityTag("\"\"").has_value());
  EXPECT_TRUE(http_internal::ParseEntityTag("\"\x80\xff\"").has_value());  // obs-text.
  for (absl::string_view bad :
       {absl::string_view(""), absl::string_view("\""), absl::string_view("abc"),
        absl::string_view("\"abc"), absl::string_view("W/"), absl::string_view("w/\"a\""),
        absl::string_view("W/abc"), absl::string_view("\"a\"b"), absl::string_view("\"a b\""),
        absl::string_view("\"a\x01\""), absl::string_view("\"a\0\"", 4),
        absl::string_view(" \"a\"")}) {
    EXPECT_FALSE(http_internal::ParseEntityTag(bad).has_value()) << bad;
  }
  const EntityTag strong{false, "\"1\""};
  const EntityTag weak{true, "\"1\""};
  const EntityTag other{false, "\"2\""};
  EXPECT_TRUE(http_internal::StrongMatch(strong, strong));
  EXPECT_FALSE(http_internal::StrongMatch(strong, weak));
  EXPECT_FALSE(http_internal::StrongMatch(weak, weak));
  EXPECT_TRUE(http_internal::WeakMatch(strong, weak));
  EXPECT_TRUE(http_internal::WeakMatch(weak, weak));
  EXPECT_FALSE(http_internal::WeakMatch(strong, other));
}

TEST(EntityTagTest, Lists) {
  using http_internal::MatchEntityTagList;
  using http_internal::TagListMatch;
  const http_internal::EntityTag current{false, "\"v1\""};
  EXPECT_EQ(MatchEntityTagList("\"v1\"", current, false), TagListMatch::kMatch);
  EXPECT_EQ(MatchEntityTagList(" * ", current, false), TagListMatch::kMatch);
  EXPECT_EQ(MatchEntityTagList("\"a\",\"v1\"", current, false), TagListMatch::kMatch);
  EXPECT_EQ(MatchEntityTagList(" , \"a\" ,\t, W/\"v1\" ,", current, true), TagListMatch::kMatch);
  EXPECT_EQ(MatchEntityTagList("W/\"v1\"", current, false), TagListMatch::kNoMatch);
  EXPECT_EQ(MatchEntityTagList("\"V1\"", current, true), TagListMatch::kNoMatch);
  EXPECT_EQ(MatchEntityTagList("\"a\", \"b\"", current, true), TagListMatch::kNoMatch);
  for (absl::string_view bad : {"", " ", ",", ", ,", "*, \"v1\"", "\"v1\", *", "\"a\" \"v1\"", "v1",
                                "\"v1", "\"v1\",\"", "W/ \"v1\"", "**"}) {
    EXPECT_EQ(MatchEntityTagList(bad, current, true), TagListMatch::kMalformed) << bad;
  }
  // Long hostile lists are linear and bounded by the input.
  std::string many;
  for (int i = 0; i < 10000; ++i) many += "\"x\",";
  EXPECT_EQ(MatchEntityTagList(many + "\"v1\"", current, true), TagListMatch::kMatch);
  EXPECT_EQ(MatchEntityTagList(many + "\"v1", current, true), TagListMatch::kMalformed);
}

TEST(RangeTest, EvaluateRange) {
  using Kind = RangeDecision::Kind;
  auto eval = [](absl::string_view v, uint64_t size) {
    RangeDecision d = http_internal::EvaluateRange(v, size);
    if (d.kind == Kind::kFull) return std::string("full");
    if (d.kind == Kind::kUnsatisfiable) return std::string("416");
    return absl::StrCat(d.first, "+", d.length);
  };
  EXPECT_EQ(eval("bytes=0-0", 1), "0+1");
  EXPECT_EQ(eval("bytes=0-", 1), "0+1");
  EXPECT_EQ(eval("bytes=-1", 1), "0+1");
  EXPECT_EQ(eval("bytes=1-", 1), "416");
  EXPECT_EQ(eval("bytes=0-18446744073709551615", 10), "0+10");
  EXPECT_EQ(eval("bytes=0-18446744073709551616", 10), "0+10");  // Saturates.
  EXPECT_EQ(eval("bytes=-18446744073709551616", 10), "0+10");
  EXPECT_EQ(eval("bytes=18446744073709551615-", UINT64_MAX), "416");
  EXPECT_EQ(eval("bytes=18446744073709551614-", UINT64_MAX), "18446744073709551614+1");
  EXPECT_EQ(eval("bytes=0-", UINT64_MAX), "0+18446744073709551615");
  EXPECT_EQ(eval("bytes=0-0,18446744073709551614-", UINT64_MAX), "full");
  EXPECT_EQ(eval("bytes=0-1", 0), "full");
  EXPECT_EQ(eval("bytes=1-", 0), "full");
  EXPECT_EQ(eval(" bytes=0-1 ", 10), "0+2");
  EXPECT_EQ(eval("bytes=0-1\t,\t2-3", 10), "0+4");
  for (absl::string_view bad :
       {"", "bytes", "bytes=", "bytes=,", "bytes=-", "bytes=a-1", "bytes=1-a", "bytes=1 -2",
        "bytes=1- 2", "bytes=+1-2", "bytes=1-2,x", "bytes==1-2", "bytes =1-2", "bytes=2-1",
        "bytes=-1-2", "bytes=1-2-", "none=1-2"}) {
    EXPECT_EQ(eval(bad, 10), "full") << bad;
  }
  std::string many = "bytes=";
  for (size_t i = 0; i < http_internal::kMaxRangeSpecs; ++i) absl::StrAppend(&many, "0-0,");
  EXPECT_EQ(eval(many, 10), "0+1");           // 64 specs, all the same range.
  EXPECT_EQ(eval(many + "0-0", 10), "full");  // 65.
  // A long header of empty elements is still cheap and still means nothing.
  EXPECT_EQ(eval("bytes=" + std::string(60000, ','), 10), "full");
}

TEST(StaticPathTest, Decode) {
  auto decode = [](absl::string_view raw) -> std::string {
    std::string buffer = "left over from an earlier request";
    absl::StatusOr<http_internal::StaticPath> p = http_internal::DecodeStaticPath(raw, &buffer);
    if (absl::IsInvalidArgument(p.status())) return "400";
    if (!p.ok()) return "404";
    // The cache key is the name, plus '/' for the directory form.
    EXPECT_EQ(p->cache_key(), absl::StrCat(p->relative, p->directory_form ? "/" : "")) << raw;
    return absl::StrCat(p->relative, p->directory_form ? " dir" : "");
  };
  EXPECT_EQ(decode(""), " dir");
  EXPECT_EQ(decode("a"), "a");
  EXPECT_EQ(decode("a/"), "a dir");
  EXPECT_EQ(decode("a/b/c.txt"), "a/b/c.txt");
  EXPECT_EQ(decode("a%20b/%41%7e"), "a b/A~");
  EXPECT_EQ(decode("..."), "...");
  EXPECT_EQ(decode(".x/..y"), ".x/..y");
  EXPECT_EQ(decode("%252e%252e"), "%2e%2e");
  EXPECT_EQ(decode("a%5Cb"), "a\\b");
  EXPECT_EQ(decode("%61/"), "a dir");
  EXPECT_EQ(decode("a%2e/b%2E/"), "a./b. dir");
  EXPECT_EQ(decode("a/b%20/"), "a/b  dir");
  for (absl::string_view not_found :
       {"..", "../a", "a/..", "a/../b", ".", "./a", "a/./b", "/", "/a", "a//b", "a//", "%2e%2e",
        "%2E.", ".%2e/x", "a%2Fb", "a%2f", "%2F", "a/%2e/"}) {
    EXPECT_EQ(decode(not_found), "404") << not_found;
  }
  for (absl::string_view bad : std::initializer_list<absl::string_view>{
           "%", "%2", "a%g0", "%0g", "%00", "a%00b", "%%", "a/%", absl::string_view("a\0b", 3)}) {
    EXPECT_EQ(decode(bad), "400") << bad;
  }
}

TEST(StaticPathTest, APathWithoutEscapesIsItsOwnDecodedForm) {
  std::string buffer;
  for (absl::string_view raw : {"a", "a/b/c.txt", "a/", "...", ".x/..y/"}) {
    absl::StatusOr<http_internal::StaticPath> p = http_internal::DecodeStaticPath(raw, &buffer);
    ASSERT_TRUE(p.ok()) << raw;
    EXPECT_EQ(p->relative.data(), raw.data()) << raw;  // a view: nothing copied
    EXPECT_EQ(p->cache_key(), raw) << raw;
    EXPECT_TRUE(buffer.empty()) << raw;
  }
  // With an escape the result lives in the buffer.
  absl::StatusOr<http_internal::StaticPath> p = http_internal::DecodeStaticPath("b%20/", &buffer);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->relative, "b ");
  EXPECT_EQ(p->relative.data(), buffer.data());
  EXPECT_EQ(p->cache_key(), "b /");
  // The root: no name, and the key "/".
  p = http_internal::DecodeStaticPath("", &buffer);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->relative, "");
  EXPECT_EQ(p->cache_key(), "/");
}

TEST(MimeTypesTest, TableAndExtensions) {
  EXPECT_EQ(http_internal::BuiltinMimeType("html"), "text/html; charset=utf-8");
  EXPECT_EQ(http_internal::BuiltinMimeType("HtMl"), "text/html; charset=utf-8");
  EXPECT_EQ(http_internal::BuiltinMimeType("woff"), "font/woff");
  EXPECT_EQ(http_internal::BuiltinMimeType("webm"), "video/webm");
  EXPECT_EQ(http_internal::BuiltinMimeType(""), "");
  EXPECT_EQ(http_internal::BuiltinMimeType("htmlx"), "");
  EXPECT_EQ(http_internal::FileExtension("a/b.tar.gz"), "gz");
  EXPECT_EQ(http_internal::FileExtension("a.b/c"), "");
  EXPECT_EQ(http_internal::FileExtension(".profile"), "");
  EXPECT_EQ(http_internal::FileExtension("x."), "");
  EXPECT_EQ(http_internal::FileExtension(""), "");
}

TEST(DirectoryListingTest, Escaping) {
  std::string page = http_internal::RenderDirectoryListing(
      "/d/<x>/", {{"b\"'&.txt", false, 3}, {"?q#f", true, 0}, {"a", false, 1}}, false);
  EXPECT_THAT(page, HasSubstr("Index of /d/&lt;x&gt;/"));
  EXPECT_THAT(page, HasSubstr("href=\"./b%22%27%26.txt\">b&quot;&#39;&amp;.txt</a> (3 bytes)"));
  EXPECT_THAT(page, HasSubstr("href=\"./%3Fq%23f/\">?q#f/</a>"));
  EXPECT_LT(page.find("./a\""), page.find("./b"));  // Sorted.
  EXPECT_EQ(http_internal::HtmlEscape("<&>\"'x"), "&lt;&amp;&gt;&quot;&#39;x");
}

}  // namespace
}  // namespace petrel
