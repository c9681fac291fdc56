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

// Holds the UDP side of the number until Release(), so that no one else binds it meanwhile;
// the TCP side is only probed (a listener binds it right after).
class PortReservation {
 public:
  // Tries up to `attempts` ephemeral numbers (picked on the first of `hosts`).
  static absl::StatusOr<PortReservation> Reserve(const std::vector<SocketAddress>& hosts,
                                                 int attempts = 64);

  PortReservation(PortReservation&& other) noexcept;
  PortReservation& operator=(PortReservation&& other) noexcept;
  PortReservation(const PortReservation&) = delete;
  PortReservation& operator=(const PortReservation&) = delete;
  ~PortReservation();

  uint16_t port() const { return port_; }
  // Closes the UDP sockets: call right before the QUIC server binds the number.
  void Release();

 private:
  PortReservation(std::vector<int> udp_fds, uint16_t port)
      : udp_fds_(std::move(udp_fds)), port_(port) {}

  std::vector<int> udp_fds_;
  uint16_t port_ = 0;
};

}  // namespace petrel::server

#endif  // PETREL_SERVER_PORT_RESERVATION_H_
