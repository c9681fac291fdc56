// Public: an IPv4 or IPv6 socket address, as a value.
#ifndef PETREL_COMMON_SOCKET_ADDRESS_H_
#define PETREL_COMMON_SOCKET_ADDRESS_H_

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdint>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace petrel {

class SocketAddress {
 public:
  SocketAddress() = default;
  // Copies `len` bytes of `addr` (AF_INET or AF_INET6; anything else gives an empty address).
  SocketAddress(const sockaddr* addr, socklen_t len);

  // "127.0.0.1", "::1", "[::1]", with `port`.
  static absl::StatusOr<SocketAddress> Parse(absl::string_view host, uint16_t port);
  // "127.0.0.1:8443" or "[::1]:8443".
  static absl::StatusOr<SocketAddress> ParseHostPort(absl::string_view host_port);

  // Makes it empty, as a default-constructed one (only the family is read when empty).
  void Clear() { storage_.sin6_family = AF_UNSPEC; }

  int family() const { return storage_.sin6_family; }
  bool empty() const { return storage_.sin6_family == AF_UNSPEC; }
  bool is_v6() const { return storage_.sin6_family == AF_INET6; }
  uint16_t port() const;
  // The wildcard address (0.0.0.0 or ::), any port.
  bool is_any() const;
  void set_port(uint16_t port);

  const sockaddr* sockaddr_ptr() const { return reinterpret_cast<const sockaddr*>(&storage_); }
  sockaddr* mutable_sockaddr() { return reinterpret_cast<sockaddr*>(&storage_); }
  // sizeof(sockaddr_in) or sizeof(sockaddr_in6); 0 when empty.
  socklen_t length() const;
  static constexpr socklen_t capacity() { return sizeof(sockaddr_in6); }

  // "127.0.0.1:443" or "[::1]:443".
  std::string ToString() const;
  // The address without the port.
  std::string HostString() const;

  friend bool operator==(const SocketAddress& a, const SocketAddress& b);
  friend bool operator!=(const SocketAddress& a, const SocketAddress& b) { return !(a == b); }

  // Hashes what operator== compares: family, port, address (and IPv6 scope).
  template <typename H>
  friend H AbslHashValue(H h, const SocketAddress& a) {
    if (a.family() == AF_INET) {
      const auto* v4 = reinterpret_cast<const sockaddr_in*>(&a.storage_);
      return H::combine(std::move(h), AF_INET, v4->sin_port, v4->sin_addr.s_addr);
    }
    if (a.family() == AF_INET6) {
      const auto* v6 = reinterpret_cast<const sockaddr_in6*>(&a.storage_);
      h = H::combine_contiguous(std::move(h), v6->sin6_addr.s6_addr, 16);
      return H::combine(std::move(h), AF_INET6, v6->sin6_port, v6->sin6_scope_id);
    }
    return H::combine(std::move(h), a.family());
  }

 private:
  // Room for either family: sockaddr_in6 is the larger, and both start with the family. Not
  // sockaddr_storage (128 bytes, where this is 28): an address is copied with every datagram
  // received, into the receive slot and the packet handed to a worker.
  sockaddr_in6 storage_{};
};

}  // namespace petrel

#endif  // PETREL_COMMON_SOCKET_ADDRESS_H_
