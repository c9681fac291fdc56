// Address-validation tokens (Retry and NEW_TOKEN) as a server receives them: arbitrary bytes
// checked against a fixed key, and tokens made for one address checked with bytes flipped and
// from other addresses. Properties besides "no crash": only a token this codec made, unchanged,
// for the same address (and port, for Retry) and at most its lifetime old, is valid; a valid Retry
// token gives back the ODCID it was made with.
#include <fuzzer/FuzzedDataProvider.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "absl/types/span.h"
#include "fuzz_check.h"
#include "petrel/common/socket_address.h"
#include "quic/token/address_token.h"

namespace {

using petrel::SocketAddress;
using petrel::quic::AddressTokenCodec;
using petrel::quic::RetryTokenContents;
using petrel::quic::TokenCheck;

const AddressTokenCodec& Codec() {
  static const AddressTokenCodec* codec = [] {
    petrel::quic::AddressTokenKey key;
    for (size_t i = 0; i < key.size(); ++i) key[i] = static_cast<uint8_t>(i * 7 + 1);
    return new AddressTokenCodec(key);
  }();
  return *codec;
}

SocketAddress AddressFrom(FuzzedDataProvider& in) {
  const uint16_t port = in.ConsumeIntegral<uint16_t>();
  if (in.ConsumeBool()) {
    const uint32_t ip = in.ConsumeIntegral<uint32_t>();
    char text[32];
    std::snprintf(text, sizeof(text), "%u.%u.%u.%u", ip >> 24, (ip >> 16) & 255, (ip >> 8) & 255,
                  ip & 255);
    return *SocketAddress::Parse(text, port);
  }
  return *SocketAddress::Parse(in.ConsumeBool() ? "::1" : "2001:db8::7", port);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 512) return 0;
  FuzzedDataProvider in(data, size);
  const AddressTokenCodec& codec = Codec();
  const SocketAddress client = AddressFrom(in);
  const SocketAddress other = AddressFrom(in);
  const auto now = std::chrono::system_clock::time_point(std::chrono::milliseconds(
      in.ConsumeIntegralInRange<int64_t>(0, int64_t{4} * 1000 * 1000 * 1000 * 1000)));
  const auto lifetime = std::chrono::milliseconds(in.ConsumeIntegralInRange<int64_t>(1, 100000));
  const auto later = now + std::chrono::milliseconds(in.ConsumeIntegralInRange<int64_t>(0, 200000));
  std::vector<uint8_t> odcid = in.ConsumeBytes<uint8_t>(in.ConsumeIntegralInRange<size_t>(0, 20));

  // Arbitrary bytes are never valid (forging one would mean breaking AES-GCM).
  const std::vector<uint8_t> junk = in.ConsumeRemainingBytes<uint8_t>();
  RetryTokenContents contents;
  PETREL_FUZZ_CHECK(codec.CheckRetryToken(junk, client, now, lifetime, &contents) !=
                    TokenCheck::kValid);
  PETREL_FUZZ_CHECK(codec.CheckNewToken(junk, client, now, lifetime) != TokenCheck::kValid);

  uint8_t token[AddressTokenCodec::kMaxTokenLen];
  const size_t n = codec.MakeRetryToken(client, odcid, now, token);
  PETREL_FUZZ_CHECK(n > 0 && n <= sizeof(token));
  const absl::Span<const uint8_t> retry(token, n);
  const TokenCheck at_later = codec.CheckRetryToken(retry, client, later, lifetime, &contents);
  if (later - now <= lifetime) {
    PETREL_FUZZ_CHECK(at_later == TokenCheck::kValid);
    PETREL_FUZZ_CHECK(
        contents.odcid_len == odcid.size() &&
        (odcid.empty() || std::memcmp(contents.odcid.data(), odcid.data(), odcid.size()) == 0));
  } else {
    PETREL_FUZZ_CHECK(at_later != TokenCheck::kValid);
  }
  if (!(other == client)) {
    PETREL_FUZZ_CHECK(codec.CheckRetryToken(retry, other, now, lifetime, &contents) !=
                      TokenCheck::kValid);
  }
  PETREL_FUZZ_CHECK(codec.CheckNewToken(retry, client, now, lifetime) != TokenCheck::kValid);
  // Any one octet changed (the first octet picked by the junk's length) spoils it.
  uint8_t flipped[AddressTokenCodec::kMaxTokenLen];
  std::memcpy(flipped, token, n);
  flipped[junk.size() % n] ^= static_cast<uint8_t>(1 + junk.size() % 255);
  PETREL_FUZZ_CHECK(codec.CheckRetryToken(absl::Span<const uint8_t>(flipped, n), client, now,
                                          lifetime, &contents) != TokenCheck::kValid);

  const size_t m = codec.MakeNewToken(client, now, token);
  PETREL_FUZZ_CHECK(m > 0 && m <= sizeof(token));
  const absl::Span<const uint8_t> fresh(token, m);
  if (later - now <= lifetime) {
    PETREL_FUZZ_CHECK(codec.CheckNewToken(fresh, client, later, lifetime) == TokenCheck::kValid);
  }
  PETREL_FUZZ_CHECK(codec.CheckRetryToken(fresh, client, now, lifetime, &contents) !=
                    TokenCheck::kValid);
  return 0;
}
