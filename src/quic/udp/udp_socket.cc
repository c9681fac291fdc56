#include "quic/udp/udp_socket.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <netinet/udp.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace petrel::quic {

// A RecvSlot starts with an iovec's two fields, in its order: recvmmsg reads the slot as one.
static_assert(offsetof(RecvSlot, data) == offsetof(iovec, iov_base) &&
              offsetof(RecvSlot, capacity) == offsetof(iovec, iov_len) &&
              sizeof(RecvSlot::data) == sizeof(iovec::iov_base) &&
              sizeof(RecvSlot::capacity) == sizeof(iovec::iov_len));

namespace {

absl::Status Errno(absl::string_view what) { return absl::ErrnoToStatus(errno, what); }

bool SetInt(int fd, int level, int name, int value) {
  return setsockopt(fd, level, name, &value, sizeof(value)) == 0;
}

// Kernels before 4.18 have no UDP_SEGMENT; reading the option tells without sending.
bool KernelHasGso(int fd) {
  int size = 0;
  socklen_t len = sizeof(size);
  return getsockopt(fd, SOL_UDP, UDP_SEGMENT, &size, &len) == 0;
}

// splitmix64: a tiny seeded generator for the loss test hook.
uint64_t NextRandom(uint64_t* state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

bool DropForTest(uint64_t* state, double rate) {
  if (rate <= 0) return false;
  return static_cast<double>(NextRandom(state) >> 11) * 0x1.0p-53 < rate;
}

}  // namespace

absl::StatusOr<std::unique_ptr<UdpSocket>> UdpSocket::Bind(const SocketAddress& addr,
                                                           const UdpSocketOptions& options) {
  if (addr.empty()) return absl::InvalidArgumentError("UDP bind address is empty");
  const int family = addr.family();
  int inherited = -1;
  for (const auto& [address, fd] : options.inherited) {
    if (address == addr) inherited = fd;
  }
  const int fd = inherited >= 0
                     ? fcntl(inherited, F_DUPFD_CLOEXEC, 0)
                     : socket(family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, IPPROTO_UDP);
  if (fd < 0) return Errno(inherited >= 0 ? "fcntl(F_DUPFD_CLOEXEC)" : "socket(UDP)");
  auto fail = [fd](absl::string_view what) {
    absl::Status s = Errno(what);
    close(fd);
    return s;
  };
  if (inherited >= 0) {  // O_NONBLOCK is the open file's: shared with the inherited fd
    const int flags = fcntl(fd, F_GETFL);
    if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0) return fail("fcntl(O_NONBLOCK)");
  } else if (options.reuse_port && !SetInt(fd, SOL_SOCKET, SO_REUSEPORT, 1)) {
    return fail("setsockopt(SO_REUSEPORT)");
  }
  // Buffer sizes are best effort: the kernel caps them at rmem_max/wmem_max.
  SetInt(fd, SOL_SOCKET, SO_RCVBUF, options.recv_buffer_bytes);
  SetInt(fd, SOL_SOCKET, SO_SNDBUF, options.send_buffer_bytes);
  if (family == AF_INET6) {
    if ((inherited < 0 && !SetInt(fd, IPPROTO_IPV6, IPV6_V6ONLY, options.ipv6_only ? 1 : 0)) ||
        !SetInt(fd, IPPROTO_IPV6, IPV6_RECVPKTINFO, 1) ||
        !SetInt(fd, IPPROTO_IPV6, IPV6_RECVTCLASS, 1)) {
      return fail("setsockopt(IPv6 receive options)");
    }
    // QUIC datagrams must not be fragmented (RFC 9000 §14).
    SetInt(fd, IPPROTO_IPV6, IPV6_DONTFRAG, 1);
    SetInt(fd, IPPROTO_IPV6, IPV6_MTU_DISCOVER, IPV6_PMTUDISC_PROBE);
  } else {
    if (!SetInt(fd, IPPROTO_IP, IP_PKTINFO, 1) || !SetInt(fd, IPPROTO_IP, IP_RECVTOS, 1)) {
      return fail("setsockopt(IPv4 receive options)");
    }
    SetInt(fd, IPPROTO_IP, IP_MTU_DISCOVER, IP_PMTUDISC_PROBE);
  }
  if (inherited < 0 && bind(fd, addr.sockaddr_ptr(), addr.length()) != 0) {
    return fail(absl::StrCat("bind(UDP ", addr.ToString(), ")"));
  }
  sockaddr_storage bound{};
  socklen_t bound_len = sizeof(bound);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &bound_len) != 0) {
    return fail("getsockname");
  }
  auto sock = std::unique_ptr<UdpSocket>(
      new UdpSocket(fd, SocketAddress(reinterpret_cast<sockaddr*>(&bound), bound_len), options));
  sock->gro_ = options.enable_gro && SetInt(fd, SOL_UDP, UDP_GRO, 1);
  sock->gso_ = options.enable_gso && KernelHasGso(fd);
  return sock;
}

