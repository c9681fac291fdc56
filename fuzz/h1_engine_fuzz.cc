// The h1 engine (H1Connection on a TcpStream) fed arbitrary bytes by a peer: pipelined requests,
// bodies, bad framing, limits (see engine_harness.h). Properties: no crash or sanitizer report,
// and the connection closes once the peer has gone.
#include <cstddef>
#include <cstdint>

#include "absl/strings/string_view.h"
#include "engine_harness.h"
#include "http/h1/h1_connection.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 64 * 1024) return 0;
  petrel::http::H1Options options;
  options.limits.max_header_section = 4096;
  options.limits.max_fields = 16;
  petrel::fuzz::RunEngine<petrel::http::H1Connection>(
      absl::string_view(reinterpret_cast<const char*>(data), size), options);
  return 0;
}
