#include "http/h1/field_line.h"

#include "http/ascii.h"
#include "petrel/http/header_map.h"

namespace petrel::h1 {

LineScan ScanLine(absl::string_view data, size_t from, size_t* pos) {
  const char* p = data.data();
  const size_t n = data.size();
  for (size_t i = from; i < n; ++i) {
    const char c = p[i];
    // Most bytes are neither CR nor LF; one compare rejects them cheaply.
    if (static_cast<unsigned char>(c) > '\r') continue;
    if (c == '\r') {
      *pos = i;
      if (i + 1 == n) return LineScan::kIncomplete;  // Its LF may come with the next read.
      return p[i + 1] == '\n' ? LineScan::kComplete : LineScan::kBareCr;
    }
    if (c == '\n') {
      *pos = i;
      return LineScan::kBareLf;  // A CR before it would have ended the scan already.
    }
  }
  *pos = n;
  return LineScan::kIncomplete;
}

const char* ParseFieldLine(absl::string_view line, FieldLine* out) {
  if (line.empty()) return "empty field line";
  if (http_internal::IsOws(line[0])) return "obs-fold or whitespace before field name";
  const size_t colon = line.find(':');
  if (colon == absl::string_view::npos) return "field line without colon";
  const absl::string_view name = line.substr(0, colon);
  if (name.empty()) return "empty field name";
  // Whitespace between name and colon has been used for request smuggling (RFC 9112 §5.1 MUST
  // reject with 400).
  if (http_internal::IsOws(name.back())) return "whitespace before colon";
  if (!IsValidFieldName(name)) return "invalid character in field name";
  const absl::string_view value = TrimFieldValue(line.substr(colon + 1));
  if (!IsValidFieldValue(value)) return "invalid character in field value";
  out->name = name;
  out->value = value;
  return nullptr;
}

}  // namespace petrel::h1
