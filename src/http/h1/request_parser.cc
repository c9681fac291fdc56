#include "http/h1/request_parser.h"

#include <cassert>
#include <limits>

#include "http/ascii.h"
#include "http/h1/field_line.h"

namespace petrel::h1 {
namespace {

using http_internal::EqualsIgnoreCase;
using http_internal::IsOws;

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// RFC 9112 §3.2: the target is visible ASCII; no SP, no CTL, no obs-text (DESIGN §7 is stricter
// than RFC 3986 here on purpose: anything else is a client bug or an attack).
bool IsTargetByte(char c) {
  const auto u = static_cast<unsigned char>(c);
  return u >= 0x21 && u <= 0x7e;
}

// The first space in `s` at or after `from`, or npos. A plain loop: the request line's parts are
// short, and this runs on every request.
size_t FindSpace(absl::string_view s, size_t from) {
  for (size_t i = from; i < s.size(); ++i) {
    if (s[i] == ' ') return i;
  }
  return absl::string_view::npos;
}

// Calls f(element) for each non-empty, OWS-trimmed element of a comma-separated list (RFC 9110
// §5.6.1: recipients accept and ignore empty elements). Stops early when f returns false.
template <typename F>
void ForEachListElement(absl::string_view list, F f) {
  while (!list.empty()) {
    const size_t comma = list.find(',');
    absl::string_view element = list.substr(0, comma);
    list = comma == absl::string_view::npos ? absl::string_view() : list.substr(comma + 1);
    element = TrimFieldValue(element);
    if (!element.empty() && !f(element)) return;
  }
}

}  // namespace

RequestParser::RequestParser(const RequestLimits& limits) : limits_(limits) {
  // Spans are 32-bit offsets; a head is bounded by the limits, which must keep it well below.
  assert(limits_.max_request_line + limits_.max_header_section +
             2 * limits_.max_leading_empty_lines <
         std::numeric_limits<uint32_t>::max() / 2);
}

void RequestParser::Reset() {
  // Member by member rather than assigning a new parser: this runs once per request. Every
  // member declared in the header returns to its initial value; limits_ stays, fields_ keeps
  // its capacity.
  state_ = State::kStart;
  scan_ = 0;
  line_start_ = 0;
  fields_start_ = 0;
  empty_lines_ = 0;
  line_control_ = false;
  base_ = nullptr;
  method_span_ = Span();
  target_span_ = Span();
  if (method_.kind() != MethodKind::kGet) method_ = Method();
  version_ = HttpVersion::k11;
  fields_.clear();
  host_span_.reset();
  head_bytes_ = 0;
  content_length_text_.reset();
  content_length_ = 0;
  has_transfer_encoding_ = false;
  chunked_ = false;
  unknown_coding_ = false;
  connection_close_ = false;
  connection_keep_alive_ = false;
  framing_ = BodyFraming();
  keep_alive_ = false;
  expect_continue_ = false;
  error_status_ = 0;
  error_reason_ = absl::string_view();
}

void RequestParser::Rebase(absl::string_view buffered) {
  assert(state_ == State::kComplete && buffered.size() >= head_bytes_);
  base_ = buffered.data();
}

RequestParser::Result RequestParser::Fail(int status, const char* reason) {
  state_ = State::kError;
  error_status_ = status;
  error_reason_ = reason;
  return Result::kError;
}

RequestParser::Result RequestParser::Parse(absl::string_view buffered) {
  if (state_ == State::kComplete) return Result::kComplete;
  if (state_ == State::kError) return Result::kError;
  // The caller only appends. A shorter input is a caller bug; refuse it rather than read past it.
  if (buffered.size() < scan_) return Fail(500, "input shrank between Parse calls");

  while (true) {
    size_t pos = 0;
    const LineScan scan = ScanLine(buffered, scan_, &pos, &line_control_);
    if (scan != LineScan::kComplete) {
      // Bound what a peer can make us buffer before the line ends. Checked before a bad byte
      // is reported, so that a bad byte beyond the limit gets the same answer however the
      // bytes arrived (had they stopped just before it, the limit would have been the error).
      if (state_ != State::kFields) {
        if (pos - line_start_ > limits_.max_request_line) {
          return Fail(414, "request line too long");
        }
      } else if (pos - fields_start_ > limits_.max_header_section) {
        return Fail(431, "header section too large");
      }
    }
    switch (scan) {
      case LineScan::kBareCr:
        return Fail(400, "bare CR");
      case LineScan::kBareLf:
        return Fail(400, "bare LF");
      case LineScan::kIncomplete:
        scan_ = pos;
        return Result::kNeedMore;
      case LineScan::kComplete:
        break;
    }

    // A complete line: buffered[line_start_, pos) followed by CRLF.
    const size_t next = pos + 2;
    std::optional<Result> result;
    switch (state_) {
      case State::kStart:
        if (pos == line_start_) {
          if (++empty_lines_ > limits_.max_leading_empty_lines) {
            return Fail(400, "too many empty lines before the request line");
          }
          break;
        }
        state_ = State::kRequestLine;
        [[fallthrough]];
      case State::kRequestLine:
        result = OnRequestLine(buffered, pos);
        if (!result) {
          state_ = State::kFields;
          fields_start_ = next;
        }
        break;
      case State::kFields:
        if (next - fields_start_ > limits_.max_header_section) {
          return Fail(431, "header section too large");
        }
        if (pos == line_start_) {
          head_bytes_ = next;
          base_ = buffered.data();
          result = OnHeadEnd();
          if (!result) {
            state_ = State::kComplete;
            return Result::kComplete;
          }
        } else {
          result = OnFieldLine(buffered, pos);
        }
        break;
      case State::kComplete:
      case State::kError:
        assert(false);
        break;
    }
    if (result) return *result;
    line_start_ = scan_ = next;
    line_control_ = false;
  }
}

std::optional<RequestParser::Result> RequestParser::OnRequestLine(absl::string_view buffered,
                                                                  size_t end) {
  if (end - line_start_ > limits_.max_request_line) return Fail(414, "request line too long");
  const absl::string_view line = buffered.substr(line_start_, end - line_start_);

  // method SP request-target SP HTTP-version, single spaces (RFC 9112 §3).
  const size_t sp1 = FindSpace(line, 0);
  if (sp1 == absl::string_view::npos) return Fail(400, "malformed request line");
  const absl::string_view method = line.substr(0, sp1);
  // GET, by far the most common method, is what a new or reset parser holds already: no
  // optional<Method> to build and move.
  if (method != "GET") {
    std::optional<Method> parsed = Method::Parse(method);
    if (!parsed) return Fail(400, "method is not a token");
    method_ = std::move(*parsed);
  }
  method_span_ = SpanOf(method, buffered);

  // The target ends at the first byte that is not visible ASCII; a valid one ends at a space.
  const absl::string_view rest = line.substr(sp1 + 1);
  size_t sp2 = 0;
  while (sp2 < rest.size() && IsTargetByte(rest[sp2])) ++sp2;
  if (sp2 == rest.size() || rest[sp2] != ' ') {
    if (FindSpace(rest, sp2) == absl::string_view::npos) {
      return Fail(400, "malformed request line");
    }
    return Fail(400, "invalid request target");
  }
  if (sp2 == 0) return Fail(400, "invalid request target");
  const absl::string_view target = rest.substr(0, sp2);
  target_span_ = SpanOf(target, buffered);

  const absl::string_view version = rest.substr(sp2 + 1);
  if (version == "HTTP/1.1") {
    version_ = HttpVersion::k11;
  } else if (version == "HTTP/1.0") {
    version_ = HttpVersion::k10;
  } else if (version.size() == 8 && version.substr(0, 5) == "HTTP/" && IsDigit(version[5]) &&
             version[6] == '.' && IsDigit(version[7])) {
    // Well-formed but not ours (HTTP/0.9 written as 0.9, 1.2, 2.0 — e.g. an h2 preface).
    return Fail(505, "unsupported HTTP version");
  } else {
    return Fail(400, "malformed HTTP version");
  }
  return std::nullopt;
}

std::optional<RequestParser::Result> RequestParser::OnFieldLine(absl::string_view buffered,
                                                                size_t end) {
  if (fields_.size() >= limits_.max_fields) return Fail(431, "too many header fields");
  FieldLine f;
  if (const char* reason =
          ParseFieldLine(buffered.substr(line_start_, end - line_start_), &f, line_control_)) {
    return Fail(400, reason);
  }
  fields_.push_back(FieldSpans{SpanOf(f.name, buffered), SpanOf(f.value, buffered)});

  // The fields that decide framing and connection handling, dispatched on length first.
  const absl::string_view name = f.name;
  switch (name.size()) {
    case 4:
      if (EqualsIgnoreCase(name, "host")) {
        // RFC 9112 §3.2: more than one Host → 400, identical or not.
        if (host_span_) return Fail(400, "more than one Host");
        host_span_ = fields_.back().value;
      }
      break;
    case 6:
      if (EqualsIgnoreCase(name, "expect") && EqualsIgnoreCase(f.value, "100-continue")) {
        expect_continue_ = true;  // Confirmed against the version at the end of the head.
      }
      break;
    case 10:
      if (EqualsIgnoreCase(name, "connection")) OnConnection(f.value);
      break;
    case 14:
      if (EqualsIgnoreCase(name, "content-length")) {
        if (content_length_text_ &&
            buffered.substr(content_length_text_->offset, content_length_text_->size) != f.value) {
          return Fail(400, "conflicting Content-Length fields");
        }
        if (auto r = OnContentLength(f.value)) return r;
        content_length_text_ = fields_.back().value;
      }
      break;
    case 17:
      if (EqualsIgnoreCase(name, "transfer-encoding")) return OnTransferEncoding(f.value);
      break;
    default:
      break;
  }
  return std::nullopt;
}

std::optional<RequestParser::Result> RequestParser::OnContentLength(absl::string_view value) {
  // RFC 9110 §8.6: 1*DIGIT. No sign, no hex, no list (`5, 5` is rejected: DESIGN §7 merges only
  // identical duplicate fields, which OnFieldLine handles).
  if (value.empty()) return Fail(400, "empty Content-Length");
  uint64_t n = 0;
  for (char c : value) {
    if (!IsDigit(c)) return Fail(400, "invalid Content-Length");
    const uint64_t digit = static_cast<uint64_t>(c - '0');
    if (n > (std::numeric_limits<uint64_t>::max() - digit) / 10) {
      return Fail(400, "Content-Length overflow");
    }
    n = n * 10 + digit;
  }
  content_length_ = n;
  return std::nullopt;
}

std::optional<RequestParser::Result> RequestParser::OnTransferEncoding(absl::string_view value) {
  // The codings of all Transfer-Encoding fields form one list (RFC 9110 §5.3). RFC 9112 §6.3:
  // chunked must be the last coding and may be applied only once; anything else makes the
  // framing ambiguous between us and another hop (TE.TE smuggling), so it is a 400. Codings we
  // do not implement are judged at the end of the head (→ 501).
  has_transfer_encoding_ = true;
  const char* reason = nullptr;
  ForEachListElement(value, [&](absl::string_view element) {
    const size_t semicolon = element.find(';');
    const absl::string_view coding = TrimFieldValue(element.substr(0, semicolon));
    const bool is_chunked = EqualsIgnoreCase(coding, "chunked");
    if (chunked_) {
      reason = is_chunked ? "chunked applied more than once" : "chunked is not the last coding";
    } else if (!http_internal::IsToken(coding)) {
      reason = "invalid transfer coding";
    } else if (is_chunked) {
      if (semicolon != absl::string_view::npos) reason = "parameters on chunked";
      chunked_ = true;
    } else {
      unknown_coding_ = true;
    }
    return reason == nullptr;
  });
  if (reason) return Fail(400, reason);
  return std::nullopt;
}

void RequestParser::OnConnection(absl::string_view value) {
  ForEachListElement(value, [&](absl::string_view option) {
    if (EqualsIgnoreCase(option, "close")) connection_close_ = true;
    if (EqualsIgnoreCase(option, "keep-alive")) connection_keep_alive_ = true;
    return true;
  });
}

std::optional<RequestParser::Result> RequestParser::OnHeadEnd() {
  const bool http11 = version_ == HttpVersion::k11;
  if (http11 && !host_span_) return Fail(400, "missing Host");

  if (has_transfer_encoding_) {
    if (!http11) return Fail(400, "Transfer-Encoding on HTTP/1.0");
    // Both framings present is the classic CL.TE / TE.CL smuggling setup (RFC 9112 §6.3 lets a
    // server reject it; DESIGN §7 requires it).
    if (content_length_text_) return Fail(400, "Transfer-Encoding with Content-Length");
    if (unknown_coding_) return Fail(501, "unsupported transfer coding");
    if (!chunked_) return Fail(400, "empty Transfer-Encoding");
    framing_ = BodyFraming{BodyFraming::Kind::kChunked, 0};
  } else if (content_length_text_) {
    if (content_length_ > limits_.max_content_length) return Fail(413, "Content-Length too large");
    framing_ = BodyFraming{BodyFraming::Kind::kContentLength, content_length_};
  }

  keep_alive_ = !connection_close_ && (http11 || connection_keep_alive_);
  expect_continue_ = expect_continue_ && http11;
  return std::nullopt;
}

void RequestParser::AppendFieldsTo(HeaderMap& map) const {
  if (map.empty()) {
    size_t bytes = 0;
    for (const FieldSpans& f : fields_) bytes += f.name.size + f.value.size;
    map.Reserve(fields_.size(), bytes);
  }
  for (size_t i = 0; i < fields_.size(); ++i) {
    const HeaderField f = field(i);
    map.Add(f.name, f.value);
  }
}

}  // namespace petrel::h1
