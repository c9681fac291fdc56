#include "common/host_name.h"

#include <array>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace petrel {
namespace {

constexpr size_t kMaxHost = 253;  // the longest DNS name in text form, no trailing dot

absl::string_view WithoutTrailingDot(absl::string_view host) {
  if (!host.empty() && host.back() == '.') host.remove_suffix(1);
  return host;
}

// Lower-cases `host` into `buf`; false if it is too long to be a name.
bool Lower(absl::string_view host, std::array<char, kMaxHost>& buf, absl::string_view* out) {
  host = WithoutTrailingDot(host);
  if (host.size() > buf.size()) return false;
  for (size_t i = 0; i < host.size(); ++i) buf[i] = absl::ascii_tolower(host[i]);
  *out = absl::string_view(buf.data(), host.size());
  return true;
}

}  // namespace

absl::string_view HostOfAuthority(absl::string_view authority) {
  if (authority.empty()) return {};
  if (authority.front() == '[') {
    const size_t close = authority.find(']');
    if (close == absl::string_view::npos) return {};
    return authority.substr(1, close - 1);
  }
  const size_t colon = authority.rfind(':');
  // More than one colon without brackets is not an authority (RFC 3986 §3.2.2); take it as is.
  if (colon != absl::string_view::npos && authority.find(':') == colon) {
    authority = authority.substr(0, colon);
  }
  return WithoutTrailingDot(authority);
}

bool SameHost(absl::string_view a, absl::string_view b) {
  return absl::EqualsIgnoreCase(WithoutTrailingDot(a), WithoutTrailingDot(b));
}

absl::Status HostTable::Add(absl::string_view pattern, size_t index) {
  pattern = WithoutTrailingDot(pattern);
  const bool wildcard = absl::StartsWith(pattern, "*.");
  const absl::string_view name = wildcard ? pattern.substr(2) : pattern;
  bool valid = !name.empty() && pattern.size() <= kMaxHost;
  for (char c : name) {
    if (c == '*' || static_cast<unsigned char>(c) <= 0x20 || c == 0x7f || c == '/') valid = false;
  }
  if (!valid) return absl::InvalidArgumentError(absl::StrCat("bad host name \"", pattern, "\""));
  auto [it, added] = (wildcard ? wildcard_ : exact_).emplace(absl::AsciiStrToLower(name), index);
  if (!added) {
    return absl::AlreadyExistsError(absl::StrCat("host name \"", pattern, "\" given twice"));
  }
  return absl::OkStatus();
}

std::optional<size_t> HostTable::Find(absl::string_view host) const {
  std::array<char, kMaxHost> buf;
  absl::string_view lower;
  if (host.empty() || !Lower(host, buf, &lower)) return std::nullopt;
  if (auto it = exact_.find(lower); it != exact_.end()) return it->second;
  if (wildcard_.empty()) return std::nullopt;
  const size_t dot = lower.find('.');
  if (dot == 0 || dot == absl::string_view::npos) return std::nullopt;
  if (auto it = wildcard_.find(lower.substr(dot + 1)); it != wildcard_.end()) return it->second;
  return std::nullopt;
}

}  // namespace petrel
