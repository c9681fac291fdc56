#include "quic/tls/ticket_keys.h"

#include <openssl/rand.h>

#include <cstring>

namespace petrel::quic {
namespace {

constexpr size_t kIdLen = 4;
constexpr size_t kNonceLen = 12;
constexpr size_t kTagLen = 16;

int RingIndex() {
  static const int index = SSL_CTX_get_ex_new_index(0, nullptr, nullptr, nullptr, nullptr);
  return index;
}

TicketKeyRing* RingOf(SSL* ssl) {
  return static_cast<TicketKeyRing*>(SSL_CTX_get_ex_data(SSL_get_SSL_CTX(ssl), RingIndex()));
}

size_t MaxOverhead(SSL*) { return TicketKeyRing::kOverhead; }

int SealTicket(SSL* ssl, uint8_t* out, size_t* out_len, size_t max_out_len, const uint8_t* in,
               size_t in_len) {
  return RingOf(ssl)->Seal(out, out_len, max_out_len, in, in_len) ? 1 : 0;
}

ssl_ticket_aead_result_t OpenTicket(SSL* ssl, uint8_t* out, size_t* out_len, size_t max_out_len,
                                    const uint8_t* in, size_t in_len) {
  return RingOf(ssl)->Open(out, out_len, max_out_len, in, in_len);
}

constexpr SSL_TICKET_AEAD_METHOD kTicketMethod = {MaxOverhead, SealTicket, OpenTicket};

}  // namespace

TicketKeyRing::TicketKeyRing(Duration rotation, size_t keys_kept)
    : rotation_(rotation), keys_kept_(keys_kept < 1 ? 1 : keys_kept), clock_(MonotonicNow) {
  RAND_bytes(reinterpret_cast<uint8_t*>(&next_id_), sizeof(next_id_));
}

TicketKeyRing::~TicketKeyRing() {
  for (auto& k : keys_) EVP_AEAD_CTX_cleanup(&k->aead);
}

void TicketKeyRing::Install(SSL_CTX* ctx) {
  SSL_CTX_set_ex_data(ctx, RingIndex(), this);
  SSL_CTX_set_ticket_aead_method(ctx, &kTicketMethod);
}

uint64_t TicketKeyRing::keys_generated() const {
  std::lock_guard<std::mutex> lock(mu_);
  return generated_;
}

void TicketKeyRing::RotateIfDueLocked(TimePoint now) {
  if (!keys_.empty() && now - keys_.front()->created < rotation_) return;
  auto key = std::make_unique<Key>();
  key->id = next_id_++;
  key->created = now;
  uint8_t secret[32];
  RAND_bytes(secret, sizeof(secret));
  EVP_AEAD_CTX_zero(&key->aead);
  EVP_AEAD_CTX_init(&key->aead, EVP_aead_aes_256_gcm(), secret, sizeof(secret), kTagLen, nullptr);
  OPENSSL_cleanse(secret, sizeof(secret));
  keys_.push_front(std::move(key));
  ++generated_;
  while (keys_.size() > keys_kept_) {
    EVP_AEAD_CTX_cleanup(&keys_.back()->aead);
    keys_.pop_back();
  }
}

bool TicketKeyRing::Seal(uint8_t* out, size_t* out_len, size_t max_out_len, const uint8_t* in,
                         size_t in_len) {
  if (max_out_len < in_len + kOverhead) return false;
  std::lock_guard<std::mutex> lock(mu_);
  RotateIfDueLocked(clock_());
  const Key& key = *keys_.front();
  // `in` may equal `out`: move the plaintext out of the way of the header first.
  std::memmove(out + kIdLen + kNonceLen, in, in_len);
  std::memcpy(out, &key.id, kIdLen);
  RAND_bytes(out + kIdLen, kNonceLen);
  size_t sealed = 0;
  uint8_t* body = out + kIdLen + kNonceLen;
  if (!EVP_AEAD_CTX_seal(&key.aead, body, &sealed, max_out_len - kIdLen - kNonceLen, out + kIdLen,
                         kNonceLen, body, in_len, out, kIdLen)) {
    return false;
  }
  *out_len = kIdLen + kNonceLen + sealed;
  return true;
}

ssl_ticket_aead_result_t TicketKeyRing::Open(uint8_t* out, size_t* out_len, size_t max_out_len,
                                             const uint8_t* in, size_t in_len) {
  if (in_len < kOverhead) return ssl_ticket_aead_ignore_ticket;
  uint8_t header[kIdLen + kNonceLen];
  std::memcpy(header, in, sizeof(header));
  uint32_t id;
  std::memcpy(&id, header, kIdLen);
  const uint8_t* sealed = in + sizeof(header);
  const size_t sealed_len = in_len - sizeof(header);
  // BoringSSL may pass out == in; the AEAD allows only exact aliasing, so then move the sealed
  // bytes to the front and open them in place.
  const bool overlaps = out < in + in_len && in < out + max_out_len;
  if (overlaps) {
    if (max_out_len < sealed_len) return ssl_ticket_aead_ignore_ticket;
    std::memmove(out, sealed, sealed_len);
    sealed = out;
  }
  std::lock_guard<std::mutex> lock(mu_);
  RotateIfDueLocked(clock_());
  for (const auto& key : keys_) {
    if (key->id != id) continue;
    if (!EVP_AEAD_CTX_open(&key->aead, out, out_len, max_out_len, header + kIdLen, kNonceLen,
                           sealed, sealed_len, header, kIdLen)) {
      return ssl_ticket_aead_ignore_ticket;
    }
    return ssl_ticket_aead_success;
  }
  return ssl_ticket_aead_ignore_ticket;  // unknown or expired key: full handshake
}

}  // namespace petrel::quic
