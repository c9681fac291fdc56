// Internal: the send side of one QUIC stream — a bounded queue of byte ranges that stay alive
// until the peer acknowledges them (ngtcp2 keeps pointers into them, for retransmission, until
// acked_stream_data_offset). A range is either a copy the queue owns or a reference to the
// caller's bytes, which the caller keeps valid until they are acknowledged or the stream is gone.
#ifndef PETREL_QUIC_CONNECTION_STREAM_SEND_QUEUE_H_
#define PETREL_QUIC_CONNECTION_STREAM_SEND_QUEUE_H_

#include <ngtcp2/ngtcp2.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/strings/string_view.h"

namespace petrel::quic {

// Offsets are stream offsets. Invariant: acked <= sent <= end. Not thread-safe (one worker).
// Ranges live in a ring that only grows (to the most ever queued at once), so queuing a
// reference allocates nothing once the ring is warm, and Reset keeps it for the stream object's
// next life.
class StreamSendQueue {
 public:
  explicit StreamSendQueue(size_t capacity) : capacity_(capacity) {}

  // Empties the queue for a new stream, keeping the ring (owned copies are freed).
  void Reset();

  // Queues a copy of `data` (+ FIN). False (nothing queued) when full or FIN was already queued.
  bool Append(absl::string_view data, bool fin) { return Push(data, fin, true); }
  // Queues `data` itself (+ FIN), not a copy: the bytes must stay valid and unchanged until
  // acknowledged (Ack covers them), or until the queue is Reset or destroyed. Same refusals.
  bool AppendRef(absl::string_view data, bool fin) { return Push(data, fin, false); }
  // Fills up to `max` vecs with data not yet handed to ngtcp2, stopping once they hold
  // `enough` bytes (what one packet can carry: the cost per packet does not grow with what is
  // queued); returns how many. `*all` tells whether they cover all of it (so that a queued FIN
  // may go with them).
  size_t Unsent(ngtcp2_vec* vecs, size_t max, size_t enough, bool* all) const;
  // `n` more bytes were handed to ngtcp2; `fin` if the FIN went with them.
  void MarkSent(size_t n, bool fin);
  // ngtcp2 says [offset, offset+len) is acknowledged (in order, no gaps); drops ranges wholly
  // acknowledged.
  void Ack(uint64_t offset, uint64_t len);

  bool has_unsent() const { return sent_ < end_ || (fin_queued_ && !fin_sent_); }
  bool fin_queued() const { return fin_queued_; }
  bool fin_sent() const { return fin_sent_; }
  // All data and the FIN were sent and acknowledged.
  bool done() const { return fin_sent_ && acked_ == end_; }
  bool full() const { return end_ - acked_ >= capacity_; }
  size_t buffered() const { return static_cast<size_t>(end_ - acked_); }
  // Ranges queued and not yet dropped (tests).
  size_t ranges() const { return count_; }

 private:
  struct Range {
    const uint8_t* data = nullptr;
    size_t len = 0;
    std::unique_ptr<uint8_t[]> owned;  // the copy `data` points into; null for a reference
  };

  bool Push(absl::string_view data, bool fin, bool copy);
  Range& At(size_t i) { return ring_[(head_ + i) & (ring_.size() - 1)]; }
  const Range& At(size_t i) const { return ring_[(head_ + i) & (ring_.size() - 1)]; }
  void Grow();

  const size_t capacity_;
  std::vector<Range> ring_;    // size 0 or a power of two
  size_t head_ = 0;            // ring index of the oldest range
  size_t count_ = 0;           // ranges queued
  uint64_t front_offset_ = 0;  // stream offset of the oldest range's first byte
  size_t next_index_ = 0;      // range holding `sent_` (relative to head_)
  size_t next_pos_ = 0;        // position of `sent_` in that range
  uint64_t acked_ = 0;
  uint64_t sent_ = 0;
  uint64_t end_ = 0;
  bool fin_queued_ = false;
  bool fin_sent_ = false;
};

}  // namespace petrel::quic

#endif  // PETREL_QUIC_CONNECTION_STREAM_SEND_QUEUE_H_
