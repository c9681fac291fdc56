// Internal: session ticket encryption with keys that rotate on a schedule. A ring of AES-256-GCM
// keys: the newest seals, the newest few open, so tickets stay valid across a rotation and
// expire once their key falls out of the ring.
//
//   ticket = key id (4) | nonce (12) | AES-256-GCM(session state) with tag (16)
#ifndef PETREL_QUIC_TLS_TICKET_KEYS_H_
#define PETREL_QUIC_TLS_TICKET_KEYS_H_

#include <openssl/aead.h>
#include <openssl/ssl.h>

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>

#include "petrel/common/clock.h"

namespace petrel::quic {

class TicketKeyRing {
 public:
  // `rotation`: how long one key seals new tickets; `keys_kept`: how many keys open tickets
  // (so a ticket lives between (keys_kept - 1) × rotation and keys_kept × rotation).
  explicit TicketKeyRing(Duration rotation = std::chrono::hours(12), size_t keys_kept = 3);
  ~TicketKeyRing();
  TicketKeyRing(const TicketKeyRing&) = delete;
  TicketKeyRing& operator=(const TicketKeyRing&) = delete;

  // Makes `ctx` seal and open its tickets with this ring. The ring must outlive `ctx`; one ring
  // may serve several contexts (all of a server's workers, say).
  void Install(SSL_CTX* ctx);

  // For tests: replaces the clock the rotation schedule reads.
  void SetClockForTest(std::function<TimePoint()> clock) { clock_ = std::move(clock); }
  // Number of keys generated so far.
  uint64_t keys_generated() const;

  // SSL_TICKET_AEAD_METHOD entry points; safe from any thread (a mutex guards the ring: tickets
  // are sealed and opened during handshakes, never per packet).
  bool Seal(uint8_t* out, size_t* out_len, size_t max_out_len, const uint8_t* in, size_t in_len);
  ssl_ticket_aead_result_t Open(uint8_t* out, size_t* out_len, size_t max_out_len,
                                const uint8_t* in, size_t in_len);
  static constexpr size_t kOverhead = 4 + 12 + 16;

 private:
  struct Key {
    uint32_t id;
    TimePoint created;
    EVP_AEAD_CTX aead;
  };
  void RotateIfDueLocked(TimePoint now);

  const Duration rotation_;
  const size_t keys_kept_;
  std::function<TimePoint()> clock_;
  mutable std::mutex mu_;
  std::deque<std::unique_ptr<Key>> keys_;  // newest first; guarded by mu_
  uint32_t next_id_;                       // guarded by mu_
  uint64_t generated_ = 0;                 // guarded by mu_
};

}  // namespace petrel::quic

#endif  // PETREL_QUIC_TLS_TICKET_KEYS_H_
