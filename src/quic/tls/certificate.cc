#include "quic/tls/certificate.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/bytestring.h>
#include <openssl/ec.h>
#include <openssl/ec_key.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/nid.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace petrel::quic {
namespace {

absl::Status SslError(absl::string_view what) {
  char buf[256];
  ERR_error_string_n(ERR_get_error(), buf, sizeof(buf));
  ERR_clear_error();
  return absl::InternalError(absl::StrCat(what, ": ", buf));
}

bool IsIpAddress(const std::string& s) {
  in6_addr a6;
  in_addr a4;
  return inet_pton(AF_INET, s.c_str(), &a4) == 1 || inet_pton(AF_INET6, s.c_str(), &a6) == 1;
}

std::string BioToString(BIO* bio) {
  const uint8_t* data = nullptr;
  size_t len = 0;
  BIO_mem_contents(bio, &data, &len);
  return std::string(reinterpret_cast<const char*>(data), len);
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

absl::Status WriteFile(const std::string& path, const std::string& data, mode_t mode) {
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) return absl::ErrnoToStatus(errno, absl::StrCat("cannot write ", path));
  size_t off = 0;
  while (off < data.size()) {
    ssize_t n = write(fd, data.data() + off, data.size() - off);
    if (n < 0) {
      if (errno == EINTR) continue;
      absl::Status s = absl::ErrnoToStatus(errno, absl::StrCat("write ", path));
      close(fd);
      return s;
    }
    off += static_cast<size_t>(n);
  }
  close(fd);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<CertificatePem> GenerateSelfSigned(const std::vector<std::string>& names,
                                                  int valid_days) {
  if (names.empty()) return absl::InvalidArgumentError("a certificate needs at least one name");
  bssl::UniquePtr<EC_KEY> ec(EC_KEY_new_by_curve_name(NID_X9_62_prime256v1));
  if (!ec || !EC_KEY_generate_key(ec.get())) return SslError("EC key generation");
  bssl::UniquePtr<EVP_PKEY> pkey(EVP_PKEY_new());
  if (!pkey || !EVP_PKEY_assign_EC_KEY(pkey.get(), ec.release())) return SslError("EVP_PKEY");

  bssl::UniquePtr<X509> x509(X509_new());
  if (!x509 || !X509_set_version(x509.get(), X509_VERSION_3)) return SslError("X509_new");
  uint8_t serial_bytes[16];
  RAND_bytes(serial_bytes, sizeof(serial_bytes));
  serial_bytes[0] &= 0x7f;  // positive
  bssl::UniquePtr<BIGNUM> serial(BN_bin2bn(serial_bytes, sizeof(serial_bytes), nullptr));
  if (!serial || !BN_to_ASN1_INTEGER(serial.get(), X509_get_serialNumber(x509.get()))) {
    return SslError("serial number");
  }
  if (!X509_gmtime_adj(X509_getm_notBefore(x509.get()), -3600) ||
      !X509_gmtime_adj(X509_getm_notAfter(x509.get()), static_cast<long>(valid_days) * 86400)) {
    return SslError("validity");
  }
  X509_NAME* subject = X509_get_subject_name(x509.get());
  if (!X509_NAME_add_entry_by_txt(subject, "O", MBSTRING_ASC,
                                  reinterpret_cast<const uint8_t*>("Petrel"), -1, -1, 0) ||
      !X509_NAME_add_entry_by_txt(subject, "CN", MBSTRING_ASC,
                                  reinterpret_cast<const uint8_t*>(names[0].c_str()), -1, -1, 0) ||
      !X509_set_issuer_name(x509.get(), subject)) {
    return SslError("subject");
  }
  std::vector<std::string> sans;
  for (const std::string& n : names)
    sans.push_back(absl::StrCat(IsIpAddress(n) ? "IP:" : "DNS:", n));
  const std::string san = absl::StrJoin(sans, ",");
  X509V3_CTX v3;
  X509V3_set_ctx(&v3, x509.get(), x509.get(), nullptr, nullptr, 0);
  struct Ext {
    int nid;
    const char* value;
  };
  const Ext exts[] = {{NID_subject_alt_name, san.c_str()},
                      {NID_basic_constraints, "critical,CA:TRUE"},
                      {NID_key_usage, "critical,digitalSignature,keyCertSign"},
                      {NID_ext_key_usage, "serverAuth,clientAuth"}};
  for (const Ext& e : exts) {
    bssl::UniquePtr<X509_EXTENSION> ext(X509V3_EXT_nconf_nid(nullptr, &v3, e.nid, e.value));
    if (!ext || !X509_add_ext(x509.get(), ext.get(), -1)) return SslError("certificate extension");
  }
  if (!X509_set_pubkey(x509.get(), pkey.get()) ||
      !X509_sign(x509.get(), pkey.get(), EVP_sha256())) {
    return SslError("signing");
  }

  bssl::UniquePtr<BIO> cert_bio(BIO_new(BIO_s_mem()));
  bssl::UniquePtr<BIO> key_bio(BIO_new(BIO_s_mem()));
  if (!PEM_write_bio_X509(cert_bio.get(), x509.get()) ||
      !PEM_write_bio_PrivateKey(key_bio.get(), pkey.get(), nullptr, nullptr, 0, nullptr, nullptr)) {
    return SslError("PEM encoding");
  }
  return CertificatePem{BioToString(cert_bio.get()), BioToString(key_bio.get())};
}

absl::StatusOr<CertificatePem> ReadPemFiles(const std::string& certificate_path,
                                            const std::string& key_path) {
  auto cert = ReadFile(certificate_path);
  if (!cert.ok()) return cert.status();
  auto key = ReadFile(key_path);
  if (!key.ok()) return key.status();
  return CertificatePem{*std::move(cert), *std::move(key)};
}

absl::StatusOr<bssl::UniquePtr<X509>> LeafCertificate(const CertificatePem& pem) {
  bssl::UniquePtr<BIO> bio(BIO_new_mem_buf(pem.certificate_chain.data(),
                                           static_cast<int>(pem.certificate_chain.size())));
  bssl::UniquePtr<X509> leaf(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
  if (!leaf) return SslError("certificate PEM");
  return leaf;
}

bool CertificateCovers(X509* certificate, absl::string_view host) {
  if (host.empty()) return false;
  const std::string text(host);  // X509_check_ip_asc wants a C string
  if (IsIpAddress(text)) return X509_check_ip_asc(certificate, text.c_str(), 0) == 1;
  return X509_check_host(certificate, text.data(), text.size(),
                         X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS, nullptr) == 1;
}

absl::Status WritePemFiles(const CertificatePem& pem, const std::string& certificate_path,
                           const std::string& key_path) {
  if (absl::Status s = WriteFile(key_path, pem.private_key, 0600); !s.ok()) return s;
  return WriteFile(certificate_path, pem.certificate_chain, 0644);
}

}  // namespace petrel::quic
