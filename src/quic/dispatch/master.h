// Internal: the master of a QUIC server (DESIGN §3). It owns the UDP sockets, reads them in
// batches, parses only the invariant header and routes each datagram by its destination
// connection ID:
//   - a CID this server issued names its worker (QUIC-LB layout, quic/cid/server_cid.h);
//   - an Initial or 0-RTT packet with a client-chosen DCID goes to hash(DCID) mod N, so a
//     retransmitted Initial lands on the same worker;
//   - an unsupported version gets Version Negotiation; a short header with a CID that is not
//     ours gets a (rate-limited) Stateless Reset; anything else unroutable is dropped and counted.
// It never decrypts, never holds keys and never touches connection state.
//
// Modes: with one worker whose loop is the master's own (workers = 0), packets are handed over
// by a direct call. Otherwise each worker has a WorkerInbox: the master pushes buffers into its
// ring and wakes it only when the ring was empty; a full ring drops the datagram (the master
// never blocks).
//
// Listen sockets can come and go while the master runs (QuicServer::SetListenAddresses). A
// socket's index (ReceivedPacket::socket_index) never changes and is never reused: workers keep
// a sender per index. A socket that stops accepting drops what would start a connection but
// still routes the rest; it is closed once every worker has released it (its connections are
// gone), and its slot stays empty.
//
// Threads: everything runs on the master's loop thread, except that Create may run anywhere
// before the loops start.
#ifndef PETREL_QUIC_DISPATCH_MASTER_H_
#define PETREL_QUIC_DISPATCH_MASTER_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "petrel/common/event_loop.h"
#include "petrel/common/metrics.h"
#include "petrel/common/packet_pool.h"
#include "quic/cid/server_cid.h"
#include "quic/dispatch/packet_sink.h"
#include "quic/dispatch/worker_inbox.h"
#include "quic/stateless/stateless_responder.h"
#include "quic/udp/udp_socket.h"

namespace petrel::quic {

struct MasterConfig {
  std::vector<SocketAddress> listen;  // one UDP socket per address
  UdpSocketOptions socket_options;
  ServerCidConfig cid;
  StatelessResetKey reset_key{};
  double resets_per_second = 200;
  size_t reset_burst = 50;
  size_t ring_capacity = 4096;         // packets in flight to one worker
  size_t drain_budget = 64;            // packets a worker takes per loop turn
  size_t recv_batches_per_event = 16;  // recvmmsg calls per readiness event, then back to the
                                       // loop (direct mode: 1, see ReadSocket)
  size_t max_datagram_buffers = 0;     // 0: derived from the ring capacities
  // Allocate every datagram buffer at start instead of on demand: the receive path then never
  // allocates, at the price of the whole pool's memory up front.
  bool preallocate_buffers = false;
};

// Why the master dropped a datagram.
enum class DropReason : uint8_t {
  kMalformed,           // not a QUIC packet we could route
  kShortInitial,        // Initial in a datagram under 1200 bytes (RFC 9000 §14.1)
  kUnroutable,          // long header with a CID that is not ours and not a new connection's
  kRingFull,            // the worker's inbox was full
  kNoBuffer,            // the packet pool was exhausted
  kVersionNegotiation,  // a VN packet sent to a server
  kResetLimited,        // a stateless reset was due but rate-limited or too small to send
  kNotListening,        // would start a connection on a socket that no longer accepts them
  // A new connection's first flight while the workers hold three quarters of the datagram
  // buffers (they are behind): the rest stays for the connections they already serve, whose
  // lost packets would cost them backed-off retransmissions; the client repeats its Initial.
  kOverload,
  kCount,
};
const char* DropReasonName(DropReason r);

struct WorkerPort {
  EventLoop* loop = nullptr;  // the worker's loop; the master's own for workers = 0
  PacketSink* sink = nullptr;
};

class Master final : public IoHandler {
 public:
  static absl::StatusOr<std::unique_ptr<Master>> Create(const MasterConfig& config, EventLoop* loop,
                                                        std::vector<WorkerPort> workers,
                                                        MetricsRegistry* metrics = nullptr);
  // Destroy only after every worker loop has stopped: buffers still in the inboxes are reclaimed.
  ~Master() override;

  // Registers the sockets on the master's loop and each inbox on its worker's loop (through
  // RunInLoop, so a worker loop may already run). Master loop thread.
  absl::Status Start();
  // Stops reading (intake ends; queued packets still reach the workers). Master loop thread.
  void StopReceiving();

  // Adds `sockets` at indexes sockets().size() onwards, accepting, and reads them from now on
  // if the master has started. Every worker must already have a sender for each of them (the
  // master routes to workers by index). All or nothing: on error `sockets` stays with the
  // caller and nothing changed. Master loop thread.
  absl::Status AddSockets(std::vector<std::unique_ptr<UdpSocket>>& sockets);
  // From now on, datagrams on socket `index` that would start a connection are dropped
  // (kNotListening); the rest is routed as before. Master loop thread.
  void StopAccepting(size_t index);
  // A worker has no connection accepted on socket `index` left and has stopped sending on it.
  // Once every worker has, and the socket no longer accepts, it is unregistered and closed.
  // Master loop thread, never from inside OnPackets (the socket may be the one being read).
  void OnSocketReleased(size_t index);

