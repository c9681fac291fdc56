#include "tools/url.h"

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace petrel::tools {

absl::StatusOr<Url> ParseUrl(absl::string_view text) {
  Url url;
  const size_t scheme_end = text.find("://");
  if (scheme_end == absl::string_view::npos || scheme_end == 0) {
    return absl::InvalidArgumentError(absl::StrCat("URL without a scheme: ", text));
  }
  url.scheme = absl::AsciiStrToLower(text.substr(0, scheme_end));
  if (url.scheme != "https" && url.scheme != "http") {
    return absl::InvalidArgumentError(absl::StrCat("unsupported URL scheme: ", url.scheme));
  }
  absl::string_view rest = text.substr(scheme_end + 3);
  if (const size_t hash = rest.find('#'); hash != absl::string_view::npos) {
    rest = rest.substr(0, hash);
  }
  const size_t path_start = rest.find_first_of("/?");
  absl::string_view authority = rest.substr(0, path_start);
  url.path = path_start == absl::string_view::npos ? "/" : std::string(rest.substr(path_start));
  if (url.path[0] == '?') url.path = absl::StrCat("/", url.path);
  if (authority.empty())
    return absl::InvalidArgumentError(absl::StrCat("URL without a host: ", text));
  if (authority.find('@') != absl::string_view::npos) {
    return absl::InvalidArgumentError("URLs with user information are not supported");
  }
  url.authority = std::string(authority);
  absl::string_view port;
  if (authority[0] == '[') {
    const size_t close = authority.find(']');
    if (close == absl::string_view::npos) {
      return absl::InvalidArgumentError(absl::StrCat("unterminated IPv6 literal: ", text));
    }
    url.host = std::string(authority.substr(1, close - 1));
    absl::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after[0] != ':') return absl::InvalidArgumentError(absl::StrCat("bad authority: ", text));
      port = after.substr(1);
    }
  } else {
    const size_t colon = authority.rfind(':');
    url.host = std::string(authority.substr(0, colon));
    if (colon != absl::string_view::npos) port = authority.substr(colon + 1);
  }
  if (url.host.empty())
    return absl::InvalidArgumentError(absl::StrCat("URL without a host: ", text));
  if (port.empty()) {
    url.port = url.scheme == "https" ? 443 : 80;
  } else {
    uint32_t p = 0;
    if (!absl::SimpleAtoi(port, &p) || p == 0 || p > 65535) {
      return absl::InvalidArgumentError(absl::StrCat("bad port in URL: ", text));
    }
    url.port = static_cast<uint16_t>(p);
  }
  return url;
}

}  // namespace petrel::tools
