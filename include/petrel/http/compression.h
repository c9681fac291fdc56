// Public: response compression (Content-Encoding, RFC 9110 §8.4 and §12.5.3) as middleware —
// gzip and brotli, negotiated from Accept-Encoding, the same on HTTP/1.1, HTTP/2 and HTTP/3.
//
//   router.Use(petrel::CompressionMiddleware());  // text, JSON, JS, SVG... above 1 KiB
//
// StaticFiles can also serve files compressed ahead of time (StaticFilesOptions::precompressed);
// their responses already carry Content-Encoding and pass through this middleware untouched.
#ifndef PETREL_HTTP_COMPRESSION_H_
#define PETREL_HTTP_COMPRESSION_H_

#include <cstdint>
#include <string>
#include <vector>

#include "petrel/http/middleware.h"

namespace petrel {

struct CompressionOptions {
  // The codings offered. When a client accepts both equally, brotli (smaller) is chosen.
  bool brotli = true;
  bool gzip = true;
  // zlib's level, 1 (fast) .. 9 (small).
  int gzip_level = 6;
  // Brotli's quality, 0 .. 11; above 6 the CPU cost per byte climbs steeply, which suits files
  // compressed ahead of time, not responses.
  int brotli_quality = 5;
  // Brotli's window, 10 .. 24 bits: memory per compressing stream grows with it (2^18 = 256 KiB).
  int brotli_window_bits = 18;
  // Bodies of a known length below this are sent as they are (the saving would not pay for the
  // work); bodies of unknown length (streams) are compressed.
  uint64_t min_length = 1024;
  // Media types compressed, compared without parameters and case-insensitively; an entry that
  // ends in '/' ("text/") matches the whole top-level type. Types with a "+json" or "+xml"
  // suffix are compressed too.
  std::vector<std::string> content_types = {
      "text/",           "application/json",     "application/javascript",
      "application/xml", "application/wasm",     "image/svg+xml",
      "font/ttf",        "application/x-ndjson", "application/manifest+json"};
};

// Compresses the responses of the routes it runs for, when the request accepts gzip or br
// (Accept-Encoding; q=0 refuses, "*" stands for both) and the response:
//  - has a body (not HEAD, not 1xx/204/304) that is not a range (206, or Content-Range set),
//  - is not encoded already (Content-Encoding set) and its Cache-Control has no "no-transform"
//    (nor has the request's),
//  - has a listed Content-Type and a length of at least `min_length`, or an unknown length.
// A buffered body is compressed at once (and keeps a Content-Length); a file or a stream is
// compressed as the engine pulls it — 16 KiB at a time, so nothing large is buffered and the
// handler's backpressure is the peer's — and a stream that pauses (its StreamingBody has
// nothing more yet) is flushed, so what it wrote is readable at once.
//
// A compressed response gets Content-Encoding, loses Content-Length (unless buffered) and
// Accept-Ranges, and a strong ETag becomes weak (W/"..."): the bytes differ from the
// identity representation's, while If-None-Match (weak comparison) still revalidates it. Every
// response of a compressible type, compressed or not, gets Vary: Accept-Encoding (a HEAD's too,
// so that its head is that of an identity GET). A 304 carries
// no type (nor body): it gets Vary, and its ETag is weakened like the 200's would be when the
// request accepts a coding — so a cache updating its stored 200 from it keeps them consistent.
Middleware CompressionMiddleware(CompressionOptions options = {});

}  // namespace petrel

#endif  // PETREL_HTTP_COMPRESSION_H_
