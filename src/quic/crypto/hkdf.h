// Internal: HKDF-Extract and TLS 1.3 HKDF-Expand-Label (RFC 8446 §7.1) over BoringSSL's
// <openssl/hkdf.h>, the only key-derivation primitives QUIC packet protection needs.
//
// All functions are pure, allocate nothing and are safe from any thread.
#ifndef PETREL_QUIC_CRYPTO_HKDF_H_
#define PETREL_QUIC_CRYPTO_HKDF_H_

#include <openssl/base.h>

#include <cstdint>
#include <string_view>

#include "absl/types/span.h"

namespace petrel::quic::crypto {

// prk = HKDF-Extract(salt, ikm); writes EVP_MD_size(md) octets into `prk`, which must be at
// least that long. Returns false on a BoringSSL failure.
bool HkdfExtract(const EVP_MD* md, absl::Span<const uint8_t> salt, absl::Span<const uint8_t> ikm,
                 absl::Span<uint8_t> prk);

// out = HKDF-Expand-Label(secret, label, context, out.size()), with `label` given without the
// "tls13 " prefix (e.g. "quic key"). `label` must be at most 249 octets and `context` at most
// 255, as the HkdfLabel structure requires. Returns false on invalid lengths or failure.
bool HkdfExpandLabel(const EVP_MD* md, absl::Span<const uint8_t> secret, std::string_view label,
                     absl::Span<const uint8_t> context, absl::Span<uint8_t> out);

}  // namespace petrel::quic::crypto

#endif  // PETREL_QUIC_CRYPTO_HKDF_H_
