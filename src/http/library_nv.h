// Internal: the name/value pair nghttp2 and nghttp3 take for a header field. Their structs
// (nghttp2_nv, nghttp3_nv) have the same members, so one template fills either.
#ifndef PETREL_HTTP_LIBRARY_NV_H_
#define PETREL_HTTP_LIBRARY_NV_H_

#include <cstdint>

#include "absl/strings/string_view.h"

namespace petrel::http_internal {

// A pair that points at the given bytes. Without the NO_COPY flags the library copies them on
// submit; with them the bytes must stay put until the library is done with the field section.
// Inline: a response builds one per field.
template <typename Nv>
inline Nv MakeLibraryNv(absl::string_view name, absl::string_view value, uint8_t flags) {
  Nv nv;
  nv.name = reinterpret_cast<uint8_t*>(const_cast<char*>(name.data()));
  nv.namelen = name.size();
  nv.value = reinterpret_cast<uint8_t*>(const_cast<char*>(value.data()));
  nv.valuelen = value.size();
  nv.flags = flags;
  return nv;
}

}  // namespace petrel::http_internal

#endif  // PETREL_HTTP_LIBRARY_NV_H_
