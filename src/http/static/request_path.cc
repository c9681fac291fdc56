#include "http/static/request_path.h"

#include <cstring>
#include <optional>

namespace petrel::http_internal {
namespace {

std::optional<int> HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return std::nullopt;
}

bool IsDotSegment(absl::string_view s) { return s == "." || s == ".."; }

// Appends the decoded `segment` to `*out`.
absl::Status DecodeSegment(absl::string_view segment, std::string* out) {
  // Most names carry no escape: append them whole.
  if (std::memchr(segment.data(), '%', segment.size()) == nullptr) {
    if (segment.empty() || IsDotSegment(segment)) {
      return absl::NotFoundError("empty, '.' or '..' path segment");
    }
    if (std::memchr(segment.data(), '\0', segment.size()) != nullptr) {
      return absl::InvalidArgumentError("NUL in path");
    }
    out->append(segment.data(), segment.size());
    return absl::OkStatus();
  }
  const size_t start = out->size();
  for (size_t i = 0; i < segment.size(); ++i) {
    char c = segment[i];
    if (c == '%') {
      std::optional<int> hi = i + 1 < segment.size() ? HexValue(segment[i + 1]) : std::nullopt;
      std::optional<int> lo = i + 2 < segment.size() ? HexValue(segment[i + 2]) : std::nullopt;
      if (!hi || !lo) return absl::InvalidArgumentError("malformed percent-encoding");
      c = static_cast<char>(*hi * 16 + *lo);
      i += 2;
      if (c == '/') return absl::NotFoundError("encoded '/' in a path segment");
    }
    if (c == '\0') return absl::InvalidArgumentError("NUL in path");
    out->push_back(c);
  }
  const absl::string_view decoded = absl::string_view(*out).substr(start);
  if (decoded.empty() || IsDotSegment(decoded)) {
    return absl::NotFoundError("empty, '.' or '..' path segment");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<StaticPath> DecodeStaticPath(absl::string_view raw) {
  StaticPath result;
  if (raw.empty()) {
    result.directory_form = true;
    return result;
  }
  result.relative.reserve(raw.size());
  while (true) {
    const size_t slash = raw.find('/');
    const absl::string_view segment = raw.substr(0, slash);
    if (slash == absl::string_view::npos) {
      if (absl::Status s = DecodeSegment(segment, &result.relative); !s.ok()) return s;
      return result;
    }
    if (slash + 1 == raw.size() && !segment.empty()) {
      // "a/b/": the final empty segment is the directory form.
      if (absl::Status s = DecodeSegment(segment, &result.relative); !s.ok()) return s;
      result.directory_form = true;
      return result;
    }
    if (absl::Status s = DecodeSegment(segment, &result.relative); !s.ok()) return s;
    result.relative.push_back('/');
    raw.remove_prefix(slash + 1);
  }
}

}  // namespace petrel::http_internal
