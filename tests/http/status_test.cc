#include "petrel/http/status.h"

#include <map>
#include <string>

#include "gtest/gtest.h"

namespace petrel {
namespace {

// The IANA HTTP Status Code Registry, every assigned code (306 is "(Unused)"; 418 is "(Unused)"
// in RFC 9110 but keeps its well-known phrase here).
const std::map<int, std::string>& Registered() {
  static const auto* table = new std::map<int, std::string>{
      {100, "Continue"},
      {101, "Switching Protocols"},
      {102, "Processing"},
      {103, "Early Hints"},
      {200, "OK"},
      {201, "Created"},
      {202, "Accepted"},
      {203, "Non-Authoritative Information"},
      {204, "No Content"},
      {205, "Reset Content"},
      {206, "Partial Content"},
      {207, "Multi-Status"},
      {208, "Already Reported"},
      {226, "IM Used"},
      {300, "Multiple Choices"},
      {301, "Moved Permanently"},
      {302, "Found"},
      {303, "See Other"},
      {304, "Not Modified"},
      {305, "Use Proxy"},
      {307, "Temporary Redirect"},
      {308, "Permanent Redirect"},
      {400, "Bad Request"},
      {401, "Unauthorized"},
      {402, "Payment Required"},
      {403, "Forbidden"},
      {404, "Not Found"},
      {405, "Method Not Allowed"},
      {406, "Not Acceptable"},
      {407, "Proxy Authentication Required"},
      {408, "Request Timeout"},
      {409, "Conflict"},
      {410, "Gone"},
      {411, "Length Required"},
      {412, "Precondition Failed"},
      {413, "Content Too Large"},
      {414, "URI Too Long"},
      {415, "Unsupported Media Type"},
      {416, "Range Not Satisfiable"},
      {417, "Expectation Failed"},
      {418, "I'm a teapot"},
      {421, "Misdirected Request"},
      {422, "Unprocessable Content"},
      {423, "Locked"},
      {424, "Failed Dependency"},
      {425, "Too Early"},
      {426, "Upgrade Required"},
      {428, "Precondition Required"},
      {429, "Too Many Requests"},
      {431, "Request Header Fields Too Large"},
      {451, "Unavailable For Legal Reasons"},
      {500, "Internal Server Error"},
      {501, "Not Implemented"},
      {502, "Bad Gateway"},
      {503, "Service Unavailable"},
      {504, "Gateway Timeout"},
      {505, "HTTP Version Not Supported"},
      {506, "Variant Also Negotiates"},
      {507, "Insufficient Storage"},
      {508, "Loop Detected"},
      {510, "Not Extended"},
      {511, "Network Authentication Required"},
  };
  return *table;
}

TEST(StatusTest, ReasonPhrasesForEveryRegisteredCode) {
  for (const auto& [code, phrase] : Registered()) {
    SCOPED_TRACE(code);
    EXPECT_EQ(ReasonPhrase(code), phrase);
  }
}

TEST(StatusTest, EveryOtherCodeIsUnknown) {
  for (int code = -1; code <= 1000; ++code) {
    if (Registered().count(code) != 0) continue;
    SCOPED_TRACE(code);
    EXPECT_EQ(ReasonPhrase(code), "Unknown");
  }
  EXPECT_EQ(ReasonPhrase(306), "Unknown");
  EXPECT_EQ(ReasonPhrase(104), "Unknown");
  EXPECT_EQ(ReasonPhrase(-2147483647 - 1), "Unknown");
}

TEST(StatusTest, NamedConstantsMatchTheirPhrases) {
  EXPECT_EQ(ReasonPhrase(HttpStatus::kOk), "OK");
  EXPECT_EQ(ReasonPhrase(HttpStatus::kNotFound), "Not Found");
  EXPECT_EQ(ReasonPhrase(HttpStatus::kTooEarly), "Too Early");
  EXPECT_EQ(ReasonPhrase(HttpStatus::kRequestHeaderFieldsTooLarge),
            "Request Header Fields Too Large");
  EXPECT_EQ(ReasonPhrase(HttpStatus::kEarlyHints), "Early Hints");
  EXPECT_EQ(ReasonPhrase(HttpStatus::kHttpVersionNotSupported), "HTTP Version Not Supported");
}

TEST(StatusTest, Classes) {
  EXPECT_EQ(StatusClass(100), 1);
  EXPECT_EQ(StatusClass(199), 1);
  EXPECT_EQ(StatusClass(200), 2);
  EXPECT_EQ(StatusClass(399), 3);
  EXPECT_EQ(StatusClass(451), 4);
  EXPECT_EQ(StatusClass(599), 5);
  EXPECT_EQ(StatusClass(99), 0);
  EXPECT_EQ(StatusClass(600), 0);
  EXPECT_EQ(StatusClass(-200), 0);
  EXPECT_TRUE(IsValidStatusCode(100));
  EXPECT_TRUE(IsValidStatusCode(599));
  EXPECT_FALSE(IsValidStatusCode(0));
  EXPECT_FALSE(IsValidStatusCode(600));
  EXPECT_TRUE(IsInformational(100));
  EXPECT_TRUE(IsInformational(103));
  EXPECT_FALSE(IsInformational(200));
  EXPECT_FALSE(IsInformational(99));
}

TEST(StatusTest, AllowsBody) {
  for (int code = 100; code <= 199; ++code) EXPECT_FALSE(AllowsBody(code)) << code;
  EXPECT_FALSE(AllowsBody(204));
  EXPECT_FALSE(AllowsBody(304));
  for (int code : {200, 201, 205, 206, 301, 302, 400, 404, 500, 599}) {
    EXPECT_TRUE(AllowsBody(code)) << code;
  }
}

}  // namespace
}  // namespace petrel
