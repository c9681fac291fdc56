// Internal (petrel-netsim): nonblocking UDP sockets with the ECN codepoint carried through,
// received in batches (recvmmsg) and sent in batches (sendmmsg).
#ifndef PETREL_INTEROP_SIM_UDP_H_
#define PETREL_INTEROP_SIM_UDP_H_

#include <sys/socket.h>
#include <sys/uio.h>

#include <array>
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "petrel/common/socket_address.h"

namespace petrel::netsim {

// A nonblocking UDP socket bound to `bind_addr` (port 0 picks one) that reports the TOS /
// traffic class of what it receives, with 4 MB buffers (capped by net.core.[rw]mem_max) so a
// burst at hundreds of Mbit/s is not lost before the simulator sees it.
absl::StatusOr<int> OpenUdpSocket(const SocketAddress& bind_addr);
SocketAddress LocalAddress(int fd);

// Receives up to kBatch datagrams per call into buffers of its own.
class UdpReceiver {
 public:
  static constexpr int kBatch = 64;
  static constexpr size_t kMaxDatagram = 65535;

  UdpReceiver();
  // Returns the count received (0 when the socket would block), or -1 with errno on an error.
  int Receive(int fd);
  const uint8_t* data(int i) const {
    return buffers_.data() + static_cast<size_t>(i) * kMaxDatagram;
  }
  size_t size(int i) const { return msgs_[i].msg_len; }
  SocketAddress peer(int i) const;
  uint8_t ecn(int i) const;  // the two low TOS bits; 0 when the kernel did not report them

 private:
  std::vector<uint8_t> buffers_;
  std::array<mmsghdr, kBatch> msgs_{};
  std::array<iovec, kBatch> iov_{};
  std::array<sockaddr_storage, kBatch> peers_{};
  alignas(cmsghdr) std::array<std::array<uint8_t, 64>, kBatch> control_{};
};

// Collects datagrams for one socket and sends them with sendmmsg. The payload pointers must
// stay valid until Flush().
class UdpSender {
 public:
  static constexpr int kBatch = 64;

  // Queues one datagram to `to` with ECN codepoint `ecn`; flushes first when the batch is full
  // or `fd` differs from the queued ones.
  void Add(int fd, const SocketAddress& to, const uint8_t* data, size_t size, uint8_t ecn);
  // Sends everything queued. A datagram the kernel refuses is dropped (a router does not retry
  // either) and counted (see TakeFailures()).
  void Flush();
  // Refused datagrams since the last call; resets the count.
  uint64_t TakeFailures() {
    const uint64_t f = failed_;
    failed_ = 0;
    return f;
  }

 private:
  int fd_ = -1;
  int count_ = 0;
  uint64_t failed_ = 0;
  std::array<mmsghdr, kBatch> msgs_{};
  std::array<iovec, kBatch> iov_{};
  std::array<sockaddr_storage, kBatch> peers_{};
  alignas(cmsghdr) std::array<std::array<uint8_t, 32>, kBatch> control_{};
};

}  // namespace petrel::netsim

#endif  // PETREL_INTEROP_SIM_UDP_H_
