// The decoding of a static-file request path. Property besides "no crash": a path it accepts is
// relative and cannot leave the root by its spelling — no leading '/', no empty, "." or ".."
// segment, no NUL — and a path without '%' needs no copy.
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "fuzz_check.h"
#include "http/static/request_path.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using petrel::http_internal::DecodeStaticPath;
  using petrel::http_internal::StaticPath;
  if (size > 4096) return 0;
  const absl::string_view raw(reinterpret_cast<const char*>(data), size);
  std::string decoded;
  const absl::StatusOr<StaticPath> path = DecodeStaticPath(raw, &decoded);
  if (!path.ok()) {
    PETREL_FUZZ_CHECK(absl::IsInvalidArgument(path.status()) || absl::IsNotFound(path.status()));
    return 0;
  }
  const absl::string_view rel = path->relative;
  PETREL_FUZZ_CHECK(rel.find('\0') == absl::string_view::npos);
  if (!rel.empty()) {
    for (const absl::string_view segment : absl::StrSplit(rel, '/')) {
      PETREL_FUZZ_CHECK(!segment.empty() && segment != "." && segment != "..");
    }
  }
  if (raw.find('%') == absl::string_view::npos) {
    PETREL_FUZZ_CHECK(rel.empty() || (rel.data() >= raw.data() && rel.data() < raw.data() + size));
  }
  if (path->directory_form) PETREL_FUZZ_CHECK(path->cache_key().back() == '/');
  return 0;
}
