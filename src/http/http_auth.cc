#include "petrel/http/http_auth.h"

#include <memory>
#include <optional>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace petrel {
namespace {

bool IsQuotableRealm(absl::string_view realm) {
  for (unsigned char c : realm) {
    if (c == '"' || c == '\\' || c < 0x20 || c == 0x7f) return false;
  }
  return true;
}

// The credentials of an Authorization field whose scheme is `scheme` (any case), trimmed; none
// for another scheme or no field.
std::optional<absl::string_view> CredentialsFor(const Request& req, absl::string_view scheme) {
  const std::optional<absl::string_view> field = req.headers().Get("authorization");
  if (!field.has_value() || field->size() <= scheme.size() ||
      !absl::StartsWithIgnoreCase(*field, scheme) || (*field)[scheme.size()] != ' ') {
    return std::nullopt;
  }
  return absl::StripAsciiWhitespace(field->substr(scheme.size() + 1));
}

void Challenge(Response& res, std::string challenge, absl::string_view reason) {
  res.SetHeader("www-authenticate", challenge);
  res.SendError(401, reason);
}

}  // namespace

Middleware BasicAuthMiddleware(std::string realm, BasicCheck check) {
  const bool valid_realm = IsQuotableRealm(realm);
  std::string challenge = absl::StrCat("Basic realm=\"", realm, "\", charset=\"UTF-8\"");
  return [valid_realm, challenge = std::move(challenge), check = std::move(check)](
             Request& req, Response& res, Next next) {
    if (!valid_realm) return res.SendError(500, "Basic auth realm is not a quotable string");
    const std::optional<absl::string_view> credentials = CredentialsFor(req, "Basic");
    std::string decoded;
    if (!credentials.has_value() || !absl::Base64Unescape(*credentials, &decoded)) {
      return Challenge(res, challenge, "no Basic credentials");
    }
    const size_t colon = decoded.find(':');
    if (colon == std::string::npos) return Challenge(res, challenge, "malformed Basic credentials");
    const absl::string_view user = absl::string_view(decoded).substr(0, colon);
    const absl::string_view password = absl::string_view(decoded).substr(colon + 1);
    if (!check(user, password)) return Challenge(res, challenge, "wrong Basic credentials");
    req.context().Emplace<AuthenticatedUser>(std::string(user));
    next();
  };
}

Middleware BearerAuthMiddleware(std::string realm, BearerCheck check) {
  const bool valid_realm = IsQuotableRealm(realm);
  std::string challenge = absl::StrCat("Bearer realm=\"", realm, "\"");
  std::string invalid = absl::StrCat(challenge, ", error=\"invalid_token\"");
  return [valid_realm, challenge = std::move(challenge), invalid = std::move(invalid),
          check = std::move(check)](Request& req, Response& res, Next next) {
    if (!valid_realm) return res.SendError(500, "Bearer auth realm is not a quotable string");
    const std::optional<absl::string_view> token = CredentialsFor(req, "Bearer");
    // RFC 6750 §3.1: no error code when the request carried no token at all.
    if (!token.has_value() || token->empty()) return Challenge(res, challenge, "no Bearer token");
    if (!check(*token)) return Challenge(res, invalid, "invalid Bearer token");
    req.context().Emplace<AuthenticatedUser>(std::string(*token));
    next();
  };
}

}  // namespace petrel
