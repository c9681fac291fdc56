// Internal: certificates and keys for TLS contexts — PEM files, or a self-signed ECDSA P-256
// certificate made at start for local use.
#ifndef PETREL_QUIC_TLS_CERTIFICATE_H_
#define PETREL_QUIC_TLS_CERTIFICATE_H_

#include <openssl/x509.h>

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace petrel::quic {

struct CertificatePem {
  std::string certificate_chain;  // one or more PEM certificates, leaf first
  std::string private_key;        // PEM private key
};

// A self-signed ECDSA P-256 certificate for `names` (DNS names and IP addresses; IPs become
// iPAddress subjectAltNames), valid from one hour ago for `valid_days`.
absl::StatusOr<CertificatePem> GenerateSelfSigned(const std::vector<std::string>& names,
                                                  int valid_days = 365);

// A certificate for some host names (exact or "*.example"), which handshakes whose server name
// (SNI) matches one of them present instead of the context's default certificate.
struct NamedCertificate {
  std::vector<std::string> names;
  CertificatePem pem;
};

// The first certificate of `pem`'s chain.
absl::StatusOr<bssl::UniquePtr<X509>> LeafCertificate(const CertificatePem& pem);

// Whether `certificate` is valid for `host` — a DNS name (its wildcards as RFC 6125 allows: one
// whole leftmost label) or an IP address — as a client checks it (BoringSSL's X509_check_host,
// X509_check_ip_asc). Read-only: safe from many threads.
bool CertificateCovers(X509* certificate, absl::string_view host);

absl::StatusOr<CertificatePem> ReadPemFiles(const std::string& certificate_path,
                                            const std::string& key_path);

// Writes both files (the key with mode 0600).
absl::Status WritePemFiles(const CertificatePem& pem, const std::string& certificate_path,
                           const std::string& key_path);

}  // namespace petrel::quic

#endif  // PETREL_QUIC_TLS_CERTIFICATE_H_
