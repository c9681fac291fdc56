// Internal: a streaming compressor for one response body — gzip (zlib's deflate with the gzip
// wrapper, RFC 1952) or brotli (RFC 7932) — behind one interface.
#ifndef PETREL_HTTP_COMPRESSION_ENCODER_H_
#define PETREL_HTTP_COMPRESSION_ENCODER_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "http/compression/content_coding.h"

namespace petrel::http_internal {

struct EncoderSettings {
  int gzip_level = 6;           // zlib 1..9
  int brotli_quality = 5;       // 0..11
  int brotli_window_bits = 18;  // 10..24
};

class Encoder {
 public:
  enum class Flush : uint8_t {
    kNone,    // the encoder may keep bytes back for a better ratio
    kSync,    // everything so far becomes decodable output (a stream that pauses)
    kFinish,  // the end of the body: the trailer follows
  };

  // An encoder for `coding` (not identity); null if the library could not make one (out of
  // memory). `size_hint`, the body's length when known (0: unknown), shrinks deflate's window
  // and state to what the body needs — a 4 KiB body then sets up a 4 KiB window, not 256 KiB of
  // state, which halves the cost of compressing it — and is brotli's size hint.
  static std::unique_ptr<Encoder> Make(ContentCoding coding, const EncoderSettings& settings,
                                       uint64_t size_hint = 0);

  virtual ~Encoder() = default;

  // Compresses `input`, appending what the encoder emits to `*out`. After kFinish nothing more
  // may be encoded.
  virtual absl::Status Encode(absl::string_view input, Flush flush, std::string* out) = 0;
};

// One buffer compressed whole (kFinish at once).
absl::Status EncodeAll(Encoder& encoder, absl::string_view input, std::string* out);

}  // namespace petrel::http_internal

#endif  // PETREL_HTTP_COMPRESSION_ENCODER_H_
