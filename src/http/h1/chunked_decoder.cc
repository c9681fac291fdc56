#include "http/h1/chunked_decoder.h"

#include <algorithm>
#include <cassert>

#include "http/ascii.h"
#include "http/h1/field_line.h"

namespace petrel::h1 {
namespace {

// 16 hex digits fill a uint64_t exactly, so capping the digit count is the overflow check.
constexpr size_t kMaxSizeDigits = 16;

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

bool IsForbiddenTrailer(absl::string_view name) {
  // Framing, routing, connection management, authentication and content interpretation: a
  // handler reading trailers must never be able to mistake one of these for the real header.
  static constexpr absl::string_view kForbidden[] = {
      "content-length",
      "transfer-encoding",
      "host",
      "connection",
      "keep-alive",
      "proxy-connection",
      "te",
      "trailer",
      "upgrade",
      "expect",
      "authorization",
      "proxy-authorization",
      "cookie",
      "set-cookie",
      "content-type",
      "content-encoding",
      "content-range",
      "range",
      "cache-control",
      "max-forwards",
  };
  for (absl::string_view f : kForbidden) {
    if (http_internal::EqualsIgnoreCase(name, f)) return true;
  }
  return false;
}

ChunkedDecoder::Result ChunkedDecoder::Fail(int status, const char* reason, size_t consumed) {
  state_ = State::kError;
  error_status_ = status;
  error_reason_ = reason;
  return Result{Status::kError, consumed, {}};
}

ChunkedDecoder::Result ChunkedDecoder::Decode(absl::string_view input) {
  if (state_ == State::kDone) return Result{Status::kDone, 0, {}};
  if (state_ == State::kError) return Result{Status::kError, 0, {}};
  size_t i = 0;
  const size_t n = input.size();
  while (i < n) {
    switch (state_) {
      case State::kSize:
      case State::kExtension:
      case State::kSizeLf:
        if (!SizeLineByte(input[i++])) return Fail(pending_status_, pending_error_, i);
        break;
      case State::kData: {
        const size_t take = static_cast<size_t>(std::min<uint64_t>(chunk_remaining_, n - i));
        const absl::string_view data = input.substr(i, take);
        chunk_remaining_ -= take;
        body_bytes_ += take;
        i += take;
        if (chunk_remaining_ == 0) state_ = State::kDataCr;
        return Result{Status::kData, i, data};
      }
      case State::kDataCr:
        if (input[i++] != '\r') return Fail(400, "missing CRLF after chunk data", i);
        state_ = State::kDataLf;
        break;
      case State::kDataLf:
        if (input[i++] != '\n') return Fail(400, "missing LF after chunk data", i);
        state_ = State::kSize;
        break;
      case State::kTrailers:
        return DecodeTrailers(input, i);
      case State::kDone:
      case State::kError:
        assert(false);
        return Result{};
    }
  }
  return Result{Status::kNeedMore, i, {}};
}

bool ChunkedDecoder::SizeLineByte(char c) {
  auto fail = [this](int status, const char* reason) {
    pending_status_ = status;
    pending_error_ = reason;
    return false;
  };
  if (++size_line_bytes_ > limits_.max_size_line) return fail(400, "chunk size line too long");
  switch (state_) {
    case State::kSize: {
      const int hex = HexValue(c);
      if (hex >= 0) {
        if (++size_digits_ > kMaxSizeDigits) return fail(400, "chunk size over 16 hex digits");
        chunk_size_ = (chunk_size_ << 4) | static_cast<uint64_t>(hex);
        return true;
      }
      if (size_digits_ == 0) return fail(400, "missing chunk size");
      state_ = State::kExtension;
      [[fallthrough]];
    }
    case State::kExtension: {
      if (c == '\r') {
        // RFC 9112 §7.1.1: BWS is allowed only before ';'.
        if (space_after_size_ && !in_extension_) return fail(400, "whitespace after chunk size");
        state_ = State::kSizeLf;
        return true;
      }
      if (c == '\n') return fail(400, "bare LF in chunk size line");
      if (!in_extension_) {
        if (c == ';') {
          in_extension_ = true;
        } else if (http_internal::IsOws(c)) {
          space_after_size_ = true;
        } else {
          return fail(400, "invalid chunk size");
        }
        return true;
      }
      // Extensions are ignored (none is defined we would act on); only CTLs are refused, since
      // they have no place in chunk-ext and a CR here is a line-ending ambiguity.
      const auto u = static_cast<unsigned char>(c);
      if ((u < 0x20 && c != '\t') || u == 0x7f) {
        return fail(400, "invalid character in chunk extension");
      }
      return true;
    }
    case State::kSizeLf: {
      if (c != '\n') return fail(400, "bare CR in chunk size line");
      if (chunk_size_ > limits_.max_body - std::min(body_bytes_, limits_.max_body)) {
        return fail(413, "chunked body too large");
      }
      state_ = chunk_size_ == 0 ? State::kTrailers : State::kData;
      chunk_remaining_ = chunk_size_;
      chunk_size_ = 0;
      size_digits_ = 0;
      size_line_bytes_ = 0;
      in_extension_ = false;
      space_after_size_ = false;
      return true;
    }
    default:
      assert(false);
      return false;
  }
}

ChunkedDecoder::Result ChunkedDecoder::DecodeTrailers(absl::string_view input, size_t consumed) {
  // A caller that passes fewer bytes than it did not consume breaks the contract; rescan rather
  // than read past the input.
  if (trailer_scan_ > input.size() - consumed) trailer_scan_ = 0;
  while (true) {
    const size_t line_start = consumed;
    size_t pos = 0;
    const LineScan scan = ScanLine(input, line_start + trailer_scan_, &pos);
    // The limit first: a bad byte beyond it gets the answer it would have got had the bytes
    // stopped just before it, however they arrive.
    if (scan != LineScan::kComplete &&
        trailer_bytes_ + (pos - line_start) > limits_.max_trailer_section) {
      return Fail(431, "trailer section too large", consumed);
    }
    switch (scan) {
      case LineScan::kBareCr:
        return Fail(400, "bare CR in trailers", consumed);
      case LineScan::kBareLf:
        return Fail(400, "bare LF in trailers", consumed);
      case LineScan::kIncomplete:
        // The unfinished line stays unconsumed; remember how far it was scanned.
        trailer_scan_ = pos - line_start;
        return Result{Status::kNeedMore, consumed, {}};
      case LineScan::kComplete:
        break;
    }
    const absl::string_view line = input.substr(line_start, pos - line_start);
    trailer_scan_ = 0;
    trailer_bytes_ += line.size() + 2;
    consumed = pos + 2;
    if (trailer_bytes_ > limits_.max_trailer_section) {
      return Fail(431, "trailer section too large", consumed);
    }
    if (line.empty()) {
      state_ = State::kDone;
      return Result{Status::kDone, consumed, {}};
    }
    if (++trailer_lines_ > limits_.max_trailer_fields) {
      return Fail(431, "too many trailer fields", consumed);
    }
    FieldLine f;
    if (const char* reason = ParseFieldLine(line, &f)) return Fail(400, reason, consumed);
    if (IsForbiddenTrailer(f.name)) {
      ++dropped_trailers_;
    } else {
      trailers_.Add(f.name, f.value);
    }
  }
}

}  // namespace petrel::h1
