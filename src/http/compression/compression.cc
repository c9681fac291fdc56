#include "petrel/http/compression.h"

#include <memory>
#include <string>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "http/compression/compressing_producer.h"
#include "http/compression/content_coding.h"
#include "http/compression/encoder.h"
#include "http/field_list.h"
#include "petrel/common/log.h"
#include "petrel/http/status.h"

namespace petrel {
namespace {

using http_internal::ContentCoding;

using http_internal::FieldHasToken;

struct Compressor {
  CompressionOptions options;
  http_internal::EncoderSettings settings;
  uint8_t offered = 0;

  bool Compressible(absl::string_view content_type) const {
    absl::string_view type =
        absl::StripAsciiWhitespace(content_type.substr(0, content_type.find(';')));
    if (type.empty()) return false;
    for (const std::string& listed : options.content_types) {
      if (!listed.empty() && listed.back() == '/') {
        if (absl::StartsWithIgnoreCase(type, listed)) return true;
      } else if (absl::EqualsIgnoreCase(type, listed)) {
        return true;
      }
    }
    return absl::EndsWithIgnoreCase(type, "+json") || absl::EndsWithIgnoreCase(type, "+xml");
  }

  // The OnCommit hook: `coding` is what the request accepts (identity: nothing offered).
  void OnCommit(ContentCoding coding, Response& res) const {
    const int status = res.status();
    HeaderMap& fields = res.headers();
    if (status == HttpStatus::kNotModified) {
      const std::optional<absl::string_view> type = fields.Get("content-type");
      if (type.has_value() && !Compressible(*type)) return;
      AddVary(fields);
      if (coding != ContentCoding::kIdentity) WeakenEtag(fields);
      return;
    }
    if (status == HttpStatus::kPartialContent || status == HttpStatus::kNoContent ||
        fields.Contains("content-range")) {
      return;
    }
    // The length first: most small answers stop here, before any field is looked at.
    const std::optional<uint64_t> length = res.body().length();
    if (length.has_value() && *length < options.min_length) return;
    const std::optional<absl::string_view> type = fields.Get("content-type");
    if (!type.has_value() || !Compressible(*type)) return;
    // From here the representation depends on Accept-Encoding.
    AddVary(fields);
    if (coding == ContentCoding::kIdentity) return;
    if (const auto encoding = fields.Get("content-encoding");
        encoding.has_value() && !absl::EqualsIgnoreCase(*encoding, "identity")) {
      return;
    }
    if (FieldHasToken(fields, "cache-control", "no-transform")) return;

    std::unique_ptr<http_internal::Encoder> encoder =
        http_internal::Encoder::Make(coding, settings, length.value_or(0));
    if (encoder == nullptr) return;  // out of memory: identity it is
    ResponseBody& body = res.body();
    if (const std::string* bytes = body.buffer(); bytes != nullptr) {
      std::string compressed;
      if (absl::Status s = http_internal::EncodeAll(*encoder, *bytes, &compressed); !s.ok()) {
        PETREL_LOG(kWarning, "compression: %s; sent as it is", s.ToString());
        return;
      }
      body = ResponseBody(std::move(compressed));
    } else {
      body = ResponseBody(std::make_unique<http_internal::CompressingProducer>(
          body.ReleaseAsProducer(), std::move(encoder)));
    }
    fields.Set("content-encoding", http_internal::ContentCodingName(coding));
    fields.Remove("content-length");
    fields.Remove("accept-ranges");
    WeakenEtag(fields);
  }

  static void AddVary(HeaderMap& fields) {
    if (FieldHasToken(fields, "vary", "accept-encoding") || FieldHasToken(fields, "vary", "*")) {
      return;
    }
    fields.Add("vary", "Accept-Encoding");
  }

  // RFC 9110 §8.8.3: a strong tag promises the same bytes, which a compressed body is not.
  static void WeakenEtag(HeaderMap& fields) {
    const std::optional<absl::string_view> etag = fields.Get("etag");
    if (!etag.has_value() || etag->empty() || (*etag)[0] != '"') return;
    fields.Set("etag", absl::StrCat("W/", *etag));
  }
};

// The coding the request accepts among `offered` (identity if none, or if it asks for no
// transformation). One pass over the request's fields for both Cache-Control and
// Accept-Encoding; several Accept-Encoding lines are joined by ChooseContentCoding.
ContentCoding RequestedCoding(const HeaderMap& fields, uint8_t offered) {
  absl::string_view accept;
  int accept_lines = 0;
  for (const HeaderField f : fields) {
    if (f.name.size() == 15 && http_internal::EqualsIgnoreCase(f.name, "accept-encoding")) {
      accept = f.value;
      ++accept_lines;
    } else if (f.name.size() == 13 && http_internal::EqualsIgnoreCase(f.name, "cache-control") &&
               http_internal::ListHasToken(f.value, "no-transform")) {
      return ContentCoding::kIdentity;
    }
  }
  if (accept_lines == 0) return ContentCoding::kIdentity;
  if (accept_lines == 1) return http_internal::ChooseContentCoding(accept, offered);
  return http_internal::ChooseContentCoding(fields, offered);
}

}  // namespace

Middleware CompressionMiddleware(CompressionOptions options) {
  auto compressor = std::make_unique<Compressor>();
  compressor->settings.gzip_level = options.gzip_level;
  compressor->settings.brotli_quality = options.brotli_quality;
  compressor->settings.brotli_window_bits = options.brotli_window_bits;
  if (options.brotli) compressor->offered |= http_internal::kOfferBrotli;
  if (options.gzip) compressor->offered |= http_internal::kOfferGzip;
  compressor->options = std::move(options);
  return [compressor = std::move(compressor)](Request& req, Response& res, Next next) {
    if (compressor->offered == 0) return next();
    // HEAD has no body to compress: its head is that of an identity GET, Vary included (the
    // hook adds it where a GET's representation would depend on Accept-Encoding).
    const ContentCoding coding = req.method().kind() == MethodKind::kHead
                                     ? ContentCoding::kIdentity
                                     : RequestedCoding(req.headers(), compressor->offered);
    res.OnCommit(
        [&compressor = *compressor, coding](Response& r) { compressor.OnCommit(coding, r); });
    next();
  };
}

}  // namespace petrel
