// Internal: ASCII character classes and case folding shared by the HTTP semantic layer.
#ifndef PETREL_HTTP_ASCII_H_
#define PETREL_HTTP_ASCII_H_

#include <array>
#include <cstddef>
#include <cstdint>

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