UdpSocket::UdpSocket(int fd, const SocketAddress& local, const UdpSocketOptions& options)
    : fd_(fd), local_(local), options_(options), loss_state_(options.test_loss_seed) {
  for (size_t i = 0; i < kMaxBatch; ++i) {
    msghdr& h = msgs_[i].msg_hdr;
    h.msg_name = &names_[i];
    h.msg_iovlen = 1;  // msg_iov: the slot's own buffer, set in Receive
    h.msg_control = controls_[i].data();
  }
  ResetHeaders(kMaxBatch);
}

void UdpSocket::ResetHeaders(size_t count) {
  for (size_t i = 0; i < count; ++i) {
    msghdr& h = msgs_[i].msg_hdr;
    h.msg_namelen = sizeof(names_[i]);
    h.msg_controllen = kControlBytes;
    h.msg_flags = 0;
  }
}

UdpSocket::~UdpSocket() { close(fd_); }

absl::StatusOr<size_t> UdpSocket::Receive(absl::Span<RecvSlot> slots) {
  const size_t n = std::min(slots.size(), kMaxBatch);
  // The kernel wrote only the headers of the datagrams it returned last time; the others are
  // as they were set. Most reads return one datagram, so this is a few stores, not 64 headers.
  ResetHeaders(headers_used_);
  headers_used_ = 0;
  RecvSlot* const slot = slots.data();
  // Each header's iovec is its slot's (data, capacity), read by the kernel where the caller keeps
  // it: pointed at again only for another array of slots (or more of them), not copied for all
  // 64 slots on every read (576 instructions a read, most of a one-datagram read's cost).
  if (slot != iov_slots_ || n > iov_count_) {
    for (size_t i = 0; i < n; ++i) msgs_[i].msg_hdr.msg_iov = reinterpret_cast<iovec*>(&slot[i]);
    iov_slots_ = slot;
    iov_count_ = n;
  }
  int got;
  do {
    got = recvmmsg(fd_, msgs_.data(), static_cast<unsigned>(n), 0, nullptr);
  } while (got < 0 && errno == EINTR);
  ++recvmmsg_calls_;
  if (got < 0) {
    if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
    return Errno("recvmmsg");
  }
  headers_used_ = static_cast<size_t>(got);
  size_t kept = 0;
  for (int i = 0; i < got; ++i) {
    if (DropForTest(&loss_state_, options_.test_rx_loss)) continue;
    const msghdr& h = msgs_[i].msg_hdr;
    // Compact kept datagrams to the front. A kept datagram's bytes stay in its buffer, so the
    // buffer (data, capacity, owner) moves with it and the dropped one's buffer takes its place.
    if (kept != static_cast<size_t>(i)) {
      std::swap(slot[kept].data, slot[i].data);
      std::swap(slot[kept].capacity, slot[i].capacity);
      std::swap(slot[kept].owner, slot[i].owner);
    }
    RecvSlot& s = slot[kept++];
    s.length = msgs_[i].msg_len;
    s.segment_size = 0;
    s.ecn = 0;
    s.peer = SocketAddress(static_cast<const sockaddr*>(h.msg_name), h.msg_namelen);
    s.local = local_;
    if ((h.msg_flags & MSG_TRUNC) != 0) s.length = 0;  // too big for the slot: dropped
    for (cmsghdr* c = CMSG_FIRSTHDR(&h); c != nullptr;
         c = CMSG_NXTHDR(const_cast<msghdr*>(&h), c)) {
      if (c->cmsg_level == SOL_UDP && c->cmsg_type == UDP_GRO) {
        int seg = 0;
        std::memcpy(&seg, CMSG_DATA(c), sizeof(seg));
        if (seg > 0 && static_cast<size_t>(seg) < s.length) s.segment_size = seg;
      } else if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_TOS) {
        s.ecn = *CMSG_DATA(c) & 0x3;
      } else if (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_TCLASS) {
        int tclass = 0;
        std::memcpy(&tclass, CMSG_DATA(c), sizeof(tclass));
        s.ecn = tclass & 0x3;
      } else if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_PKTINFO) {
        in_pktinfo info;
        std::memcpy(&info, CMSG_DATA(c), sizeof(info));
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr = info.ipi_addr;
        a.sin_port = htons(local_.port());
        s.local = SocketAddress(reinterpret_cast<sockaddr*>(&a), sizeof(a));
      } else if (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_PKTINFO) {
        in6_pktinfo info;
        std::memcpy(&info, CMSG_DATA(c), sizeof(info));
        sockaddr_in6 a{};
        a.sin6_family = AF_INET6;
        a.sin6_addr = info.ipi6_addr;
        a.sin6_port = htons(local_.port());
        s.local = SocketAddress(reinterpret_cast<sockaddr*>(&a), sizeof(a));
      }
    }
  }
  return kept;
}

