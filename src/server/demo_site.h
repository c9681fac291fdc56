// Internal (petrel-server): the built-in demo site served when no --root is given.
#ifndef PETREL_SERVER_DEMO_SITE_H_
#define PETREL_SERVER_DEMO_SITE_H_

#include <cstdint>

#include "absl/status/status.h"
#include "petrel/http/router.h"

namespace petrel::server {

// Sizes of the files under /files/ (named "1k.bin" ... "100m.bin"): deterministic bytes made
// on the fly, so a download can be checked against DemoFileByte without shipping the files.
inline constexpr uint64_t kDemoFileSizes[] = {1024, 1024 * 1024, 10 * 1024 * 1024,
                                              100 * 1024 * 1024};

// Byte `i` of every demo file.
inline char DemoFileByte(uint64_t i) { return static_cast<char>('a' + (i * 7 + i / 4093) % 26); }

// Routes: GET / (an index page that names the protocol it came over), GET /hello,
// POST /echo (the body streamed back), GET /files/ (a listing) and GET /files/<size>.bin.
absl::Status AddDemoSite(Router& router);

}  // namespace petrel::server

#endif  // PETREL_SERVER_DEMO_SITE_H_
