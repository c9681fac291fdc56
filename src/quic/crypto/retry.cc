#include "quic/crypto/retry.h"

#include <openssl/mem.h>

#include <cstring>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "quic/crypto/cipher_suite.h"
#include "quic/crypto/ngtcp2_callbacks.h"
#include "quic/crypto/version_params.h"

namespace petrel::quic::crypto {
namespace {

AeadContextPtr NewRetryContext(const VersionParams& params) {
  return NewAeadContext(InitialCipherSuite(), params.retry_key);
}

bool RetryTag(const EVP_AEAD_CTX* ctx, const VersionParams& params, absl::Span<const uint8_t> odcid,
              absl::Span<const uint8_t> retry_without_tag, uint8_t tag[kRetryTagLen]) {
  if (odcid.size() > NGTCP2_MAX_CIDLEN) return false;
  // Not a per-packet path (see ComputeRetryIntegrityTag), so a heap buffer is fine.
  std::vector<uint8_t> pseudo;
  pseudo.reserve(1 + odcid.size() + retry_without_tag.size());
  pseudo.push_back(static_cast<uint8_t>(odcid.size()));
  pseudo.insert(pseudo.end(), odcid.begin(), odcid.end());
  pseudo.insert(pseudo.end(), retry_without_tag.begin(), retry_without_tag.end());
  return AeadSeal(ctx, params.retry_nonce, pseudo, {}, tag, kRetryTagLen) == kRetryTagLen;
}

}  // namespace

bool ComputeRetryIntegrityTag(uint32_t version, absl::Span<const uint8_t> odcid,
                              absl::Span<const uint8_t> retry_without_tag,
                              uint8_t tag[kRetryTagLen]) {
  const VersionParams* params = FindVersionParams(version);
  if (params == nullptr) return false;
  AeadContextPtr ctx = NewRetryContext(*params);
  return ctx != nullptr && RetryTag(ctx.get(), *params, odcid, retry_without_tag, tag);
}

bool VerifyRetryIntegrityTag(uint32_t version, absl::Span<const uint8_t> odcid,
                             absl::Span<const uint8_t> retry_packet) {
  if (retry_packet.size() < kRetryTagLen) return false;
  uint8_t tag[kRetryTagLen];
  if (!ComputeRetryIntegrityTag(version, odcid,
                                retry_packet.subspan(0, retry_packet.size() - kRetryTagLen), tag)) {
    return false;
  }
  return CRYPTO_memcmp(tag, retry_packet.data() + retry_packet.size() - kRetryTagLen,
                       kRetryTagLen) == 0;
}

absl::StatusOr<RetryPacketWriter> RetryPacketWriter::Create() {
  RetryPacketWriter writer;
  for (const VersionParams& params : AllVersionParams()) {
    // Only versions the linked ngtcp2 can write: its core picks the nonce by version.
    if (!ngtcp2_is_supported_version(params.version)) continue;
    Entry& entry = writer.entries_[writer.size_++];
    entry.version = params.version;
    entry.ctx = NewRetryContext(params);
    if (entry.ctx == nullptr) return absl::InternalError("cannot key the Retry AEAD");
  }
  return writer;
}

absl::StatusOr<size_t> RetryPacketWriter::Write(uint32_t version, const ngtcp2_cid& dcid,
                                                const ngtcp2_cid& scid, const ngtcp2_cid& odcid,
                                                absl::Span<const uint8_t> token,
                                                absl::Span<uint8_t> out) const {
  for (size_t i = 0; i < size_; ++i) {
    if (entries_[i].version != version) continue;
    const ngtcp2_crypto_aead aead = MakeCryptoAead(InitialCipherSuite());
    const ngtcp2_crypto_aead_ctx aead_ctx{entries_[i].ctx.get()};
    const ngtcp2_ssize n =
        ngtcp2_pkt_write_retry(out.data(), out.size(), version, &dcid, &scid, &odcid, token.data(),
                               token.size(), &Encrypt, &aead, &aead_ctx);
    if (n < 0) {
      return absl::InvalidArgumentError(std::string("ngtcp2_pkt_write_retry: ") +
                                        ngtcp2_strerror(static_cast<int>(n)));
    }
    return static_cast<size_t>(n);
  }
  return absl::InvalidArgumentError("no Retry key for this version");
}

int InstallRetryAead(ngtcp2_conn* conn, uint32_t version) {
  const VersionParams* params = FindVersionParams(version);
  if (params == nullptr) return NGTCP2_ERR_CALLBACK_FAILURE;
  AeadContextPtr ctx = NewRetryContext(*params);
  if (ctx == nullptr) return NGTCP2_ERR_CALLBACK_FAILURE;
  const ngtcp2_crypto_aead aead = MakeCryptoAead(InitialCipherSuite());
  const ngtcp2_crypto_aead_ctx aead_ctx{ctx.release()};  // ngtcp2 owns it from here
  ngtcp2_conn_set_retry_aead(conn, &aead, &aead_ctx);
  return 0;
}

}  // namespace petrel::quic::crypto
