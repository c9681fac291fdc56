// Internal: response field names as the h2 and h3 engines see them (lowercase, RFC 9113 §8.2,
// RFC 9114 §4.2), sorted into the ones the engine passes, drops or treats specially.
#ifndef PETREL_HTTP_FIELD_NAMES_H_
#define PETREL_HTTP_FIELD_NAMES_H_

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "absl/base/attributes.h"
#include "absl/strings/string_view.h"

namespace petrel::http_internal {

// True if `name` is the literal `word`. A compare of known size compiles to a few word
// compares; string_view's operator== calls memcmp, which costs more for these short names.
template <size_t N>
inline bool IsLiteral(absl::string_view name, const char (&word)[N]) {
  return name.size() == N - 1 && std::memcmp(name.data(), word, N - 1) == 0;
}

// The three digits of every status code, in static storage: h2 and h3 hand nghttp2 / nghttp3 a
// view of them (NO_COPY) instead of formatting them per response.
struct StatusDigitTable {
  static constexpr int kFirst = 100;
  static constexpr int kLast = 599;
  char digits[kLast - kFirst + 1][3];
};
constexpr StatusDigitTable MakeStatusDigitTable() {
  StatusDigitTable t{};
  for (int status = StatusDigitTable::kFirst; status <= StatusDigitTable::kLast; ++status) {
    char* d = t.digits[status - StatusDigitTable::kFirst];
    d[0] = static_cast<char>('0' + status / 100);
    d[1] = static_cast<char>('0' + status / 10 % 10);
    d[2] = static_cast<char>('0' + status % 10);
  }
  return t;
}
inline constexpr StatusDigitTable kStatusDigits = MakeStatusDigitTable();

// `status` in 100..599 (Response::Commit keeps final statuses in 200..599).
inline absl::string_view StatusDigits(int status) {
  return absl::string_view(kStatusDigits.digits[status - StatusDigitTable::kFirst], 3);
}

enum class FieldRole : uint8_t {
  kPass,  // goes to nghttp2 / nghttp3 as it is
  kDrop,  // owned by the engine, or connection-specific (RFC 9113 §8.2.2, RFC 9114 §4.2)
  kDate,  // passes, and means the engine adds no Date of its own
};

// What an h2 or h3 engine does with a response field; `name` is lowercase. One switch on the
// length serves both questions engines ask of every field. Inlined: it runs once per field of
// every response, and the call would cost as much as the switch.
ABSL_ATTRIBUTE_ALWAYS_INLINE inline FieldRole ResponseFieldRole(absl::string_view name) {
  if (name.empty() || name[0] == ':') return FieldRole::kDrop;
  bool drop = false;
  switch (name.size()) {
    case 2:
      drop = IsLiteral(name, "te");
      break;
    case 4:
      return IsLiteral(name, "date") ? FieldRole::kDate : FieldRole::kPass;
    case 7:
      drop = IsLiteral(name, "upgrade");
      break;
    case 10:
      drop = IsLiteral(name, "connection") || IsLiteral(name, "keep-alive");
      break;
    case 14:
      drop = IsLiteral(name, "content-length");
      break;
    case 16:
      drop = IsLiteral(name, "proxy-connection");
      break;
    case 17:
      drop = IsLiteral(name, "transfer-encoding");
      break;
    default:
      break;
  }
  return drop ? FieldRole::kDrop : FieldRole::kPass;
}

}  // namespace petrel::http_internal

#endif  // PETREL_HTTP_FIELD_NAMES_H_
