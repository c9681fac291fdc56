// Runs a ChunkedDecoder the way the h1 engine does — over the bytes received and not consumed
// yet — with the input arriving in pieces, and records what came out, so two arrivals of the
// same bytes can be compared.
#ifndef PETREL_FUZZ_CHUNKED_ARRIVAL_H_
#define PETREL_FUZZ_CHUNKED_ARRIVAL_H_

#include <cstddef>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "fuzz_check.h"
#include "http/h1/chunked_decoder.h"

namespace petrel::fuzz {

inline bool Inside(absl::string_view part, absl::string_view whole) {
  return part.empty() ||
         (part.data() >= whole.data() && part.data() + part.size() <= whole.data() + whole.size());
}

struct BodyOutcome {
  h1::ChunkedDecoder::Status status = h1::ChunkedDecoder::Status::kNeedMore;
  int error_status = 0;
  std::string body;
  size_t consumed = 0;  // where the body ended (kDone)
  std::vector<std::pair<std::string, std::string>> trailers;

  bool operator==(const BodyOutcome&) const = default;
};

// Runs a decoder as an engine does: over the bytes received and not consumed yet, the input
// arriving in pieces that end at `cuts`, then in full.
inline BodyOutcome DecodeArriving(absl::string_view input, const std::vector<size_t>& cuts) {
  h1::ChunkedLimits limits;
  limits.max_body = 1 << 20;
  limits.max_trailer_section = 512;
  limits.max_trailer_fields = 8;
  limits.max_size_line = 64;
  h1::ChunkedDecoder decoder(limits);
  BodyOutcome o;
  size_t consumed = 0;
  std::vector<size_t> arrivals = cuts;
  arrivals.push_back(input.size());
  for (size_t arrived : arrivals) {
    for (;;) {
      const absl::string_view pending = input.substr(consumed, arrived - consumed);
      const h1::ChunkedDecoder::Result r = decoder.Decode(pending);
      PETREL_FUZZ_CHECK(r.consumed <= pending.size());
      o.status = r.status;
      if (r.status == h1::ChunkedDecoder::Status::kData) {
        PETREL_FUZZ_CHECK(!r.data.empty() && Inside(r.data, pending.substr(0, r.consumed)));
        o.body.append(r.data.data(), r.data.size());
        consumed += r.consumed;
        continue;
      }
      consumed += r.consumed;
      if (r.status == h1::ChunkedDecoder::Status::kNeedMore) break;
      if (r.status == h1::ChunkedDecoder::Status::kError) {
        o.error_status = decoder.error_status();
        PETREL_FUZZ_CHECK(o.error_status == 400 || o.error_status == 413 || o.error_status == 431);
        return o;
      }
      o.consumed = consumed;
      for (const HeaderField f : decoder.trailers()) {
        o.trailers.emplace_back(std::string(f.name), std::string(f.value));
      }
      PETREL_FUZZ_CHECK(decoder.body_bytes() == o.body.size());
      return o;
    }
  }
  return o;
}

// For a violated property's report.
inline void ExpectSameBody(const BodyOutcome& whole, const BodyOutcome& split) {
  if (split == whole) return;
  for (const auto& [label, o] : {std::pair{"whole", &whole}, std::pair{"split", &split}}) {
    std::fprintf(stderr, "%s: status %d error %d body %zu bytes consumed %zu trailers %zu\n", label,
                 static_cast<int>(o->status), o->error_status, o->body.size(), o->consumed,
                 o->trailers.size());
  }
  PETREL_FUZZ_CHECK(split == whole);
}

}  // namespace petrel::fuzz

#endif  // PETREL_FUZZ_CHUNKED_ARRIVAL_H_
