// HTTP-date parsing and formatting (RFC 9110 §5.6.7). Properties besides "no crash": a parsed
// date lies in the four-digit-year range; formatting any instant gives 29 bytes that parse back
// to the same (clamped) instant; a parsed IMF-fixdate formats back to the same text.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"
#include "fuzz_check.h"
#include "http/http_date.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using petrel::http_internal::FormatHttpDate;
  using petrel::http_internal::kMaxHttpDate;
  using petrel::http_internal::kMinHttpDate;
  using petrel::http_internal::ParseHttpDate;
  if (size > 256) return 0;
  // The first eight bytes are also "now", for RFC 850's two-digit years.
  int64_t now = 1'700'000'000;
  if (size >= 8) {
    std::memcpy(&now, data, 8);
    now = kMinHttpDate + static_cast<int64_t>(static_cast<uint64_t>(now) %
                                              static_cast<uint64_t>(kMaxHttpDate - kMinHttpDate));
  }
  const absl::string_view text(reinterpret_cast<const char*>(data), size);
  for (const int64_t when : {int64_t{1'700'000'000}, now}) {
    const std::optional<int64_t> parsed = ParseHttpDate(text, when);
    if (!parsed.has_value()) continue;
    PETREL_FUZZ_CHECK(*parsed >= kMinHttpDate && *parsed <= kMaxHttpDate);
    const std::string formatted = FormatHttpDate(*parsed);
    PETREL_FUZZ_CHECK(ParseHttpDate(formatted, when) == parsed);
    // An IMF-fixdate (29 bytes, "GMT" last, a comma after the day name) formats back to itself
    // unless it named a leap second (:60 counts as :59) or a wrong weekday (not checked).
    if (text.size() == 29 && text[3] == ',' && text.substr(23, 2) != "60") {
      PETREL_FUZZ_CHECK(formatted.substr(4) == text.substr(4));
    }
  }
  if (size >= 8) {
    int64_t instant;
    std::memcpy(&instant, data, 8);
    const std::string formatted = FormatHttpDate(instant);
    PETREL_FUZZ_CHECK(formatted.size() == 29);
    const int64_t clamped = instant < kMinHttpDate   ? kMinHttpDate
                            : instant > kMaxHttpDate ? kMaxHttpDate
                                                     : instant;
    PETREL_FUZZ_CHECK(ParseHttpDate(formatted, 0) == clamped);
  }
  return 0;
}
