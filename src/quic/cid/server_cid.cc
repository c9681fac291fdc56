#include "quic/cid/server_cid.h"

#include <openssl/rand.h>

#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace petrel::quic {

absl::StatusOr<ServerCidCodec> ServerCidCodec::Create(const ServerCidConfig& config) {
  if (config.config_rotation > 6) {
    return absl::InvalidArgumentError(
        absl::StrCat("config_rotation ", config.config_rotation, " must be 0..6"));
  }
  if (config.server_id_len < 1 || config.server_id_len > 15) {
    return absl::InvalidArgumentError(
        absl::StrCat("server_id_len ", config.server_id_len, " must be 1..15"));
  }
  const size_t fixed = 1 + size_t{config.server_id_len} + 1;
  if (config.cid_len > kMaxCidLen || config.cid_len < fixed + kMinRandomOctets) {
    return absl::InvalidArgumentError(
        absl::StrCat("cid_len ", config.cid_len, " must be ", fixed + kMinRandomOctets, "..",
                     kMaxCidLen, " for a server id of ", config.server_id_len, " octets"));
  }
  return ServerCidCodec(config);
}

void ServerCidCodec::Generate(uint8_t worker_id, uint8_t* out) const {
  const size_t sid = config_.server_id_len;
  out[0] = FirstOctet();
  std::memcpy(out + 1, config_.server_id.data(), sid);
  out[1 + sid] = worker_id;
  RAND_bytes(out + 2 + sid, config_.cid_len - 2 - sid);
}

std::optional<uint8_t> ServerCidCodec::WorkerOf(absl::Span<const uint8_t> dcid) const {
  const size_t sid = config_.server_id_len;
  if (dcid.size() != config_.cid_len || dcid[0] != FirstOctet() ||
      std::memcmp(dcid.data() + 1, config_.server_id.data(), sid) != 0) {
    return std::nullopt;
  }
  return dcid[1 + sid];
}

}  // namespace petrel::quic
