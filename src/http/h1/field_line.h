// Internal: CRLF line scanning and field-line syntax shared by the h1 request-head parser and the
// chunked decoder's trailer section (RFC 9112 §2.2, §5; DESIGN §7).
#ifndef PETREL_HTTP_H1_FIELD_LINE_H_
#define PETREL_HTTP_H1_FIELD_LINE_H_

#include <cstddef>
#include <cstdint>

#include "absl/strings/string_view.h"

namespace petrel::h1 {

// The high bit of each byte of `word` (eight bytes as loaded from memory on a little-endian
// machine) that is below 0x20 (HTAB included) or is DEL. Exact when zero, and the lowest mark is
// always a real one; marks above a real one may be false alarms (the borrow of the subtraction).
inline uint64_t ControlMarks(uint64_t word) {
  constexpr uint64_t kOnes = 0x0101010101010101u;
  constexpr uint64_t kHigh = 0x8080808080808080u;
  const uint64_t below_space = (word - 0x20 * kOnes) & ~word & kHigh;
  const uint64_t del = word ^ (0x7f * kOnes);
  const uint64_t is_del = (del - kOnes) & ~del & kHigh;
  return below_space | is_del;
}

// True if some byte of `word` is below 0x20 (HTAB included) or is DEL. Exact when it says false;
// a true may be a false alarm, so callers then look byte by byte.
inline bool MayHoldControlByte(uint64_t word) { return ControlMarks(word) != 0; }

enum class LineScan {
  kComplete,    // A CRLF was found; *pos is the index of its CR.
  kIncomplete,  // No line end yet; *pos is where the next scan must resume.
  kBareCr,      // A CR not followed by LF; *pos is its index.
  kBareLf,      // An LF not preceded by CR; *pos is its index.
};

// Looks for the CRLF ending the line that contains data[from]. Every byte from `from` on is
// looked at once per call, and on kIncomplete *pos tells the caller where to resume, so a
// parser fed one byte at a time still scans each byte only once (a trailing CR is looked at again
// because its LF may be the next byte to arrive). DESIGN §7: CRLF only — a CR anywhere except
// directly before LF, and an LF anywhere except directly after CR, are errors.
//
// If `control` is not null, it is set to true when a scanned byte other than the line's CR is a
// control byte (below 0x20, HTAB included) or DEL; it is never set to false. A caller that clears
// it at the start of a line thus learns whether the line is free of them, and can skip looking
// for them again (the scan tests eight bytes at a time for exactly these).
LineScan ScanLine(absl::string_view data, size_t from, size_t* pos, bool* control = nullptr);

// One field line, split. `name` and `value` view into the line passed to ParseFieldLine.
struct FieldLine {
  absl::string_view name;
  absl::string_view value;  // Trimmed of SP/HTAB on both sides.
};

// Parses a field line without its CRLF (RFC 9112 §5): a token name, ':' with no whitespace
// before it, a value trimmed of SP/HTAB with no CTL other than HTAB. A line starting with SP or
// HTAB is obs-fold (a continuation) and is rejected (RFC 9112 §5.2, DESIGN §7). Returns nullptr
// on success, else a static reason string for the log; every failure here means 400.
// `may_hold_control` false promises that no byte of `line` is a control byte or DEL (ScanLine
// found none), so the value needs no second look for them.
const char* ParseFieldLine(absl::string_view line, FieldLine* out, bool may_hold_control = true);

// IsValidFieldName(name) && IsValidFieldValue(value), for fields about to be sent: every field of
// every response head passes here, so the common answer (a token name; a value without control
// bytes) is found with a table lookup per name byte and a test per eight value bytes, and only a
// value that may hold one (an HTAB, say) is looked at again by IsValidFieldValue.
bool IsValidOutputField(absl::string_view name, absl::string_view value);

}  // namespace petrel::h1

#endif  // PETREL_HTTP_H1_FIELD_LINE_H_
