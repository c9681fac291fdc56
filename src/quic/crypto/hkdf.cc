#include "quic/crypto/hkdf.h"

#include <openssl/digest.h>
#include <openssl/hkdf.h>

#include <cstring>

namespace petrel::quic::crypto {
namespace {

constexpr std::string_view kTls13Prefix = "tls13 ";

}  // namespace

bool HkdfExtract(const EVP_MD* md, absl::Span<const uint8_t> salt, absl::Span<const uint8_t> ikm,
                 absl::Span<uint8_t> prk) {
  if (prk.size() < EVP_MD_size(md)) return false;
  size_t prk_len = 0;
  return HKDF_extract(prk.data(), &prk_len, md, ikm.data(), ikm.size(), salt.data(), salt.size()) ==
             1 &&
         prk_len == EVP_MD_size(md);
}

bool HkdfExpandLabel(const EVP_MD* md, absl::Span<const uint8_t> secret, std::string_view label,
                     absl::Span<const uint8_t> context, absl::Span<uint8_t> out) {
  // struct { uint16 length; opaque label<7..255> = "tls13 " + label; opaque context<0..255>; }
  const size_t full_label_len = kTls13Prefix.size() + label.size();
  if (full_label_len > 255 || context.size() > 255 || out.size() > 0xffff) return false;
  uint8_t info[2 + 1 + 255 + 1 + 255];
  size_t n = 0;
  info[n++] = static_cast<uint8_t>(out.size() >> 8);
  info[n++] = static_cast<uint8_t>(out.size());
  info[n++] = static_cast<uint8_t>(full_label_len);
  std::memcpy(info + n, kTls13Prefix.data(), kTls13Prefix.size());
  n += kTls13Prefix.size();
  std::memcpy(info + n, label.data(), label.size());
  n += label.size();
  info[n++] = static_cast<uint8_t>(context.size());
  if (!context.empty()) std::memcpy(info + n, context.data(), context.size());
  n += context.size();
  return HKDF_expand(out.data(), out.size(), md, secret.data(), secret.size(), info, n) == 1;
}

}  // namespace petrel::quic::crypto
