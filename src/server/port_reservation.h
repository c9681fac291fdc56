// A port number free for both TCP and UDP on one address, for an HttpServer asked to pick its
// https port (port 0): the TCP listeners and the QUIC socket must share the number, and the
// number a TCP bind picks is often taken on UDP by the many client sockets of a busy host.
#ifndef PETREL_SERVER_PORT_RESERVATION_H_
#define PETREL_SERVER_PORT_RESERVATION_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "petrel/common/socket_address.h"

namespace petrel::server {

// Holds the UDP side of the number until Release(), so that no one else binds it meanwhile;
// the TCP side is only probed (a listener binds it right after).
class PortReservation {
 public:
  // Tries up to `attempts` ephemeral numbers on `host`'s address.
  static absl::StatusOr<PortReservation> Reserve(const SocketAddress& host, int attempts = 64);

  PortReservation(PortReservation&& other) noexcept;
  PortReservation& operator=(PortReservation&& other) noexcept;
  PortReservation(const PortReservation&) = delete;
  PortReservation& operator=(const PortReservation&) = delete;
  ~PortReservation();

  uint16_t port() const { return port_; }
  // Closes the UDP socket: call right before the QUIC server binds the number.
  void Release();

 private:
  PortReservation(int udp_fd, uint16_t port) : udp_fd_(udp_fd), port_(port) {}

  int udp_fd_ = -1;
  uint16_t port_ = 0;
};

}  // namespace petrel::server

#endif  // PETREL_SERVER_PORT_RESERVATION_H_
