#include "http/static/mime_types.h"

#include <array>
#include <utility>

#include "http/ascii.h"

namespace petrel::http_internal {
namespace {

// Sorted by nothing in particular: the table is small and a lookup is one pass of short
// length-first comparisons, cheaper than hashing the extension.
constexpr std::pair<absl::string_view, absl::string_view> kTypes[] = {
    {"html", "text/html; charset=utf-8"},
    {"htm", "text/html; charset=utf-8"},
    {"css", "text/css; charset=utf-8"},
    {"js", "text/javascript; charset=utf-8"},  // RFC 9239
    {"mjs", "text/javascript; charset=utf-8"},
    {"json", "application/json"},  // RFC 8259: UTF-8 always, no charset parameter.
    {"map", "application/json"},
    {"webmanifest", "application/manifest+json"},
    {"txt", "text/plain; charset=utf-8"},
    {"md", "text/markdown; charset=utf-8"},
    {"csv", "text/csv; charset=utf-8"},
    {"xml", "text/xml; charset=utf-8"},
    {"svg", "image/svg+xml"},
    {"png", "image/png"},
    {"jpg", "image/jpeg"},
    {"jpeg", "image/jpeg"},
    {"gif", "image/gif"},
    {"webp", "image/webp"},
    {"avif", "image/avif"},
    {"ico", "image/vnd.microsoft.icon"},
    {"wasm", "application/wasm"},
    {"pdf", "application/pdf"},
    {"zip", "application/zip"},
    {"gz", "application/gzip"},
    {"tar", "application/x-tar"},
    {"mp3", "audio/mpeg"},
    {"ogg", "audio/ogg"},
    {"wav", "audio/wav"},
    {"mp4", "video/mp4"},
    {"webm", "video/webm"},
    {"woff", "font/woff"},
    {"woff2", "font/woff2"},
    {"ttf", "font/ttf"},
    {"otf", "font/otf"},
    {"bin", "application/octet-stream"},
};

}  // namespace

absl::string_view BuiltinMimeType(absl::string_view extension) {
  for (const auto& [ext, type] : kTypes) {
    if (EqualsIgnoreCase(ext, extension)) return type;
  }
  return {};
}

absl::string_view FileExtension(absl::string_view name) {
  const size_t slash = name.rfind('/');
  if (slash != absl::string_view::npos) name.remove_prefix(slash + 1);
  const size_t dot = name.rfind('.');
  if (dot == absl::string_view::npos || dot == 0) return {};
  return name.substr(dot + 1);
}

}  // namespace petrel::http_internal
