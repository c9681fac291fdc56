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

// True if `raw` (not empty) needs no decoding and every segment is a name: no '%', no NUL, no
// empty, "." or ".." segment except the final empty one of the directory form. Such a path is
// its own decoded form.
bool IsPlainPath(absl::string_view raw) {
  size_t start = 0;
  for (size_t i = 0; i <= raw.size(); ++i) {
    if (i < raw.size() && raw[i] != '/') {
      if (raw[i] == '%' || raw[i] == '\0') return false;
      continue;
    }
    const absl::string_view segment = raw.substr(start, i - start);
    if (segment.empty() ? i < raw.size() : IsDotSegment(segment)) return false;
    start = i + 1;
  }
  return true;
}

}  // namespace

absl::StatusOr<StaticPath> DecodeStaticPath(absl::string_view raw, std::string* decoded) {
  StaticPath result;
  if (raw.empty()) {
    decoded->assign(1, '/');  // the root's cache key
    result.relative = absl::string_view(decoded->data(), 0);
    result.directory_form = true;
    return result;
  }
  if (IsPlainPath(raw)) {
    result.directory_form = raw.back() == '/';
    result.relative = raw.substr(0, raw.size() - (result.directory_form ? 1 : 0));
    return result;
  }
  std::string& out = *decoded;
  out.clear();
  out.reserve(raw.size());
  while (true) {
    const size_t slash = raw.find('/');
    const absl::string_view segment = raw.substr(0, slash);
    if (absl::Status s = DecodeSegment(segment, &out); !s.ok()) return s;
    if (slash == absl::string_view::npos) break;
    out.push_back('/');
    if (slash + 1 == raw.size()) {
      // "a/b/": the final empty segment is the directory form; the '/' stays for cache_key.
      result.directory_form = true;
      break;
    }
    raw.remove_prefix(slash + 1);
  }
  result.relative = absl::string_view(out).substr(0, out.size() - (result.directory_form ? 1 : 0));
  return result;
}

}  // namespace petrel::http_internal
