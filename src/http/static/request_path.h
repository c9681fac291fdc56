// Internal: turns the raw path a static-file route captured into a relative file name that cannot
// leave the served root by its spelling (the handler still checks where it resolves).
#ifndef PETREL_HTTP_STATIC_REQUEST_PATH_H_
#define PETREL_HTTP_STATIC_REQUEST_PATH_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace petrel::http_internal {

struct StaticPath {
  // Decoded segments joined by '/', no leading or trailing '/'; "" names the root itself. A view
  // into the raw path when that needed no decoding (the common case: no copy), else into the
  // caller's buffer. In the directory form a '/' follows it in memory (see cache_key).
  absl::string_view relative;
  // The raw path ended with '/' (or was empty): the client asked for a directory.
  bool directory_form = false;

  // "dir/" for the directory form, which names the directory's index file: a key no regular
  // file can have.
  absl::string_view cache_key() const {
    return absl::string_view(relative.data(), relative.size() + (directory_form ? 1 : 0));
  }
};

// `raw` is the still percent-encoded path below the route's prefix, without a leading '/'
// ("a/b%20c.txt", "" for the root). Splits it at '/' first, then percent-decodes each segment,
// so an encoded "%2F" can never act as a separator and "%2e%2e" is seen as "..". Decoding runs
// once: "%252e" is the literal name "%2e".
// `decoded` is the buffer the result may point into; it must outlive the result (as `raw` must).
// Errors: InvalidArgument (answer 400) for a malformed escape ("%", "%4", "%zz") or a NUL byte,
// encoded or not; NotFound (answer 404, revealing nothing) for an encoded '/' and for an empty,
// "." or ".." segment other than the final empty one of the directory form.
absl::StatusOr<StaticPath> DecodeStaticPath(absl::string_view raw, std::string* decoded);

}  // namespace petrel::http_internal

#endif  // PETREL_HTTP_STATIC_REQUEST_PATH_H_
