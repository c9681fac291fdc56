// Internal: the built-in table from file name extensions to media types for static files.
#ifndef PETREL_HTTP_STATIC_MIME_TYPES_H_
#define PETREL_HTTP_STATIC_MIME_TYPES_H_

#include "absl/strings/string_view.h"

namespace petrel::http_internal {

// The media type for `extension` (without the dot, ASCII case-insensitive: "HTML" = "html"),
// with "; charset=utf-8" on text types; "" if the table does not know it. Static storage.
absl::string_view BuiltinMimeType(absl::string_view extension);

// The extension of the last segment of `name` ("a/b.tar.gz" -> "gz"), "" if it has none. A
// leading dot does not start an extension (".profile" has none).
absl::string_view FileExtension(absl::string_view name);

}  // namespace petrel::http_internal

#endif  // PETREL_HTTP_STATIC_MIME_TYPES_H_
