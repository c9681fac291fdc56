// Internal: UDP I/O in batches. UdpSocket owns the socket and receives — recvmmsg with UDP_GRO,
// PKTINFO and ECN — on the thread that reads it (the master). UdpSender sends on it — sendmsg
// with UDP_SEGMENT (GSO), a source address and ECN — and each sending thread (every worker) has
// its own, so senders share nothing but the fd. Both fall back to one datagram per call where the
// kernel lacks GRO or GSO. No allocation per datagram: message headers and control buffers are
// preallocated. A sender on a loop can also stage batches and send all that its connections
// wrote in one loop turn with one sendmmsg (udp_send_stage.cc).
#ifndef PETREL_QUIC_UDP_UDP_SOCKET_H_
#define PETREL_QUIC_UDP_UDP_SOCKET_H_

#include <sys/socket.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "petrel/common/after_batch.h"
#include "petrel/common/event_loop.h"
#include "petrel/common/metrics.h"
#include "petrel/common/socket_address.h"

namespace petrel::quic {

struct UdpSocketOptions {
  bool reuse_port = false;
  bool enable_gro = true;  // ask the kernel to coalesce equal-size datagrams on receive
  bool enable_gso = true;  // let senders put many packets of one connection in one sendmsg
  int recv_buffer_bytes = 4 << 20;
  int send_buffer_bytes = 4 << 20;
  // IPv6 sockets take IPv6 only (false: "::" takes IPv4 too, as IPv4-mapped addresses, with
  // the reply's source address from IPV6_PKTINFO all the same).
  bool ipv6_only = true;
  // Sockets already bound (handed over by a service manager), by their address; not owned.
  // Bind() of one of these addresses sets up a duplicate of that socket instead of binding
  // one (reuse_port, ipv6_only and the address do not apply: they are the socket's own).
  std::vector<std::pair<SocketAddress, int>> inherited;
  // Test hook: drop this fraction of received datagrams, with a seeded generator.
  double test_rx_loss = 0;
  uint64_t test_loss_seed = 1;
};

struct UdpSenderOptions {
  // Lets connections stage their batches (UdpSender::Send with an owner) for one sendmmsg per
  // loop turn: for a sender that many connections share (a worker's); ~0.5 MiB once used.
  bool stage = false;
  // Test hook: drop this fraction of sent datagrams (after GSO is split), seeded.
  double test_tx_loss = 0;
  uint64_t test_loss_seed = 2;
  // Datagrams and bytes sent (not owned; null: not counted).
  Counter* datagrams_sent = nullptr;
  Counter* bytes_sent = nullptr;
  // Sends the socket refused for a full send buffer (EAGAIN); not owned; null: not counted.
  Counter* send_blocked = nullptr;
};

// One slot of a receive batch. The caller sets `data` and `capacity`; Receive fills the rest.
struct RecvSlot {
  // First, in this order: the two fields of an iovec, which the socket hands the kernel as one.
  uint8_t* data = nullptr;
  size_t capacity = 0;
  void* owner = nullptr;  // the caller's handle for the buffer; travels with `data`
  size_t length = 0;
  // With GRO, `length` bytes hold consecutive datagrams of `segment_size` bytes (the last may be
  // shorter); 0 means one datagram.
  size_t segment_size = 0;
  SocketAddress peer;
  SocketAddress local;  // the destination address of the datagram (IP_PKTINFO)
  uint8_t ecn = 0;      // the two ECN bits of the IP header
};

// Packets for one peer: `length` bytes cut into `segment_size` pieces (the last may be shorter).
struct SendBatch {
  const uint8_t* data = nullptr;
  size_t length = 0;
  size_t segment_size = 0;  // 0: one datagram of `length` bytes
  const SocketAddress* peer = nullptr;
  const SocketAddress* local = nullptr;  // source address to send from; null: the kernel's choice
  uint8_t ecn = 0;
};

struct SendResult {
  size_t bytes_sent = 0;     // whole segments sent, counted from the start of the batch
  bool would_block = false;  // the rest must wait for EPOLLOUT
  int error = 0;             // errno of a hard failure (the unsent rest should be dropped)
};

class UdpSocket {
 public:
  static constexpr size_t kMaxBatch = 64;
  // One UDP_SEGMENT send carries at most 64 segments and at most kMaxGsoBytes in all (the
  // payload limit of one UDP datagram, which the kernel splits afterwards).
  static constexpr size_t kMaxGsoSegments = 64;
  static constexpr size_t kMaxGsoBytes = 65507;

