// The chunked request-body decoder on arbitrary bytes (RFC 9112 §7.1). Properties besides "no
// crash, no sanitizer report": the body, trailers, end and error do not depend on how the bytes
// arrived (whole; cut at data-chosen points; byte by byte for short inputs); delivered data
// always lies inside the consumed input; errors are 400, 413 or 431.
#include <cstddef>
#include <cstdint>

#include "absl/strings/string_view.h"
#include "chunked_arrival.h"
#include "fuzz_check.h"
#include "split_points.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using petrel::fuzz::DecodeArriving;
  if (size > 64 * 1024) return 0;
  const absl::string_view input(reinterpret_cast<const char*>(data), size);
  const petrel::fuzz::BodyOutcome whole = DecodeArriving(input, {});
  petrel::fuzz::ExpectSameBody(whole, DecodeArriving(input, petrel::fuzz::SplitPoints(input, 4)));
  if (size <= 1024) {
    petrel::fuzz::ExpectSameBody(whole, DecodeArriving(input, petrel::fuzz::EveryPoint(input)));
  }
  return 0;
}
