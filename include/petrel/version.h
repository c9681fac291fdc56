// Public: Petrel's version and the versions of the libraries it runs on.
#ifndef PETREL_VERSION_H_
#define PETREL_VERSION_H_

#include <string>

namespace petrel {

inline constexpr const char kVersion[] = "0.1.0";

// One line naming Petrel's version and those of the linked ngtcp2, nghttp3, nghttp2 and
// BoringSSL, as the libraries report them at run time.
std::string VersionLine();

}  // namespace petrel

#endif  // PETREL_VERSION_H_
