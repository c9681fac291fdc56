#include "quic/crypto/packet_keys.h"

#include <openssl/digest.h>
#include <openssl/mem.h>

#include "quic/crypto/hkdf.h"

namespace petrel::quic::crypto {

PacketProtectionKeys::~PacketProtectionKeys() {
  OPENSSL_cleanse(key_bytes.data(), key_bytes.size());
  OPENSSL_cleanse(iv_bytes.data(), iv_bytes.size());
  OPENSSL_cleanse(hp_bytes.data(), hp_bytes.size());
}

InitialSecrets::~InitialSecrets() {
  OPENSSL_cleanse(client.data(), client.size());
  OPENSSL_cleanse(server.data(), server.size());
}

bool DerivePacketProtectionKeys(const CipherSuite& suite, const VersionParams& version,
                                absl::Span<const uint8_t> secret, PacketProtectionKeys* keys,
                                bool with_hp) {
  keys->key_len = suite.key_len;
  keys->hp_len = with_hp ? suite.hp->key_len : 0;
  if (!HkdfExpandLabel(suite.md, secret, version.key_label, {},
                       absl::MakeSpan(keys->key_bytes.data(), keys->key_len)) ||
      !HkdfExpandLabel(suite.md, secret, version.iv_label, {}, absl::MakeSpan(keys->iv_bytes))) {
    return false;
  }
  return !with_hp || HkdfExpandLabel(suite.md, secret, version.hp_label, {},
                                     absl::MakeSpan(keys->hp_bytes.data(), keys->hp_len));
}

bool DeriveInitialSecrets(const VersionParams& version, absl::Span<const uint8_t> client_dcid,
                          InitialSecrets* secrets) {
  const EVP_MD* md = EVP_sha256();
  std::array<uint8_t, kInitialSecretLen> initial_secret;
  const bool ok =
      HkdfExtract(md, version.initial_salt, client_dcid, absl::MakeSpan(initial_secret)) &&
      HkdfExpandLabel(md, initial_secret, "client in", {}, absl::MakeSpan(secrets->client)) &&
      HkdfExpandLabel(md, initial_secret, "server in", {}, absl::MakeSpan(secrets->server));
  OPENSSL_cleanse(initial_secret.data(), initial_secret.size());
  return ok;
}

bool DeriveNextTrafficSecret(const EVP_MD* md, const VersionParams& version,
                             absl::Span<const uint8_t> secret, absl::Span<uint8_t> next) {
  return next.size() == secret.size() && HkdfExpandLabel(md, secret, version.ku_label, {}, next);
}

}  // namespace petrel::quic::crypto
