// permessage-deflate negotiation (RFC 7692 §5, §7.1): the Sec-WebSocket-Extensions grammar
// (RFC 6455 §9.1) including hostile input, which offer is accepted, and the answer.
#include "http/websocket/permessage_deflate.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace petrel::http_internal {
namespace {

WebSocketDeflateOptions On() {
  WebSocketDeflateOptions o;
  o.enabled = true;
  return o;
}

// The answer to `lines`, or "declined".
std::string Answer(std::vector<absl::string_view> lines,
                   const WebSocketDeflateOptions& options = On()) {
  const std::optional<PermessageDeflateParams> p = NegotiatePermessageDeflate(lines, options);
  return p.has_value() ? p->ResponseValue() : "declined";
}

TEST(ExtensionListTest, ParsesOffersParametersAndQuotedValues) {
  const auto offers = ParseExtensionList(
      {"Permessage-Deflate; Client_Max_Window_Bits; server_max_window_bits=\"10\" , foo",
       ",, x-webkit-deflate-frame;a=\"b\\c\"\t;  d = e"});
  ASSERT_TRUE(offers.has_value());
  ASSERT_EQ(offers->size(), 3u);
  EXPECT_EQ((*offers)[0].name, "permessage-deflate");
  ASSERT_EQ((*offers)[0].params.size(), 2u);
  EXPECT_EQ((*offers)[0].params[0].name, "client_max_window_bits");
  EXPECT_FALSE((*offers)[0].params[0].value.has_value());
  EXPECT_EQ((*offers)[0].params[1].value, "10");
  EXPECT_EQ((*offers)[1].name, "foo");
  EXPECT_TRUE((*offers)[1].params.empty());
  EXPECT_EQ((*offers)[2].params[0].value, "bc");  // a quoted-pair unescaped
  EXPECT_EQ((*offers)[2].params[1].name, "d");
  EXPECT_EQ((*offers)[2].params[1].value, "e");
  EXPECT_TRUE(ParseExtensionList({}).value().empty());
  EXPECT_TRUE(ParseExtensionList({"  ,  "}).value().empty());
}

TEST(ExtensionListTest, RefusesWhatBreaksTheGrammar) {
  for (absl::string_view bad : {
           "permessage-deflate; a=\"unterminated",
           "permessage-deflate; a=\"ends in \\",
           "permessage-deflate; a=\"not a token\"",  // quoted, yet must be a token
           "permessage-deflate; a=\"\"",
           "permessage-deflate; a=",
           "permessage-deflate;",
           "permessage-deflate; ; a",
           "permessage-deflate a",
           "=x",
           ";a",
           "permessage-deflate; a=b=c",
           "permessage-deflate; \"a\"",
           "perm\x01essage-deflate",
           "permessage-deflate; a=\xff",
       }) {
    SCOPED_TRACE(bad);
    EXPECT_FALSE(ParseExtensionList({bad}).has_value());
  }
  // A comma inside quotes does not split the list.
  const auto quoted = ParseExtensionList({"a; b=\"x,y\""});
  EXPECT_FALSE(quoted.has_value());  // "x,y" is no token
}

TEST(ExtensionListTest, SurvivesLongAndDeepInput) {
  std::string many;
  for (int i = 0; i < 10000; ++i) many += "permessage-deflate; x, ";
  EXPECT_EQ(ParseExtensionList({many})->size(), 10000u);
  EXPECT_EQ(Answer({many}), "declined");  // every offer has an unknown parameter
  std::string quotes(100000, '"');
  EXPECT_FALSE(ParseExtensionList({"a; b=" + quotes}).has_value());
  std::string escapes = "a; b=\"";
  escapes.append(100000, '\\');
  EXPECT_FALSE(ParseExtensionList({escapes}).has_value());
}

TEST(PermessageDeflateTest, AcceptsTheFirstAcceptableOffer) {
  EXPECT_EQ(Answer({"permessage-deflate"}), "permessage-deflate");
  // What Python's websockets and browsers offer.
  EXPECT_EQ(Answer({"permessage-deflate; client_max_window_bits"}), "permessage-deflate");
  EXPECT_EQ(Answer({"foo, permessage-deflate; server_max_window_bits=10"}),
            "permessage-deflate; server_max_window_bits=10");
  // Offers in preference order: the first is invalid (duplicate), the second applies.
  EXPECT_EQ(Answer({"permessage-deflate; server_no_context_takeover; server_no_context_takeover,"
                    " permessage-deflate; client_no_context_takeover"}),
            "permessage-deflate; client_no_context_takeover");
  // Split across field lines.
  EXPECT_EQ(
      Answer({"permessage-deflate; unknown=1", "permessage-deflate; client_max_window_bits=9"}),
      "permessage-deflate; client_max_window_bits=9");
  EXPECT_EQ(Answer({"PERMESSAGE-DEFLATE; SERVER_NO_CONTEXT_TAKEOVER"}),
            "permessage-deflate; server_no_context_takeover");
  EXPECT_EQ(Answer({"permessage-deflate; server_max_window_bits=\"12\""}),
            "permessage-deflate; server_max_window_bits=12");
}

TEST(PermessageDeflateTest, DeclinesInvalidOffers) {
  for (absl::string_view bad : {
           "",
           "x-webkit-deflate-frame",
           "permessage-deflate; unknown",
           "permessage-deflate; server_no_context_takeover=1",
           "permessage-deflate; client_no_context_takeover=\"x\"",
           "permessage-deflate; server_max_window_bits",
           "permessage-deflate; server_max_window_bits=7",
           "permessage-deflate; server_max_window_bits=16",
           "permessage-deflate; server_max_window_bits=010",
           "permessage-deflate; server_max_window_bits=+9",
           "permessage-deflate; server_max_window_bits=4294967305",
           "permessage-deflate; client_max_window_bits=0",
           "permessage-deflate; client_max_window_bits; client_max_window_bits",
           "permessage-deflate; server_max_window_bits=10; server_max_window_bits=10",
           // zlib cannot compress with an 8-bit window: an offer that allows only that is
           // declined, never answered with a larger window.
           "permessage-deflate; server_max_window_bits=8",
           "permessage-deflate; a=\"broken",
       }) {
    SCOPED_TRACE(bad);
    EXPECT_EQ(Answer({bad}), "declined");
  }
  WebSocketDeflateOptions off;
  EXPECT_EQ(Answer({"permessage-deflate"}, off), "declined");
}

TEST(PermessageDeflateTest, ServerSettingsShapeTheAnswer) {
  WebSocketDeflateOptions o = On();
  o.server_no_context_takeover = true;
  o.client_no_context_takeover = true;
  o.server_max_window_bits = 11;
  o.client_max_window_bits = 10;
  EXPECT_EQ(Answer({"permessage-deflate; client_max_window_bits"}, o),
            "permessage-deflate; server_no_context_takeover; client_no_context_takeover; "
            "server_max_window_bits=11; client_max_window_bits=10");
  // Never above what the client allows.
  EXPECT_EQ(Answer({"permessage-deflate; server_max_window_bits=9; client_max_window_bits=8"}, o),
            "permessage-deflate; server_no_context_takeover; client_no_context_takeover; "
            "server_max_window_bits=9; client_max_window_bits=8");
  // A client that offers no client_max_window_bits may use 15 bits: more than this route
  // inflates with, so declined.
  EXPECT_EQ(Answer({"permessage-deflate"}, o), "declined");
  // 8 for the server is taken as 9 (zlib's least for raw deflate).
  WebSocketDeflateOptions eight = On();
  eight.server_max_window_bits = 8;
  EXPECT_EQ(Answer({"permessage-deflate"}, eight), "permessage-deflate; server_max_window_bits=9");

  const std::optional<PermessageDeflateParams> p = NegotiatePermessageDeflate(
      std::vector<absl::string_view>{"permessage-deflate; client_max_window_bits=12"}, On());
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->client_max_window_bits, 12);
  EXPECT_EQ(p->server_max_window_bits, 15);
  EXPECT_FALSE(p->server_no_context_takeover);
}

}  // namespace
}  // namespace petrel::http_internal
