// Internal (tests): a UDP relay on its own thread — datagrams from a client to the relay go to
// the current target, and the target's answers go back to the client. Switching the target
// makes a server "lose" a connection without the client hearing of it (stateless reset tests).
#ifndef PETREL_TESTS_QUIC_UDP_RELAY_H_
#define PETREL_TESTS_QUIC_UDP_RELAY_H_

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <mutex>
#include <thread>

#include "petrel/common/socket_address.h"

namespace petrel::hq::testing {

class UdpRelay {
 public:
  explicit UdpRelay(const SocketAddress& target) : target_(target) {
    front_ = Bind();
    back_ = Bind();
    stop_fd_ = ::eventfd(0, EFD_CLOEXEC);
    thread_ = std::thread([this] { Loop(); });
  }
  ~UdpRelay() {
    const uint64_t one = 1;
    (void)!::write(stop_fd_, &one, sizeof(one));
    thread_.join();
    ::close(front_);
    ::close(back_);
    ::close(stop_fd_);
  }

  SocketAddress address() const {
    sockaddr_storage ss{};
    socklen_t len = sizeof(ss);
    ::getsockname(front_, reinterpret_cast<sockaddr*>(&ss), &len);
    return SocketAddress(reinterpret_cast<sockaddr*>(&ss), len);
  }
  // From now on the client's datagrams go to `target`, and only its answers come back.
  void SetTarget(const SocketAddress& target) {
    std::lock_guard<std::mutex> lock(mu_);
    target_ = target;
  }

 private:
  static int Bind() {
    const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    SocketAddress any = *SocketAddress::Parse("127.0.0.1", 0);
    ::bind(fd, any.sockaddr_ptr(), any.length());
    return fd;
  }

  void Loop() {
    char buf[65536];
    for (;;) {
      pollfd fds[3] = {{front_, POLLIN, 0}, {back_, POLLIN, 0}, {stop_fd_, POLLIN, 0}};
      if (::poll(fds, 3, -1) < 0) continue;
      if (fds[2].revents != 0) return;
      if (fds[0].revents != 0) {
        sockaddr_storage from{};
        socklen_t len = sizeof(from);
        const ssize_t n =
            ::recvfrom(front_, buf, sizeof(buf), 0, reinterpret_cast<sockaddr*>(&from), &len);
        if (n >= 0) {
          client_ = SocketAddress(reinterpret_cast<sockaddr*>(&from), len);
          std::lock_guard<std::mutex> lock(mu_);
          ::sendto(back_, buf, n, 0, target_.sockaddr_ptr(), target_.length());
        }
      }
      if (fds[1].revents != 0) {
        sockaddr_storage from{};
        socklen_t len = sizeof(from);
        const ssize_t n =
            ::recvfrom(back_, buf, sizeof(buf), 0, reinterpret_cast<sockaddr*>(&from), &len);
        bool current;
        {
          std::lock_guard<std::mutex> lock(mu_);
          current = SocketAddress(reinterpret_cast<sockaddr*>(&from), len) == target_;
        }
        if (n >= 0 && current && !client_.empty()) {
          ::sendto(front_, buf, n, 0, client_.sockaddr_ptr(), client_.length());
        }
      }
    }
  }

  int front_ = -1;
  int back_ = -1;
  int stop_fd_ = -1;
  std::mutex mu_;
  SocketAddress target_;  // guarded by mu_
  SocketAddress client_;  // relay thread only
  std::thread thread_;
};

}  // namespace petrel::hq::testing

#endif  // PETREL_TESTS_QUIC_UDP_RELAY_H_
