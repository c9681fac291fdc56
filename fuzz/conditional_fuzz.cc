// Entity-tags and conditional requests (RFC 9110 §8.8.3, §13). Properties besides "no crash":
// a parsed tag is a view of the text, quoted, and compares as the RFC says with itself; "*"
// matches any current representation; the precondition outcome is one of the three defined.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"
#include "fuzz_check.h"
#include "http/static/conditional.h"
#include "petrel/http/header_map.h"

namespace {

constexpr absl::string_view kNames[] = {"If-Match",
                                        "If-None-Match",
                                        "If-Modified-Since",
                                        "If-Unmodified-Since",
                                        "If-Range",
                                        "if-none-match",
                                        "Range",
                                        "X-Other"};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace petrel::http_internal;  // NOLINT: a fuzz target's whole subject
  if (size > 4096) return 0;
  FuzzedDataProvider in(data, size);

  const std::string tag_text = in.ConsumeRandomLengthString(64);
  const std::optional<EntityTag> tag = ParseEntityTag(tag_text);
  if (tag.has_value()) {
    const absl::string_view o = tag->opaque;
    PETREL_FUZZ_CHECK(o.size() >= 2 && o.front() == '"' && o.back() == '"');
    PETREL_FUZZ_CHECK(o.data() >= tag_text.data() &&
                      o.data() + o.size() <= tag_text.data() + tag_text.size());
    PETREL_FUZZ_CHECK(StrongMatch(*tag, *tag) == !tag->weak);
    PETREL_FUZZ_CHECK(WeakMatch(*tag, *tag));
  }

  // The representation's validators: the parsed tag made strong, or a fixed one.
  Validators current{EntityTag{false, "\"petrel-fuzz\""}, in.ConsumeIntegral<int32_t>()};
  if (tag.has_value()) current.etag = EntityTag{false, tag->opaque};
  const int64_t now = current.last_modified + in.ConsumeIntegralInRange<int64_t>(-100, 100000);

  PETREL_FUZZ_CHECK(MatchEntityTagList("*", current.etag, false) == TagListMatch::kMatch);
  PETREL_FUZZ_CHECK(MatchEntityTagList(current.etag.opaque, current.etag, false) ==
                    TagListMatch::kMatch);

  petrel::HeaderMap headers;
  const size_t fields = in.ConsumeIntegralInRange<size_t>(0, 6);
  for (size_t i = 0; i < fields && in.remaining_bytes() > 0; ++i) {
    const absl::string_view name = kNames[in.ConsumeIntegralInRange<size_t>(0, 7)];
    const std::string value = in.ConsumeRandomLengthString(128);
    headers.Add(name, value);
    (void)MatchEntityTagList(value, current.etag, in.ConsumeBool());
    (void)IfRangeMatches(value, current, now);
  }
  const Precondition p = EvaluatePreconditions(headers, current, now);
  PETREL_FUZZ_CHECK(p == Precondition::kProceed || p == Precondition::kNotModified ||
                    p == Precondition::kPreconditionFailed);
  if (headers.empty()) PETREL_FUZZ_CHECK(p == Precondition::kProceed);
  return 0;
}
