#include "petrel/http/cors.h"

#include <memory>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace petrel {
namespace {

// The options, with the joined field values made once.
struct Cors {
  CorsOptions options;
  bool any_origin = false;
  std::string methods;
  std::string headers;
  std::string exposed;
  std::string max_age;

  bool Allows(absl::string_view origin) const {
    if (any_origin) return true;
    for (const std::string& o : options.allowed_origins) {
      if (o == origin) return true;
    }
    return false;
  }
  bool AllowsMethod(absl::string_view method) const {
    for (const std::string& m : options.allowed_methods) {
      if (m == method) return true;
    }
    return false;
  }
  // Every field named in the Access-Control-Request-Headers list is allowed.
  bool AllowsHeaders(absl::string_view requested) const {
    for (absl::string_view name : absl::StrSplit(requested, ',')) {
      name = absl::StripAsciiWhitespace(name);
      if (name.empty()) continue;
      bool found = false;
      for (const std::string& h : options.allowed_headers) {
        if (absl::EqualsIgnoreCase(h, name)) {
          found = true;
          break;
        }
      }
      if (!found) return false;
    }
    return true;
  }
  // Access-Control-Allow-Origin and what goes with it.
  void AddOriginFields(absl::string_view origin, Response& res) const {
    const bool echo = !any_origin || options.allow_credentials;
    res.SetHeader("access-control-allow-origin", echo ? origin : absl::string_view("*"));
    if (echo) res.AddHeader("vary", "Origin");
    if (options.allow_credentials && !any_origin) {
      res.SetHeader("access-control-allow-credentials", "true");
    }
  }
};

}  // namespace

Middleware CorsMiddleware(CorsOptions options) {
  auto cors = std::make_unique<Cors>();
  for (const std::string& o : options.allowed_origins) cors->any_origin |= o == "*";
  cors->methods = absl::StrJoin(options.allowed_methods, ", ");
  cors->headers = absl::StrJoin(options.allowed_headers, ", ");
  cors->exposed = absl::StrJoin(options.exposed_headers, ", ");
  cors->max_age =
      absl::StrCat(std::chrono::duration_cast<std::chrono::seconds>(options.max_age).count());
  if (cors->any_origin) options.allow_credentials = false;  // never with "*"
  cors->options = std::move(options);
  return [cors = std::move(cors)](Request& req, Response& res, Next next) {
    const std::optional<absl::string_view> origin = req.headers().Get("origin");
    if (!origin.has_value()) return next();
    const std::optional<absl::string_view> preflight_method =
        req.headers().Get("access-control-request-method");
    if (req.method().kind() == MethodKind::kOptions && preflight_method.has_value()) {
      const absl::string_view asked =
          req.headers().Get("access-control-request-headers").value_or("");
      if (!cors->Allows(*origin) || !cors->AllowsMethod(*preflight_method) ||
          !cors->AllowsHeaders(asked)) {
        return res.SendError(403, "CORS preflight not allowed");
      }
      cors->AddOriginFields(*origin, res);
      res.AddHeader("vary", "Access-Control-Request-Method, Access-Control-Request-Headers");
      res.SetHeader("access-control-allow-methods", cors->methods);
      if (!cors->headers.empty()) res.SetHeader("access-control-allow-headers", cors->headers);
      res.SetHeader("access-control-max-age", cors->max_age);
      return res.Send(204, std::string());
    }
    if (cors->Allows(*origin)) {
      // The origin is read again when the head is made (the request outlives its response's
      // commit): two references fit the hook's inline storage, a copy of the origin would not.
      res.OnCommit([&cors = *cors, &req](Response& r) {
        const std::optional<absl::string_view> echoed = req.headers().Get("origin");
        if (!echoed.has_value() || !cors.Allows(*echoed)) return;
        cors.AddOriginFields(*echoed, r);
        if (!cors.exposed.empty()) r.SetHeader("access-control-expose-headers", cors.exposed);
      });
    }
    next();
  };
}

}  // namespace petrel