  // Indexed by socket_index; a closed socket's entry is null.
  const std::vector<std::unique_ptr<UdpSocket>>& sockets() const { return sockets_; }
  bool accepting(size_t index) const { return accepting_[index] != 0; }
  const ServerCidCodec& cid_codec() const { return cid_codec_; }
  size_t worker_count() const { return workers_.size(); }
  bool direct() const { return direct_; }

  // Counters; master loop thread (or after it stopped).
  uint64_t datagrams_received() const { return datagrams_received_; }
  uint64_t routed_to(size_t worker) const { return routed_[worker]; }
  uint64_t drops(DropReason r) const { return drops_[static_cast<size_t>(r)]; }
  uint64_t version_negotiations_sent() const { return vn_sent_; }
  uint64_t stateless_resets_sent() const { return resets_sent_; }
  const WorkerInbox* inbox(size_t worker) const { return inboxes_[worker].get(); }

  void OnIoEvent(uint32_t events) override;

 private:
  // Routing of one datagram; returns the worker index or -1 (handled or dropped).
  // `shed_new`: new connections' Initials are dropped (DropReason::kOverload).
  int Route(const uint8_t* data, size_t length, size_t first_segment, const RecvSlot& slot,
            size_t socket_index, bool shed_new);
  void ReadSocket(size_t socket_index);
  // Gives every empty slot a buffer of pool_ while there are some; returns the armed slots.
  size_t ArmSlots();
  // Gives the armed slots' buffers back to pool_.
  void DisarmSlots();
  void ReclaimBuffers();
  // Closes socket `index` if it no longer accepts and every worker released it; `count`: one
  // more worker did.
  void OnSocketReleased(size_t index, bool count);
  void Drop(DropReason r) {
    ++drops_[static_cast<size_t>(r)];
    if (Counter* c = drop_metrics_[static_cast<size_t>(r)]; c != nullptr) c->Inc();
  }
  void Reply(size_t socket_index, const RecvSlot& slot, const uint8_t* data, size_t len);

  Master(const MasterConfig& config, EventLoop* loop, ServerCidCodec codec,
         std::vector<WorkerPort> workers);

  const MasterConfig config_;
  EventLoop* const loop_;
  const ServerCidCodec cid_codec_;
  std::vector<WorkerPort> workers_;
  const bool direct_;
  std::vector<std::unique_ptr<UdpSocket>> sockets_;
  std::vector<std::unique_ptr<UdpSender>> senders_;  // the master's replies, one per socket
  // Per socket index: whether it takes new connections (a byte, not vector<bool>: read per
  // datagram that starts one), and how many workers have released it.
  std::vector<uint8_t> accepting_;
  std::vector<size_t> released_by_;
  std::vector<std::unique_ptr<WorkerInbox>> inboxes_;  // empty in direct mode
  std::unique_ptr<PacketPool> pool_;
  // With GRO, pool_'s buffers hold a coalesced batch (64 KiB each), so few are kept, and a
  // worker behind on many connections' single datagrams would soon hold them all: a datagram
  // that arrived alone is copied into one of these instead and the large buffer is read into
  // again. Null without GRO and in direct mode.
  std::unique_ptr<PacketPool> small_pool_;
  // Buffers of each pool held by the workers above which new connections are shed
  // (kOverload); never in direct mode, where the one loop reads only as fast as it serves.
  size_t shed_above_ = SIZE_MAX;
  size_t small_shed_above_ = SIZE_MAX;
  // Gives `b` back to the pool it came from.
  void ReleaseBuffer(PacketBuffer* b);
  bool IsSmall(const PacketBuffer* b) const {
    return small_pool_ != nullptr && b->capacity() == small_pool_->buffer_size();
  }
  StatelessResponder responder_;
  bool started_ = false;

  // Where recvmmsg reads: slots_[0, armed_) hold a buffer of pool_ each, kept from one read to
  // the next (a slot whose buffer went to a worker gets a new one before the next read).
  std::array<RecvSlot, UdpSocket::kMaxBatch> slots_{};
  size_t armed_ = 0;
  std::vector<std::vector<PacketBuffer*>> per_worker_;  // threaded mode
  std::vector<ReceivedPacket> direct_batch_;            // direct mode
  std::vector<PacketBuffer*> reclaimed_;
  std::vector<uint8_t> scratch_;  // receives into this when the pool is exhausted

  uint64_t datagrams_received_ = 0;
  std::vector<uint64_t> routed_;
  std::array<uint64_t, static_cast<size_t>(DropReason::kCount)> drops_{};
  uint64_t vn_sent_ = 0;
  uint64_t resets_sent_ = 0;
  Counter* datagrams_metric_ = nullptr;
  std::array<Counter*, static_cast<size_t>(DropReason::kCount)> drop_metrics_{};
  std::vector<Gauge*> ring_depth_metrics_;  // per inbox; entries null without metrics
};

}  // namespace petrel::quic

#endif  // PETREL_QUIC_DISPATCH_MASTER_H_
