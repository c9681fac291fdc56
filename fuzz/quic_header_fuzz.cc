// What the master reads of a datagram before any key: the RFC 8999 invariant header (and an
// Initial's token), and QUIC variable-length integers. Properties besides "no crash, no read past
// the datagram": every span lies inside the datagram; a parsed long header of a supported version
// has connection IDs of at most 20 octets; a short header's DCID has the configured length;
// a varint read consumes 1, 2, 4 or 8 octets as its first two bits say.
#include <cstddef>
#include <cstdint>

#include "absl/types/span.h"
#include "fuzz_check.h"
#include "quic/packet/invariant_header.h"
#include "quic/packet/versions.h"

namespace {

bool Inside(absl::Span<const uint8_t> part, absl::Span<const uint8_t> whole) {
  return part.empty() ||
         (part.data() >= whole.data() && part.data() + part.size() <= whole.data() + whole.size());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace petrel::quic;  // NOLINT: a fuzz target's whole subject
  if (size < 1 || size > 2048) return 0;
  // The first octet picks the short-header CID length (0..20); the rest is the datagram.
  const size_t short_dcid_len = data[0] % 21;
  const absl::Span<const uint8_t> datagram(data + 1, size - 1);
  InvariantHeader h;
  const HeaderParse r = ParseInvariantHeader(datagram, short_dcid_len, &h);
  if (r != HeaderParse::kMalformed) {
    PETREL_FUZZ_CHECK(Inside(h.dcid, datagram) && Inside(h.scid, datagram) &&
                      Inside(h.token, datagram));
    PETREL_FUZZ_CHECK(h.dcid.size() <= 255 && h.scid.size() <= 255);
  }
  if (r == HeaderParse::kOk) {
    if (h.long_form) {
      PETREL_FUZZ_CHECK(IsSupportedVersion(h.version));
      PETREL_FUZZ_CHECK(h.dcid.size() <= 20 && h.scid.size() <= 20);
      if (h.type != LongPacketType::kInitial) PETREL_FUZZ_CHECK(h.token.empty());
    } else {
      PETREL_FUZZ_CHECK(h.dcid.size() == short_dcid_len && h.scid.empty() && h.token.empty());
    }
  }
  if (r == HeaderParse::kUnsupportedVersion) PETREL_FUZZ_CHECK(h.long_form);

  size_t pos = 0;
  uint64_t value = 0;
  while (pos < datagram.size()) {
    const size_t before = pos;
    const size_t want = size_t{1} << (datagram[pos] >> 6);
    if (!ReadVarint(datagram, &pos, &value)) {
      PETREL_FUZZ_CHECK(datagram.size() - before < want && pos == before);
      break;
    }
    PETREL_FUZZ_CHECK(pos - before == want && value < (uint64_t{1} << 62));
  }
  return 0;
}
