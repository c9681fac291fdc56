// Internal: how an h1 request body is delimited, and the counter for a Content-Length body.
#ifndef PETREL_HTTP_H1_BODY_FRAMING_H_
#define PETREL_HTTP_H1_BODY_FRAMING_H_

#include <algorithm>
#include <cstdint>

#include "absl/strings/string_view.h"

namespace petrel::h1 {

// RFC 9112 §6.3 for requests: chunked if Transfer-Encoding ends in chunked, else Content-Length,
// else no body. A request body is never delimited by connection close.
struct BodyFraming {
  enum class Kind : uint8_t { kNone, kContentLength, kChunked };

  Kind kind = Kind::kNone;
  uint64_t content_length = 0;  // Only meaningful for kContentLength (may be 0).

  friend bool operator==(const BodyFraming&, const BodyFraming&) = default;
};

// Counts down a Content-Length body. Zero-copy: Take returns the body prefix of the input; the
// caller delivers it and consumes exactly that many bytes from its buffer.
class FixedLengthBody {
 public:
  explicit FixedLengthBody(uint64_t length) : remaining_(length) {}

  // The part of `input` (the caller's unconsumed bytes, starting at the next body byte) that
  // belongs to the body; bytes past it are the next request (pipelining).
  absl::string_view Take(absl::string_view input) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(remaining_, input.size()));
    remaining_ -= n;
    return input.substr(0, n);
  }

  uint64_t remaining() const { return remaining_; }
  bool done() const { return remaining_ == 0; }

 private:
  uint64_t remaining_;
};

}  // namespace petrel::h1

#endif  // PETREL_HTTP_H1_BODY_FRAMING_H_
