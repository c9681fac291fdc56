#include "quic/version.h"

#include <ngtcp2/ngtcp2.h>
#include <openssl/base.h>
#include <openssl/crypto.h>

#include "absl/strings/str_cat.h"

namespace petrel::quic {

std::string TransportLibraryVersions() {
  const ngtcp2_info* info = ngtcp2_version(0);
  // OpenSSL_version() is read at run time so the line names the library actually loaded.
  return absl::StrCat("ngtcp2/", info != nullptr ? info->version_str : "?", " ",
                      OpenSSL_version(OPENSSL_VERSION), "/api-", BORINGSSL_API_VERSION);
}

}  // namespace petrel::quic
