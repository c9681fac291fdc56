// Internal: the tokens a Petrel server hands out to validate client addresses (RFC 9000 §8.1):
// Retry tokens and NEW_TOKEN tokens, encrypted and authenticated with a static key, bound to the
// client's address and carrying their issue time so that they expire.
//
//   octet 0       kind (Retry or NEW_TOKEN)
//   octets 1..12  random nonce
//   rest          AES-256-GCM(issue time in ms since the Unix epoch (8 octets)
//                             [, Retry: ODCID length (1) + ODCID]) + 16-octet tag
//   associated data: kind, then the client's IP address (+ port for Retry, which the client
//   reuses at once; a NEW_TOKEN token is used on a later connection, likely from another port).
//
// Wall-clock time, not the monotonic clock: tokens must survive a restart and may be checked by
// another server process that shares the key.
#ifndef PETREL_QUIC_TOKEN_ADDRESS_TOKEN_H_
#define PETREL_QUIC_TOKEN_ADDRESS_TOKEN_H_

#include <openssl/aead.h>

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>

#include "absl/types/span.h"
#include "petrel/common/socket_address.h"

namespace petrel::quic {

using AddressTokenKey = std::array<uint8_t, 32>;
using WallTime = std::chrono::system_clock::time_point;

enum class TokenKind : uint8_t { kRetry = 0xb1, kNewToken = 0xb2 };

enum class TokenCheck : uint8_t {
  kValid,
  kMalformed,  // not a token of ours, wrong kind, or fails authentication (other key/address)
  kExpired,
};

struct RetryTokenContents {
  std::array<uint8_t, 20> odcid{};
  size_t odcid_len = 0;
};

class AddressTokenCodec {
 public:
  static constexpr size_t kMaxTokenLen = 1 + 12 + 8 + 1 + 20 + 16;

  explicit AddressTokenCodec(const AddressTokenKey& key);
  ~AddressTokenCodec();
  AddressTokenCodec(const AddressTokenCodec&) = delete;
  AddressTokenCodec& operator=(const AddressTokenCodec&) = delete;

  // Writes a Retry token for a client at `client` whose first Initial had `odcid` (≤ 20 octets).
  // Returns the token's length (≤ kMaxTokenLen), 0 on failure. Safe from any thread.
  size_t MakeRetryToken(const SocketAddress& client, absl::Span<const uint8_t> odcid, WallTime now,
                        uint8_t* out) const;
  // Writes a token for a NEW_TOKEN frame. Returns its length, 0 on failure.
  size_t MakeNewToken(const SocketAddress& client, WallTime now, uint8_t* out) const;

  // Accepts a Retry token issued less than `lifetime` ago to this client address and port.
  TokenCheck CheckRetryToken(absl::Span<const uint8_t> token, const SocketAddress& client,
                             WallTime now, std::chrono::milliseconds lifetime,
                             RetryTokenContents* contents) const;
  // Accepts a NEW_TOKEN token issued less than `lifetime` ago to this client IP address.
  TokenCheck CheckNewToken(absl::Span<const uint8_t> token, const SocketAddress& client,
                           WallTime now, std::chrono::milliseconds lifetime) const;

  // The kind a token claims to be, from its first octet (unauthenticated), for routing the check.
  static bool LooksLike(absl::Span<const uint8_t> token, TokenKind kind) {
    return !token.empty() && token[0] == static_cast<uint8_t>(kind);
  }

  static AddressTokenKey RandomKey();

 private:
  size_t Seal(TokenKind kind, const SocketAddress& client, absl::Span<const uint8_t> plaintext,
              uint8_t* out) const;
  // Opens `token` into `plaintext` (capacity ≥ token size); returns the plaintext length or -1.
  long Open(TokenKind kind, const SocketAddress& client, absl::Span<const uint8_t> token,
            uint8_t* plaintext) const;

  // Sealing and opening only read the context, so one codec serves every thread.
  EVP_AEAD_CTX ctx_;
};

}  // namespace petrel::quic

#endif  // PETREL_QUIC_TOKEN_ADDRESS_TOKEN_H_
