// Internal: the addresses HttpServer's listeners bind, from the text of its configuration
// (HttpServerConfig::listen, petrel-server's --listen).
//
//   "127.0.0.1", "::1", "[::1]", "0.0.0.0", "::"  every server port on that address
//   "10.0.0.1:8443", "[2001:db8::1]:8080"          that address, for the server port so numbered
#ifndef PETREL_SERVER_LISTEN_ADDRESS_H_
#define PETREL_SERVER_LISTEN_ADDRESS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "petrel/common/socket_address.h"

namespace petrel::server {

struct ListenAddress {
  SocketAddress ip;              // port 0
  std::optional<uint16_t> port;  // only the server port with this number; nullopt: every one
  bool required = true;          // false: left out where the machine lacks the address
};

absl::StatusOr<ListenAddress> ParseListenAddress(absl::string_view text);

// Parses `texts` for a server with these ports (nullopt: off; 0: picked at bind). Empty
// `texts`: loopback on both families, 127.0.0.1 and ::1 (::1 not required). Errors name the
// entry: not an address, a port that is neither server port, an address given twice.
absl::StatusOr<std::vector<ListenAddress>> ParseListenAddresses(
    const std::vector<std::string>& texts, std::optional<uint16_t> http_port,
    std::optional<uint16_t> https_port);

// The addresses that serve `port` (a configured server port), each with that port set.
std::vector<SocketAddress> AddressesFor(const std::vector<ListenAddress>& addresses, uint16_t port);

// Whether this machine can bind `ip` (a UDP probe on port 0): false when it has no such
// address or no such family (IPv6 turned off).
bool CanBind(const SocketAddress& ip);

}  // namespace petrel::server

#endif  // PETREL_SERVER_LISTEN_ADDRESS_H_
