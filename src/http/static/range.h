// Internal: the Range request header for static files (RFC 9110 §14.1.2, §14.2): bytes ranges
// only, answered with one range or not at all.
#ifndef PETREL_HTTP_STATIC_RANGE_H_
#define PETREL_HTTP_STATIC_RANGE_H_

#include <cstddef>
#include <cstdint>

#include "absl/strings/string_view.h"

namespace petrel::http_internal {

// What to do with a Range header, for a representation of a given size.
struct RangeDecision {
  enum class Kind : uint8_t {
    kFull,           // Ignore the header: 200 with the whole representation.
    kPartial,        // 206 with [first, first + length).
    kUnsatisfiable,  // 416 with "Content-Range: bytes */size".
  };
  Kind kind = Kind::kFull;
  uint64_t first = 0;
  uint64_t length = 0;
};

// More range-specs than this and the header is ignored: a client asking for hundreds of pieces
// is either broken or probing (RFC 9110 §14.2 lets a server ignore such requests).
inline constexpr size_t kMaxRangeSpecs = 64;

// Decides how to answer `value` (one Range field value) for `size` bytes:
//  - not "bytes=" (unit compared case-insensitively), malformed syntax (any bad range-spec,
//    last < first, no range-spec at all), or more than kMaxRangeSpecs specs: kFull.
//  - `size` == 0: kFull (an empty 200; no byte range of nothing is worth a 206 or a 416).
//  - no satisfiable spec (first >= size, or a "-0" suffix): kUnsatisfiable.
//  - the satisfiable specs, clamped to the representation, overlapping or adjacent ones
//    merged, leave one range: kPartial with it. More than one: kFull (no multipart/byteranges;
//    RFC 9110 §14.2 allows answering 200 instead).
// Numbers too large for uint64 saturate (so they are treated as "beyond the end").
RangeDecision EvaluateRange(absl::string_view value, uint64_t size);

}  // namespace petrel::http_internal

#endif  // PETREL_HTTP_STATIC_RANGE_H_