UdpSender::UdpSender(const UdpSocket& socket, const UdpSenderOptions& options)
    : fd_(socket.fd()),
      v6_(socket.local_address().is_v6()),
      gso_(socket.gso_enabled()),
      options_(options),
      loss_state_(options.test_loss_seed) {}

UdpSender::~UdpSender() {
  // What the connections wrote last (a CONNECTION_CLOSE at shutdown) still leaves; the owners
  // are gone or going, so a refusal is not reported.
  for (size_t i = 0; i < staged_count_; ++i) stage_->messages[i].owner = nullptr;
  FlushStaged();
  flush_.reset();
  if (watch_fd_ >= 0) {
    loop_->Unregister(watch_fd_);
    ::close(watch_fd_);
  }
}

absl::Status UdpSender::WatchWritability(EventLoop* loop) {
  if (loop_ != nullptr) return absl::FailedPreconditionError("UdpSender: already watched");
  const int fd = ::fcntl(fd_, F_DUPFD_CLOEXEC, 0);
  if (fd < 0) return absl::ErrnoToStatus(errno, "UdpSender: dup");
  if (absl::Status s = loop->Register(fd, 0, this); !s.ok()) {
    ::close(fd);
    return s;
  }
  loop_ = loop;
  watch_fd_ = fd;
  flush_ = std::make_unique<AfterBatch>(loop, [this] { FlushStaged(); });
  return absl::OkStatus();
}

void UdpSender::Wait(Waiter* waiter) {
  if (std::find(waiters_.begin(), waiters_.end(), waiter) == waiters_.end()) {
    waiters_.push_back(waiter);
  }
  if (!blocked_ && !wake_posted_) {
    // Writable already (another waiter's send got through): the next batch step tells it.
    wake_posted_ = true;
    loop_->RunAfterBatch([this] {
      wake_posted_ = false;
      if (!blocked_) WakeWaiters();
    });
  }
}