  // Creates a non-blocking socket bound to `addr` (port 0 picks one), or takes the inherited
  // one bound to `addr` (options.inherited).
  static absl::StatusOr<std::unique_ptr<UdpSocket>> Bind(const SocketAddress& addr,
                                                         const UdpSocketOptions& options);
  ~UdpSocket();
  UdpSocket(const UdpSocket&) = delete;
  UdpSocket& operator=(const UdpSocket&) = delete;

  int fd() const { return fd_; }
  const SocketAddress& local_address() const { return local_; }
  // Whether senders may use GSO: asked for and supported by the kernel.
  bool gso_enabled() const { return gso_; }
  bool gro_enabled() const { return gro_; }

  // Receives up to min(slots.size(), kMaxBatch) datagrams with one recvmmsg. Returns how many
  // slots were filled; 0 when nothing is pending. Datagrams the loss hook drops are not counted.
  // The receiving thread only.
  absl::StatusOr<size_t> Receive(absl::Span<RecvSlot> slots);

  uint64_t recvmmsg_calls() const { return recvmmsg_calls_; }

  // Enough for PKTINFO (v6 is larger), TOS/TCLASS and UDP_GRO or UDP_SEGMENT.
  static constexpr size_t kControlBytes = 128;

 private:
  UdpSocket(int fd, const SocketAddress& local, const UdpSocketOptions& options);
  // Sets the fields recvmmsg writes back (name and control lengths, flags) of the first
  // `count` headers to what the next call expects.
  void ResetHeaders(size_t count);

  int fd_;
  SocketAddress local_;
  UdpSocketOptions options_;
  bool gso_ = false;
  bool gro_ = false;
  uint64_t loss_state_;
  uint64_t recvmmsg_calls_ = 0;

  // Name and control pointers are set once, iovec pointers by Receive (they point at the
  // caller's slots); headers_used_ of them were written by the last recvmmsg.
  std::array<mmsghdr, kMaxBatch> msgs_{};
  size_t headers_used_ = 0;
  const RecvSlot* iov_slots_ = nullptr;  // the slots msgs_' iovecs point at (Receive)
  size_t iov_count_ = 0;
  std::array<sockaddr_storage, kMaxBatch> names_{};
  alignas(cmsghdr) std::array<std::array<uint8_t, kControlBytes>, kMaxBatch> controls_{};
};

// Sends on a UdpSocket's fd. One per sending thread; the socket must outlive it.
class UdpSender : private IoHandler {
 public:
  // Told once the socket takes data again after a send that would have blocked.
  class Waiter {
   public:
    virtual ~Waiter() = default;
    virtual void OnSocketWritable() = 0;
  };

  // Owns staged batches until they are sent; told of each that the socket refuses (EAGAIN)
  // when the stage is flushed, in the order they were staged, so that it can keep them (the
  // bytes are valid during the call only) and Wait for writability. Loop thread only.
  class StagedOwner {
   public:
    virtual ~StagedOwner() = default;
    virtual void OnStagedBatchRefused(UdpSender* sender, const SendBatch& batch) = 0;
  };

  // Staging holds at most this many messages and bytes; a fuller stage is sent at once.
  static constexpr size_t kMaxStagedMessages = UdpSocket::kMaxBatch;
  static constexpr size_t kStageBytes = 512 << 10;

  explicit UdpSender(const UdpSocket& socket, const UdpSenderOptions& options = {});
  ~UdpSender() override;
  UdpSender(const UdpSender&) = delete;
  UdpSender& operator=(const UdpSender&) = delete;

  // Lets senders wait for writability on `loop` (their thread's): a duplicate of the socket's
  // fd, so that the loop that reads the socket can watch it too, is registered there with no
  // interest until a send would block. Loop thread only; at most once.
  absl::Status WatchWritability(EventLoop* loop);
  bool can_wait() const { return loop_ != nullptr; }
  // A send would have blocked and the socket has not been seen writable since: waiting beats
  // another sendmsg that would fail too.
  bool blocked() const { return blocked_; }
  // Tells `waiter` (once, in the order of the calls) when the socket is writable again; at once
  // (on the loop, not inside this call) if it is not blocked. A waiter that goes away first
  // calls CancelWait. Needs WatchWritability.
  void Wait(Waiter* waiter);
  void CancelWait(Waiter* waiter);
  // Stops using the socket for good, before its owner closes it: the writability watch goes,
  // later sends fail (EBADF) without reaching any fd, and waiters are told at once (their sends
  // then fail too and loss recovery gives up on the path). For a sender that connections may
  // still point to after the server stopped listening on its address: the object stays valid,
  // the fd number does not. Loop thread (the watching one) only.
  void Close();
  bool closed() const { return fd_ < 0; }

