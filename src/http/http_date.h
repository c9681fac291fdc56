// Internal: HTTP-date (RFC 9110 §5.6.7) as seconds since the Unix epoch — formatting as
// IMF-fixdate and parsing the three forms a recipient must accept. Thread-safe, locale-free.
#ifndef PETREL_HTTP_HTTP_DATE_H_
#define PETREL_HTTP_HTTP_DATE_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"

namespace petrel::http_internal {

// The earliest and latest instants a four-digit year can express: 0001-01-01T00:00:00Z and
// 9999-12-31T23:59:59Z.
inline constexpr int64_t kMinHttpDate = -62135596800;
inline constexpr int64_t kMaxHttpDate = 253402300799;

// "Sun, 06 Nov 1994 08:49:37 GMT" (always 29 bytes). Times outside [kMinHttpDate, kMaxHttpDate]
// are clamped to that range (a file's mtime can be anything).
std::string FormatHttpDate(int64_t unix_seconds);

// Parses an IMF-fixdate, an obsolete RFC 850 date ("Sunday, 06-Nov-94 08:49:37 GMT") or an
// asctime() date ("Sun Nov  6 08:49:37 1994"), the whole of `text` and nothing else (callers trim
// OWS). Names are case-sensitive as the grammar says; the weekday must be a valid name but is not
// checked against the date. Impossible dates (Feb 30, hour 24) give nullopt; a leap second (:60)
// counts as :59. RFC 850's two-digit year is resolved against `now_unix_seconds`: a year that
// would lie more than 50 years in the future means the previous century.
std::optional<int64_t> ParseHttpDate(absl::string_view text, int64_t now_unix_seconds);

}  // namespace petrel::http_internal

#endif  // PETREL_HTTP_HTTP_DATE_H_
