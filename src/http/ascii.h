// Internal: ASCII character classes and case folding shared by the HTTP semantic layer.
#ifndef PETREL_HTTP_ASCII_H_
#define PETREL_HTTP_ASCII_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "absl/base/attributes.h"
#include "absl/strings/string_view.h"

namespace petrel::http_internal {

// tchar from RFC 9110 §5.6.2: "!#$%&'*+-.^_`|~", DIGIT, ALPHA.
constexpr std::array<bool, 256> MakeTcharTable() {
  std::array<bool, 256> t{};
  for (int c = '0'; c <= '9'; ++c) t[c] = true;
  for (int c = 'a'; c <= 'z'; ++c) t[c] = true;
  for (int c = 'A'; c <= 'Z'; ++c) t[c] = true;
  for (char c : absl::string_view("!#$%&'*+-.^_`|~")) t[static_cast<unsigned char>(c)] = true;
  return t;
}
inline constexpr std::array<bool, 256> kTchar = MakeTcharTable();

inline bool IsTchar(char c) { return kTchar[static_cast<unsigned char>(c)]; }

// A non-empty sequence of tchar (RFC 9110 "token").
inline bool IsToken(absl::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!IsTchar(c)) return false;
  }
  return true;
}

inline char AsciiLower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c | 0x20) : c; }

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

// True if any of the n bytes at `s` is in 'A'..'Z', tested a word at a time as CopyLowercase
// goes.
ABSL_ATTRIBUTE_ALWAYS_INLINE inline bool HasUpperAscii(const char* s, size_t n) {
  constexpr uint64_t kOnes = 0x0101010101010101ull;
  constexpr uint64_t kHigh = 0x8080808080808080ull;
  const auto upper = [](uint64_t w) {
    const uint64_t low7 = w & ~kHigh;
    const uint64_t ge_a = low7 + kOnes * (0x80 - 'A');
    const uint64_t gt_z = low7 + kOnes * (0x80 - 'Z' - 1);
    return (ge_a & ~gt_z & ~w & kHigh) != 0;
  };
  uint64_t w = 0;
  if (n >= 8) {
    for (size_t i = 0; i + 8 <= n; i += 8) {
      std::memcpy(&w, s + i, 8);
      if (upper(w)) return true;
    }
    std::memcpy(&w, s + n - 8, 8);
    return upper(w);
  }
  if (n >= 4) {
    uint32_t head = 0;
    uint32_t tail = 0;
    std::memcpy(&head, s, 4);
    std::memcpy(&tail, s + n - 4, 4);
    return upper(uint64_t{head} | uint64_t{tail} << 32);
  }
  for (size_t i = 0; i < n; ++i) {
    if (s[i] >= 'A' && s[i] <= 'Z') return true;
  }
  return false;
}

// ASCII case-insensitive equality. Lengths are compared first: most header lookups end there.
inline bool EqualsIgnoreCase(absl::string_view a, absl::string_view b) {
  if (a.size() != b.size()) return false;
  const size_t n = a.size();
  for (size_t i = 0; i < n; ++i) {
    const char x = a[i];
    const char y = b[i];
    if (x == y) continue;
    // Only letters may differ, and only by the 0x20 case bit.
    if ((x ^ y) != 0x20) return false;
    const char lx = static_cast<char>(x | 0x20);
    if (lx < 'a' || lx > 'z') return false;
  }
  return true;
}

// Optional whitespace (RFC 9110 §5.6.3): SP and HTAB.
inline bool IsOws(char c) { return c == ' ' || c == '\t'; }

}  // namespace petrel::http_internal

#endif  // PETREL_HTTP_ASCII_H_
