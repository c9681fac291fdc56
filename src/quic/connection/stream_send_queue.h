// Internal: the send side of one QUIC stream — a bounded queue of chunks that stay alive until
// the peer acknowledges them (ngtcp2 keeps pointers into them until acked_stream_data_offset).
#ifndef PETREL_QUIC_CONNECTION_STREAM_SEND_QUEUE_H_
#define PETREL_QUIC_CONNECTION_STREAM_SEND_QUEUE_H_

#include <ngtcp2/ngtcp2.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>

#include "absl/strings/string_view.h"

namespace petrel::quic {

// Offsets are stream offsets. Invariant: acked <= sent <= end. Not thread-safe (one worker).
class StreamSendQueue {
 public:
  explicit StreamSendQueue(size_t capacity) : capacity_(capacity) {}

  // Empties the queue for a new stream, keeping what it has allocated.
  void Reset();

  // Queues `data` (+ FIN). False (nothing queued) when full or FIN was already queued.
  bool Append(absl::string_view data, bool fin);
  // Fills up to `max` vecs with data not yet handed to ngtcp2; returns how many. `*all` tells
  // whether they cover all of it (so that a queued FIN may go with them).
  size_t Unsent(ngtcp2_vec* vecs, size_t max, bool* all) const;
  // `n` more bytes were handed to ngtcp2; `fin` if the FIN went with them.
  void MarkSent(size_t n, bool fin);
  // ngtcp2 says [offset, offset+len) is acknowledged; frees chunks wholly acknowledged.
  void Ack(uint64_t offset, uint64_t len);

  bool has_unsent() const { return sent_ < end_ || (fin_queued_ && !fin_sent_); }
  bool fin_queued() const { return fin_queued_; }
  bool fin_sent() const { return fin_sent_; }
  // All data and the FIN were sent and acknowledged.
  bool done() const { return fin_sent_ && acked_ == end_; }
  bool full() const { return end_ - acked_ >= capacity_; }
  size_t buffered() const { return static_cast<size_t>(end_ - acked_); }

 private:
  const size_t capacity_;
  std::deque<std::string> chunks_;
  uint64_t front_offset_ = 0;  // stream offset of chunks_.front()[0]
  size_t next_index_ = 0;      // chunk holding `sent_`
  size_t next_pos_ = 0;        // position of `sent_` in that chunk
  uint64_t acked_ = 0;
  uint64_t sent_ = 0;
  uint64_t end_ = 0;
  bool fin_queued_ = false;
  bool fin_sent_ = false;
};

}  // namespace petrel::quic

#endif  // PETREL_QUIC_CONNECTION_STREAM_SEND_QUEUE_H_
