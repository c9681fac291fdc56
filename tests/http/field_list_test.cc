// ListHasToken / FieldHasToken: the one scanner of comma-separated field values that h1
// (Connection, TE), WebSocket openings (Upgrade, Sec-WebSocket-Protocol) and compression
// (Cache-Control, Vary) share.
#include "http/field_list.h"

#include <gtest/gtest.h>

namespace petrel::http_internal {
namespace {

TEST(FieldListTest, FindsTheTokenWhateverTheCaseSpacingAndPosition) {
  EXPECT_TRUE(ListHasToken("upgrade", "upgrade"));
  EXPECT_TRUE(ListHasToken("keep-alive, Upgrade", "upgrade"));
  EXPECT_TRUE(ListHasToken("UPGRADE ,keep-alive", "upgrade"));
  EXPECT_TRUE(ListHasToken(" \t upgrade \t", "upgrade"));
  EXPECT_TRUE(ListHasToken("a,,b, ,c", "c"));
  EXPECT_TRUE(ListHasToken("chat, chat.v2", "chat.v2"));
}

TEST(FieldListTest, ComparesAnElementUpToItsParametersOrArgument) {
  EXPECT_TRUE(ListHasToken("trailers;q=1", "trailers"));
  EXPECT_TRUE(ListHasToken("gzip, trailers ; q=0.5", "trailers"));
  EXPECT_TRUE(ListHasToken("max-age=60, no-transform", "no-transform"));
  EXPECT_TRUE(ListHasToken("max-age=60", "max-age"));
  EXPECT_FALSE(ListHasToken("q=trailers", "trailers"));
}

TEST(FieldListTest, NoPartialOrEmptyMatches) {
  EXPECT_FALSE(ListHasToken("", "upgrade"));
  EXPECT_FALSE(ListHasToken(",,, ,", "upgrade"));
  EXPECT_FALSE(ListHasToken("upgrades", "upgrade"));
  EXPECT_FALSE(ListHasToken("pgrade", "upgrade"));
  EXPECT_FALSE(ListHasToken("up grade", "upgrade"));
  EXPECT_FALSE(ListHasToken("websocket/13", "websocket"));
  EXPECT_FALSE(ListHasToken("upgrade\xc3", "upgrade"));
}

TEST(FieldListTest, FieldHasTokenLooksAtEveryLine) {
  HeaderMap fields;
  fields.Add("vary", "origin");
  fields.Add("cache-control", "max-age=5");
  fields.Add("Vary", "Accept-Encoding, cookie");
  EXPECT_TRUE(FieldHasToken(fields, "vary", "accept-encoding"));
  EXPECT_TRUE(FieldHasToken(fields, "vary", "origin"));
  EXPECT_FALSE(FieldHasToken(fields, "vary", "max-age"));
  EXPECT_FALSE(FieldHasToken(fields, "content-type", "origin"));
}

}  // namespace
}  // namespace petrel::http_internal
