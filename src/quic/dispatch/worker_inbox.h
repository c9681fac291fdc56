// Internal: the channel from the master to one worker (DESIGN §3): a bounded SPSC ring of
// packet buffers going to the worker, a ring bringing them back, and an eventfd the master
// writes only when the ring goes from empty to non-empty.
//
// Each packet travels as one PacketBuffer*: the buffer starts with its ReceivedPacket (addresses,
// ECN, time) and the datagram bytes follow at kPayloadOffset, so the hand-off copies 8 bytes.
//
// Threads: Push, ReclaimReturned belong to the master thread; OnIoEvent (registered on the
// worker's loop) runs on the worker thread. Destroy the inbox only after the worker's loop has
// stopped (DESIGN §3: join threads, then free); it unregisters itself then.
#ifndef PETREL_QUIC_DISPATCH_WORKER_INBOX_H_
#define PETREL_QUIC_DISPATCH_WORKER_INBOX_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "petrel/common/event_loop.h"
#include "petrel/common/metrics.h"
#include "petrel/common/packet_pool.h"
#include "petrel/common/spsc_ring.h"
#include "quic/dispatch/packet_sink.h"

namespace petrel::quic {

class WorkerInbox final : public IoHandler {
 public:
  // Room for the ReceivedPacket at the start of each buffer, cache-line aligned.
  static constexpr size_t kPayloadOffset = (sizeof(ReceivedPacket) + 63) / 64 * 64;

  // `ring_capacity` packets in flight to the worker; `drain_budget` packets handed to `sink`
  // per worker loop turn (then the loop runs timers and writes before the rest).
  WorkerInbox(size_t ring_capacity, size_t drain_budget, PacketSink* sink);
  ~WorkerInbox() override;
  WorkerInbox(const WorkerInbox&) = delete;
  WorkerInbox& operator=(const WorkerInbox&) = delete;

  // Registers the eventfd on the worker's loop. Call on the worker's loop thread (or before it
  // runs); Unregister likewise before the loop or the inbox goes away.
  absl::Status Register(EventLoop* worker_loop);
  void Unregister();

  // Master: hands `count` buffers to the worker; returns how many were taken (the rest found the
  // ring full and stay with the caller, which drops and counts them). Writes the eventfd only if
  // the worker may be asleep.
  size_t Push(PacketBuffer** buffers, size_t count);
  // Master: takes back up to `max` buffers the worker is done with.
  size_t ReclaimReturned(PacketBuffer** out, size_t max);
  // Shutdown, after the worker's loop has stopped for good: takes back buffers the worker never
  // drained and any it could not return yet (the consumer role moves to the caller).
  size_t ReclaimUndelivered(PacketBuffer** out, size_t max);

  // Worker thread: drains up to the budget into the sink.
  void OnIoEvent(uint32_t events) override;

  // The packet header inside a buffer (master fills it, worker reads it).
  static ReceivedPacket* Header(PacketBuffer* b) {
    return reinterpret_cast<ReceivedPacket*>(b->data());
  }
  static uint8_t* Payload(PacketBuffer* b) { return b->data() + kPayloadOffset; }

  // Packets in the ring now (approximate: the other side moves on). Any thread.
  size_t depth() const { return to_worker_.SizeApprox(); }
  // Set to the ring's depth after every push (master) and drain (worker); not owned. Before
  // packets flow.
  void set_depth_gauge(Gauge* gauge) { depth_gauge_ = gauge; }

  uint64_t wakeups_sent() const { return wakeups_sent_; }        // master thread
  uint64_t packets_handled() const { return packets_handled_; }  // worker thread

 private:
  void ReturnBuffers(PacketBuffer** buffers, size_t count);

  SpscRing<PacketBuffer*> to_worker_;
  SpscRing<PacketBuffer*> to_master_;
  const size_t drain_budget_;
  PacketSink* const sink_;
  const int event_fd_;
  EventLoop* loop_ = nullptr;

  // Worker-side scratch, sized once: the drained buffers, their headers for the sink, and
  // buffers the return ring could not take yet.
  std::vector<PacketBuffer*> batch_;
  std::vector<ReceivedPacket> packets_;
  std::vector<PacketBuffer*> pending_return_;
  uint64_t packets_handled_ = 0;
  Gauge* depth_gauge_ = nullptr;

  uint64_t wakeups_sent_ = 0;
};

}  // namespace petrel::quic

#endif  // PETREL_QUIC_DISPATCH_WORKER_INBOX_H_
