// Internal: response field names as the h2 and h3 engines send them: lowercased (RFC 9113 §8.2,
// RFC 9114 §4.2) and sorted into the ones the engine passes, drops or treats specially.
#ifndef PETREL_HTTP_FIELD_NAMES_H_
#define PETREL_HTTP_FIELD_NAMES_H_

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "absl/base/attributes.h"
#include "absl/strings/string_view.h"
#include "http/ascii.h"

namespace petrel::http_internal {

// True if `name` is the literal `word`. A compare of known size compiles to a few word
// compares; string_view's operator== calls memcmp, which costs more for these short names.
template <size_t N>
inline bool IsLiteral(absl::string_view name, const char (&word)[N]) {
  return name.size() == N - 1 && std::memcmp(name.data(), word, N - 1) == 0;
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

// Writes the n bytes at `src` to `dst` with 'A'..'Z' lowercased, a word at a time: the tail word
// overlaps the one before instead of going byte by byte (field names are short). `dst` may be
// `src` (lowercasing in place).
ABSL_ATTRIBUTE_ALWAYS_INLINE inline void CopyLowercase(char* dst, const char* src, size_t n) {
  constexpr uint64_t kOnes = 0x0101010101010101ull;
  constexpr uint64_t kHigh = 0x8080808080808080ull;
  // Sets bit 5 of every byte in 'A'..'Z'; bytes >= 0x80 never match.
  const auto lower = [](uint64_t w) {
    const uint64_t low7 = w & ~kHigh;
    const uint64_t ge_a = low7 + kOnes * (0x80 - 'A');      // high bit: byte >= 'A'
    const uint64_t gt_z = low7 + kOnes * (0x80 - 'Z' - 1);  // high bit: byte > 'Z'
    return w | ((ge_a & ~gt_z & ~w & kHigh) >> 2);
  };
  uint64_t w = 0;
  if (n >= 8) {
    for (size_t i = 0; i + 8 <= n; i += 8) {
      std::memcpy(&w, src + i, 8);
      w = lower(w);
      std::memcpy(dst + i, &w, 8);
    }
    std::memcpy(&w, src + n - 8, 8);
    w = lower(w);
    std::memcpy(dst + n - 8, &w, 8);
  } else if (n >= 4) {
    uint32_t head = 0;
    uint32_t tail = 0;
    std::memcpy(&head, src, 4);
    std::memcpy(&tail, src + n - 4, 4);
    w = lower(uint64_t{head} | uint64_t{tail} << 32);
    head = static_cast<uint32_t>(w);
    tail = static_cast<uint32_t>(w >> 32);
    std::memcpy(dst, &head, 4);
    std::memcpy(dst + n - 4, &tail, 4);
  } else {
    for (size_t i = 0; i < n; ++i) dst[i] = http_internal::AsciiLower(src[i]);
  }
}

}  // namespace petrel::http_internal

#endif  // PETREL_HTTP_FIELD_NAMES_H_
