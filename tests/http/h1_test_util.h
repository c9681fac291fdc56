// Internal (tests): helpers that run the h1 request parser over a message whole, split in two at
// a given byte, and byte by byte, and describe the outcome as one comparable string.
#ifndef PETREL_TESTS_HTTP_H1_TEST_UTIL_H_
#define PETREL_TESTS_HTTP_H1_TEST_UTIL_H_

#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "http/h1/request_parser.h"

namespace petrel::h1::testing {

// Everything the parser reports, as text; equal strings mean identical results.
inline std::string Describe(const RequestParser& p, RequestParser::Result r) {
  switch (r) {
    case RequestParser::Result::kNeedMore:
      return "need-more";
    case RequestParser::Result::kError:
      return absl::StrCat("error ", p.error_status(), " ", p.error_reason());
    case RequestParser::Result::kComplete:
      break;
  }
  std::string s = absl::StrCat("complete bytes=", p.head_bytes(), " method=", p.method_token(),
                               " target=", p.target(), " version=", HttpVersionName(p.version()),
                               " host=", p.host());
  for (size_t i = 0; i < p.field_count(); ++i) {
    absl::StrAppend(&s, " [", p.field(i).name, "|", p.field(i).value, "]");
  }
  const BodyFraming& f = p.framing();
  absl::StrAppend(&s, " framing=", static_cast<int>(f.kind), ":", f.content_length,
                  " keep_alive=", p.keep_alive(), " expect=", p.expect_continue());
  return s;
}

// Each Parse call gets a freshly allocated copy of the bytes so far: the parser must keep offsets,
// not pointers, across calls.
inline std::string ParseWhole(const std::string& msg, const RequestLimits& limits = {}) {
  RequestParser p(limits);
  const std::string copy = msg;
  return Describe(p, p.Parse(copy));
}

inline std::string ParseSplit(const std::string& msg, size_t at, const RequestLimits& limits = {}) {
  RequestParser p(limits);
  const std::string first = msg.substr(0, at);
  RequestParser::Result r = p.Parse(first);
  if (r != RequestParser::Result::kNeedMore) return Describe(p, r);
  const std::string all = msg;  // A different allocation: the bytes have moved.
  return Describe(p, p.Parse(all));
}

inline std::string ParseBytewise(const std::string& msg, const RequestLimits& limits = {}) {
  RequestParser p(limits);
  std::string buffered;
  RequestParser::Result r = RequestParser::Result::kNeedMore;
  for (char c : msg) {
    buffered.push_back(c);
    buffered.shrink_to_fit();  // Moves the bytes now and then.
    r = p.Parse(buffered);
    if (r != RequestParser::Result::kNeedMore) break;
  }
  return Describe(p, r);
}

// The result of parsing `msg`; checks that byte-by-byte parsing agrees, and (when `all_splits`)
// every two-piece split too. Error results agree on status; complete results in every detail.
inline std::string ParseAllWays(const std::string& msg, const RequestLimits& limits = {},
                                bool all_splits = true) {
  const std::string whole = ParseWhole(msg, limits);
  EXPECT_EQ(ParseBytewise(msg, limits), whole) << "byte by byte: " << msg;
  if (all_splits) {
    for (size_t at = 0; at <= msg.size(); ++at) {
      EXPECT_EQ(ParseSplit(msg, at, limits), whole) << "split at " << at << ": " << msg;
    }
  }
  return whole;
}

// The error status of `msg` (0 when it parses completely, -1 when it needs more).
inline int StatusOf(const std::string& msg, const RequestLimits& limits = {}) {
  RequestParser p(limits);
  const RequestParser::Result r = p.Parse(msg);
  ParseAllWays(msg, limits, msg.size() < 4096);
  if (r == RequestParser::Result::kComplete) return 0;
  if (r == RequestParser::Result::kNeedMore) return -1;
  return p.error_status();
}

// The logged reason of a rejected `msg` ("" if it was not rejected). For rules that another check
// would also catch (whitespace before the colon is also a non-token name), the reason is what
// proves the rule itself is enforced.
inline std::string ReasonOf(const std::string& msg, const RequestLimits& limits = {}) {
  RequestParser p(limits);
  if (p.Parse(msg) != RequestParser::Result::kError) return "";
  return std::string(p.error_reason());
}

}  // namespace petrel::h1::testing

#endif  // PETREL_TESTS_HTTP_H1_TEST_UTIL_H_
