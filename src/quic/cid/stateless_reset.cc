#include "quic/cid/stateless_reset.h"

#include <openssl/digest.h>
#include <openssl/rand.h>

#include <cstring>

namespace petrel::quic {

StatelessResetTokens::StatelessResetTokens(const StatelessResetKey& key) {
  HMAC_CTX_init(&ctx_);
  HMAC_Init_ex(&ctx_, key.data(), key.size(), EVP_sha256(), nullptr);
}

StatelessResetTokens::~StatelessResetTokens() { HMAC_CTX_cleanup(&ctx_); }

void StatelessResetTokens::Compute(absl::Span<const uint8_t> cid,
                                   uint8_t out[kStatelessResetTokenLen]) {
  // A null key with the same digest restarts from the stored key without reallocating.
  HMAC_Init_ex(&ctx_, nullptr, 0, nullptr, nullptr);
  HMAC_Update(&ctx_, cid.data(), cid.size());
  uint8_t mac[EVP_MAX_MD_SIZE];
  unsigned int mac_len = 0;
  HMAC_Final(&ctx_, mac, &mac_len);
  std::memcpy(out, mac, kStatelessResetTokenLen);
}

StatelessResetKey StatelessResetTokens::RandomKey() {
  StatelessResetKey key;
  RAND_bytes(key.data(), key.size());
  return key;
}

}  // namespace petrel::quic
