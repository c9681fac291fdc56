// Internal: host names as a server compares them — the host of a Host / :authority value or a
// TLS server name (SNI), against the names virtual hosts and certificates are for.
//
// Names compare case-insensitively and without a trailing dot. A pattern is an exact name
// ("a.example", "127.0.0.1", "::1") or a wildcard "*.example", which — as in certificates
// (RFC 6125 §6.4.3) — stands for exactly one leftmost label: it matches "a.example", not
// "example" and not "b.a.example". Exact names win over wildcards.
#ifndef PETREL_COMMON_HOST_NAME_H_
#define PETREL_COMMON_HOST_NAME_H_

#include <cstddef>
#include <optional>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace petrel {

// The host of an authority: "Example.com:8443" -> "Example.com", "[::1]:443" -> "::1",
// "a.example." -> "a.example" (case kept). "" when there is none or it is malformed (an
// unclosed bracket).
absl::string_view HostOfAuthority(absl::string_view authority);

// Whether two hosts are the same name (case-insensitive, trailing dots ignored).
bool SameHost(absl::string_view a, absl::string_view b);

// A map from host names to small numbers (an index into the caller's list of sites or
// certificates). Lookups are read-only, safe from many threads, and never allocate.
class HostTable {
 public:
  // InvalidArgument for a malformed pattern (empty, a '*' anywhere but a leading "*.", a space
  // or control byte, longer than 253 bytes), AlreadyExists if the same pattern is already in.
  absl::Status Add(absl::string_view pattern, size_t index);
  // The index of the exact name, else of the wildcard for its parent domain; nullopt if none.
  std::optional<size_t> Find(absl::string_view host) const;
  bool empty() const { return exact_.empty() && wildcard_.empty(); }

 private:
  absl::flat_hash_map<std::string, size_t> exact_;
  absl::flat_hash_map<std::string, size_t> wildcard_;  // "*.example" under "example"
};

}  // namespace petrel

#endif  // PETREL_COMMON_HOST_NAME_H_
