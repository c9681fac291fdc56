#include "quic/token/address_token.h"

#include <openssl/rand.h>

#include <cstring>

namespace petrel::quic {
namespace {

constexpr size_t kNonceLen = 12;
constexpr size_t kTagLen = 16;
constexpr size_t kTimeLen = 8;

// Associated data: the kind, the address family, the IP address and, for Retry, the port.
size_t BuildAad(TokenKind kind, const SocketAddress& client, uint8_t* aad) {
  size_t n = 0;
  aad[n++] = static_cast<uint8_t>(kind);
  aad[n++] = static_cast<uint8_t>(client.family());
  if (client.family() == AF_INET) {
    const auto* a = reinterpret_cast<const sockaddr_in*>(client.sockaddr_ptr());
    std::memcpy(aad + n, &a->sin_addr, 4);
    n += 4;
  } else if (client.family() == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(client.sockaddr_ptr());
    std::memcpy(aad + n, &a->sin6_addr, 16);
    n += 16;
  }
  if (kind == TokenKind::kRetry) {
    const uint16_t port = client.port();
    aad[n++] = static_cast<uint8_t>(port >> 8);
    aad[n++] = static_cast<uint8_t>(port);
  }
  return n;
}

void PutTime(WallTime t, uint8_t* out) {
  const uint64_t ms = static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count());
  for (int i = 0; i < 8; ++i) out[i] = static_cast<uint8_t>(ms >> (56 - 8 * i));
}

WallTime GetTime(const uint8_t* in) {
  uint64_t ms = 0;
  for (int i = 0; i < 8; ++i) ms = (ms << 8) | in[i];
  return WallTime(std::chrono::milliseconds(ms));
}

TokenCheck CheckAge(WallTime issued, WallTime now, std::chrono::milliseconds lifetime) {
  // A token from the future (clock stepped back, or another machine's clock) is accepted only
  // within the lifetime too, so the window is bounded either way.
  if (issued > now + lifetime || now - issued > lifetime) return TokenCheck::kExpired;
  return TokenCheck::kValid;
}

}  // namespace

AddressTokenCodec::AddressTokenCodec(const AddressTokenKey& key) {
  EVP_AEAD_CTX_zero(&ctx_);
  EVP_AEAD_CTX_init(&ctx_, EVP_aead_aes_256_gcm(), key.data(), key.size(), kTagLen, nullptr);
}

AddressTokenCodec::~AddressTokenCodec() { EVP_AEAD_CTX_cleanup(&ctx_); }

AddressTokenKey AddressTokenCodec::RandomKey() {
  AddressTokenKey key;
  RAND_bytes(key.data(), key.size());
  return key;
}

size_t AddressTokenCodec::Seal(TokenKind kind, const SocketAddress& client,
                               absl::Span<const uint8_t> plaintext, uint8_t* out) const {
  uint8_t aad[32];
  const size_t aad_len = BuildAad(kind, client, aad);
  out[0] = static_cast<uint8_t>(kind);
  uint8_t* nonce = out + 1;
  RAND_bytes(nonce, kNonceLen);
  size_t sealed = 0;
  if (EVP_AEAD_CTX_seal(&ctx_, out + 1 + kNonceLen, &sealed, plaintext.size() + kTagLen, nonce,
                        kNonceLen, plaintext.data(), plaintext.size(), aad, aad_len) != 1) {
    return 0;
  }
  return 1 + kNonceLen + sealed;
}

long AddressTokenCodec::Open(TokenKind kind, const SocketAddress& client,
                             absl::Span<const uint8_t> token, uint8_t* plaintext) const {
  if (token.size() < 1 + kNonceLen + kTimeLen + kTagLen || token.size() > kMaxTokenLen ||
      !LooksLike(token, kind)) {
    return -1;
  }
  uint8_t aad[32];
  const size_t aad_len = BuildAad(kind, client, aad);
  size_t opened = 0;
  const size_t sealed_len = token.size() - 1 - kNonceLen;
  if (EVP_AEAD_CTX_open(&ctx_, plaintext, &opened, sealed_len, token.data() + 1, kNonceLen,
                        token.data() + 1 + kNonceLen, sealed_len, aad, aad_len) != 1) {
    return -1;
  }
  return static_cast<long>(opened);
}

size_t AddressTokenCodec::MakeRetryToken(const SocketAddress& client,
                                         absl::Span<const uint8_t> odcid, WallTime now,
                                         uint8_t* out) const {
  if (odcid.size() > 20) return 0;
  uint8_t plain[kTimeLen + 1 + 20];
  PutTime(now, plain);
  plain[kTimeLen] = static_cast<uint8_t>(odcid.size());
  if (!odcid.empty()) std::memcpy(plain + kTimeLen + 1, odcid.data(), odcid.size());
  return Seal(TokenKind::kRetry, client, absl::MakeConstSpan(plain, kTimeLen + 1 + odcid.size()),
              out);
}

size_t AddressTokenCodec::MakeNewToken(const SocketAddress& client, WallTime now,
                                       uint8_t* out) const {
  uint8_t plain[kTimeLen];
  PutTime(now, plain);
  return Seal(TokenKind::kNewToken, client, plain, out);
}

TokenCheck AddressTokenCodec::CheckRetryToken(absl::Span<const uint8_t> token,
                                              const SocketAddress& client, WallTime now,
                                              std::chrono::milliseconds lifetime,
                                              RetryTokenContents* contents) const {
  uint8_t plain[kMaxTokenLen];
  const long n = Open(TokenKind::kRetry, client, token, plain);
  if (n < static_cast<long>(kTimeLen + 1)) return TokenCheck::kMalformed;
  const size_t odcid_len = plain[kTimeLen];
  if (odcid_len > 20 || kTimeLen + 1 + odcid_len != static_cast<size_t>(n)) {
    return TokenCheck::kMalformed;
  }
  const TokenCheck age = CheckAge(GetTime(plain), now, lifetime);
  if (age != TokenCheck::kValid) return age;
  if (contents != nullptr) {
    contents->odcid_len = odcid_len;
    std::memcpy(contents->odcid.data(), plain + kTimeLen + 1, odcid_len);
  }
  return TokenCheck::kValid;
}

TokenCheck AddressTokenCodec::CheckNewToken(absl::Span<const uint8_t> token,
                                            const SocketAddress& client, WallTime now,
                                            std::chrono::milliseconds lifetime) const {
  uint8_t plain[kMaxTokenLen];
  const long n = Open(TokenKind::kNewToken, client, token, plain);
  if (n != static_cast<long>(kTimeLen)) return TokenCheck::kMalformed;
  return CheckAge(GetTime(plain), now, lifetime);
}

}  // namespace petrel::quic
