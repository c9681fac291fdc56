// Internal: the incremental, zero-copy HTTP/1.1 request-head parser (RFC 9112 §2–§6, DESIGN §7).
#ifndef PETREL_HTTP_H1_REQUEST_PARSER_H_
#define PETREL_HTTP_H1_REQUEST_PARSER_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "absl/strings/string_view.h"
#include "http/h1/body_framing.h"
#include "petrel/http/header_map.h"
#include "petrel/http/method.h"
#include "petrel/http/request.h"

namespace petrel::h1 {

// DESIGN §7 defaults. Every limit is checked while bytes arrive, so a peer can never make the
// caller buffer more than these bounds before it gets its error.
struct RequestLimits {
  // Bytes of the request line, CRLF excluded. Over it → 414 (also when the method is what is
  // long: the status names the line, and no valid method comes close).
  size_t max_request_line = 8 * 1024;
  // Bytes of the header section: every field line with its CRLF plus the final empty line.
  // Over it → 431.
  size_t max_header_section = 64 * 1024;
  // Field lines in the header section. The (max_fields + 1)-th → 431.
  size_t max_fields = 100;
  // RFC 9112 §2.2 lets a server ignore "at least one" empty line before the request line (some
  // clients send a stray CRLF after a body). More than this many → 400, so a peer cannot keep
  // the connection busy with empty lines.
  size_t max_leading_empty_lines = 8;
  // A Content-Length above this → 413. Routes may impose a lower limit later; chunked bodies are
  // bounded by the ChunkedDecoder's own limit.
  uint64_t max_content_length = uint64_t{10} * 1024 * 1024;
};

// The incremental parser. The caller owns the input: it appends received bytes to its buffer and
// calls Parse() with ALL the bytes of the current message received so far (buffered[0] is the
// first byte after the previous message). The parser remembers how far it has scanned and
// tokenized and looks only at new bytes, so a head arriving byte by byte costs O(head) in total.
//
// Contract:
//  - Between calls, the caller may only append: `buffered` must begin with the same bytes as in
//    the previous call (it may live at another address — the parser keeps offsets, not pointers,
//    while the head is incomplete).
//  - After kComplete, head_bytes() bytes at the front of the buffer are the head; the body (if
//    any) starts right after. The views returned by target(), method_token(), field() and host()
//    point into the `buffered` of the completing Parse call and stay valid until Reset() or until
//    the caller moves or frees those bytes. If it moves them (e.g. ByteBuffer compaction when
//    appending body bytes), it calls Rebase() with the head's new location to refresh the views.
//    Copy what must outlive the head (AppendFieldsTo, Request setters) before consuming it.
//  - kComplete and kError are sticky: further Parse calls return the same result without
//    scanning, until Reset() prepares the parser for the next message.
// Not thread-safe; one parser per connection, on its loop thread.
class RequestParser {
 public:
  enum class Result { kNeedMore, kComplete, kError };

  explicit RequestParser(const RequestLimits& limits = RequestLimits());

  Result Parse(absl::string_view buffered);

  // For the next message on the connection. Keeps allocated capacity.
  void Reset();

  // Re-points the views at `buffered`, which must hold the same head bytes at its front (it may
  // be longer). Only valid after kComplete.
  void Rebase(absl::string_view buffered);

  // ---- After kError ----
  // 400, 413, 414, 431, 501 or 505. The caller answers with it and closes (DESIGN §7). 500 only
  // when the caller broke the contract (passed fewer bytes than before).
  int error_status() const { return error_status_; }
  // A static, short description for the log (never sent to the peer verbatim).
  absl::string_view error_reason() const { return error_reason_; }

