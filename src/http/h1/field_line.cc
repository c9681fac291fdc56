#include "http/h1/field_line.h"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>

#include "http/ascii.h"
#include "petrel/http/header_map.h"

namespace petrel::h1 {
namespace {

// ControlMarks reads bytes in memory order from the low end of a word.
static_assert(std::endian::native == std::endian::little);

uint64_t Load8(const char* p) {
  uint64_t word;
  std::memcpy(&word, p, sizeof(word));
  return word;
}

bool IsControlByte(unsigned char c) { return c < 0x20 || c == 0x7f; }

}  // namespace

LineScan ScanLine(absl::string_view data, size_t from, size_t* pos, bool* control) {
  const char* p = data.data();
  const size_t n = data.size();
  size_t i = from;
  while (i < n) {
    // Most of a head is visible ASCII: skip eight such bytes per test. In a word that holds a
    // control byte, the lowest marked byte is a real one (a false alarm only ever sits above a
    // real hit), so it is found without looking at the bytes before it.
    if (n - i >= 8) {
      const uint64_t marks = ControlMarks(Load8(p + i));
      if (marks == 0) {
        i += 8;
        continue;
      }
      i += static_cast<size_t>(std::countr_zero(marks)) / 8;
    } else if (!IsControlByte(static_cast<unsigned char>(p[i]))) {
      ++i;  // the last few bytes, one at a time
      continue;
    }
    const char c = p[i];
    if (c == '\r') {
      *pos = i;
      if (i + 1 == n) return LineScan::kIncomplete;  // Its LF may come with the next read.
      return p[i + 1] == '\n' ? LineScan::kComplete : LineScan::kBareCr;
    }
    if (c == '\n') {
      *pos = i;
      return LineScan::kBareLf;  // A CR before it would have ended the scan already.
    }
    if (control != nullptr) *control = true;
    ++i;
  }
  *pos = n;
  return LineScan::kIncomplete;
}

const char* ParseFieldLine(absl::string_view line, FieldLine* out, bool may_hold_control) {
  // The common case in one pass: a token, then the colon right after it. Whatever else the line
  // holds is judged below, where each failure gets its own reason.
  const size_t n = line.size();
  size_t colon = 0;
  while (colon < n && http_internal::IsTchar(line[colon])) ++colon;
  if (colon != 0 && colon < n && line[colon] == ':') {
    const absl::string_view value = TrimFieldValue(line.substr(colon + 1));
    if (!may_hold_control || IsValidFieldValue(value)) {
      out->name = line.substr(0, colon);
      out->value = value;
      return nullptr;
    }
    return "invalid character in field value";
  }

  if (line.empty()) return "empty field line";
  if (http_internal::IsOws(line[0])) return "obs-fold or whitespace before field name";
  colon = line.find(':');
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

bool IsValidOutputField(absl::string_view name, absl::string_view value) {
  const char* p = name.data();
  const size_t n = name.size();
  // No early exit: names are short, and one AND per byte beats a branch per byte.
  bool token = n != 0;
  size_t i = 0;
  for (; n - i >= 4; i += 4) {
    token &= http_internal::IsTchar(p[i]) & http_internal::IsTchar(p[i + 1]) &
             http_internal::IsTchar(p[i + 2]) & http_internal::IsTchar(p[i + 3]);
  }
  for (; i < n; ++i) token &= http_internal::IsTchar(p[i]);
  if (!token) return false;

  const char* q = value.data();
  const size_t m = value.size();
  if (m == 0) return true;
  if (http_internal::IsOws(q[0]) || http_internal::IsOws(q[m - 1])) return false;
  if (m < 8) {
    for (size_t j = 0; j < m; ++j) {
      if (IsControlByte(static_cast<unsigned char>(q[j]))) return IsValidFieldValue(value);
    }
    return true;
  }
  size_t j = 0;
  for (; m - j >= 8; j += 8) {
    if (MayHoldControlByte(Load8(q + j))) return IsValidFieldValue(value);
  }
  // The last few bytes as the tail of the last eight (some of them looked at twice).
  if (j != m && MayHoldControlByte(Load8(q + m - 8))) return IsValidFieldValue(value);
  return true;
}

}  // namespace petrel::h1
