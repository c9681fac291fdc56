#include "server/self_signed_store.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "quic/tls/certificate.h"

namespace petrel::server {
namespace {

// mkdir -p with mode 0700 for what it creates.
absl::Status MakeDirs(const std::string& dir) {
  for (size_t pos = 1; pos <= dir.size(); ++pos) {
    if (pos != dir.size() && dir[pos] != '/') continue;
    const std::string part = dir.substr(0, pos);
    if (mkdir(part.c_str(), 0700) != 0 && errno != EEXIST) {
      return absl::PermissionDeniedError(
          absl::StrCat("cannot create ", part, ": ", std::strerror(errno)));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<StoredCertificate> LoadOrCreateSelfSigned(const std::string& dir,
                                                         const std::vector<std::string>& names) {
  StoredCertificate stored;
  stored.certificate_file = absl::StrCat(dir, "/cert.pem");
  stored.key_file = absl::StrCat(dir, "/key.pem");
  if (quic::ReadPemFiles(stored.certificate_file, stored.key_file).ok()) return stored;
  if (absl::Status s = MakeDirs(dir); !s.ok()) return s;
  absl::StatusOr<quic::CertificatePem> pem = quic::GenerateSelfSigned(names, 825);
  if (!pem.ok()) return pem.status();
  if (absl::Status s = quic::WritePemFiles(*pem, stored.certificate_file, stored.key_file);
      !s.ok()) {
    return s;
  }
  stored.created = true;
  return stored;
}

}  // namespace petrel::server
