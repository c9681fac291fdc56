// The Range header for static files (RFC 9110 §14.2). Properties besides "no crash": a partial
// answer is one non-empty range inside the representation; an unsatisfiable one only for a
// non-empty representation; an empty representation is always served whole.
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "absl/strings/string_view.h"
#include "fuzz_check.h"
#include "http/static/range.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using petrel::http_internal::EvaluateRange;
  using petrel::http_internal::RangeDecision;
  if (size < 8 || size > 4096) return 0;
  uint64_t raw_size;
  std::memcpy(&raw_size, data, 8);
  const absl::string_view value(reinterpret_cast<const char*>(data) + 8, size - 8);
  // Small sizes (the interesting edges), and the raw value as it is (huge ones).
  for (const uint64_t file_size : {raw_size % 4096, raw_size}) {
    const RangeDecision d = EvaluateRange(value, file_size);
    switch (d.kind) {
      case RangeDecision::Kind::kPartial:
        PETREL_FUZZ_CHECK(d.length > 0 && d.first < file_size && d.length <= file_size - d.first);
        break;
      case RangeDecision::Kind::kUnsatisfiable:
        PETREL_FUZZ_CHECK(file_size > 0);
        break;
      case RangeDecision::Kind::kFull:
        break;
    }
    if (file_size == 0) PETREL_FUZZ_CHECK(d.kind == RangeDecision::Kind::kFull);
  }
  return 0;
}
