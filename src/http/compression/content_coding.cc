#include "http/compression/content_coding.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace petrel::http_internal {
namespace {

constexpr int kUnset = -1;

// RFC 9110 §12.4.2: qvalue = ( "0" [ "." 0*3DIGIT ] ) / ( "1" [ "." 0*3("0") ] ), in
// thousandths; -1 if malformed.
int ParseQvalue(absl::string_view q) {
  if (q.empty() || q.size() > 5 || (q[0] != '0' && q[0] != '1')) return -1;
  int value = (q[0] - '0') * 1000;
  if (q.size() == 1) return value;
  if (q[1] != '.') return -1;
  int scale = 100;
  for (char c : q.substr(2)) {
    if (!absl::ascii_isdigit(c)) return -1;
    value += (c - '0') * scale;
    scale /= 10;
  }
  return value <= 1000 ? value : -1;
}

}  // namespace

absl::string_view ContentCodingName(ContentCoding coding) {
  switch (coding) {
    case ContentCoding::kBrotli:
      return "br";
    case ContentCoding::kGzip:
      return "gzip";
    case ContentCoding::kIdentity:
      break;
  }
  return {};
}

absl::string_view ContentCodingSuffix(ContentCoding coding) {
  switch (coding) {
    case ContentCoding::kBrotli:
      return ".br";
    case ContentCoding::kGzip:
      return ".gz";
    case ContentCoding::kIdentity:
      break;
  }
  return {};
}

uint8_t OfferBit(ContentCoding coding) {
  switch (coding) {
    case ContentCoding::kBrotli:
      return kOfferBrotli;
    case ContentCoding::kGzip:
      return kOfferGzip;
    case ContentCoding::kIdentity:
      break;
  }
  return 0;
}

ContentCoding ChooseContentCoding(absl::string_view accept_encoding, uint8_t offered) {
  int brotli = kUnset;
  int gzip = kUnset;
  int any = kUnset;
  for (absl::string_view element : absl::StrSplit(accept_encoding, ',')) {
    absl::string_view coding = element;
    absl::string_view params;
    if (const size_t semi = element.find(';'); semi != absl::string_view::npos) {
      coding = element.substr(0, semi);
      params = element.substr(semi + 1);
    }
    coding = absl::StripAsciiWhitespace(coding);
    if (coding.empty()) continue;
    int q = 1000;
    for (absl::string_view param : absl::StrSplit(params, ';', absl::SkipWhitespace())) {
      param = absl::StripAsciiWhitespace(param);
      if (param.size() >= 2 && (param[0] == 'q' || param[0] == 'Q') && param[1] == '=') {
        q = ParseQvalue(absl::StripAsciiWhitespace(param.substr(2)));
      }
    }
    if (q < 0) continue;
    // A coding named twice keeps its highest qvalue.
    int* slot = nullptr;
    if (absl::EqualsIgnoreCase(coding, "br")) {
      slot = &brotli;
    } else if (absl::EqualsIgnoreCase(coding, "gzip") || absl::EqualsIgnoreCase(coding, "x-gzip")) {
      slot = &gzip;
    } else if (coding == "*") {
      slot = &any;
    }
    if (slot != nullptr && q > *slot) *slot = q;
  }
  if (brotli == kUnset) brotli = any;
  if (gzip == kUnset) gzip = any;
  if ((offered & kOfferBrotli) == 0) brotli = 0;
  if ((offered & kOfferGzip) == 0) gzip = 0;
  if (brotli <= 0 && gzip <= 0) return ContentCoding::kIdentity;
  return brotli >= gzip ? ContentCoding::kBrotli : ContentCoding::kGzip;
}

ContentCoding ChooseContentCoding(const HeaderMap& request_fields, uint8_t offered) {
  // Usually one field line, read in place.
  const auto values = request_fields.GetAll("accept-encoding");
  if (values.empty()) return ContentCoding::kIdentity;
  if (values.size() == 1) return ChooseContentCoding(values[0], offered);
  return ChooseContentCoding(absl::StrJoin(values, ","), offered);
}

}  // namespace petrel::http_internal
