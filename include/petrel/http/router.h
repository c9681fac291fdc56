// Public: maps (method, path) to handlers with path patterns, most specific match first.
#ifndef PETREL_HTTP_ROUTER_H_
#define PETREL_HTTP_ROUTER_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "petrel/common/clock.h"
#include "petrel/http/method.h"
#include "petrel/http/middleware.h"
#include "petrel/http/request.h"
#include "petrel/http/response.h"
#include "petrel/http/websocket.h"

namespace petrel {

// A request handler. Move-only (it may own state such as an open directory) and const-callable:
// one router is shared read-only by all workers, so a handler may run on several loop threads at
// once and must be safe for that (a non-mutable lambda over immutable or synchronized state).
// It runs on the request's loop thread and commits `res` now or later (see Response).
using Handler = absl::AnyInvocable<void(Request& req, Response& res) const>;

// A response the server generates itself, as the error handler sees it.
struct HttpError {
  int status = 500;
  // What went wrong ("no route for the path", "request header fields too large", "handler
  // threw: ..."), for logs and pages; may be empty. Valid during the call only.
  absl::string_view reason;
};

// Renders the error responses of a router's site (Router::SetErrorHandler): commits `res`
// before returning (Send, SendFile, ...), with `error.status` or another status. The request
// may be partial: for a head that could not be parsed it has only the connection's facts (peer,
// protocol, SNI). Runs on the request's loop thread, possibly on several at once (as Handler).
using ErrorHandler =
    absl::AnyInvocable<void(const HttpError& error, const Request& req, Response& res) const>;

// Limits and deadlines of one route; unset fields keep the server's values (HttpServerConfig).
struct RouteOptions {
  // Largest request body, above or below the server's max_request_body. A Content-Length over
  // it gets 413 before the handler runs and without the body being read; a body without one is
  // cut off when it passes the limit (HTTP/1.1: 413 if the response has not begun, then the
  // connection closes; HTTP/2 and HTTP/3: the stream is reset).
  std::optional<uint64_t> max_request_body;
  // Largest request head, as the server's max_header_bytes counts it; only below that one (a
  // head is read whole before it can be routed). Over it: 431 before the handler runs.
  std::optional<size_t> max_header_bytes;
  // A handler that has not committed its response this long after it was called gets its
  // cancel callback (Response::SetOnCancel), and the client gets `deadline_status` through the
  // error page. Zero: no deadline.
  Duration handler_deadline = Duration::zero();
  int deadline_status = 503;
  // A streamed response (Response::Stream) whose handler writes nothing for this long while
  // nothing of it waits to be sent is reset (HTTP/1.1: the connection closes without the last
  // chunk); see StreamingBody::SetIdleLimit. Zero: no limit.
  Duration stream_idle_timeout = Duration::zero();
  // Middleware for this route only, run after the router's (Use), outermost first.
  std::vector<Middleware> middleware;
};

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
  absl::Status Add(const Method& method, absl::string_view pattern, Handler handler,
                   RouteOptions options = {});
  absl::Status Any(absl::string_view pattern, Handler handler, RouteOptions options = {});
  absl::Status Get(absl::string_view pattern, Handler handler, RouteOptions options = {});
  absl::Status Post(absl::string_view pattern, Handler handler, RouteOptions options = {});
  absl::Status Put(absl::string_view pattern, Handler handler, RouteOptions options = {});
  absl::Status Delete(absl::string_view pattern, Handler handler, RouteOptions options = {});
  absl::Status Patch(absl::string_view pattern, Handler handler, RouteOptions options = {});
  // A WebSocket endpoint (websocket.h) for every protocol: HTTP/1.1 GET with Upgrade (101),
  // HTTP/2 and HTTP/3 extended CONNECT with :protocol websocket (200). The route's middleware
  // runs before the handshake; `factory` makes each connection's handler. Any other request to
  // the path gets 426 Upgrade Required (400 for a broken opening).
  absl::Status WebSocket(absl::string_view pattern, WebSocketFactory factory,
                         WebSocketOptions websocket = {}, RouteOptions options = {});

  // Every error response for requests this router serves goes through `handler`: the ones
  // Handle generates (404, 405, 500 for a handler that threw), StaticFiles' (403, 404, 412,
  // 416, ...), a handler's own Response::SendError, the engines' (400 for a malformed head,
  // 408 when it does not arrive in time, 413, 431, 425 for early data), and 421 for a
  // misdirected request. Errors HTTP/1.1 finds before a request's host is known (a head that
  // does not parse, is too large, announces a body over the limit or does not arrive in time)
  // go to the default site's (HttpServer::router()), with the connection's facts only (empty path).
  // An error handler that throws or does not commit leaves the built-in page (logged). On HTTP/1.1,
  // errors that close the connection (those found before or while reading a request) send the
  // page's status, fields and a buffered or file body up to 1 MiB; anything else there gives the
  // built-in page.
  void SetErrorHandler(ErrorHandler handler);
  // Runs the error handler for `error` (if any; exceptions caught and logged). Response::SendError
  // is the way to use it: it falls back to the built-in page.
  void RenderError(const HttpError& error, const Request& req, Response& res) const;

  // Middleware for every request this router serves (including those no route matches), or
  // for those whose raw path starts with `prefix` ("/api/"). Registration order is the order
  // they run in, outermost first (see middleware.h). Before Start, like routes.
  void Use(Middleware middleware);
  void Use(absl::string_view prefix, Middleware middleware);

  // `path` is the raw request path (Request::path()); one not starting with '/' gives 404.
  RouteMatch Match(const Method& method, absl::string_view path) const;

  // Matches `req`, stores the parameters and the pattern in it, applies the route's limits
  // (RouteOptions) and runs the handler, arming its deadline if it returns without committing;
  // otherwise answers 404, or 405 with the Allow header (SendError). A request the engine
  // rejected (Response::Reject) is answered with its error instead, and one whose Content-Length
  // exceeds the body limit with 413. A handler that throws has its exception logged
  // (with the route) and caught here: the request gets 500 if nothing was committed, a body it
  // was streaming fails (the stream is reset, an HTTP/1.1 connection closed), and the
  // connection serves on where the protocol allows. (Callbacks a handler leaves behind run
  // later, outside this call: they must not throw.)
  void Handle(Request& req, Response& res) const;

  struct Node;  // Internal (router.cc).

 private:
  friend class Next;
  struct UsedMiddleware {
    std::string prefix;  // empty: every request
    Middleware middleware;
  };
  // The end of the chain: the route's handler (exceptions caught), or the 404/405 answer.
  void RunHandler(const void* route, Request& req, Response& res) const;
  void AnswerMiss(Request& req, Response& res) const;
  // Runs the chain from `index`: the next middleware that applies, else the end.
  void RunChain(const void* route, uint32_t index, Request& req, Response& res) const;
  absl::Status AddRoute(const Method* method, absl::string_view pattern, Handler handler,
                        RouteOptions options);
  // A route's limits, checked before its handler runs; true if they answered the request.
  static bool AnswerOverLimits(const RouteOptions& options, Request& req, Response& res);
  static void HandlerThrew(absl::string_view pattern, absl::string_view what, const Request& req,
                           Response& res);

  std::unique_ptr<Node> root_;
  ErrorHandler error_handler_;
  std::vector<UsedMiddleware> middleware_;
  bool has_middleware_ = false;  // any: the router's, or a route's own
};

}  // namespace petrel

#endif  // PETREL_HTTP_ROUTER_H_
