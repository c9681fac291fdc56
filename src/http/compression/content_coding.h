// Internal: content codings (RFC 9110 §8.4.1) and choosing one from a request's Accept-Encoding
// (§12.5.3). Shared by the compression middleware and StaticFiles' precompressed siblings.
#ifndef PETREL_HTTP_COMPRESSION_CONTENT_CODING_H_
#define PETREL_HTTP_COMPRESSION_CONTENT_CODING_H_

#include <cstdint>

#include "absl/strings/string_view.h"
#include "petrel/http/header_map.h"

namespace petrel::http_internal {

enum class ContentCoding : uint8_t { kIdentity, kBrotli, kGzip };

// Bits of the codings a server offers.
inline constexpr uint8_t kOfferBrotli = 1;
inline constexpr uint8_t kOfferGzip = 2;
inline constexpr uint8_t kOfferAll = kOfferBrotli | kOfferGzip;

// The bit of `coding` (0 for identity).
uint8_t OfferBit(ContentCoding coding);

// The Content-Encoding value ("br", "gzip"; empty for identity).
absl::string_view ContentCodingName(ContentCoding coding);
// The file name suffix of a precompressed sibling (".br", ".gz"; empty for identity).
absl::string_view ContentCodingSuffix(ContentCoding coding);

// The offered coding the Accept-Encoding field values (joined by commas) accept with the highest
// qvalue; on a tie brotli before gzip (smaller). Identity when nothing offered is acceptable, or
// when the request has no Accept-Encoding at all (RFC 9110 §12.5.3: then any coding would do,
// but clients that do not send the field are the ones least likely to decode). "x-gzip" is gzip;
// "*" stands for every coding not named; q=0 refuses; an element with a malformed qvalue is
// ignored.
ContentCoding ChooseContentCoding(absl::string_view accept_encoding, uint8_t offered);
// The same from a request's fields (several Accept-Encoding lines are one list).
ContentCoding ChooseContentCoding(const HeaderMap& request_fields, uint8_t offered);

}  // namespace petrel::http_internal

#endif  // PETREL_HTTP_COMPRESSION_CONTENT_CODING_H_
