#include "petrel/http/header_map.h"

#include <algorithm>
#include <cctype>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace petrel {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::Optional;

using Pairs = std::vector<std::pair<std::string, std::string>>;

Pairs Fields(const HeaderMap& m) {
  Pairs out;
  for (HeaderField f : m) out.emplace_back(std::string(f.name), std::string(f.value));
  return out;
}

TEST(HeaderMapTest, EmptyMap) {
  HeaderMap m;
  EXPECT_TRUE(m.empty());
  EXPECT_EQ(m.size(), 0u);
  EXPECT_EQ(m.Get("a"), std::nullopt);
  EXPECT_THAT(m.GetAll("a"), IsEmpty());
  EXPECT_EQ(m.GetJoined("a"), std::nullopt);
  EXPECT_FALSE(m.Contains("a"));
  EXPECT_EQ(m.Remove("a"), 0u);
  EXPECT_EQ(m.begin(), m.end());
}

TEST(HeaderMapTest, CaseInsensitiveNamesStoredAsGiven) {
  HeaderMap m;
  m.Add("Content-Type", "text/plain");
  EXPECT_THAT(m.Get("content-type"), Optional(absl::string_view("text/plain")));
  EXPECT_THAT(m.Get("CONTENT-TYPE"), Optional(absl::string_view("text/plain")));
  EXPECT_THAT(m.Get("Content-Type"), Optional(absl::string_view("text/plain")));
  EXPECT_TRUE(m.Contains("cOnTeNt-TyPe"));
  EXPECT_FALSE(m.Contains("Content-Typ"));
  EXPECT_FALSE(m.Contains("Content-Types"));
  EXPECT_EQ(m[0].name, "Content-Type");
}

TEST(HeaderMapTest, LowercaseNamesInPlace) {
  // Names shorter and longer than the 8-byte steps, letters at every position, bytes next to
  // 'A' and 'Z', and a non-ASCII byte; values stay as they are.
  HeaderMap m;
  m.Add("Content-Type", "Text/HTML");
  m.Add("ETAG", "X");
  m.Add("@AZ[`az{-Access-Control-Allow-ORIGIN", "V");
  m.Add("x-\xC3\x89T\xC3\xa9", "v");
  // Every length from 1 to 17 (the word steps, their overlapping tails and the byte loop).
  const std::string letters = "ABCDEFGHIJKLMNOPQ";
  for (size_t n = 1; n <= letters.size(); ++n) m.Add(letters.substr(0, n), "v");
  const HeaderField before_value = m[0];
  m.LowercaseNames();
  EXPECT_EQ(m[0].name, "content-type");
  EXPECT_EQ(m[0].value, "Text/HTML");
  EXPECT_EQ(m[0].value.data(), before_value.value.data());  // in place: views stay valid
  EXPECT_EQ(m[1].name, "etag");
  EXPECT_EQ(m[2].name, "@az[`az{-access-control-allow-origin");
  EXPECT_EQ(m[3].name, "x-\xC3\x89t\xC3\xa9");
  for (size_t n = 1; n <= letters.size(); ++n) {
    EXPECT_EQ(m[3 + n].name, absl::AsciiStrToLower(letters.substr(0, n)));
  }
  EXPECT_EQ(m.Get("CONTENT-TYPE"), "Text/HTML");
}