void UdpSender::CancelWait(Waiter* waiter) {
  waiters_.erase(std::remove(waiters_.begin(), waiters_.end(), waiter), waiters_.end());
}

void UdpSender::Close() {
  if (fd_ < 0) return;
  FlushStaged();
  fd_ = -1;
  if (watch_fd_ >= 0) {
    loop_->Unregister(watch_fd_);
    ::close(watch_fd_);
    watch_fd_ = -1;
  }
  blocked_ = false;
  // A waiter's next send fails instead of waiting for a writability that cannot come.
  if (!waiters_.empty() && !wake_posted_) {
    wake_posted_ = true;
    loop_->RunAfterBatch([this] {
      wake_posted_ = false;
      WakeWaiters();
    });
  }
}

void UdpSender::OnIoEvent(uint32_t events) {
  if ((events & (EventLoop::kWritable | EventLoop::kError)) == 0) return;
  // Level-triggered: the interest goes until the next refused send.
  (void)loop_->SetInterest(watch_fd_, 0);
  blocked_ = false;
  ++writable_events_;
  WakeWaiters();
}

void UdpSender::WakeWaiters() {
  // A waiter may block the socket again and wait anew: it joins the next round.
  std::vector<Waiter*> ready;
  ready.swap(waiters_);
  for (size_t i = 0; i < ready.size(); ++i) {
    if (blocked_) {  // the socket filled up again: the rest keep waiting, in order
      waiters_.insert(waiters_.begin(), ready.begin() + static_cast<std::ptrdiff_t>(i),
                      ready.end());
      return;
    }
    ready[i]->OnSocketWritable();
  }
}

SendResult UdpSender::Send(const SendBatch& batch, StagedOwner* owner) {
  if (owner != nullptr && can_stage() && Stage(batch, owner)) {
    return SendResult{batch.length, false, 0};
  }
  if (staged_count_ > 0) {
    FlushStaged();
    if (blocked_) {  // what was staged before this batch waits: so does this batch
      MarkBlocked();
      return SendResult{0, true, 0};
    }
  }
  return SendNow(batch);
}

SendResult UdpSender::SendNow(const SendBatch& batch) {
  const SendResult r = SendUncounted(batch);
  if (r.would_block) MarkBlocked();
  if (r.bytes_sent > 0) CountSent(r.bytes_sent, batch.segment_size);
  return r;
}

void UdpSender::MarkBlocked() {
  ++blocked_sends_;
  if (options_.send_blocked != nullptr) options_.send_blocked->Inc();
  if (loop_ != nullptr && !blocked_) {
    blocked_ = true;
    (void)loop_->SetInterest(watch_fd_, EventLoop::kWritable);
  }
}

void UdpSender::CountSent(size_t bytes, size_t segment_size) {
  if (options_.datagrams_sent == nullptr) return;
  const size_t seg = segment_size == 0 ? bytes : segment_size;
  options_.datagrams_sent->Inc((bytes + seg - 1) / seg);
  if (options_.bytes_sent != nullptr) options_.bytes_sent->Inc(bytes);
}

SendResult UdpSender::SendUncounted(const SendBatch& batch) {
  if (fd_ < 0) return SendResult{0, false, EBADF};
  const size_t seg = batch.segment_size == 0 ? batch.length : batch.segment_size;
  const bool loss = options_.test_tx_loss > 0;
  if (gso_ && !loss && batch.length > seg) {
    SendResult r = SendOne(batch, batch.data, batch.length, seg);
    if (r.error != EIO) return r;
    // EIO: the device cannot segment (e.g. no checksum offload). Fall back for good.
    gso_ = false;
  }
  SendResult total;
  for (size_t off = 0; off < batch.length; off += seg) {
    const size_t len = std::min(seg, batch.length - off);
    if (loss && DropForTest(&loss_state_, options_.test_tx_loss)) {
      total.bytes_sent += len;
      continue;
    }
    SendResult r = SendOne(batch, batch.data + off, len, 0);
    if (r.bytes_sent == 0) {
      total.would_block = r.would_block;
      total.error = r.error;
      return total;
    }
    total.bytes_sent += r.bytes_sent;
  }
  return total;
}

