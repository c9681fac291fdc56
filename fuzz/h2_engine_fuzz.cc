// The h2 engine (H2Connection on nghttp2, over a TcpStream) fed arbitrary frames after a valid
// client preface and SETTINGS: streams, flow control, priorities, resets, floods, bad frames
// (see engine_harness.h). Properties: no crash or sanitizer report, and the connection closes
// once the peer has gone.
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
#include "engine_harness.h"
#include "http/h2/h2_connection.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 64 * 1024) return 0;
  // Client connection preface (RFC 9113 §3.4) and an empty SETTINGS frame.
  std::string bytes("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\4\0\0\0\0\0", 24 + 9);
  bytes.append(reinterpret_cast<const char*>(data), size);
  petrel::fuzz::RunEngine<petrel::http::H2Connection>(bytes, petrel::http::H2Options());
  return 0;
}