// names_lowercase() lets h2/h3 send the names as stored: it must turn false whenever any name
// with an uppercase letter gets in, by any way in, and true again only when that is undone.
TEST(HeaderMapTest, KnowsWhenEveryNameIsLowercase) {
  // One uppercase letter at each position of names of every length from 1 to 17 (the word
  // steps, their overlapping tails and the byte loop), and the bytes next to 'A' and 'Z'.
  for (size_t n = 1; n <= 17; ++n) {
    for (size_t at = 0; at < n; ++at) {
      std::string name(n, 'a');
      name[at] = 'Q';
      HeaderMap m;
      m.Add("x-lower", "V");
      EXPECT_TRUE(m.names_lowercase());
      m.Add(name, "v");
      EXPECT_FALSE(m.names_lowercase()) << name;
    }
  }
  HeaderMap edges;
  edges.Add("@[`{-\x80\xC3\x89", "V");
  EXPECT_TRUE(edges.names_lowercase());
  edges.Set("x-Set", "v");
  EXPECT_FALSE(edges.names_lowercase());
  edges.LowercaseNames();
  EXPECT_TRUE(edges.names_lowercase());
  EXPECT_EQ(edges[1].name, "x-set");

  // AddAll: either map's uppercase name makes the result not lowercase.
  const HeaderMap lower{{"etag", "\"1\""}, {"content-type", "text/css"}};
  const HeaderMap mixed{{"etag", "\"1\""}, {"Content-Type", "text/css"}};
  HeaderMap m;
  m.AddAll(lower);
  EXPECT_TRUE(m.names_lowercase());
  m.AddAll(mixed);
  EXPECT_FALSE(m.names_lowercase());
  HeaderMap n{{"Date", "x"}};
  n.AddAll(lower);
  EXPECT_FALSE(n.names_lowercase());
  // Copies and moves carry it; Clear and a moved-from map start over.
  EXPECT_FALSE(HeaderMap(n).names_lowercase());
  EXPECT_TRUE(HeaderMap(lower).names_lowercase());
  HeaderMap moved(std::move(n));
  EXPECT_FALSE(moved.names_lowercase());
  EXPECT_TRUE(n.names_lowercase());  // NOLINT(bugprone-use-after-move): reset to empty
  HeaderMap assigned;
  assigned = std::move(moved);
  EXPECT_FALSE(assigned.names_lowercase());
  assigned.Clear();
  EXPECT_TRUE(assigned.names_lowercase());
}

TEST(HeaderMapTest, AddAllAppendsEveryFieldInOrder) {
  HeaderMap prepared{{"ETag", "\"1\""}, {"Accept-Ranges", "bytes"}, {"Content-Type", "text/css"}};
  HeaderMap m;
  m.AddAll(prepared);  // into an empty map
  m.AddAll(prepared);  // and behind fields already there
  ASSERT_EQ(m.size(), 6u);
  for (size_t i = 0; i < 6; ++i) {
    EXPECT_EQ(m[i].name, prepared[i % 3].name);
    EXPECT_EQ(m[i].value, prepared[i % 3].value);
  }
  EXPECT_EQ(m.byte_size(), 2 * prepared.byte_size());
  EXPECT_EQ(prepared.size(), 3u);  // the source is left as it was

  // A source with garbage in its arena (a replaced field) copies only the live fields.
  HeaderMap edited{{"A", "1"}, {"B", "2"}};
  edited.Set("A", "one");
  HeaderMap n{{"X", "x"}};
  n.AddAll(edited);
  ASSERT_EQ(n.size(), 3u);
  EXPECT_EQ(n[1].name, "A");
  EXPECT_EQ(n[1].value, "one");
  EXPECT_EQ(n[2].value, "2");
  EXPECT_EQ(n.arena_size(), n.byte_size());

  // Into itself, growing the arena while the bytes being copied are its own.
  HeaderMap self{{"Name", std::string(200, 'v')}};
  self.AddAll(self);
  self.AddAll(self);
  ASSERT_EQ(self.size(), 4u);
  for (const HeaderField f : self) EXPECT_EQ(f.value, std::string(200, 'v'));

  HeaderMap empty;
  m.AddAll(empty);
  EXPECT_EQ(m.size(), 6u);
}

TEST(HeaderMapTest, CaseFoldingOnlyForLetters) {
  HeaderMap m;
  m.Add("a@", "1");  // '@' (0x40) and '`' (0x60) differ by the case bit but are not letters.
  m.Add("x[", "2");  // '[' (0x5b) and '{' (0x7b) likewise.
  EXPECT_FALSE(m.Contains("a`"));
  EXPECT_FALSE(m.Contains("x{"));
  EXPECT_TRUE(m.Contains("A@"));
  EXPECT_TRUE(m.Contains("X["));
}

