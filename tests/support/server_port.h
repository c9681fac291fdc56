// Internal (tests): picking the port a server under test will listen on.
//
// A test that starts a server in another process must name the port before the server binds it,
// so the pick and the bind race with everything else on the machine. Ports handed out by bind(0)
// and by connect() come from the kernel's ephemeral range, where parallel tests' clients take
// them all the time; a pick below that range can only collide with another test's pick, which
// is random. Callers still retry when the server reports the port in use.
#ifndef PETREL_TESTS_SUPPORT_SERVER_PORT_H_
#define PETREL_TESTS_SUPPORT_SERVER_PORT_H_

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <random>

namespace petrel::testing {

// True when nothing holds `port` on 127.0.0.1 for this socket type right now.
inline bool LoopbackPortFree(int type, uint16_t port) {
  const int fd = ::socket(AF_INET, type | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(port);
  const bool free = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  ::close(fd);
  return free;
}

// A port below the ephemeral range, free on 127.0.0.1 for both TCP and UDP (petrel-server
// serves TLS over TCP and HTTP/3 over UDP on one number); 0 if none was found.
inline uint16_t PickServerPort() {
  int ephemeral_low = 32768;
  std::ifstream("/proc/sys/net/ipv4/ip_local_port_range") >> ephemeral_low;
  const int high = ephemeral_low - 1;
  const int low = high > 12000 ? high - 10000 : 1024;
  static std::mt19937 rng(std::random_device{}());
  std::uniform_int_distribution<int> dist(low, high);
  for (int attempt = 0; attempt < 200; ++attempt) {
    const auto port = static_cast<uint16_t>(dist(rng));
    if (LoopbackPortFree(SOCK_DGRAM, port) && LoopbackPortFree(SOCK_STREAM, port)) return port;
  }
  return 0;
}

}  // namespace petrel::testing

#endif  // PETREL_TESTS_SUPPORT_SERVER_PORT_H_
