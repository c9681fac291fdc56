#include "udp.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <unistd.h>

#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace petrel::netsim {
namespace {

constexpr int kSocketBuffer = 4 << 20;

void SetInt(int fd, int level, int name, int value) {
  (void)::setsockopt(fd, level, name, &value, sizeof(value));
}

bool IsV4Mapped(const SocketAddress& a) {
  return a.is_v6() &&
         IN6_IS_ADDR_V4MAPPED(&reinterpret_cast<const sockaddr_in6*>(a.sockaddr_ptr())->sin6_addr);
}

}  // namespace

absl::StatusOr<int> OpenUdpSocket(const SocketAddress& bind_addr) {
  const int fd = ::socket(bind_addr.family(), SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::ErrnoToStatus(errno, "socket");
  SetInt(fd, SOL_SOCKET, SO_RCVBUF, kSocketBuffer);
  SetInt(fd, SOL_SOCKET, SO_SNDBUF, kSocketBuffer);
  if (bind_addr.is_v6()) {
    SetInt(fd, IPPROTO_IPV6, IPV6_RECVTCLASS, 1);
    SetInt(fd, IPPROTO_IP, IP_RECVTOS, 1);  // for v4-mapped peers of a dual-stack socket
  } else {
    SetInt(fd, IPPROTO_IP, IP_RECVTOS, 1);
  }
  if (::bind(fd, bind_addr.sockaddr_ptr(), bind_addr.length()) != 0) {
    const int err = errno;
    ::close(fd);
    return absl::ErrnoToStatus(err, absl::StrCat("bind ", bind_addr.ToString()));
  }
  return fd;
}

SocketAddress LocalAddress(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return SocketAddress();
  return SocketAddress(reinterpret_cast<const sockaddr*>(&ss), len);
}

UdpReceiver::UdpReceiver() : buffers_(static_cast<size_t>(kBatch) * kMaxDatagram) {
  for (int i = 0; i < kBatch; ++i) {
    iov_[i].iov_base = buffers_.data() + static_cast<size_t>(i) * kMaxDatagram;
    iov_[i].iov_len = kMaxDatagram;
  }
}

int UdpReceiver::Receive(int fd) {
  for (int i = 0; i < kBatch; ++i) {
    msghdr& h = msgs_[i].msg_hdr;
    h.msg_name = &peers_[i];
    h.msg_namelen = sizeof(peers_[i]);
    h.msg_iov = &iov_[i];
    h.msg_iovlen = 1;
    h.msg_control = control_[i].data();
    h.msg_controllen = control_[i].size();
    h.msg_flags = 0;
    msgs_[i].msg_len = 0;
  }
  const int n = ::recvmmsg(fd, msgs_.data(), kBatch, MSG_DONTWAIT, nullptr);
  if (n < 0) return (errno == EAGAIN || errno == EWOULDBLOCK) ? 0 : -1;
  return n;
}

SocketAddress UdpReceiver::peer(int i) const {
  return SocketAddress(reinterpret_cast<const sockaddr*>(&peers_[i]), msgs_[i].msg_hdr.msg_namelen);
}

uint8_t UdpReceiver::ecn(int i) const {
  const msghdr& h = msgs_[i].msg_hdr;
  for (cmsghdr* c = CMSG_FIRSTHDR(&h); c != nullptr; c = CMSG_NXTHDR(const_cast<msghdr*>(&h), c)) {
    if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_TOS && c->cmsg_len >= CMSG_LEN(1)) {
      return *CMSG_DATA(c) & IPTOS_ECN_MASK;
    }
    if (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_TCLASS &&
        c->cmsg_len >= CMSG_LEN(sizeof(int))) {
      int tclass = 0;
      std::memcpy(&tclass, CMSG_DATA(c), sizeof(tclass));
      return static_cast<uint8_t>(tclass & IPTOS_ECN_MASK);
    }
  }
  return 0;
}

void UdpSender::Add(int fd, const SocketAddress& to, const uint8_t* data, size_t size,
                    uint8_t ecn) {
  if (count_ == kBatch || (count_ > 0 && fd != fd_)) Flush();
  fd_ = fd;
  const int i = count_++;
  std::memcpy(&peers_[i], to.sockaddr_ptr(), to.length());
  iov_[i].iov_base = const_cast<uint8_t*>(data);
  iov_[i].iov_len = size;
  msghdr& h = msgs_[i].msg_hdr;
  h = msghdr{};
  h.msg_name = &peers_[i];
  h.msg_namelen = to.length();
  h.msg_iov = &iov_[i];
  h.msg_iovlen = 1;
  // Always set the codepoint, also Not-ECT, so that a socket never leaks a previous value.
  h.msg_control = control_[i].data();
  h.msg_controllen = CMSG_SPACE(sizeof(int));
  cmsghdr* c = CMSG_FIRSTHDR(&h);
  const bool v4 = !to.is_v6() || IsV4Mapped(to);
  c->cmsg_level = v4 ? IPPROTO_IP : IPPROTO_IPV6;
  c->cmsg_type = v4 ? IP_TOS : IPV6_TCLASS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  const int value = ecn & IPTOS_ECN_MASK;
  std::memcpy(CMSG_DATA(c), &value, sizeof(value));
}

void UdpSender::Flush() {
  int sent = 0;
  while (sent < count_) {
    const int n = ::sendmmsg(fd_, msgs_.data() + sent, count_ - sent, 0);
    if (n > 0) {
      sent += n;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    // The datagram at `sent` was refused (EAGAIN with a full buffer, EMSGSIZE, unreachable):
    // drop it and go on with the rest.
    ++failed_;
    ++sent;
  }
  count_ = 0;
}

}  // namespace petrel::netsim