TEST(HeaderMapTest, InsertionOrderAndMultiValues) {
  HeaderMap m;
  m.Add("Accept", "a");
  m.Add("Host", "h");
  m.Add("accept", "b");
  m.Add("X-Empty", "");
  m.Add("ACCEPT", "c");
  EXPECT_EQ(m.size(), 5u);
  EXPECT_EQ(
      Fields(m),
      (Pairs{{"Accept", "a"}, {"Host", "h"}, {"accept", "b"}, {"X-Empty", ""}, {"ACCEPT", "c"}}));
  EXPECT_THAT(m.Get("accept"), Optional(absl::string_view("a")));
  EXPECT_THAT(m.GetAll("Accept"), ElementsAre("a", "b", "c"));
  EXPECT_THAT(m.GetJoined("accept"), Optional(std::string("a, b, c")));
  EXPECT_THAT(m.GetJoined("host"), Optional(std::string("h")));
  EXPECT_THAT(m.GetJoined("x-empty"), Optional(std::string("")));
  EXPECT_THAT(m.Get("x-empty"), Optional(absl::string_view("")));
}

TEST(HeaderMapTest, SetReplacesAllAtPositionOfFirst) {
  HeaderMap m;
  m.Add("A", "1");
  m.Add("Cookie", "x");
  m.Add("B", "2");
  m.Add("cookie", "y");
  m.Set("COOKIE", "z");
  EXPECT_EQ(Fields(m), (Pairs{{"A", "1"}, {"COOKIE", "z"}, {"B", "2"}}));
  m.Set("New", "n");
  EXPECT_EQ(Fields(m), (Pairs{{"A", "1"}, {"COOKIE", "z"}, {"B", "2"}, {"New", "n"}}));
  m.Set("a", "one");
  EXPECT_EQ(Fields(m), (Pairs{{"a", "one"}, {"COOKIE", "z"}, {"B", "2"}, {"New", "n"}}));
}

TEST(HeaderMapTest, RemoveReturnsCountAndKeepsOrder) {
  HeaderMap m;
  m.Add("Via", "1");
  m.Add("A", "a");
  m.Add("via", "2");
  m.Add("B", "b");
  m.Add("VIA", "3");
  EXPECT_EQ(m.Remove("Via"), 3u);
  EXPECT_EQ(Fields(m), (Pairs{{"A", "a"}, {"B", "b"}}));
  EXPECT_EQ(m.Remove("via"), 0u);
  EXPECT_EQ(m.Remove("a"), 1u);
  EXPECT_EQ(m.Remove("B"), 1u);
  EXPECT_TRUE(m.empty());
  EXPECT_EQ(m.byte_size(), 0u);
}

TEST(HeaderMapTest, ClearAndReserve) {
  HeaderMap m;
  m.Reserve(16, 1024);
  m.Add("a", "b");
  m.Clear();
  EXPECT_TRUE(m.empty());
  EXPECT_EQ(m.byte_size(), 0u);
  m.Add("c", "d");
  EXPECT_EQ(Fields(m), (Pairs{{"c", "d"}}));
}

TEST(HeaderMapTest, ArgumentsMayAliasTheMap) {
  HeaderMap m;
  m.Add("Source", std::string(100, 's'));
  for (int i = 0; i < 50; ++i) m.Add("Copy", *m.Get("source"));  // Arena grows meanwhile.
  for (absl::string_view v : m.GetAll("copy")) EXPECT_EQ(v, std::string(100, 's'));
  m.Set("Source", m.Get("Source")->substr(0, 10));  // Value aliases the field it replaces.
  EXPECT_THAT(m.Get("source"), Optional(absl::string_view("ssssssssss")));
  m.Set(m[0].name, "renamed-by-own-name");
  EXPECT_EQ(m[0].name, "Source");
  EXPECT_EQ(m[0].value, "renamed-by-own-name");
}

