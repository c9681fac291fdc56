#include "petrel/common/socket_address.h"

#include <arpa/inet.h>

#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace petrel {

SocketAddress::SocketAddress(const sockaddr* addr, socklen_t len) {
  if (addr == nullptr) return;
  // A constant size per branch: a few moves, not a call to memcpy (one per received datagram).
  if (addr->sa_family == AF_INET && len >= sizeof(sockaddr_in)) {
    std::memcpy(&storage_, addr, sizeof(sockaddr_in));
  } else if (addr->sa_family == AF_INET6 && len >= sizeof(sockaddr_in6)) {
    std::memcpy(&storage_, addr, sizeof(sockaddr_in6));
  }
}

absl::StatusOr<SocketAddress> SocketAddress::Parse(absl::string_view host, uint16_t port) {
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  const std::string h(host);
  SocketAddress a;
  auto* v4 = reinterpret_cast<sockaddr_in*>(&a.storage_);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&a.storage_);
  if (inet_pton(AF_INET, h.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(port);
    return a;
  }
  a.storage_ = {};
  if (inet_pton(AF_INET6, h.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(port);
    return a;
  }
  return absl::InvalidArgumentError(absl::StrCat("not an IPv4 or IPv6 address: '", host, "'"));
}

absl::StatusOr<SocketAddress> SocketAddress::ParseHostPort(absl::string_view host_port) {
  size_t colon = host_port.rfind(':');
  if (colon == absl::string_view::npos) {
    return absl::InvalidArgumentError(absl::StrCat("missing port in '", host_port, "'"));
  }
  absl::string_view host = host_port.substr(0, colon);
  if (host.find(':') != absl::string_view::npos && host.front() != '[') {
    return absl::InvalidArgumentError(
        absl::StrCat("IPv6 addresses need brackets, as in [::1]:443: '", host_port, "'"));
  }
  uint32_t port = 0;
  if (!absl::SimpleAtoi(host_port.substr(colon + 1), &port) || port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("bad port in '", host_port, "'"));
  }
  return Parse(host, static_cast<uint16_t>(port));
}

uint16_t SocketAddress::port() const {
  if (family() == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in*>(&storage_)->sin_port);
  if (family() == AF_INET6) {
    return ntohs(reinterpret_cast<const sockaddr_in6*>(&storage_)->sin6_port);
  }
  return 0;
}

void SocketAddress::set_port(uint16_t port) {
  if (family() == AF_INET) reinterpret_cast<sockaddr_in*>(&storage_)->sin_port = htons(port);
  if (family() == AF_INET6) reinterpret_cast<sockaddr_in6*>(&storage_)->sin6_port = htons(port);
}

socklen_t SocketAddress::length() const {
  if (family() == AF_INET) return sizeof(sockaddr_in);
  if (family() == AF_INET6) return sizeof(sockaddr_in6);
  return 0;
}

std::string SocketAddress::HostString() const {
  char buf[INET6_ADDRSTRLEN] = {};
  if (family() == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&storage_)->sin_addr, buf,
              sizeof(buf));
  } else if (family() == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(&storage_)->sin6_addr, buf,
              sizeof(buf));
  }
  return buf;
}

std::string SocketAddress::ToString() const {
  if (empty()) return "(none)";
  if (is_v6()) return absl::StrCat("[", HostString(), "]:", port());
  return absl::StrCat(HostString(), ":", port());
}

bool operator==(const SocketAddress& a, const SocketAddress& b) {
  if (a.family() != b.family()) return false;
  if (a.family() == AF_INET) {
    const auto* x = reinterpret_cast<const sockaddr_in*>(&a.storage_);
    const auto* y = reinterpret_cast<const sockaddr_in*>(&b.storage_);
    return x->sin_port == y->sin_port && x->sin_addr.s_addr == y->sin_addr.s_addr;
  }
  if (a.family() == AF_INET6) {
    const auto* x = reinterpret_cast<const sockaddr_in6*>(&a.storage_);
    const auto* y = reinterpret_cast<const sockaddr_in6*>(&b.storage_);
    return x->sin6_port == y->sin6_port && x->sin6_scope_id == y->sin6_scope_id &&
           std::memcmp(&x->sin6_addr, &y->sin6_addr, sizeof(in6_addr)) == 0;
  }
  return true;
}

bool SocketAddress::is_any() const {
  if (family() == AF_INET) {
    return reinterpret_cast<const sockaddr_in*>(&storage_)->sin_addr.s_addr == htonl(INADDR_ANY);
  }
  if (family() == AF_INET6) {
    return IN6_IS_ADDR_UNSPECIFIED(&reinterpret_cast<const sockaddr_in6*>(&storage_)->sin6_addr);
  }
  return false;
}

}  // namespace petrel
