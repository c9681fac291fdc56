// Public: authentication middleware — HTTP Basic (RFC 7617) and Bearer tokens (RFC 6750).
// Requests without valid credentials get 401 with WWW-Authenticate (through the error page);
// the others go on with the user in the request's context.
//
//   router.Use("/admin/", petrel::BasicAuthMiddleware("admin",
//       [](absl::string_view user, absl::string_view password) { return ...; }));
#ifndef PETREL_HTTP_HTTP_AUTH_H_
#define PETREL_HTTP_HTTP_AUTH_H_

#include <string>

#include "absl/functional/any_invocable.h"
#include "absl/strings/string_view.h"
#include "petrel/http/middleware.h"

namespace petrel {

// Who the request was authenticated as: the Basic user name, or the Bearer token itself.
struct AuthenticatedUser {
  std::string name;
};

// Checks run on the loop threads, possibly on several at once (as handlers do).
using BasicCheck =
    absl::AnyInvocable<bool(absl::string_view user, absl::string_view password) const>;
using BearerCheck = absl::AnyInvocable<bool(absl::string_view token) const>;

// `realm` names the protected space in the challenge; it must be a valid quoted-string body
// (no '"', '\\' or controls) or the middleware answers 500.
Middleware BasicAuthMiddleware(std::string realm, BasicCheck check);
Middleware BearerAuthMiddleware(std::string realm, BearerCheck check);

}  // namespace petrel

#endif  // PETREL_HTTP_HTTP_AUTH_H_