TEST(HeaderMapTest, RepeatedSetsStayCompact) {
  HeaderMap m;
  m.Add("Keep", "k");
  const std::string big(1000, 'v');
  for (int i = 0; i < 1000; ++i) {
    m.Set("X-Counter", std::to_string(i) + big);
    m.Add("Tmp", big);
    m.Remove("tmp");
  }
  EXPECT_EQ(m.size(), 2u);
  EXPECT_THAT(m.Get("x-counter"), Optional(absl::string_view("999" + big)));
  EXPECT_THAT(m.Get("keep"), Optional(absl::string_view("k")));
  // Live bytes are ~1 KiB; garbage is compacted away long before it piles up.
  EXPECT_EQ(m.byte_size(), 4u + 1u + 9u + 3u + big.size());
  EXPECT_LE(m.arena_size(), 4 * m.byte_size());
}

TEST(HeaderMapTest, CopyAndMove) {
  HeaderMap m = {{"A", "1"}, {"B", "2"}, {"a", "3"}};
  HeaderMap copy = m;
  EXPECT_EQ(Fields(copy), Fields(m));
  HeaderMap moved = std::move(m);
  EXPECT_EQ(Fields(moved), (Pairs{{"A", "1"}, {"B", "2"}, {"a", "3"}}));
  copy.Add("C", "4");
  EXPECT_EQ(moved.size(), 3u);
  EXPECT_EQ(copy.size(), 4u);
  // A moved-from map is empty and usable; assignments replace the whole contents.
  EXPECT_TRUE(m.empty());  // NOLINT(bugprone-use-after-move)
  m.Add("D", "5");
  EXPECT_EQ(Fields(m), (Pairs{{"D", "5"}}));
  m = copy;
  EXPECT_EQ(Fields(m), Fields(copy));
  copy = std::move(moved);
  EXPECT_EQ(Fields(copy), (Pairs{{"A", "1"}, {"B", "2"}, {"a", "3"}}));
  // A copy of a map with garbage (after Set) holds the live fields only.
  HeaderMap churned;
  churned.Add("Keep", "k");
  churned.Set("X", std::string(100, 'x'));
  churned.Set("X", "y");
  const HeaderMap trimmed = churned;
  EXPECT_EQ(Fields(trimmed), (Pairs{{"Keep", "k"}, {"X", "y"}}));
  EXPECT_EQ(trimmed.arena_size(), trimmed.byte_size());
}

TEST(HeaderMapTest, IteratorBasics) {
  HeaderMap m = {{"A", "1"}, {"B", "2"}};
  auto it = m.begin();
  EXPECT_EQ((*it).name, "A");
  auto old = it++;
  EXPECT_EQ((*old).value, "1");
  EXPECT_EQ((*it).name, "B");
  ++it;
  EXPECT_EQ(it, m.end());
}

bool SameName(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i]))) {
      return false;
    }
  }
  return true;
}

// Random Add/Set/Remove/aliasing sequences against a plain vector model, so the arena
// bookkeeping and compaction are exercised on many shapes.
TEST(HeaderMapTest, MatchesReferenceModel) {
  std::mt19937 rng(20240611);
  const std::vector<std::string> names = {
      "a", "B", "Content-Type", "content-type", "X-Long-Name", "x-long-name", "Set-Cookie", "b"};
  HeaderMap m;
  Pairs model;
  for (int step = 0; step < 20000; ++step) {
    const std::string& name = names[rng() % names.size()];
    std::string value(rng() % 300, static_cast<char>('a' + rng() % 26));
    switch (rng() % 5) {
      case 0:
      case 1:
        m.Add(name, value);
        model.emplace_back(name, value);
        break;
      case 2: {
        m.Set(name, value);
        auto first = std::find_if(model.begin(), model.end(),
                                  [&](const auto& f) { return SameName(f.first, name); });
        if (first == model.end()) {
          model.emplace_back(name, value);
        } else {
          *first = {name, value};
          model.erase(std::remove_if(first + 1, model.end(),
                                     [&](const auto& f) { return SameName(f.first, name); }),
                      model.end());
        }
        break;
      }
      case 3: {
        const size_t before = model.size();
        model.erase(std::remove_if(model.begin(), model.end(),
                                   [&](const auto& f) { return SameName(f.first, name); }),
                    model.end());
        ASSERT_EQ(m.Remove(name), before - model.size());
        break;
      }
      case 4:
        if (!m.empty()) {  // Copy a stored value under another name (aliasing).
          const size_t i = rng() % m.size();
          m.Add(name, m[i].value);
          model.emplace_back(name, model[i].second);
        }
        break;
    }
    ASSERT_EQ(m.size(), model.size()) << step;
    if (step % 97 == 0) {
      ASSERT_EQ(Fields(m), model) << step;
    }
  }
  EXPECT_EQ(Fields(m), model);
  size_t live = 0;
  for (const auto& [n, v] : model) live += n.size() + v.size();
  EXPECT_EQ(m.byte_size(), live);
}

