// Public: the rate-limit middleware — a token bucket per client address; requests beyond it get
// 429 Too Many Requests with Retry-After (RFC 6585 §4).
//
//   router.Use("/api/", petrel::RateLimitMiddleware({.requests_per_second = 5, .burst = 20}));
#ifndef PETREL_HTTP_RATE_LIMIT_H_
#define PETREL_HTTP_RATE_LIMIT_H_

#include <cstddef>

#include "petrel/http/middleware.h"

namespace petrel {

struct RateLimitOptions {
  double requests_per_second = 10;  // the bucket's refill rate
  double burst = 20;                // its size: requests a fresh client may make at once
  // Clients tracked at most; past it, the buckets that have refilled completely (clients that
  // are not limited now) are forgotten first, then the oldest.
  size_t max_clients = 100000;
};

// One bucket per client IP address (IPv4, or IPv6 — each address its own), shared by every
// connection and protocol of the client and by all of the server's threads (a mutex held for a
// lookup per request). A request that finds the bucket empty gets 429 through the error page
// with Retry-After: the seconds until a token is back.
Middleware RateLimitMiddleware(RateLimitOptions options);

}  // namespace petrel

#endif  // PETREL_HTTP_RATE_LIMIT_H_
