#include "server/port_reservation.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"

namespace petrel::server {

namespace {

// Binds a new socket of `type` to `address`; returns the fd or -1 (errno set).
int BindSocket(const SocketAddress& address, int type, bool ipv6_only) {
  const int fd = socket(address.family(), type | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  const int one = 1;
  // As the TCP listeners do: a number in TIME_WAIT is not refused here, and a listener binding
  // beside this socket (which never listens) is not refused either.
  if (type == SOCK_STREAM) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  const int v6only = ipv6_only ? 1 : 0;
  if (address.is_v6()) setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &v6only, sizeof(v6only));
  if (bind(fd, address.sockaddr_ptr(), address.length()) != 0) {
    const int saved = errno;
    close(fd);
    errno = saved;
    return -1;
  }
  return fd;
}

}  // namespace

absl::StatusOr<PortReservation> PortReservation::Reserve(const std::vector<SocketAddress>& hosts,
                                                         bool ipv6_only, int attempts) {
  if (hosts.empty()) return absl::InvalidArgumentError("no address to reserve a port on");
  int last_errno = 0;
  for (int i = 0; i < attempts; ++i) {
    SocketAddress any_port = hosts[0];
    any_port.set_port(0);
    const int udp = BindSocket(any_port, SOCK_DGRAM, ipv6_only);
    if (udp < 0) {
      return absl::InternalError(
          absl::StrCat("UDP bind to ", any_port.ToString(), ": ", std::strerror(errno)));
    }
    SocketAddress bound;
    socklen_t len = SocketAddress::capacity();
    if (getsockname(udp, bound.mutable_sockaddr(), &len) != 0) {
      const int saved = errno;
      close(udp);
      return absl::InternalError(absl::StrCat("getsockname: ", std::strerror(saved)));
    }
    // The same number on every address, held on both.
    PortReservation r(bound.port());
    r.udp_fds_.push_back(udp);
    bool free = true;
    for (size_t h = 0; h < hosts.size() && free; ++h) {
      SocketAddress a = hosts[h];
      a.set_port(bound.port());
      if (h > 0) {
        const int more = BindSocket(a, SOCK_DGRAM, ipv6_only);
        if (more < 0) {
          free = false;
          break;
        }
        r.udp_fds_.push_back(more);
      }
      const int tcp = BindSocket(a, SOCK_STREAM, ipv6_only);
      if (tcp < 0) {
        free = false;
        break;
      }
      r.tcp_fds_.push_back(tcp);
    }
    if (free) return r;
    last_errno = errno;
  }
  return absl::UnavailableError(absl::StrCat("no port free for both TCP and UDP on ",
                                             hosts[0].ToString(),
                                             hosts.size() > 1 ? " and the others" : "", " after ",
                                             attempts, " tries: ", std::strerror(last_errno)));
}

PortReservation::PortReservation(PortReservation&& other) noexcept
    : udp_fds_(std::exchange(other.udp_fds_, {})),
      tcp_fds_(std::exchange(other.tcp_fds_, {})),
      port_(other.port_) {}

PortReservation& PortReservation::operator=(PortReservation&& other) noexcept {
  if (this != &other) {
    Release();
    udp_fds_ = std::exchange(other.udp_fds_, {});
    tcp_fds_ = std::exchange(other.tcp_fds_, {});
    port_ = other.port_;
  }
  return *this;
}

PortReservation::~PortReservation() { Release(); }

void PortReservation::ReleaseTcp() {
  for (int fd : tcp_fds_) close(fd);
  tcp_fds_.clear();
}

void PortReservation::Release() {
  ReleaseTcp();
  for (int fd : udp_fds_) close(fd);
  udp_fds_.clear();
}

}  // namespace petrel::server