  // Sends a batch: one sendmsg with UDP_SEGMENT when GSO is on, else one sendmsg per segment.
  // If the kernel refuses GSO at run time (EIO), this sender turns GSO off and re-sends.
  // Whatever is staged goes first (FlushStaged); if that fills the socket, `batch` is refused
  // as would_block without a try, so that nothing overtakes what was refused.
  //
  // With an `owner`, a batch written at StagingSpace() is staged instead: it reports as sent
  // and leaves with the other batches staged in this loop turn, in one sendmmsg, when the
  // loop's batch ends (AfterBatch) — or earlier, when the stage is full or anything is sent
  // at once. Staging needs options.stage, WatchWritability and no loss hook; without them, or
  // for a batch elsewhere, it is sent at once.
  SendResult Send(const SendBatch& batch, StagedOwner* owner = nullptr);

  // Where the next batch to stage is to be written: at least UdpSocket::kMaxGsoBytes. Sends
  // what is staged first if the stage has less room left. Null if this sender cannot stage.
  uint8_t* StagingSpace();
  bool can_stage() const {
    return options_.stage && loop_ != nullptr && fd_ >= 0 && options_.test_tx_loss <= 0;
  }
  // Sends every staged batch now (one sendmmsg, more after an interruption or an error).
  void FlushStaged();
  // `owner` goes away: its staged batches are still sent, but a refusal is not reported.
  void ForgetStaged(const StagedOwner* owner);
  size_t staged_messages() const { return staged_count_; }

  bool gso_enabled() const { return gso_; }
  uint64_t sendmsg_calls() const { return sendmsg_calls_; }
  uint64_t sendmmsg_calls() const { return sendmmsg_calls_; }
  uint64_t blocked_sends() const { return blocked_sends_; }
  uint64_t writable_events() const { return writable_events_; }  // after a blocked send

 private:
  void OnIoEvent(uint32_t events) override;
  void WakeWaiters();

  SendResult SendNow(const SendBatch& batch);
  SendResult SendUncounted(const SendBatch& batch);
  SendResult SendOne(const SendBatch& batch, const uint8_t* data, size_t length,
                     size_t segment_size);
  // Fills `h` (name, one iovec, control: ECN, source address, GSO size) for one message.
  void BuildMessage(const SendBatch& batch, const uint8_t* data, size_t length, size_t segment_size,
                    msghdr* h, iovec* iov, uint8_t* control) const;
  void MarkBlocked();
  void CountSent(size_t bytes, size_t segment_size);
  // Stages `batch` (at the stage's free space) as one message per GSO batch; false if the stage
  // has no room for it.
  bool Stage(const SendBatch& batch, StagedOwner* owner);

  // A staged message: its header points into the stage's arrays and arena.
  struct StagedMessage {
    StagedOwner* owner;
    size_t offset;  // into arena
    size_t length;
    size_t segment_size;  // 0: one datagram
    SocketAddress peer;
    SocketAddress local;
    uint8_t ecn;
  };
  // Allocated by the first StagingSpace(): senders that never stage pay nothing.
  struct StageBuffers {
    std::unique_ptr<uint8_t[]> arena{new uint8_t[kStageBytes]};  // not zeroed: written first
    std::array<StagedMessage, kMaxStagedMessages> messages;
    std::array<mmsghdr, kMaxStagedMessages> headers{};
    std::array<iovec, kMaxStagedMessages> iovs{};
    alignas(cmsghdr)
        std::array<std::array<uint8_t, UdpSocket::kControlBytes>, kMaxStagedMessages> controls{};
  };

  int fd_;  // -1 once closed
  const bool v6_;
  bool gso_;
  UdpSenderOptions options_;
  uint64_t loss_state_;
  uint64_t sendmsg_calls_ = 0;
  uint64_t sendmmsg_calls_ = 0;
  uint64_t blocked_sends_ = 0;
  uint64_t writable_events_ = 0;
  EventLoop* loop_ = nullptr;
  int watch_fd_ = -1;  // a dup of fd_, registered on loop_
  bool blocked_ = false;
  bool wake_posted_ = false;
  std::vector<Waiter*> waiters_;
  alignas(cmsghdr) std::array<uint8_t, UdpSocket::kControlBytes> control_{};
  std::unique_ptr<StageBuffers> stage_;
  size_t staged_count_ = 0;
  size_t staged_bytes_ = 0;            // the arena's used part
  std::unique_ptr<AfterBatch> flush_;  // the end-of-batch flush, once WatchWritability
};

}  // namespace petrel::quic

#endif  // PETREL_QUIC_UDP_UDP_SOCKET_H_
