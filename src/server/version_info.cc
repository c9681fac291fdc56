#include "absl/strings/str_cat.h"
#include "http/version.h"
#include "petrel/version.h"
#include "quic/version.h"

namespace petrel {

std::string VersionLine() {
  return absl::StrCat("petrel/", kVersion, " ", quic::TransportLibraryVersions(), " ",
                      http::HttpLibraryVersions());
}

}  // namespace petrel