  // ---- After kComplete ----
  // Bytes from buffered[0] through the empty line ending the head (leading empty lines included).
  size_t head_bytes() const { return head_bytes_; }
  const Method& method() const { return method_; }
  absl::string_view method_token() const { return View(method_span_); }
  absl::string_view target() const { return View(target_span_); }
  HttpVersion version() const { return version_; }
  // Field lines in received order, names as spelled, values trimmed. Content-Length, Host,
  // Transfer-Encoding etc. are included: the engine decides what to hide from handlers.
  size_t field_count() const { return fields_.size(); }
  HeaderField field(size_t i) const { return {View(fields_[i].name), View(fields_[i].value)}; }
  // Adds every field to `map` (copying the bytes, so the map outlives the head).
  void AppendFieldsTo(HeaderMap& map) const;
  // The Host value; "" when absent (only possible on HTTP/1.0).
  absl::string_view host() const { return host_span_ ? View(*host_span_) : absl::string_view(); }
  const BodyFraming& framing() const { return framing_; }
  // RFC 9112 §9.3: 1.1 persists unless `Connection: close`; 1.0 only with
  // `Connection: keep-alive` (and no close).
  bool keep_alive() const { return keep_alive_; }
  // `Expect: 100-continue` on HTTP/1.1 (RFC 9110 §10.1.1; 1.0 peers get no 100). The engine
  // sends 100 only when the handler first reads the body, and only if framing() has a body.
  bool expect_continue() const { return expect_continue_; }

 private:
  // kStart covers leading empty lines and an unfinished request line; a finished request line
  // passes through kRequestLine to kFields within one call.
  enum class State : uint8_t { kStart, kRequestLine, kFields, kComplete, kError };

  // A range of the message, as offsets from buffered[0].
  struct Span {
    uint32_t offset = 0;
    uint32_t size = 0;
  };
  struct FieldSpans {
    Span name;
    Span value;
  };

  absl::string_view View(Span s) const { return absl::string_view(base_ + s.offset, s.size); }
  static Span SpanOf(absl::string_view part, absl::string_view buffered) {
    return Span{static_cast<uint32_t>(part.data() - buffered.data()),
                static_cast<uint32_t>(part.size())};
  }

  Result Fail(int status, const char* reason);
  // Each returns nullopt to continue, or the result to return from Parse.
  std::optional<Result> OnRequestLine(absl::string_view buffered, size_t end);
  std::optional<Result> OnFieldLine(absl::string_view buffered, size_t end);
  std::optional<Result> OnHeadEnd();
  std::optional<Result> OnContentLength(absl::string_view value);
  std::optional<Result> OnTransferEncoding(absl::string_view value);
  void OnConnection(absl::string_view value);

  // Reset() returns every member below limits_ to its initial value, one line each: a new
  // member needs its line there.
  RequestLimits limits_;
  State state_ = State::kStart;
  size_t scan_ = 0;        // Next byte to look at.
  size_t line_start_ = 0;  // Start of the line being scanned.
  size_t fields_start_ = 0;
  size_t empty_lines_ = 0;
  // The current line holds a control byte or DEL (ScanLine says so while it scans it).
  bool line_control_ = false;
  const char* base_ = nullptr;  // buffered.data() of the completing call (or Rebase).

  // The head, as offsets.
  Span method_span_;
  Span target_span_;
  Method method_;  // GET until the request line says otherwise
  HttpVersion version_ = HttpVersion::k11;
  std::vector<FieldSpans> fields_;
  std::optional<Span> host_span_;
  size_t head_bytes_ = 0;

  // Framing facts gathered field by field, judged at the end of the head.
  std::optional<Span> content_length_text_;
  uint64_t content_length_ = 0;
  bool has_transfer_encoding_ = false;
  bool chunked_ = false;         // `chunked` seen (it must be the last coding).
  bool unknown_coding_ = false;  // A coding other than chunked (→ 501).
  bool connection_close_ = false;
  bool connection_keep_alive_ = false;

  BodyFraming framing_;
  bool keep_alive_ = false;
  bool expect_continue_ = false;

  int error_status_ = 0;
  absl::string_view error_reason_;
};

}  // namespace petrel::h1

#endif  // PETREL_HTTP_H1_REQUEST_PARSER_H_
