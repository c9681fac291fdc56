// Internal: entity tags and the conditional request headers (RFC 9110 §8.8.3, §13) as the
// static-file handler evaluates them.
#ifndef PETREL_HTTP_STATIC_CONDITIONAL_H_
#define PETREL_HTTP_STATIC_CONDITIONAL_H_

#include <cstdint>
#include <optional>

#include "absl/strings/string_view.h"
#include "petrel/http/header_map.h"

namespace petrel::http_internal {

// An entity-tag: `opaque` includes the double quotes ("\"xyzzy\"").
struct EntityTag {
  bool weak = false;
  absl::string_view opaque;
};

// Exactly one entity-tag (`W/"..."` or `"..."`, etagc = %x21 / %x23-7E / obs-text), nothing
// around it. The view points into `text`.
std::optional<EntityTag> ParseEntityTag(absl::string_view text);

// RFC 9110 §8.8.3.2.
bool StrongMatch(const EntityTag& a, const EntityTag& b);
bool WeakMatch(const EntityTag& a, const EntityTag& b);

enum class TagListMatch : uint8_t { kMatch, kNoMatch, kMalformed };

// Matches `current` against an If-Match / If-None-Match value: "*" (matches any current
// representation) or a comma-separated list of entity-tags with optional whitespace and empty
// elements. `weak` selects weak comparison (If-None-Match) over strong (If-Match). Anything else,
// e.g. "*" inside a list or a bare token, is kMalformed. Allocation-free.
TagListMatch MatchEntityTagList(absl::string_view value, const EntityTag& current, bool weak);

// What the validators of the selected representation are.
struct Validators {
  EntityTag etag;         // Strong.
  int64_t last_modified;  // Unix seconds (mtime truncated, as Last-Modified says it).
};

// True for the names of the conditional fields (If-Match, If-None-Match, If-Modified-Since,
// If-Unmodified-Since, If-Range): all start with "if-", which one look at the name tells.
inline bool IsConditionalFieldName(absl::string_view name) {
  return name.size() > 3 && (name[0] | 0x20) == 'i' && (name[1] | 0x20) == 'f' && name[2] == '-';
}

enum class Precondition : uint8_t {
  kProceed,             // Serve the request (maybe as a range).
  kNotModified,         // 304.
  kPreconditionFailed,  // 412.
};

// RFC 9110 §13.2.2 steps 1-4 for a GET or HEAD of an existing representation:
//  1. If-Match: no strong match (or malformed) -> 412.
//  2. else If-Unmodified-Since, a valid date: modified after it -> 412.
//  3. If-None-Match: a weak match (or "*") -> 304; a malformed value is ignored.
//  4. else If-Modified-Since, a valid date not in the future: not modified since -> 304.
// A field that appears more than once with a date is invalid and ignored; list fields combine.
// `now` (Unix seconds) decides whether an If-Modified-Since date lies in the future.
Precondition EvaluatePreconditions(const HeaderMap& headers, const Validators& current,
                                   int64_t now);

// RFC 9110 §13.1.5: whether If-Range `value` lets the Range apply. An entity-tag must match
// strongly; an HTTP-date must equal Last-Modified exactly and Last-Modified must be strong, i.e.
// at least one second before `now` (a file modified in the current second may change again
// within it). Anything else (weak tags, malformed values) does not match: send the whole file.
bool IfRangeMatches(absl::string_view value, const Validators& current, int64_t now);

}  // namespace petrel::http_internal

#endif  // PETREL_HTTP_STATIC_CONDITIONAL_H_
