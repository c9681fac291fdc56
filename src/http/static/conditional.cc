#include "http/static/conditional.h"

#include "http/ascii.h"
#include "http/http_date.h"

namespace petrel::http_internal {
namespace {

bool IsEtagc(char c) {
  const auto u = static_cast<unsigned char>(c);
  return u == 0x21 || (u >= 0x23 && u <= 0x7e) || u >= 0x80;
}

// Parses an entity-tag at the front of `*s` and consumes it.
std::optional<EntityTag> TakeEntityTag(absl::string_view* s) {
  EntityTag tag;
  absl::string_view t = *s;
  if (t.size() >= 2 && t[0] == 'W' && t[1] == '/') {
    tag.weak = true;
    t.remove_prefix(2);
  }
  if (t.empty() || t[0] != '"') return std::nullopt;
  size_t i = 1;
  while (i < t.size() && IsEtagc(t[i])) ++i;
  if (i >= t.size() || t[i] != '"') return std::nullopt;
  tag.opaque = t.substr(0, i + 1);
  t.remove_prefix(i + 1);
  *s = t;
  return tag;
}

void SkipOws(absl::string_view* s) {
  while (!s->empty() && IsOws(s->front())) s->remove_prefix(1);
}

// The one date of a date-valued field, if present exactly once and valid.
std::optional<int64_t> SingleDate(const HeaderMap& headers, absl::string_view name, int64_t now) {
  auto values = headers.GetAll(name);
  if (values.size() != 1) return std::nullopt;
  return ParseHttpDate(TrimFieldValue(values[0]), now);
}

}  // namespace

std::optional<EntityTag> ParseEntityTag(absl::string_view text) {
  std::optional<EntityTag> tag = TakeEntityTag(&text);
  if (!tag || !text.empty()) return std::nullopt;
  return tag;
}

bool StrongMatch(const EntityTag& a, const EntityTag& b) {
  return !a.weak && !b.weak && a.opaque == b.opaque;
}

bool WeakMatch(const EntityTag& a, const EntityTag& b) { return a.opaque == b.opaque; }

TagListMatch MatchEntityTagList(absl::string_view value, const EntityTag& current, bool weak) {
  value = TrimFieldValue(value);
  if (value == "*") return TagListMatch::kMatch;
  bool matched = false;
  bool any = false;
  while (true) {
    SkipOws(&value);
    if (value.empty()) break;
    if (value.front() == ',') {  // An empty element.
      value.remove_prefix(1);
      continue;
    }
    std::optional<EntityTag> tag = TakeEntityTag(&value);
    if (!tag) return TagListMatch::kMalformed;
    any = true;
    if (weak ? WeakMatch(*tag, current) : StrongMatch(*tag, current)) matched = true;
    SkipOws(&value);
    if (value.empty()) break;
    if (value.front() != ',') return TagListMatch::kMalformed;
    value.remove_prefix(1);
  }
  if (!any) return TagListMatch::kMalformed;
  return matched ? TagListMatch::kMatch : TagListMatch::kNoMatch;
}

Precondition EvaluatePreconditions(const HeaderMap& headers, const Validators& current,
                                   int64_t now) {
  // Most requests carry no conditional at all: one pass over the names instead of four lookups.
  bool conditional = false;
  for (const HeaderField f : headers) {
    if (IsConditionalFieldName(f.name)) {
      conditional = true;
      break;
    }
  }
  if (!conditional) return Precondition::kProceed;

  if (std::optional<std::string> if_match = headers.GetJoined("If-Match")) {
    if (MatchEntityTagList(*if_match, current.etag, /*weak=*/false) != TagListMatch::kMatch) {
      return Precondition::kPreconditionFailed;
    }
  } else if (std::optional<int64_t> date = SingleDate(headers, "If-Unmodified-Since", now)) {
    if (current.last_modified > *date) return Precondition::kPreconditionFailed;
  }

  if (std::optional<std::string> if_none_match = headers.GetJoined("If-None-Match")) {
    if (MatchEntityTagList(*if_none_match, current.etag, /*weak=*/true) == TagListMatch::kMatch) {
      return Precondition::kNotModified;
    }
  } else if (std::optional<int64_t> date = SingleDate(headers, "If-Modified-Since", now)) {
    // RFC 9110 §13.1.3: a date later than the server's clock is invalid.
    if (*date <= now && current.last_modified <= *date) return Precondition::kNotModified;
  }
  return Precondition::kProceed;
}

bool IfRangeMatches(absl::string_view value, const Validators& current, int64_t now) {
  value = TrimFieldValue(value);
  // An entity-tag starts with '"' or "W/"; anything else ("Wed, ..." included) is a date.
  if (!value.empty() && (value.front() == '"' || value.substr(0, 2) == "W/")) {
    std::optional<EntityTag> tag = ParseEntityTag(value);
    return tag && StrongMatch(*tag, current.etag);
  }
  std::optional<int64_t> date = ParseHttpDate(value, now);
  return date && *date == current.last_modified && current.last_modified + 1 <= now;
}

}  // namespace petrel::http_internal
