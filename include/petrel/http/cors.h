// Public: the CORS middleware (Fetch standard, "CORS protocol"): answers preflight requests and
// adds the Access-Control-* fields to the responses of allowed origins.
//
//   petrel::CorsOptions cors;
//   cors.allowed_origins = {"https://app.example"};
//   router.Use("/api/", petrel::CorsMiddleware(cors));
#ifndef PETREL_HTTP_CORS_H_
#define PETREL_HTTP_CORS_H_

#include <string>
#include <vector>

#include "petrel/common/clock.h"
#include "petrel/http/middleware.h"

namespace petrel {

struct CorsOptions {
  // Origins allowed, exactly as browsers send them ("https://app.example:8443"); "*" allows
  // every origin (then credentials are never allowed).
  std::vector<std::string> allowed_origins;
  // What a preflight may ask for: methods (case-sensitive) and request fields (any case).
  std::vector<std::string> allowed_methods = {"GET", "HEAD", "POST"};
  std::vector<std::string> allowed_headers;
  // Response fields scripts may read beyond the safelisted ones.
  std::vector<std::string> exposed_headers;
  bool allow_credentials = false;
  Duration max_age = std::chrono::minutes(10);  // how long a browser may cache a preflight
};

// A request without Origin passes untouched. A preflight (OPTIONS with Origin and
// Access-Control-Request-Method) from an allowed origin asking for allowed methods and fields
// is answered 204 with the Allow-* fields; any other preflight gets 403 (error page). Other
// requests go on; an allowed origin's response gets Access-Control-Allow-Origin (and
// -Credentials, -Expose-Headers), with Vary: Origin when the origin is echoed.
Middleware CorsMiddleware(CorsOptions options);

}  // namespace petrel

#endif  // PETREL_HTTP_CORS_H_
