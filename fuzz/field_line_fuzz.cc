// The h1 field-line parser and the output-field check (RFC 9112 §5, RFC 9110 §5.5). Properties
// besides "no crash": an accepted line splits into a non-empty token name and a trimmed value
// without control bytes other than HTAB, both views of the line; what the parser accepts, the
// output check accepts too; the "no control byte" hint never changes the answer for a line that
// really has none.
#include <cstddef>
#include <cstdint>

#include "absl/strings/string_view.h"
#include "fuzz_check.h"
#include "http/h1/field_line.h"

namespace {

bool HasControl(absl::string_view s) {
  for (unsigned char c : s) {
    if (c < 0x20 || c == 0x7f) return true;
  }
  return false;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using petrel::h1::FieldLine;
  if (size > 4096) return 0;
  const absl::string_view line(reinterpret_cast<const char*>(data), size);
  FieldLine f;
  const char* error = petrel::h1::ParseFieldLine(line, &f);
  if (!HasControl(line)) {
    FieldLine g;
    const char* hinted = petrel::h1::ParseFieldLine(line, &g, false);
    PETREL_FUZZ_CHECK((error == nullptr) == (hinted == nullptr));
  }
  if (error != nullptr) return 0;
  PETREL_FUZZ_CHECK(!f.name.empty());
  PETREL_FUZZ_CHECK(f.name.data() == line.data());
  PETREL_FUZZ_CHECK(f.value.empty() || (f.value.data() > f.name.data() &&
                                        f.value.data() + f.value.size() <= line.data() + size));
  for (unsigned char c : f.value) PETREL_FUZZ_CHECK(c >= 0x20 || c == '\t');
  PETREL_FUZZ_CHECK(f.value.find('\x7f') == absl::string_view::npos);
  if (!f.value.empty()) {
    PETREL_FUZZ_CHECK(f.value.front() != ' ' && f.value.front() != '\t');
    PETREL_FUZZ_CHECK(f.value.back() != ' ' && f.value.back() != '\t');
  }
  PETREL_FUZZ_CHECK(petrel::h1::IsValidOutputField(f.name, f.value));
  return 0;
}
