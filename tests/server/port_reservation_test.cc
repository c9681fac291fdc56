// The https port an HttpServer picks for itself (port 0 with h3): the number must stay taken on
// TCP and UDP from the choice until the server's own sockets hold it, or another socket of a busy
// host takes it in between and the start fails with "Address already in use".
#include "server/port_reservation.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

namespace petrel::server {
namespace {

// Binds a plain socket (no SO_REUSEADDR, as a client's or another program's) to `a`: 0 or errno.
int BindPlain(const SocketAddress& a, int type, bool listen_too = false, int* out_fd = nullptr) {
  const int fd = socket(a.family(), type | SOCK_CLOEXEC, 0);
  if (fd < 0) return errno;
  int rc = bind(fd, a.sockaddr_ptr(), a.length()) == 0 ? 0 : errno;
  if (rc == 0 && listen_too && listen(fd, 8) != 0) rc = errno;
  if (rc == 0 && out_fd != nullptr) {
    *out_fd = fd;
  } else {
    close(fd);
  }
  return rc;
}

// A listener as TcpListener makes one: SO_REUSEADDR, bind, listen. 0 or errno.
int BindListener(const SocketAddress& a, int* out_fd) {
  const int fd = socket(a.family(), SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return errno;
  const int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (bind(fd, a.sockaddr_ptr(), a.length()) != 0 || listen(fd, 8) != 0) {
    const int e = errno;
    close(fd);
    return e;
  }
  *out_fd = fd;
  return 0;
}

TEST(PortReservationTest, HoldsTheNumberOnBothProtocolsUntilTheServerHoldsIt) {
  const std::vector<SocketAddress> hosts = {*SocketAddress::Parse("127.0.0.1", 0),
                                            *SocketAddress::Parse("127.0.0.2", 0)};
  absl::StatusOr<PortReservation> r = PortReservation::Reserve(hosts);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_NE(r->port(), 0);
  ASSERT_EQ(r->udp_fds().size(), hosts.size());
  std::vector<SocketAddress> at;
  for (SocketAddress a : hosts) {
    a.set_port(r->port());
    at.push_back(a);
  }
  // Nobody else gets the number, on either protocol, on any address.
  for (const SocketAddress& a : at) {
    EXPECT_EQ(BindPlain(a, SOCK_DGRAM), EADDRINUSE) << "UDP " << a.ToString();
    EXPECT_EQ(BindPlain(a, SOCK_STREAM), EADDRINUSE) << "TCP " << a.ToString();
  }
  // The server's TCP listeners bind and listen beside the placeholders.
  std::vector<int> listeners;
  for (const SocketAddress& a : at) {
    int fd = -1;
    EXPECT_EQ(BindListener(a, &fd), 0) << "listener " << a.ToString();
    if (fd >= 0) listeners.push_back(fd);
  }
  r->ReleaseTcp();
  for (int fd : listeners) close(fd);
  // The UDP sockets are the QUIC server's to use: still bound, to the number, on each address.
  for (size_t i = 0; i < at.size(); ++i) {
    EXPECT_EQ(BindPlain(at[i], SOCK_DGRAM), EADDRINUSE) << "UDP " << at[i].ToString();
    sockaddr_storage bound{};
    socklen_t len = sizeof(bound);
    ASSERT_EQ(getsockname(r->udp_fds()[i], reinterpret_cast<sockaddr*>(&bound), &len), 0);
    EXPECT_EQ(SocketAddress(reinterpret_cast<sockaddr*>(&bound), len), at[i]);
  }
  // And released, the number is free again.
  r->Release();
  EXPECT_TRUE(r->udp_fds().empty());
  for (const SocketAddress& a : at) {
    int fd = -1;
    EXPECT_EQ(BindPlain(a, SOCK_DGRAM, false, &fd), 0) << "UDP " << a.ToString();
    if (fd >= 0) close(fd);
  }
}

TEST(PortReservationTest, NoAddressIsAnError) { EXPECT_FALSE(PortReservation::Reserve({}).ok()); }

}  // namespace
}  // namespace petrel::server
