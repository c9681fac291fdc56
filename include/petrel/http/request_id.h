// Public: the request-id middleware — every request gets an id that travels in and out as
// X-Request-Id and lands in the access log.
//
//   router.Use(petrel::RequestIdMiddleware());
//   ... in a handler: req.context().Get<petrel::RequestId>()->value()
#ifndef PETREL_HTTP_REQUEST_ID_H_
#define PETREL_HTTP_REQUEST_ID_H_

#include <cstddef>
#include <cstdint>

#include "absl/strings/string_view.h"
#include "petrel/http/middleware.h"

namespace petrel {

// The request's id, in its context. Held inline (no allocation per request).
class RequestId {
 public:
  static constexpr size_t kMaxLength = 128;

  // `id` cut to kMaxLength characters.
  explicit RequestId(absl::string_view id);

  absl::string_view value() const { return absl::string_view(data_, size_); }

 private:
  uint8_t size_ = 0;
  char data_[kMaxLength];
};

// Keeps the client's X-Request-Id when it is 1 to 128 characters of [A-Za-z0-9._:-] (anything
// else could forge log lines or split headers), else makes one (32 hex digits, random); puts
// it in the request's context and the response's X-Request-Id field.
Middleware RequestIdMiddleware();

}  // namespace petrel

#endif  // PETREL_HTTP_REQUEST_ID_H_