void UdpSender::BuildMessage(const SendBatch& batch, const uint8_t* data, size_t length,
                             size_t segment_size, msghdr* h, iovec* iov, uint8_t* control) const {
  *iov = iovec{const_cast<uint8_t*>(data), length};
  *h = msghdr{};
  h->msg_name = const_cast<sockaddr*>(batch.peer->sockaddr_ptr());
  h->msg_namelen = batch.peer->length();
  h->msg_iov = iov;
  h->msg_iovlen = 1;
  h->msg_control = control;
  h->msg_controllen = UdpSocket::kControlBytes;
  size_t control_len = 0;
  cmsghdr* c = CMSG_FIRSTHDR(h);
  const bool v6 = v6_;
  // ECN codepoint on the IP header.
  {
    const int tos = batch.ecn & 0x3;
    c->cmsg_level = v6 ? IPPROTO_IPV6 : IPPROTO_IP;
    c->cmsg_type = v6 ? IPV6_TCLASS : IP_TOS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(c), &tos, sizeof(tos));
    control_len += CMSG_SPACE(sizeof(int));
    c = CMSG_NXTHDR(h, c);
  }
  if (batch.local != nullptr && !batch.local->empty()) {
    if (v6) {
      in6_pktinfo info{};
      info.ipi6_addr =
          reinterpret_cast<const sockaddr_in6*>(batch.local->sockaddr_ptr())->sin6_addr;
      c->cmsg_level = IPPROTO_IPV6;
      c->cmsg_type = IPV6_PKTINFO;
      c->cmsg_len = CMSG_LEN(sizeof(info));
      std::memcpy(CMSG_DATA(c), &info, sizeof(info));
      control_len += CMSG_SPACE(sizeof(info));
    } else {
      in_pktinfo info{};
      info.ipi_spec_dst =
          reinterpret_cast<const sockaddr_in*>(batch.local->sockaddr_ptr())->sin_addr;
      c->cmsg_level = IPPROTO_IP;
      c->cmsg_type = IP_PKTINFO;
      c->cmsg_len = CMSG_LEN(sizeof(info));
      std::memcpy(CMSG_DATA(c), &info, sizeof(info));
      control_len += CMSG_SPACE(sizeof(info));
    }
    c = CMSG_NXTHDR(h, c);
  }
  if (segment_size != 0 && segment_size < length) {
    const uint16_t gso_size = static_cast<uint16_t>(segment_size);
    c->cmsg_level = SOL_UDP;
    c->cmsg_type = UDP_SEGMENT;
    c->cmsg_len = CMSG_LEN(sizeof(gso_size));
    std::memcpy(CMSG_DATA(c), &gso_size, sizeof(gso_size));
    control_len += CMSG_SPACE(sizeof(gso_size));
  }
  h->msg_controllen = control_len;
}

SendResult UdpSender::SendOne(const SendBatch& batch, const uint8_t* data, size_t length,
                              size_t segment_size) {
  iovec iov;
  msghdr h;
  BuildMessage(batch, data, length, segment_size, &h, &iov, control_.data());

  SendResult r;
  ssize_t n;
  do {
    n = sendmsg(fd_, &h, 0);
  } while (n < 0 && errno == EINTR);
  ++sendmsg_calls_;
  if (n >= 0) {
    r.bytes_sent = length;  // UDP sends all or nothing
  } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
    r.would_block = true;
  } else {
    r.error = errno;
  }
  return r;
}

}  // namespace petrel::quic
