#include "http/static/range.h"

#include <algorithm>
#include <array>
#include <limits>
#include <optional>

#include "http/ascii.h"
#include "petrel/http/header_map.h"

namespace petrel::http_internal {
namespace {

constexpr uint64_t kSaturated = std::numeric_limits<uint64_t>::max();

// A non-empty run of digits, saturating at kSaturated.
std::optional<uint64_t> ParseDigits(absl::string_view s) {
  if (s.empty()) return std::nullopt;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    const uint64_t d = static_cast<uint64_t>(c - '0');
    v = v > (kSaturated - d) / 10 ? kSaturated : v * 10 + d;
  }
  return v;
}

struct Span {
  uint64_t first;
  uint64_t last;  // Inclusive.
};

}  // namespace

RangeDecision EvaluateRange(absl::string_view value, uint64_t size) {
  RangeDecision full;
  value = TrimFieldValue(value);
  const size_t eq = value.find('=');
  if (eq == absl::string_view::npos || !EqualsIgnoreCase(value.substr(0, eq), "bytes")) {
    return full;
  }
  absl::string_view rest = value.substr(eq + 1);

  std::array<Span, kMaxRangeSpecs> spans;
  size_t satisfiable = 0;
  size_t specs = 0;
  while (true) {
    const size_t comma = rest.find(',');
    const absl::string_view spec = TrimFieldValue(rest.substr(0, comma));
    // Empty list elements are allowed (RFC 9110 §5.6.1) and ignored.
    if (!spec.empty()) {
      if (++specs > kMaxRangeSpecs) return full;
      const size_t dash = spec.find('-');
      if (dash == absl::string_view::npos) return full;
      const absl::string_view first_text = spec.substr(0, dash);
      const absl::string_view last_text = spec.substr(dash + 1);
      if (first_text.empty()) {
        // suffix-range: the last n bytes.
        std::optional<uint64_t> n = ParseDigits(last_text);
        if (!n) return full;
        if (*n > 0 && size > 0) {
          spans[satisfiable++] = {size - std::min(*n, size), size - 1};
        }
      } else {
        std::optional<uint64_t> first = ParseDigits(first_text);
        if (!first) return full;
        uint64_t last = kSaturated;
        if (!last_text.empty()) {
          std::optional<uint64_t> parsed = ParseDigits(last_text);
          if (!parsed || *parsed < *first) return full;
          last = *parsed;
        }
        if (*first < size) spans[satisfiable++] = {*first, std::min(last, size - 1)};
      }
    }
    if (comma == absl::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  if (specs == 0 || size == 0) return full;
  if (satisfiable == 0) return {RangeDecision::Kind::kUnsatisfiable, 0, 0};

  std::sort(spans.begin(), spans.begin() + satisfiable,
            [](const Span& a, const Span& b) { return a.first < b.first; });
  Span merged = spans[0];
  for (size_t i = 1; i < satisfiable; ++i) {
    // Adjacent (next starts right after) or overlapping; last < size so last + 1 cannot wrap.
    if (spans[i].first > merged.last + 1) return full;
    merged.last = std::max(merged.last, spans[i].last);
  }
  return {RangeDecision::Kind::kPartial, merged.first, merged.last - merged.first + 1};
}

}  // namespace petrel::http_internal
