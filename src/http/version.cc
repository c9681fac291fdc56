#include "http/version.h"

#include <nghttp2/nghttp2.h>
#include <nghttp3/nghttp3.h>

#include "absl/strings/str_cat.h"

namespace petrel::http {

std::string HttpLibraryVersions() {
  const nghttp3_info* h3 = nghttp3_version(0);
  const nghttp2_info* h2 = nghttp2_version(0);
  return absl::StrCat("nghttp3/", h3 != nullptr ? h3->version_str : "?", " nghttp2/",
                      h2 != nullptr ? h2->version_str : "?");
}

}  // namespace petrel::http
