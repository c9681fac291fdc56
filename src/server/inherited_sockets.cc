#include "server/inherited_sockets.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace petrel::server {
namespace {

constexpr int kFirstListenFd = 3;  // SD_LISTEN_FDS_START

int SocketOption(int fd, int name) {
  int value = 0;
  socklen_t len = sizeof(value);
  return getsockopt(fd, SOL_SOCKET, name, &value, &len) == 0 ? value : -1;
}

}  // namespace

std::vector<int> TakeListenFds() {
  const char* pid_text = std::getenv("LISTEN_PID");
  const char* count_text = std::getenv("LISTEN_FDS");
  int pid = 0;
  int count = 0;
  const bool ours = pid_text != nullptr && count_text != nullptr &&
                    absl::SimpleAtoi(pid_text, &pid) && pid == getpid() &&
                    absl::SimpleAtoi(count_text, &count) && count > 0;
  unsetenv("LISTEN_PID");
  unsetenv("LISTEN_FDS");
  unsetenv("LISTEN_FDNAMES");
  std::vector<int> fds;
  if (!ours) return fds;
  for (int fd = kFirstListenFd; fd < kFirstListenFd + count; ++fd) {
    const int flags = fcntl(fd, F_GETFD);
    if (flags >= 0) (void)fcntl(fd, F_SETFD, flags | FD_CLOEXEC);
    fds.push_back(fd);
  }
  return fds;
}

absl::StatusOr<InheritedSocket> DescribeSocket(int fd) {
  auto invalid = [fd](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("inherited fd ", fd, ": ", why));
  };
  const int type = SocketOption(fd, SO_TYPE);
  if (type < 0) return invalid(absl::StrCat("not a socket (", strerror(errno), ")"));
  sockaddr_storage bound{};
  socklen_t len = sizeof(bound);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len) != 0) {
    return invalid(absl::StrCat("getsockname: ", strerror(errno)));
  }
  if (bound.ss_family != AF_INET && bound.ss_family != AF_INET6) {
    return invalid("not an IPv4 or IPv6 socket");
  }
  InheritedSocket s;
  s.fd = fd;
  s.address = SocketAddress(reinterpret_cast<sockaddr*>(&bound), len);
  if (type == SOCK_STREAM) {
    if (SocketOption(fd, SO_ACCEPTCONN) != 1) {
      return invalid(absl::StrCat("TCP ", s.address.ToString(), " is not listening"));
    }
    s.tcp = true;
  } else if (type != SOCK_DGRAM) {
    return invalid("neither a TCP nor a UDP socket");
  }
  if (s.address.port() == 0) return invalid("not bound to a port");
  return s;
}

}  // namespace petrel::server
