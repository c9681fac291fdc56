// Internal: stateless reset tokens derived from a connection ID with a static key
// (RFC 9000 §10.3.2), so any thread — the master answering an unknown CID, or the worker that
// issued the CID — computes the same token without shared state.
#ifndef PETREL_QUIC_CID_STATELESS_RESET_H_
#define PETREL_QUIC_CID_STATELESS_RESET_H_

#include <openssl/hmac.h>

#include <array>
#include <cstdint>

#include "absl/types/span.h"

namespace petrel::quic {

inline constexpr size_t kStatelessResetTokenLen = 16;
using StatelessResetKey = std::array<uint8_t, 32>;

// token = first 16 octets of HMAC-SHA256(key, cid). One instance per thread: it keeps a keyed
// HMAC context so that a token costs no allocation. Not thread-safe.
class StatelessResetTokens {
 public:
  explicit StatelessResetTokens(const StatelessResetKey& key);
  ~StatelessResetTokens();
  StatelessResetTokens(const StatelessResetTokens&) = delete;
  StatelessResetTokens& operator=(const StatelessResetTokens&) = delete;

  void Compute(absl::Span<const uint8_t> cid, uint8_t out[kStatelessResetTokenLen]);

  // A random key, for servers that do not configure one (tokens then change on restart).
  static StatelessResetKey RandomKey();

 private:
  HMAC_CTX ctx_;
};

}  // namespace petrel::quic

#endif  // PETREL_QUIC_CID_STATELESS_RESET_H_
