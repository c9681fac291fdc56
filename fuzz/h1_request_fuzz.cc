// The h1 request-head parser, and the chunked body decoder behind a head that asks for one, on
// arbitrary bytes. Properties besides "no crash, no sanitizer report":
//  - the outcome does not depend on how the bytes were split across Parse calls (whole; cut at
//    data-chosen points; byte by byte for short inputs), with the default limits and tiny ones;
//  - a complete head lies inside the input, and every view the parser returns lies inside it;
//  - an error carries one of the statuses the parser documents.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "chunked_arrival.h"
#include "fuzz_check.h"
#include "http/h1/request_parser.h"
#include "split_points.h"

namespace petrel::fuzz {
namespace {

using h1::RequestLimits;
using h1::RequestParser;

struct HeadOutcome {
  RequestParser::Result result = RequestParser::Result::kNeedMore;
  int error_status = 0;
  size_t head_bytes = 0;
  std::string method;
  std::string target;
  HttpVersion version = HttpVersion::k11;
  std::vector<std::pair<std::string, std::string>> fields;
  std::string host;
  h1::BodyFraming framing;
  bool keep_alive = false;
  bool expect_continue = false;

  bool operator==(const HeadOutcome&) const = default;
};

HeadOutcome Summarize(const RequestParser& p, RequestParser::Result r, absl::string_view input) {
  HeadOutcome o;
  o.result = r;
  if (r == RequestParser::Result::kError) {
    o.error_status = p.error_status();
    const int s = o.error_status;
    PETREL_FUZZ_CHECK(s == 400 || s == 413 || s == 414 || s == 431 || s == 501 || s == 505);
    return o;
  }
  if (r != RequestParser::Result::kComplete) return o;
  o.head_bytes = p.head_bytes();
  PETREL_FUZZ_CHECK(o.head_bytes <= input.size());
  const absl::string_view head = input.substr(0, o.head_bytes);
  PETREL_FUZZ_CHECK(head.size() >= 4 && head.substr(head.size() - 4) == "\r\n\r\n");
  PETREL_FUZZ_CHECK(Inside(p.method_token(), head) && !p.method_token().empty());
  PETREL_FUZZ_CHECK(Inside(p.target(), head) && !p.target().empty());
  PETREL_FUZZ_CHECK(Inside(p.host(), head));
  o.method = std::string(p.method_token());
  o.target = std::string(p.target());
  o.version = p.version();
  for (size_t i = 0; i < p.field_count(); ++i) {
    const HeaderField f = p.field(i);
    PETREL_FUZZ_CHECK(Inside(f.name, head) && Inside(f.value, head) && !f.name.empty());
    o.fields.emplace_back(std::string(f.name), std::string(f.value));
  }
  o.host = std::string(p.host());
  o.framing = p.framing();
  o.keep_alive = p.keep_alive();
  o.expect_continue = p.expect_continue();
  return o;
}

// Parses `input` arriving in pieces that end at `cuts` (ascending), then in full.
HeadOutcome ParseArriving(absl::string_view input, const std::vector<size_t>& cuts,
                          const RequestLimits& limits) {
  RequestParser parser(limits);
  RequestParser::Result r = RequestParser::Result::kNeedMore;
  for (size_t cut : cuts) {
    r = parser.Parse(input.substr(0, cut));
    if (r != RequestParser::Result::kNeedMore) break;
  }
  if (r == RequestParser::Result::kNeedMore) r = parser.Parse(input);
  return Summarize(parser, r, input);
}

// For a violated property's report.
void Print(const char* label, const HeadOutcome& o) {
  std::fprintf(stderr,
               "%s: result %d status %d head %zu method '%s' target '%s' fields %zu framing %d\n",
               label, static_cast<int>(o.result), o.error_status, o.head_bytes, o.method.c_str(),
               o.target.c_str(), o.fields.size(), static_cast<int>(o.framing.kind));
}

void ExpectSameHead(const HeadOutcome& whole, const HeadOutcome& split) {
  if (split == whole) return;
  Print("whole", whole);
  Print("split", split);
  PETREL_FUZZ_CHECK(split == whole);
}

}  // namespace

void CheckHead(absl::string_view input, const RequestLimits& limits) {
  const HeadOutcome whole = ParseArriving(input, {}, limits);
  ExpectSameHead(whole, ParseArriving(input, SplitPoints(input, 3), limits));
  if (input.size() <= 512) ExpectSameHead(whole, ParseArriving(input, EveryPoint(input), limits));
  if (whole.result != RequestParser::Result::kComplete ||
      whole.framing.kind != h1::BodyFraming::Kind::kChunked) {
    return;
  }
  const absl::string_view body = input.substr(whole.head_bytes);
  const BodyOutcome all = DecodeArriving(body, {});
  ExpectSameBody(all, DecodeArriving(body, SplitPoints(body, 3)));
  if (body.size() <= 512) ExpectSameBody(all, DecodeArriving(body, EveryPoint(body)));
}

}  // namespace petrel::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 64 * 1024) return 0;
  const absl::string_view input(reinterpret_cast<const char*>(data), size);
  petrel::fuzz::CheckHead(input, petrel::h1::RequestLimits());
  petrel::h1::RequestLimits tiny;
  tiny.max_request_line = 48;
  tiny.max_header_section = 160;
  tiny.max_fields = 4;
  tiny.max_leading_empty_lines = 1;
  tiny.max_content_length = 100;
  petrel::fuzz::CheckHead(input, tiny);
  return 0;
}
