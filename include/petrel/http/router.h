// Public: maps (method, path) to handlers with path patterns, most specific match first.
#ifndef PETREL_HTTP_ROUTER_H_
#define PETREL_HTTP_ROUTER_H_

#include <memory>
#include <string>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "petrel/http/method.h"
#include "petrel/http/request.h"
#include "petrel/http/response.h"

namespace petrel {

// A request handler. Move-only (it may own state such as an open directory) and const-callable:
// one router is shared read-only by all workers, so a handler may run on several loop threads at
// once and must be safe for that (a non-mutable lambda over immutable or synchronized state).
// It runs on the request's loop thread and commits `res` now or later (see Response).
using Handler = absl::AnyInvocable<void(Request& req, Response& res) const>;

// What Router::Match found.
struct RouteMatch {
  // 200: `handler` is set. 404: no pattern matches the path. 405: patterns match the path, but
  // none for this method; `allow` is the Allow header value.
  int status = 404;
  const Handler* handler = nullptr;  // Owned by the router.
  absl::string_view pattern;         // The winning pattern as registered (for logs, metrics).
  RouteParams params;
  std::string allow;

  bool found() const { return handler != nullptr; }
};

// Patterns: '/' followed by segments separated by '/':
//  - a literal segment matches itself byte for byte (raw path: no percent-decoding; "%2F" stays
//    three bytes and never splits a segment). Empty literals are allowed: "/a/" differs from
//    "/a". Literals may not contain '*', '?', '#', controls, spaces or non-ASCII bytes, and may
//    not start with ':'.
//  - ":name" (name = [A-Za-z0-9_]+, unique in the pattern) matches one non-empty segment.
//  - "*", only as the last segment, matches the rest of the path after the preceding '/',
//    possibly empty and including further '/': "/files/*" matches "/files/" and "/files/a/b"
//    (param "*" = "a/b"), not "/files".
//
// Precedence, independent of registration order: of the patterns that match the path and have a
// route for the method, the winner is the one that, at the first segment where two patterns
// differ, has a literal rather than a parameter, or a parameter rather than a wildcard. So
// "/users/me" beats "/users/:id" beats "/users/*", and "/a/b/:x" beats "/a/:y/c" for "/a/b/c".
//
// Methods: a route is for one method or for any method (Any). At a pattern, an exact method
// wins over Any; HEAD uses a HEAD route, else GET, else Any (the engine sends no body). A path
// whose patterns have no route for the method gives 405 with Allow listing, in MethodKind order
// then extensions by name, every method some matching pattern accepts (HEAD whenever GET).
// OPTIONS is not answered automatically: register it (or Any) if wanted.
//
// Threading: register everything first (not thread-safe), then Match/Handle from any number of
// threads concurrently (read-only). Match does not allocate on success when there are at most
// four parameters; params refer into the router and the path.
class Router {
 public:
  Router();
  Router(Router&&) noexcept;
  Router& operator=(Router&&) noexcept;
  ~Router();

  // InvalidArgument for a malformed pattern, AlreadyExists if the same method (or Any) is
  // already registered for an equivalent pattern (same shape; parameter names do not count).
  absl::Status Add(const Method& method, absl::string_view pattern, Handler handler);
  absl::Status Any(absl::string_view pattern, Handler handler);
  absl::Status Get(absl::string_view pattern, Handler handler);
  absl::Status Post(absl::string_view pattern, Handler handler);
  absl::Status Put(absl::string_view pattern, Handler handler);
  absl::Status Delete(absl::string_view pattern, Handler handler);
  absl::Status Patch(absl::string_view pattern, Handler handler);

  // `path` is the raw request path (Request::path()); one not starting with '/' gives 404.
  RouteMatch Match(const Method& method, absl::string_view path) const;

  // Matches `req`, stores the parameters in it and runs the handler; otherwise answers 404, or
  // 405 with the Allow header, as text/plain. A handler that throws has its exception logged
  // (with the route) and caught here: the request gets 500 if nothing was committed, a body it
  // was streaming fails (the stream is reset, an HTTP/1.1 connection closed), and the
  // connection serves on where the protocol allows. (Callbacks a handler leaves behind run
  // later, outside this call: they must not throw.)
  void Handle(Request& req, Response& res) const;

  struct Node;  // Internal (router.cc).

 private:
  absl::Status AddRoute(const Method* method, absl::string_view pattern, Handler handler);
  static void HandlerThrew(absl::string_view pattern, absl::string_view what, const Request& req,
                           Response& res);

  std::unique_ptr<Node> root_;
};

}  // namespace petrel

#endif  // PETREL_HTTP_ROUTER_H_
