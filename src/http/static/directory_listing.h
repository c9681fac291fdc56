// Internal: the HTML page a static-file route shows for a directory when listings are enabled.
#ifndef PETREL_HTTP_STATIC_DIRECTORY_LISTING_H_
#define PETREL_HTTP_STATIC_DIRECTORY_LISTING_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace petrel::http_internal {

struct ListingEntry {
  std::string name;  // A file name as stored on disk (any bytes but '/' and NUL).
  bool directory = false;
  uint64_t size = 0;
};

// A UTF-8 HTML page titled with `request_path` (shown, never interpreted) that links each entry
// by a relative reference: names are percent-encoded in hrefs (so "a:b" or "?x" cannot become a
// scheme or a query) and HTML-escaped in text. Entries appear sorted by name, directories with a
// trailing '/', preceded by a link to the parent unless `is_root`.
std::string RenderDirectoryListing(absl::string_view request_path,
                                   std::vector<ListingEntry> entries, bool is_root);

// `text` with &, <, >, " and ' escaped for HTML text and attribute values.
std::string HtmlEscape(absl::string_view text);

}  // namespace petrel::http_internal

#endif  // PETREL_HTTP_STATIC_DIRECTORY_LISTING_H_
