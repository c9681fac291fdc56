#include "petrel/http/request_id.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <utility>

#include "absl/strings/ascii.h"

namespace petrel {
namespace {

bool IsAcceptableId(absl::string_view id) {
  if (id.empty() || id.size() > RequestId::kMaxLength) return false;
  for (char c : id) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != ':' &&
        c != '-') {
      return false;
    }
  }
  return true;
}

// 128 random bits as 32 hex digits, written into `out`. One generator per thread, seeded once
// from the system: ids need to be unique, not secret.
absl::string_view NewId(char (&out)[32]) {
  thread_local std::mt19937_64 generator{std::random_device{}()};
  static constexpr char kHex[] = "0123456789abcdef";
  for (int half = 0; half < 2; ++half) {
    uint64_t bits = generator();
    for (int i = 0; i < 16; ++i, bits >>= 4) out[half * 16 + i] = kHex[bits & 0xf];
  }
  return absl::string_view(out, sizeof(out));
}

}  // namespace

RequestId::RequestId(absl::string_view id)
    : size_(static_cast<uint8_t>(std::min(id.size(), kMaxLength))) {
  std::memcpy(data_, id.data(), size_);
}

Middleware RequestIdMiddleware() {
  return [](Request& req, Response& res, Next next) {
    std::optional<absl::string_view> given = req.headers().Get("x-request-id");
    char fresh[32];
    const RequestId& id = req.context().Emplace<RequestId>(
        given.has_value() && IsAcceptableId(*given) ? *given : NewId(fresh));
    res.OnCommit([&id](Response& r) { r.SetHeader("x-request-id", id.value()); });
    next();
  };
}

}  // namespace petrel
