// Internal (tests): a UDP relay on its own thread — datagrams from a client to the relay go to
// the current target, and the target's answers go back to the client. Tests use it to look at
// and drop datagrams on the wire (a filter sees each one), to make a server "lose" a connection
// without the client hearing of it (SetTarget), and to rebind the client's side to a new port
// the way a NAT does (Rebind).
#ifndef PETREL_TESTS_QUIC_UDP_RELAY_H_
#define PETREL_TESTS_QUIC_UDP_RELAY_H_

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <functional>
#include <mutex>
#include <thread>

#include "absl/types/span.h"
#include "petrel/common/socket_address.h"

namespace petrel::hq::testing {

class UdpRelay {
 public:
  enum class Direction { kToServer, kToClient };
  // Runs on the relay thread for every datagram; false drops it.
  using Filter = std::function<bool(Direction, absl::Span<const uint8_t>)>;

  explicit UdpRelay(const SocketAddress& target, Filter filter = nullptr)
      : filter_(std::move(filter)), target_(target) {
    front_ = Bind();
    back_ = Bind();
    wake_fd_ = ::eventfd(0, EFD_CLOEXEC);
    thread_ = std::thread([this] { Loop(); });
  }
  ~UdpRelay() {
    stop_.store(true);
    Wake();
    thread_.join();
    ::close(front_);
    ::close(back_);
    ::close(wake_fd_);
  }

  SocketAddress address() const { return LocalOf(front_); }
  // The address the server sees the client at (changes with Rebind).
  SocketAddress server_side_address() {
    std::lock_guard<std::mutex> lock(mu_);
    return LocalOf(back_);
  }
  // From now on the client's datagrams go to `target`, and only its answers come back.
  void SetTarget(const SocketAddress& target) {
    std::lock_guard<std::mutex> lock(mu_);
    target_ = target;
  }
  // NAT rebinding: the client's next datagrams reach the server from a new port. Safe from any
  // thread, also from inside the filter.
  void Rebind() {
    rebind_.store(true);
    Wake();
  }

  uint64_t bytes(Direction d) const { return bytes_[static_cast<int>(d)].load(); }
  uint64_t datagrams(Direction d) const { return datagrams_[static_cast<int>(d)].load(); }

 private:
  static int Bind() {
    const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    SocketAddress any = *SocketAddress::Parse("127.0.0.1", 0);
    ::bind(fd, any.sockaddr_ptr(), any.length());
    return fd;
  }
  static SocketAddress LocalOf(int fd) {
    sockaddr_storage ss{};
    socklen_t len = sizeof(ss);
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len);
    return SocketAddress(reinterpret_cast<sockaddr*>(&ss), len);
  }
  void Wake() {
    const uint64_t one = 1;
    (void)!::write(wake_fd_, &one, sizeof(one));
  }
  bool Pass(Direction d, const char* data, ssize_t n) {
    if (filter_ && !filter_(d, absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(data),
                                                   static_cast<size_t>(n)))) {
      return false;
    }
    bytes_[static_cast<int>(d)].fetch_add(static_cast<uint64_t>(n));
    datagrams_[static_cast<int>(d)].fetch_add(1);
    return true;
  }

  void Loop() {
    char buf[65536];
    for (;;) {
      pollfd fds[3] = {{front_, POLLIN, 0}, {back_, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
      if (::poll(fds, 3, -1) < 0) continue;
      if (fds[2].revents != 0) {
        uint64_t v;
        (void)!::read(wake_fd_, &v, sizeof(v));
        if (stop_.load()) return;
        if (rebind_.exchange(false)) {
          const int fresh = Bind();
          std::lock_guard<std::mutex> lock(mu_);
          ::close(back_);
          back_ = fresh;
        }
        continue;  // fds[1] may name the old socket
      }
      if (fds[0].revents != 0) {
        sockaddr_storage from{};
        socklen_t len = sizeof(from);
        const ssize_t n =
            ::recvfrom(front_, buf, sizeof(buf), 0, reinterpret_cast<sockaddr*>(&from), &len);
        if (n >= 0) {
          client_ = SocketAddress(reinterpret_cast<sockaddr*>(&from), len);
          if (Pass(Direction::kToServer, buf, n)) {
            std::lock_guard<std::mutex> lock(mu_);
            ::sendto(back_, buf, n, 0, target_.sockaddr_ptr(), target_.length());
          }
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
        if (n >= 0 && current && !client_.empty() && Pass(Direction::kToClient, buf, n)) {
          ::sendto(front_, buf, n, 0, client_.sockaddr_ptr(), client_.length());
        }
      }
    }
  }

  const Filter filter_;
  int front_ = -1;
  int back_ = -1;  // replaced by the relay thread on Rebind, under mu_
  int wake_fd_ = -1;
  std::atomic<bool> stop_{false};
  std::atomic<bool> rebind_{false};
  std::atomic<uint64_t> bytes_[2] = {0, 0};
  std::atomic<uint64_t> datagrams_[2] = {0, 0};
  std::mutex mu_;
  SocketAddress target_;  // guarded by mu_
  SocketAddress client_;  // relay thread only
  std::thread thread_;
};

}  // namespace petrel::hq::testing

#endif  // PETREL_TESTS_QUIC_UDP_RELAY_H_
