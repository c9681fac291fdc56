// UdpSender's stage: the batches a worker's connections write in one loop turn, sent together
// with one sendmmsg when the turn's batch ends. Each connection still writes its packets
// straight into the buffer they leave from (the stage's arena), so staging copies nothing; what
// the socket refuses goes back to its connection, in order, as a refused Send would have.
#include <errno.h>
#include <sys/socket.h>

#include <algorithm>

#include "quic/udp/udp_socket.h"

namespace petrel::quic {

uint8_t* UdpSender::StagingSpace() {
  if (!can_stage()) return nullptr;
  if (stage_ == nullptr) stage_ = std::make_unique<StageBuffers>();
  if (staged_bytes_ + UdpSocket::kMaxGsoBytes > kStageBytes ||
      staged_count_ == kMaxStagedMessages) {
    FlushStaged();
  }
  return stage_->arena.get() + staged_bytes_;
}

bool UdpSender::Stage(const SendBatch& batch, StagedOwner* owner) {
  // Only a batch written where StagingSpace() pointed: anything else may not outlive the call.
  if (stage_ == nullptr || batch.data != stage_->arena.get() + staged_bytes_ ||
      staged_bytes_ + batch.length > kStageBytes) {
    return false;
  }
  const size_t seg = batch.segment_size == 0 ? batch.length : batch.segment_size;
  // Without GSO each datagram is a message of its own.
  const size_t messages = gso_ ? 1 : (batch.length + seg - 1) / seg;
  // No room: the caller sends it at once, after what is staged.
  if (staged_count_ + messages > kMaxStagedMessages) return false;
  const size_t piece = gso_ ? batch.length : seg;
  for (size_t off = 0; off < batch.length; off += piece) {
    const size_t len = std::min(piece, batch.length - off);
    const size_t i = staged_count_++;
    StagedMessage& m = stage_->messages[i];
    m.owner = owner;
    m.offset = staged_bytes_ + off;
    m.length = len;
    m.segment_size = len > seg ? seg : 0;
    m.peer = *batch.peer;
    if (batch.local != nullptr) {
      m.local = *batch.local;
    } else {
      m.local.Clear();
    }
    m.ecn = batch.ecn;
    const SendBatch staged{nullptr, len, m.segment_size, &m.peer, &m.local, m.ecn};
    BuildMessage(staged, stage_->arena.get() + m.offset, len, m.segment_size,
                 &stage_->headers[i].msg_hdr, &stage_->iovs[i], stage_->controls[i].data());
  }
  staged_bytes_ += batch.length;
  flush_->Schedule();
  return true;
}

void UdpSender::FlushStaged() {
  if (staged_count_ == 0) return;
  StageBuffers& st = *stage_;
  const size_t count = staged_count_;
  size_t next = 0;  // the first message not yet sent or dropped
  while (next < count && fd_ >= 0) {
    const int n = sendmmsg(fd_, &st.headers[next], static_cast<unsigned>(count - next), 0);
    ++sendmmsg_calls_;
    if (n > 0) {
      for (size_t i = next; i < next + static_cast<size_t>(n); ++i) {
        CountSent(st.messages[i].length, st.messages[i].segment_size);
      }
      next += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      MarkBlocked();
      break;
    }
    // A hard error belongs to the first unsent message (the ones before it went out). EIO for
    // a GSO message: the device cannot segment; that message and the later ones go one
    // datagram at a time, as Send does.
    const StagedMessage& m = st.messages[next];
    if (n < 0 && errno == EIO && m.segment_size != 0) {
      gso_ = false;
      const SendBatch batch{
          st.arena.get() + m.offset, m.length, m.segment_size, &m.peer, &m.local, m.ecn};
      const SendResult r = SendNow(batch);
      if (r.would_block && r.bytes_sent == 0) break;  // refused whole: given back below
      // Partly sent: the rest is lost (loss recovery resends it), as with a hard error.
    }
    ++next;  // lost; QUIC's loss recovery resends what it carried
  }
  // Refused for a full socket buffer (or the socket was closed): back to the owners, in order.
  // The owners copy the bytes; nothing is staged meanwhile (they only keep and wait).
  staged_count_ = 0;
  for (size_t i = next; i < count; ++i) {
    const StagedMessage& m = st.messages[i];
    if (m.owner == nullptr || fd_ < 0) continue;
    const SendBatch batch{
        st.arena.get() + m.offset, m.length, m.segment_size, &m.peer, &m.local, m.ecn};
    m.owner->OnStagedBatchRefused(this, batch);
  }
  staged_bytes_ = 0;
  if (flush_ != nullptr) flush_->Cancel();
}

void UdpSender::ForgetStaged(const StagedOwner* owner) {
  for (size_t i = 0; i < staged_count_; ++i) {
    if (stage_->messages[i].owner == owner) stage_->messages[i].owner = nullptr;
  }
}

}  // namespace petrel::quic
