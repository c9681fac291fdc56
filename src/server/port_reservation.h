// A port number free for both TCP and UDP on every listen address, for an HttpServer asked to pick
// its https port (port 0): the TCP listeners and the QUIC socket must share the number, and the
// number a TCP bind picks is often taken on UDP by the many client sockets of a busy host.
#ifndef PETREL_SERVER_PORT_RESERVATION_H_
#define PETREL_SERVER_PORT_RESERVATION_H_

#include <cstdint>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "petrel/common/socket_address.h"

namespace petrel::server {

// Holds the number on UDP and TCP on every address, so that no other socket of this host takes it
// between the choice and the binds that use it. The UDP sockets are the QUIC server's own (handed
// over as inherited sockets: the number is never unbound); the TCP ones are bound with
// SO_REUSEADDR and never listen, so the listeners bind beside them and ReleaseTcp() follows.
class PortReservation {
 public:
  // Tries up to `attempts` ephemeral numbers (picked on the first of `hosts`). IPv6 sockets get
  // IPV6_V6ONLY = `ipv6_only`, as the server's own would.
  static absl::StatusOr<PortReservation> Reserve(const std::vector<SocketAddress>& hosts,
                                                 bool ipv6_only = true, int attempts = 64);

  PortReservation(PortReservation&& other) noexcept;
  PortReservation& operator=(PortReservation&& other) noexcept;
  PortReservation(const PortReservation&) = delete;
  PortReservation& operator=(const PortReservation&) = delete;
  ~PortReservation();

  uint16_t port() const { return port_; }
  // Bound UDP sockets, one per address, for QuicServerConfig::listen_fds; open until Release().
  const std::vector<int>& udp_fds() const { return udp_fds_; }
  // Closes the TCP placeholders: call once the listeners are bound.
  void ReleaseTcp();
  void Release();

 private:
  explicit PortReservation(uint16_t port) : port_(port) {}

  std::vector<int> udp_fds_;
  std::vector<int> tcp_fds_;
  uint16_t port_ = 0;
};

}  // namespace petrel::server

#endif  // PETREL_SERVER_PORT_RESERVATION_H_
