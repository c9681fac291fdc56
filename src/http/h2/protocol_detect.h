// Internal: tells h2 prior-knowledge (h2c) from HTTP/1.x on the cleartext port by the first
// bytes a client sends (DESIGN §8: no Upgrade: h2c). Looks at the bytes in place; the caller
// then hands the very same input buffer to the engine it picked.
#ifndef PETREL_HTTP_H2_PROTOCOL_DETECT_H_
#define PETREL_HTTP_H2_PROTOCOL_DETECT_H_

#include "absl/strings/string_view.h"

namespace petrel::http {

enum class CleartextProtocol {
  kNeedMore,  // The bytes so far are a proper prefix of the h2 preface: read more.
  kH2,        // The input starts with the 24-byte client connection preface.
  kH1,        // Anything else: hand the connection to the HTTP/1.x engine.
};

// The client connection preface of RFC 9113 §3.4.
inline constexpr absl::string_view kH2ClientPreface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

// Decides from the first bytes; never needs more than 24 of them.
CleartextProtocol DetectCleartextProtocol(absl::string_view input);

// Convenience: true when `input` starts with the full preface.
inline bool LooksLikeH2Preface(absl::string_view input) {
  return DetectCleartextProtocol(input) == CleartextProtocol::kH2;
}

}  // namespace petrel::http

#endif  // PETREL_HTTP_H2_PROTOCOL_DETECT_H_
