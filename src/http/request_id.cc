#include "petrel/http/request_id.h"

#include <cstdint>
#include <random>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"

namespace petrel {
namespace {

constexpr size_t kMaxIdLength = 128;

bool IsAcceptableId(absl::string_view id) {
  if (id.empty() || id.size() > kMaxIdLength) return false;
  for (char c : id) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != ':' &&
        c != '-') {
      return false;
    }
  }
  return true;
}

// 128 random bits as hex. One generator per thread, seeded once from the system: ids need to be
// unique, not secret.
std::string NewId() {
  thread_local std::mt19937_64 generator{std::random_device{}()};
  uint64_t bits[2] = {generator(), generator()};
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(bits), sizeof(bits)));
}

}  // namespace

Middleware RequestIdMiddleware() {
  return [](Request& req, Response& res, Next next) {
    std::optional<absl::string_view> given = req.headers().Get("x-request-id");
    RequestId& id = req.context().Emplace<RequestId>();
    id.value = given.has_value() && IsAcceptableId(*given) ? std::string(*given) : NewId();
    res.OnCommit([&id](Response& r) { r.SetHeader("x-request-id", id.value); });
    next();
  };
}

}  // namespace petrel
