#include "http/received_head.h"

#include <utility>

#include "absl/strings/numbers.h"

namespace petrel::http_internal {

void ReceivedHead::TakeMethod(absl::string_view value, Request& req) {
  if (value.size() == 3 && value[0] == 'G' && value[1] == 'E' && value[2] == 'T') {
    if (req.method().kind() != MethodKind::kGet) req.set_method(Method::kGet);
    method_valid = true;
  } else if (std::optional<Method> method = Method::Parse(value)) {
    req.set_method(*std::move(method));
    method_valid = true;
  }
}

void ReceivedHead::TakeContentLength(absl::string_view value) {
  if (content_length.has_value()) return;
  uint64_t length = 0;
  if (absl::SimpleAtoi(value, &length)) content_length = length;
}

bool RejectUnservableHead(const ReceivedHead& head, uint64_t max_request_body, Request& req,
                          Response& res) {
  if (!head.method_valid) {
    req.body().Discard();
    res.Reject(400, "the method is not a token");
    return true;
  }
  if (head.too_large) {
    req.body().Discard();
    res.Reject(431, "request header fields too large");
    return true;
  }
  req.body().set_limit(max_request_body);
  // Checked against the limit once the request is routed (a route may allow more).
  if (head.content_length.has_value()) req.body().set_expected_length(*head.content_length);
  req.set_head_bytes(head.field_bytes);
  return false;
}

}  // namespace petrel::http_internal
