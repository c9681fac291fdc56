// Internal: the incremental, zero-copy decoder of a chunked request body (RFC 9112 §7.1,
// DESIGN §7).
#ifndef PETREL_HTTP_H1_CHUNKED_DECODER_H_
#define PETREL_HTTP_H1_CHUNKED_DECODER_H_

#include <cstddef>
#include <cstdint>

#include "absl/strings/string_view.h"
#include "petrel/http/header_map.h"

namespace petrel::h1 {

struct ChunkedLimits {
  // Bytes of one chunk-size line (size, extensions, CRLF). Over it → 400. Extensions are
  // ignored, so this only bounds work and buffering.
  size_t max_size_line = 1024;
  // Bytes of the trailer section (every trailer line with its CRLF, plus the final empty line).
  // Over it → 431, the status for "fields too large" that the request head uses too.
  size_t max_trailer_section = 8 * 1024;
  // Trailer lines. The (max_trailer_fields + 1)-th → 431.
  size_t max_trailer_fields = 100;
  // Sum of all chunk sizes. A chunk that would exceed it → 413, reported as soon as its size
  // line ends (before any of its data is delivered).
  uint64_t max_body = uint64_t{10} * 1024 * 1024;
};

// Decodes one chunked body. The caller passes its unconsumed input (starting at the first byte
// the decoder has not consumed yet), consumes `consumed` bytes afterwards, and calls again.
//
//   kData:     `data` is the next piece of body, a view into `input` inside the consumed
//              prefix: deliver it before consuming. Call again for more.
//   kNeedMore: everything useful was consumed; call again when more bytes have arrived.
//   kDone:     the body and its trailers are complete; bytes after `consumed` belong to the next
//              request. trailers() holds the trailer fields.
//   kError:    error_status() (400, 413 or 431) and error_reason(); the caller answers and
//              closes. Sticky.
//
// Framing bytes are consumed as they are read (a size line split across reads costs nothing to
// resume), except an unfinished trailer line, which stays unconsumed in the caller's buffer; the
// decoder remembers how much of it it has scanned, so it is never rescanned.
//
// Trailer fields are validated exactly like header fields. Fields that would change framing,
// routing, authentication or content interpretation if merged into the header section
// (Content-Length, Transfer-Encoding, Host, Connection, Authorization, Content-Type, ... see
// IsForbiddenTrailer) are dropped, not rejected: RFC 9110 §6.5.1 lets a recipient discard them,
// and a 400 would only break clients that send harmless metadata there. They still count
// against the limits. dropped_trailers() tells how many.
//
// Not thread-safe; one decoder per body, on the connection's loop thread.
class ChunkedDecoder {
 public:
  enum class Status { kNeedMore, kData, kDone, kError };
  struct Result {
    Status status = Status::kNeedMore;
    size_t consumed = 0;
    absl::string_view data;  // Non-empty only for kData.
  };

  explicit ChunkedDecoder(const ChunkedLimits& limits = ChunkedLimits()) : limits_(limits) {}
  // A new body limit (a route's), from the next chunk size on.
  void set_max_body(uint64_t max_body) { limits_.max_body = max_body; }

  Result Decode(absl::string_view input);

  int error_status() const { return error_status_; }
  absl::string_view error_reason() const { return error_reason_; }
  // Valid after kDone; the map owns its bytes.
  const HeaderMap& trailers() const { return trailers_; }
  HeaderMap& mutable_trailers() { return trailers_; }
  size_t dropped_trailers() const { return dropped_trailers_; }
  // Body bytes delivered so far.
  uint64_t body_bytes() const { return body_bytes_; }

 private:
  enum class State : uint8_t {
    kSize,       // Hex digits of the chunk size.
    kExtension,  // After the digits, until CR.
    kSizeLf,     // The LF after the size line's CR.
    kData,       // chunk_remaining_ bytes of data.
    kDataCr,     // CRLF after the data.
    kDataLf,
    kTrailers,  // Trailer field lines until an empty line.
    kDone,
    kError,
  };

  Result Fail(int status, const char* reason, size_t consumed);
  // Consumes one byte of a size line; false if it failed.
  bool SizeLineByte(char c);
  Result DecodeTrailers(absl::string_view input, size_t consumed);

  ChunkedLimits limits_;
  State state_ = State::kSize;
  uint64_t chunk_size_ = 0;
  uint64_t chunk_remaining_ = 0;
  uint64_t body_bytes_ = 0;
  size_t size_digits_ = 0;
  size_t size_line_bytes_ = 0;
  bool in_extension_ = false;      // A ';' was seen on this size line.
  bool space_after_size_ = false;  // BWS after the digits, which must precede a ';'.
  size_t trailer_bytes_ = 0;       // Complete trailer lines so far, CRLFs included.
  size_t trailer_scan_ = 0;        // Scanned bytes of the unfinished trailer line.
  size_t dropped_trailers_ = 0;
  size_t trailer_lines_ = 0;
  HeaderMap trailers_;
  int error_status_ = 0;
  absl::string_view error_reason_;
  const char* pending_error_ = nullptr;  // Set by SizeLineByte.
  int pending_status_ = 400;
};

// Fields a sender must not put in trailers, or that a server must not let a trailer override
// (RFC 9110 §6.5.1). Case-insensitive.
bool IsForbiddenTrailer(absl::string_view name);

}  // namespace petrel::h1

#endif  // PETREL_HTTP_H1_CHUNKED_DECODER_H_
