// Internal (petrel-server): the self-signed certificate petrel-server makes once and keeps in
// its state directory, so that a browser or client trusting it keeps working across restarts.
#ifndef PETREL_SERVER_SELF_SIGNED_STORE_H_
#define PETREL_SERVER_SELF_SIGNED_STORE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace petrel::server {

struct StoredCertificate {
  std::string certificate_file;  // <dir>/cert.pem
  std::string key_file;          // <dir>/key.pem (mode 0600)
  bool created = false;          // made now (else reused)
};

// Reuses <dir>/cert.pem + key.pem if both load; otherwise creates `dir` (mode 0700) and a new
// certificate for `names`.
absl::StatusOr<StoredCertificate> LoadOrCreateSelfSigned(const std::string& dir,
                                                         const std::vector<std::string>& names);

}  // namespace petrel::server

#endif  // PETREL_SERVER_SELF_SIGNED_STORE_H_
