// Internal: sockets a service manager bound for the server and handed over at exec (systemd's
// socket activation, the LISTEN_FDS protocol of sd_listen_fds(3), without libsystemd): ports
// below 1024 without root, and connections queued in the kernel while the server restarts.
#ifndef PETREL_SERVER_INHERITED_SOCKETS_H_
#define PETREL_SERVER_INHERITED_SOCKETS_H_

#include <vector>

#include "absl/status/statusor.h"
#include "petrel/common/socket_address.h"

namespace petrel::server {

struct InheritedSocket {
  int fd = -1;
  bool tcp = false;  // a listening TCP socket; otherwise a bound UDP one
  SocketAddress address;
};

// The descriptors handed to this process: LISTEN_FDS of them from fd 3, when LISTEN_PID is this
// process. Unsets LISTEN_PID, LISTEN_FDS and LISTEN_FDNAMES (nothing the server starts inherits
// them) and marks each descriptor close-on-exec. Empty when there are none for this process.
std::vector<int> TakeListenFds();

// What `fd` is: a listening TCP socket or a bound UDP socket (IPv4 or IPv6), and its address;
// InvalidArgument, naming the fd, for anything else.
absl::StatusOr<InheritedSocket> DescribeSocket(int fd);

}  // namespace petrel::server

#endif  // PETREL_SERVER_INHERITED_SOCKETS_H_
