// The server's connection-ID layout (what the master routes by) and the transport-parameter
// codec Petrel uses for a resumed session's 0-RTT parameters. Properties besides "no crash": any
// valid layout round-trips every worker id through Generate and WorkerOf; a DCID of the wrong
// length is never routed; transport parameters that decode encode to bytes that decode to the
// same parameters.
#include <fuzzer/FuzzedDataProvider.h>
#include <ngtcp2/ngtcp2.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "fuzz_check.h"
#include "quic/cid/server_cid.h"

namespace {

void CheckCidLayout(FuzzedDataProvider& in) {
  using petrel::quic::ServerCidCodec;
  petrel::quic::ServerCidConfig config;
  config.config_rotation = in.ConsumeIntegralInRange<uint8_t>(0, 7);
  config.server_id_len = in.ConsumeIntegralInRange<uint8_t>(0, 16);
  for (uint8_t& b : config.server_id) b = in.ConsumeIntegral<uint8_t>();
  config.cid_len = in.ConsumeIntegralInRange<uint8_t>(0, 21);
  const absl::StatusOr<ServerCidCodec> codec = ServerCidCodec::Create(config);
  if (!codec.ok()) return;
  PETREL_FUZZ_CHECK(codec->cid_len() <= ServerCidCodec::kMaxCidLen);
  const uint8_t worker = in.ConsumeIntegral<uint8_t>();
  uint8_t cid[ServerCidCodec::kMaxCidLen + 1];
  codec->Generate(worker, cid);
  PETREL_FUZZ_CHECK(codec->WorkerOf({cid, codec->cid_len()}) == worker);
  if (codec->cid_len() > 1) PETREL_FUZZ_CHECK(!codec->WorkerOf({cid, codec->cid_len() - 1}));
  // An arbitrary DCID: routed only if it has the layout's length.
  const std::vector<uint8_t> dcid =
      in.ConsumeBytes<uint8_t>(in.ConsumeIntegralInRange<size_t>(0, 20));
  if (dcid.size() != codec->cid_len()) PETREL_FUZZ_CHECK(!codec->WorkerOf(dcid).has_value());
}

void CheckTransportParams(const std::vector<uint8_t>& bytes) {
  ngtcp2_transport_params params;
  if (ngtcp2_decode_transport_params(&params, NGTCP2_TRANSPORT_PARAMS_TYPE_ENCRYPTED_EXTENSIONS,
                                     bytes.data(), bytes.size()) != 0) {
    return;
  }
  uint8_t encoded[4096];
  const ngtcp2_ssize n = ngtcp2_encode_transport_params(
      encoded, sizeof(encoded), NGTCP2_TRANSPORT_PARAMS_TYPE_ENCRYPTED_EXTENSIONS, &params);
  PETREL_FUZZ_CHECK(n > 0);
  ngtcp2_transport_params again;
  PETREL_FUZZ_CHECK(
      ngtcp2_decode_transport_params(&again, NGTCP2_TRANSPORT_PARAMS_TYPE_ENCRYPTED_EXTENSIONS,
                                     encoded, static_cast<size_t>(n)) == 0);
  uint8_t reencoded[4096];
  const ngtcp2_ssize m = ngtcp2_encode_transport_params(
      reencoded, sizeof(reencoded), NGTCP2_TRANSPORT_PARAMS_TYPE_ENCRYPTED_EXTENSIONS, &again);
  PETREL_FUZZ_CHECK(m == n && std::memcmp(encoded, reencoded, static_cast<size_t>(n)) == 0);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 4096) return 0;
  FuzzedDataProvider in(data, size);
  const bool params_first = in.ConsumeBool();
  if (params_first) {
    CheckTransportParams(in.ConsumeRemainingBytes<uint8_t>());
  } else {
    CheckCidLayout(in);
    CheckTransportParams(in.ConsumeRemainingBytes<uint8_t>());
  }
  return 0;
}
