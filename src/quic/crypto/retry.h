// Internal: Retry packets and their integrity tag (RFC 9001 §5.8, RFC 9369 §3.3.3).
//
// The tag is AEAD_AES_128_GCM with the version's fixed key and nonce over an empty plaintext,
// the associated data being the Retry pseudo-packet: ODCID length, ODCID, then the Retry
// packet without its tag. ngtcp2 0.12.1's core writes Retry packets (ngtcp2_pkt_write_retry)
// and verifies them on the client, but wants the AEAD context from us; its nonce is built in
// per version, which is why version_params.cc must carry the matching key.
#ifndef PETREL_QUIC_CRYPTO_RETRY_H_
#define PETREL_QUIC_CRYPTO_RETRY_H_

#include <ngtcp2/ngtcp2.h>

#include <array>
#include <cstddef>
#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "quic/crypto/aead.h"

namespace petrel::quic::crypto {

inline constexpr size_t kRetryTagLen = 16;

// tag over the pseudo-packet built from `odcid` and `retry_without_tag`. Creates and frees an
// AEAD context per call: for tests and rare use; RetryPacketWriter is the per-packet path.
bool ComputeRetryIntegrityTag(uint32_t version, absl::Span<const uint8_t> odcid,
                              absl::Span<const uint8_t> retry_without_tag,
                              uint8_t tag[kRetryTagLen]);

// True if the last 16 octets of `retry_packet` are its valid tag for `odcid`.
bool VerifyRetryIntegrityTag(uint32_t version, absl::Span<const uint8_t> odcid,
                             absl::Span<const uint8_t> retry_packet);

// Writes Retry packets for every version Petrel has Retry keys for. Holds one AEAD context
// per version, keyed once at Create(); Write() allocates nothing and, since the contexts are
// immutable and BoringSSL's seal is reentrant, is safe to call from several threads at once.
class RetryPacketWriter {
 public:
  static absl::StatusOr<RetryPacketWriter> Create();

  // A Retry answering a client Initial whose SCID was `dcid` and DCID was `odcid`, with the
  // new server CID `scid` and `token`, written into `out`. Returns the packet length.
  absl::StatusOr<size_t> Write(uint32_t version, const ngtcp2_cid& dcid, const ngtcp2_cid& scid,
                               const ngtcp2_cid& odcid, absl::Span<const uint8_t> token,
                               absl::Span<uint8_t> out) const;

 private:
  struct Entry {
    uint32_t version = 0;
    AeadContextPtr ctx;
  };
  RetryPacketWriter() = default;

  std::array<Entry, 3> entries_;
  size_t size_ = 0;
};

// Client side: gives `conn` the AEAD context with which ngtcp2 verifies a Retry of `version`
// (the client's chosen version; RFC 9369 §4.1: a Retry always uses the original version).
// ngtcp2 owns the context afterwards. Returns 0 or an NGTCP2_ERR_* code.
int InstallRetryAead(ngtcp2_conn* conn, uint32_t version);

}  // namespace petrel::quic::crypto

#endif  // PETREL_QUIC_CRYPTO_RETRY_H_
