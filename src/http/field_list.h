// Internal: tokens in comma-separated field values (RFC 9110 §5.6.1), one scanner for every
// layer that asks "does this list name X": Connection and TE (h1), Upgrade and
// Sec-WebSocket-Protocol (WebSocket openings), Cache-Control and Vary (compression).
#ifndef PETREL_HTTP_FIELD_LIST_H_
#define PETREL_HTTP_FIELD_LIST_H_

#include <cstddef>

#include "absl/strings/string_view.h"
#include "http/ascii.h"
#include "petrel/http/header_map.h"

namespace petrel::http_internal {

// Whether some element of `list` equals `token`, case-insensitively. An element is compared up
// to its first ';' (parameters: "trailers;q=1") or '=' (a directive's argument: "max-age=60"),
// without the optional whitespace around it; empty elements never match a non-empty token.
inline bool ListHasToken(absl::string_view list, absl::string_view token) {
  size_t at = 0;
  while (at <= list.size()) {
    size_t end = list.find(',', at);
    if (end == absl::string_view::npos) end = list.size();
    size_t stop = at;
    while (stop < end && list[stop] != ';' && list[stop] != '=') ++stop;
    size_t first = at;
    while (first < stop && IsOws(list[first])) ++first;
    while (stop > first && IsOws(list[stop - 1])) --stop;
    if (http_internal::EqualsIgnoreCase(list.substr(first, stop - first), token)) return true;
    at = end + 1;
  }
  return false;
}

// The same over every line of the field `name`.
inline bool FieldHasToken(const HeaderMap& fields, absl::string_view name,
                          absl::string_view token) {
  for (absl::string_view value : fields.GetAll(name)) {
    if (ListHasToken(value, token)) return true;
  }
  return false;
}

}  // namespace petrel::http_internal

#endif  // PETREL_HTTP_FIELD_LIST_H_
