// Internal (tools): the parts of an https:// URL the command-line clients need.
#ifndef PETREL_TOOLS_URL_H_
#define PETREL_TOOLS_URL_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace petrel::tools {

struct Url {
  std::string scheme;     // "https" (or "http")
  std::string host;       // without brackets for IPv6 literals
  uint16_t port = 0;      // the explicit port, else the scheme's default
  std::string authority;  // as written: host[:port], brackets kept
  std::string path;       // origin form with the query, "/" if the URL has none
};

// Parses "scheme://host[:port][/path][?query]" (a fragment is dropped). InvalidArgument names
// what is wrong.
absl::StatusOr<Url> ParseUrl(absl::string_view text);

}  // namespace petrel::tools

#endif  // PETREL_TOOLS_URL_H_
