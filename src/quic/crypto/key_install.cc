#include "quic/crypto/key_install.h"

#include <memory>

#include "quic/crypto/aead.h"
#include "quic/crypto/header_protection.h"
#include "quic/crypto/packet_keys.h"
#include "quic/crypto/version_params.h"

namespace petrel::quic::crypto {
namespace {

// One direction's key objects, owned here until ngtcp2 accepts them.
struct PendingKey {
  AeadContextPtr aead;
  std::unique_ptr<HeaderProtectionContext> hp;
  std::array<uint8_t, kIvLen> iv{};

  ngtcp2_crypto_aead_ctx aead_ctx() const { return ngtcp2_crypto_aead_ctx{aead.get()}; }
  ngtcp2_crypto_cipher_ctx hp_ctx() const { return ngtcp2_crypto_cipher_ctx{hp.get()}; }
  // Called once ngtcp2 owns the contexts.
  void HandOver() {
    (void)aead.release();
    (void)hp.release();
  }
};

bool BuildKey(const CipherSuite& suite, const VersionParams& version,
              absl::Span<const uint8_t> secret, PendingKey* key) {
  PacketProtectionKeys keys;
  if (!DerivePacketProtectionKeys(suite, version, secret, &keys)) return false;
  key->aead = NewAeadContext(suite, keys.key());
  key->hp = HeaderProtectionContext::Create(*suite.hp, keys.hp());
  key->iv = keys.iv_bytes;
  return key->aead != nullptr && key->hp != nullptr;
}

int InstallInitial(ngtcp2_conn* conn, uint32_t version, const ngtcp2_cid& client_dcid,
                   bool for_version_negotiation) {
  const VersionParams* params = FindVersionParams(version);
  if (params == nullptr) return NGTCP2_ERR_CALLBACK_FAILURE;
  InitialSecrets secrets;
  if (!DeriveInitialSecrets(*params, absl::MakeConstSpan(client_dcid.data, client_dcid.datalen),
                            &secrets)) {
    return NGTCP2_ERR_CALLBACK_FAILURE;
  }
  const bool is_server = ngtcp2_conn_is_server(conn) != 0;
  const CipherSuite& suite = InitialCipherSuite();
  PendingKey rx;
  PendingKey tx;
  if (!BuildKey(suite, *params, is_server ? secrets.client : secrets.server, &rx) ||
      !BuildKey(suite, *params, is_server ? secrets.server : secrets.client, &tx)) {
    return NGTCP2_ERR_CALLBACK_FAILURE;
  }
  const ngtcp2_crypto_aead_ctx rx_aead = rx.aead_ctx();
  const ngtcp2_crypto_cipher_ctx rx_hp = rx.hp_ctx();
  const ngtcp2_crypto_aead_ctx tx_aead = tx.aead_ctx();
  const ngtcp2_crypto_cipher_ctx tx_hp = tx.hp_ctx();
  int rv;
  if (for_version_negotiation) {
    rv = ngtcp2_conn_install_vneg_initial_key(conn, version, &rx_aead, rx.iv.data(), &rx_hp,
                                              &tx_aead, tx.iv.data(), &tx_hp, kIvLen);
  } else {
    ngtcp2_crypto_ctx ctx;
    FillCryptoCtx(suite, &ctx);
    ngtcp2_conn_set_initial_crypto_ctx(conn, &ctx);
    rv = ngtcp2_conn_install_initial_key(conn, &rx_aead, rx.iv.data(), &rx_hp, &tx_aead,
                                         tx.iv.data(), &tx_hp, kIvLen);
  }
  if (rv != 0) return rv;
  rx.HandOver();
  tx.HandOver();
  return 0;
}

}  // namespace

int InstallInitialKeys(ngtcp2_conn* conn, uint32_t version, const ngtcp2_cid& client_dcid) {
  return InstallInitial(conn, version, client_dcid, /*for_version_negotiation=*/false);
}

int InstallVersionNegotiationKeys(ngtcp2_conn* conn, uint32_t version,
                                  const ngtcp2_cid& client_dcid) {
  return InstallInitial(conn, version, client_dcid, /*for_version_negotiation=*/true);
}

int InstallTrafficKey(ngtcp2_conn* conn, ngtcp2_crypto_level level, KeyDirection direction,
                      const CipherSuite& suite, uint32_t version,
                      absl::Span<const uint8_t> secret) {
  const VersionParams* params = FindVersionParams(version);
  if (params == nullptr) return NGTCP2_ERR_CALLBACK_FAILURE;
  PendingKey key;
  if (!BuildKey(suite, *params, secret, &key)) return NGTCP2_ERR_CALLBACK_FAILURE;
  const ngtcp2_crypto_aead_ctx aead_ctx = key.aead_ctx();
  const ngtcp2_crypto_cipher_ctx hp_ctx = key.hp_ctx();
  ngtcp2_crypto_ctx ctx;
  FillCryptoCtx(suite, &ctx);
  const bool read = direction == KeyDirection::kRead;
  int rv;
  switch (level) {
    case NGTCP2_CRYPTO_LEVEL_HANDSHAKE:
      ngtcp2_conn_set_crypto_ctx(conn, &ctx);
      rv = read ? ngtcp2_conn_install_rx_handshake_key(conn, &aead_ctx, key.iv.data(), kIvLen,
                                                       &hp_ctx)
                : ngtcp2_conn_install_tx_handshake_key(conn, &aead_ctx, key.iv.data(), kIvLen,
                                                       &hp_ctx);
      break;
    case NGTCP2_CRYPTO_LEVEL_APPLICATION:
      ngtcp2_conn_set_crypto_ctx(conn, &ctx);
      rv = read ? ngtcp2_conn_install_rx_key(conn, secret.data(), secret.size(), &aead_ctx,
                                             key.iv.data(), kIvLen, &hp_ctx)
                : ngtcp2_conn_install_tx_key(conn, secret.data(), secret.size(), &aead_ctx,
                                             key.iv.data(), kIvLen, &hp_ctx);
      break;
    case NGTCP2_CRYPTO_LEVEL_EARLY:
      if (read != (ngtcp2_conn_is_server(conn) != 0)) return NGTCP2_ERR_CALLBACK_FAILURE;
      ngtcp2_conn_set_early_crypto_ctx(conn, &ctx);
      rv = ngtcp2_conn_install_early_key(conn, &aead_ctx, key.iv.data(), kIvLen, &hp_ctx);
      break;
    default:
      return NGTCP2_ERR_CALLBACK_FAILURE;
  }
  if (rv != 0) return rv;
  key.HandOver();
  return 0;
}

uint32_t PacketProtectionVersion(ngtcp2_conn* conn) {
  const uint32_t negotiated = ngtcp2_conn_get_negotiated_version(conn);
  return negotiated != 0 ? negotiated : ngtcp2_conn_get_client_chosen_version(conn);
}

}  // namespace petrel::quic::crypto