TEST(FieldValidationTest, Names) {
  EXPECT_TRUE(IsValidFieldName("Content-Type"));
  EXPECT_TRUE(IsValidFieldName("x"));
  EXPECT_TRUE(IsValidFieldName("!#$%&'*+-.^_`|~09azAZ"));
  EXPECT_FALSE(IsValidFieldName(""));
  EXPECT_FALSE(IsValidFieldName("Content Type"));
  EXPECT_FALSE(IsValidFieldName("Host:"));
  EXPECT_FALSE(IsValidFieldName(":authority"));
  EXPECT_FALSE(IsValidFieldName("a\r\nb"));
  EXPECT_FALSE(IsValidFieldName(std::string("a\0b", 3)));
  EXPECT_FALSE(IsValidFieldName("caf\xc3\xa9"));
  EXPECT_FALSE(IsValidFieldName("a(b)"));
}

TEST(FieldValidationTest, Values) {
  EXPECT_TRUE(IsValidFieldValue(""));
  EXPECT_TRUE(IsValidFieldValue("text/html; charset=utf-8"));
  EXPECT_TRUE(IsValidFieldValue("a\tb c"));
  EXPECT_TRUE(IsValidFieldValue("obs-text \x80\xff"));
  EXPECT_TRUE(IsValidFieldValue("!~\"(),/:;<=>?@[\\]{}"));
  EXPECT_FALSE(IsValidFieldValue(" leading"));
  EXPECT_FALSE(IsValidFieldValue("trailing "));
  EXPECT_FALSE(IsValidFieldValue("\tleading"));
  EXPECT_FALSE(IsValidFieldValue("trailing\t"));
  EXPECT_FALSE(IsValidFieldValue("a\rb"));
  EXPECT_FALSE(IsValidFieldValue("a\nb"));
  EXPECT_FALSE(IsValidFieldValue("a\r\nSet-Cookie: x"));
  EXPECT_FALSE(IsValidFieldValue(std::string("a\0b", 3)));
  EXPECT_FALSE(
      IsValidFieldValue("a\x01"
                        "b"));
  EXPECT_FALSE(
      IsValidFieldValue("a\x7f"
                        "b"));
}

TEST(FieldValidationTest, Trim) {
  EXPECT_EQ(TrimFieldValue("  \t value \t "), "value");
  EXPECT_EQ(TrimFieldValue("a b"), "a b");
  EXPECT_EQ(TrimFieldValue(" \t "), "");
  EXPECT_EQ(TrimFieldValue(""), "");
  EXPECT_TRUE(IsValidFieldValue(TrimFieldValue("  x y  ")));
}

// Every byte value at every position of values 1..24 bytes long (the word-at-a-time scan covers
// whole 8-byte words and a tail), against the rule stated byte by byte.
TEST(FieldValidationTest, ValueCheckMatchesTheByteRuleAtEveryPosition) {
  auto allowed = [](unsigned char c) { return (c >= 0x20 || c == '\t') && c != 0x7f; };
  for (size_t size = 1; size <= 24; ++size) {
    for (size_t pos = 0; pos < size; ++pos) {
      for (int b = 0; b < 256; ++b) {
        std::string value(size, 'a');
        value[pos] = static_cast<char>(b);
        const bool edge_ows = (pos == 0 || pos + 1 == size) && (b == ' ' || b == '\t');
        const bool expected = allowed(static_cast<unsigned char>(b)) && !edge_ows;
        ASSERT_EQ(IsValidFieldValue(value), expected)
            << "size " << size << " byte 0x" << std::hex << b << " at " << std::dec << pos;
      }
    }
  }
}

}  // namespace
}  // namespace petrel
