// Public: middleware — code a Router runs around its handlers, the same on HTTP/1.1, HTTP/2 and
// HTTP/3.
//
//   router.Use([](petrel::Request& req, petrel::Response& res, petrel::Next next) {
//     if (!req.headers().Contains("authorization")) return res.SendError(401, "no credentials");
//     res.OnCommit([](petrel::Response& r) { r.SetHeader("x-served-by", "petrel"); });
//     next();  // the rest of the chain, then the handler
//   });
//
// A middleware may inspect and change the request, answer by itself (not calling `next`), or
// call `next` — now, or later on the request's loop thread (after an asynchronous check) — and
// see the response through the Response's hooks: OnCommit to read and change its status and
// fields before anything is sent, OnDone to observe how it ended (status sent, body bytes,
// completed or cut off). Bodies (streams, files) pass through untouched and unbuffered.
//
// Order: the router's middleware in registration order, global (Use(mw)) and per path prefix
// (Use("/api/", mw)) together, outermost first; then the route's own (RouteOptions::
// middleware); then the handler — or, for a path no route matches, the router's 404/405. A
// request the engine rejected, or one over the route's limits, is answered before any
// middleware runs. A middleware that throws is caught like a handler (500, logged).
#ifndef PETREL_HTTP_MIDDLEWARE_H_
#define PETREL_HTTP_MIDDLEWARE_H_

#include <cstdint>

#include "absl/functional/any_invocable.h"
#include "petrel/http/request.h"
#include "petrel/http/response.h"

namespace petrel {

class Router;

// The rest of a request's chain. Copyable and small; call it at most once, while the request
// lives (until the response is sent or the cancel callback ran).
class Next {
 public:
  void operator()() const;

 private:
  friend class Router;
  Next(const Router* router, const void* route, uint32_t index, Request* req, Response* res)
      : router_(router), route_(route), index_(index), req_(req), res_(res) {}

  const Router* router_;
  const void* route_;  // the matched route (Router-internal), or null
  uint32_t index_;     // the next chain position to consider
  Request* req_;
  Response* res_;
};

using Middleware = absl::AnyInvocable<void(Request& req, Response& res, Next next) const>;

}  // namespace petrel

#endif  // PETREL_HTTP_MIDDLEWARE_H_
