#include "quic/packet/versions.h"

#include <ngtcp2/ngtcp2.h>

#include <array>

namespace petrel::quic {
namespace {

struct VersionList {
  std::array<uint32_t, 3> versions{};
  size_t size = 0;
};

VersionList BuildSupportedVersions() {
  VersionList list;
  for (uint32_t v : {kVersion1, kVersion2, kVersion2Draft}) {
    if (ngtcp2_is_supported_version(v)) list.versions[list.size++] = v;
  }
  return list;
}

const VersionList& Supported() {
  static const VersionList list = BuildSupportedVersions();
  return list;
}

}  // namespace

bool IsSupportedVersion(uint32_t version) {
  for (uint32_t v : SupportedVersions()) {
    if (v == version) return true;
  }
  return false;
}

absl::Span<const uint32_t> SupportedVersions() {
  const VersionList& list = Supported();
  return absl::MakeConstSpan(list.versions.data(), list.size);
}

}  // namespace petrel::quic
