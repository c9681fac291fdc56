// Internal: versions of the HTTP libraries linked into petrel_http.
#ifndef PETREL_HTTP_VERSION_H_
#define PETREL_HTTP_VERSION_H_

#include <string>

namespace petrel::http {

// "nghttp3/0.8.0 nghttp2/1.52.0", as the libraries report at run time.
std::string HttpLibraryVersions();

}  // namespace petrel::http

#endif  // PETREL_HTTP_VERSION_H_
