#include "petrel/http/method.h"

#include <cassert>
#include <cstring>

#include "http/ascii.h"

namespace petrel {
namespace {

// Compares `s` with a literal of the same length known at compile time.
template <size_t N>
bool Is(absl::string_view s, const char (&literal)[N]) {
  return std::memcmp(s.data(), literal, N - 1) == 0;
}

// Standard names by length, then a memcmp. No allocation, at most two compares.
std::optional<MethodKind> ParseStandard(absl::string_view s) {
  switch (s.size()) {
    case 3:
      if (Is(s, "GET")) return MethodKind::kGet;
      if (Is(s, "PUT")) return MethodKind::kPut;
      break;
    case 4:
      if (s[0] == 'P') {
        if (Is(s, "POST")) return MethodKind::kPost;
      } else if (Is(s, "HEAD")) {
        return MethodKind::kHead;
      }
      break;
    case 5:
      if (s[0] == 'P') {
        if (Is(s, "PATCH")) return MethodKind::kPatch;
      } else if (Is(s, "TRACE")) {
        return MethodKind::kTrace;
      }
      break;
    case 6:
      if (Is(s, "DELETE")) return MethodKind::kDelete;
      break;
    case 7:
      if (s[0] == 'O') {
        if (Is(s, "OPTIONS")) return MethodKind::kOptions;
      } else if (Is(s, "CONNECT")) {
        return MethodKind::kConnect;
      }
      break;
    default:
      break;
  }
  return std::nullopt;
}

}  // namespace

absl::string_view MethodKindName(MethodKind kind) {
  switch (kind) {
    case MethodKind::kGet:
      return "GET";
    case MethodKind::kHead:
      return "HEAD";
    case MethodKind::kPost:
      return "POST";
    case MethodKind::kPut:
      return "PUT";
    case MethodKind::kDelete:
      return "DELETE";
    case MethodKind::kConnect:
      return "CONNECT";
    case MethodKind::kOptions:
      return "OPTIONS";
    case MethodKind::kTrace:
      return "TRACE";
    case MethodKind::kPatch:
      return "PATCH";
    case MethodKind::kExtension:
      break;
  }
  return "";
}

Method::Method(MethodKind kind) : kind_(kind) { assert(kind != MethodKind::kExtension); }

std::optional<Method> Method::Parse(absl::string_view token) {
  if (std::optional<MethodKind> kind = ParseStandard(token)) return Method(*kind);
  if (!http_internal::IsToken(token)) return std::nullopt;
  return Method(MethodKind::kExtension, std::string(token));
}

absl::string_view Method::name() const {
  if (kind_ == MethodKind::kExtension) return extension_;
  return MethodKindName(kind_);
}

bool Method::IsSafe() const {
  switch (kind_) {
    case MethodKind::kGet:
    case MethodKind::kHead:
    case MethodKind::kOptions:
    case MethodKind::kTrace:
      return true;
    default:
      return false;
  }
}

bool Method::IsIdempotent() const {
  return IsSafe() || kind_ == MethodKind::kPut || kind_ == MethodKind::kDelete;
}

}  // namespace petrel
