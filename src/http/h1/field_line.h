// Internal: CRLF line scanning and field-line syntax shared by the h1 request-head parser and the
// chunked decoder's trailer section (RFC 9112 §2.2, §5; DESIGN §7).
#ifndef PETREL_HTTP_H1_FIELD_LINE_H_
#define PETREL_HTTP_H1_FIELD_LINE_H_

#include <cstddef>

#include "absl/strings/string_view.h"

namespace petrel::h1 {

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
LineScan ScanLine(absl::string_view data, size_t from, size_t* pos);

// One field line, split. `name` and `value` view into the line passed to ParseFieldLine.
struct FieldLine {
  absl::string_view name;
  absl::string_view value;  // Trimmed of SP/HTAB on both sides.
};

// Parses a field line without its CRLF (RFC 9112 §5): a token name, ':' with no whitespace
// before it, a value trimmed of SP/HTAB with no CTL other than HTAB. A line starting with SP or
// HTAB is obs-fold (a continuation) and is rejected (RFC 9112 §5.2, DESIGN §7). Returns nullptr
// on success, else a static reason string for the log; every failure here means 400.
const char* ParseFieldLine(absl::string_view line, FieldLine* out);

}  // namespace petrel::h1

#endif  // PETREL_HTTP_H1_FIELD_LINE_H_
