#include "http/h2/protocol_detect.h"

#include <algorithm>

namespace petrel::http {

CleartextProtocol DetectCleartextProtocol(absl::string_view input) {
  const size_t n = std::min(input.size(), kH2ClientPreface.size());
  if (input.substr(0, n) != kH2ClientPreface.substr(0, n)) return CleartextProtocol::kH1;
  return n == kH2ClientPreface.size() ? CleartextProtocol::kH2 : CleartextProtocol::kNeedMore;
}

}  // namespace petrel::http
