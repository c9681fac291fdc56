// Internal: the connection IDs a Petrel server issues, in the QUIC-LB plaintext layout
// (draft-ietf-quic-load-balancers), and the decoding the master routes by.
//
//   octet 0        config rotation (3 bits) | CID length - 1 (5 bits)
//   octets 1..S    server id (S = server_id_len, default 1), for a QUIC-LB-aware load balancer
//   octet S+1      worker id, for Petrel's master
//   rest           random octets (at least 8)
//
// This encoding is the only routing state: the master needs no table and no lock.
#ifndef PETREL_QUIC_CID_SERVER_CID_H_
#define PETREL_QUIC_CID_SERVER_CID_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace petrel::quic {

struct ServerCidConfig {
  uint8_t config_rotation = 0;  // 0..6; 7 marks CIDs a load balancer cannot route
  uint8_t server_id_len = 1;    // 1..15
  std::array<uint8_t, 15> server_id{};
  uint8_t cid_len = 16;  // total length, ≤ 20 (QUIC v1)
};

class ServerCidCodec {
 public:
  static constexpr size_t kMinRandomOctets = 8;
  static constexpr size_t kMaxCidLen = 20;

  // Validates the layout: lengths fit in 20 octets with at least 8 random octets.
  static absl::StatusOr<ServerCidCodec> Create(const ServerCidConfig& config);

  // Writes a fresh CID for `worker_id` into `out` (cid_len() octets), random octets from
  // BoringSSL's RAND_bytes. Safe from any thread.
  void Generate(uint8_t worker_id, uint8_t* out) const;

  // The worker a DCID names, or nullopt if it is not a CID of this server's layout (wrong
  // length, rotation bits, length bits or server id) — e.g. a client-chosen Initial DCID.
  std::optional<uint8_t> WorkerOf(absl::Span<const uint8_t> dcid) const;

  size_t cid_len() const { return config_.cid_len; }

 private:
  explicit ServerCidCodec(const ServerCidConfig& config) : config_(config) {}
  uint8_t FirstOctet() const {
    return static_cast<uint8_t>((config_.config_rotation << 5) | (config_.cid_len - 1));
  }

  ServerCidConfig config_;
};

}  // namespace petrel::quic

#endif  // PETREL_QUIC_CID_SERVER_CID_H_
