// Public: the request-id middleware — every request gets an id that travels in and out as
// X-Request-Id and lands in the access log.
//
//   router.Use(petrel::RequestIdMiddleware());
//   ... in a handler: req.context().Get<petrel::RequestId>()->value
#ifndef PETREL_HTTP_REQUEST_ID_H_
#define PETREL_HTTP_REQUEST_ID_H_

#include <string>

#include "petrel/http/middleware.h"

namespace petrel {

// The request's id, in its context.
struct RequestId {
  std::string value;
};

// Keeps the client's X-Request-Id when it is 1 to 128 characters of [A-Za-z0-9._:-] (anything
// else could forge log lines or split headers), else makes one (32 hex digits, random); puts
// it in the request's context and the response's X-Request-Id field.
Middleware RequestIdMiddleware();

}  // namespace petrel

#endif  // PETREL_HTTP_REQUEST_ID_H_
