// Internal: what the h2 and h3 engines learn of a request head as its fields arrive, besides the
// Request itself, and the answers both give before a handler may run.
#ifndef PETREL_HTTP_RECEIVED_HEAD_H_
#define PETREL_HTTP_RECEIVED_HEAD_H_

#include <cstddef>
#include <cstdint>
#include <optional>

#include "absl/strings/string_view.h"
#include "petrel/http/request.h"
#include "petrel/http/response.h"

namespace petrel::http_internal {

struct ReceivedHead {
  bool method_valid = false;  // :method arrived and is a token (the Request holds it)
  // RFC 9113 §6.5.2 / RFC 9114 §4.2.2 size of the field section so far: names + values + 32
  // per field. Past the engine's limit the fields are dropped and the request gets 431.
  size_t field_bytes = 0;
  bool too_large = false;
  std::optional<uint64_t> content_length;  // the first content-length field, if a number

  void Reset() { *this = ReceivedHead(); }

  // Puts a :method value into `req` (GET without parsing, and without an assignment on a
  // recycled Request, which Reset leaves at GET); a value that is not a token leaves
  // method_valid false, for a 400.
  void TakeMethod(absl::string_view value, Request& req);
  // Keeps the value of the first content-length field (the libraries checked it is a number and
  // check it against the DATA received).
  void TakeContentLength(absl::string_view value);
};

// Rejects (Response::Reject), with the body discarded, a request no handler may see: 400 for a
// method that is not a token, 431 for a field section past the limit; true then (the dispatcher
// still runs and answers with the error page). Otherwise sets the body's limit
// (`max_request_body`; the router answers a Content-Length over it, or over its route's, with
// 413), its expected length and the request's head size, and returns false.
bool RejectUnservableHead(const ReceivedHead& head, uint64_t max_request_body, Request& req,
                          Response& res);

}  // namespace petrel::http_internal

#endif  // PETREL_HTTP_RECEIVED_HEAD_H_
