// Connection: the write loop — packets of one size into the preallocated buffer, sent as GSO
// batches (at most 64 segments and UdpSocket::kMaxGsoBytes per sendmsg), paced by ngtcp2.
#include <algorithm>
#include <cstring>

#include "quic/connection/connection.h"

namespace petrel::quic {
namespace {

// Fair share: batches per connection per write, then back to the loop (the timer resumes).
constexpr int kMaxBatchesPerWrite = 4;
constexpr size_t kMaxVecs = 16;

}  // namespace

namespace {

// The first stream of `queue` that can send now; drops the others it passes from the queue.
template <typename Stream>
Stream* FirstSendable(std::deque<Stream*>& queue) {
  while (!queue.empty()) {
    Stream* s = queue.front();
    if (!s->blocked && s->send.has_unsent()) return s;
    s->in_sendable = false;
    queue.pop_front();
  }
  return nullptr;
}

}  // namespace

Connection::Stream* Connection::NextSendable() {
  if (!urgent_sendable_.empty()) {
    if (Stream* s = FirstSendable(urgent_sendable_)) return s;
  }
  return FirstSendable(sendable_);
}

bool Connection::FlushBatch(const uint8_t* data, size_t len, size_t segment,
                            const ngtcp2_path& path, uint8_t ecn) {
  const SocketAddress peer(reinterpret_cast<const sockaddr*>(path.remote.addr),
                           path.remote.addrlen);
  const SocketAddress local(reinterpret_cast<const sockaddr*>(path.local.addr), path.local.addrlen);
  // Probes of a path other than the current one may leave from another of the server's sockets.
  UdpSender* sender = sender_;
  if (is_server_ && local != local_) {
    if (UdpSender* s = host_->SenderFor(local); s != nullptr) sender = s;
  }
  if (!handshake_completed_) handshake_bytes_out_ += len;
  size_t sent = 0;
  if (unsent_.empty() && !sender->blocked()) {
    const SendBatch batch{
        data, len, len > segment ? segment : 0, &peer, is_server_ ? &local : nullptr, ecn};
    // Staged: batches of the connection's own sender (BatchSpace wrote them into its stage).
    // A connection stages on one sender at a time, so that one ForgetStaged covers it; after
    // a change of sender (migration) the old one's stage goes out first; what it refuses
    // counts as lost (loss recovery resends it) rather than waiting in unsent_, which the
    // check above found empty.
    StagedOwner* owner = nullptr;
    if (!duplicate_probes_ && sender == sender_) {
      if (staged_on_ != sender) {
        if (staged_on_ != nullptr) {
          staged_on_->ForgetStaged(this);
          staged_on_->FlushStaged();
        }
        staged_on_ = sender;
      }
      owner = this;
    }
    const SendResult r = sender->Send(batch, owner);
    datagrams_sent_ += (r.bytes_sent + segment - 1) / segment;
    if (r.bytes_sent == len) {
      if (duplicate_probes_ && !handshake_completed_ &&
          (!is_server_ || handshake_bytes_out_ + len <= 3 * handshake_bytes_in_)) {
        handshake_bytes_out_ += len;
        datagrams_sent_ += (sender->Send(batch).bytes_sent + segment - 1) / segment;
      }
      return true;
    }
    if (!r.would_block || !sender->can_wait()) return false;  // lost; loss recovery resends
    sent = r.bytes_sent;
  } else if (!sender->can_wait()) {
    return false;
  }
  // Behind a full socket buffer: kept, in order, for when it drains.
  unsent_.push_back(UnsentBatch{std::vector<uint8_t>(data + sent, data + len), segment, peer, local,
                                ecn, sender});
  if (waiting_on_ == nullptr) {
    waiting_on_ = sender;
    sender->Wait(this);
  }
  return false;
}

bool Connection::SendUnsent() {
  while (!unsent_.empty()) {
    UnsentBatch& b = unsent_.front();
    if (b.sender->blocked()) break;
    const size_t len = b.bytes.size();
    const SendBatch batch{b.bytes.data(),
                          len,
                          len > b.segment ? b.segment : 0,
                          &b.peer,
                          is_server_ ? &b.local : nullptr,
                          b.ecn};
    const SendResult r = b.sender->Send(batch);
    datagrams_sent_ += (r.bytes_sent + b.segment - 1) / b.segment;
    if (r.bytes_sent == len || !r.would_block) {
      unsent_.erase(unsent_.begin());  // sent, or lost to a hard error
      continue;
    }
    b.bytes.erase(b.bytes.begin(), b.bytes.begin() + static_cast<std::ptrdiff_t>(r.bytes_sent));
    break;
  }
  if (unsent_.empty()) return true;
  if (waiting_on_ == nullptr) {
    waiting_on_ = unsent_.front().sender;
    waiting_on_->Wait(this);
  }
  return false;
}

void Connection::OnSocketWritable() {
  waiting_on_ = nullptr;
  ScheduleWrite();  // WritePackets sends what was kept first
}

void Connection::OnStagedBatchRefused(UdpSender* sender, const SendBatch& batch) {
  const size_t segment = batch.segment_size == 0 ? batch.length : batch.segment_size;
  datagrams_sent_ -= (batch.length + segment - 1) / segment;
  unsent_.push_back(
      UnsentBatch{std::vector<uint8_t>(batch.data, batch.data + batch.length), segment, *batch.peer,
                  batch.local != nullptr ? *batch.local : SocketAddress(), batch.ecn, sender});
  if (waiting_on_ == nullptr) {
    waiting_on_ = sender;
    sender->Wait(this);
  }
}

uint8_t* Connection::BatchSpace(UdpSender* sender) {
  if (!duplicate_probes_) {
    if (uint8_t* space = sender->StagingSpace(); space != nullptr) return space;
  }
  return SendBuffer();
}

void Connection::SendHeldPacket() {
  if (held_packet_.empty()) return;
  FlushBatch(held_packet_.data(), held_packet_.size(), held_packet_.size(), held_path_.path,
             held_ecn_);
  held_packet_.clear();
}

void Connection::WriteOwedFrames() {
  in_write_ = true;
  ngtcp2_path_storage ps;
  ngtcp2_path_storage_zero(&ps);
  ngtcp2_pkt_info pi{};
  const size_t max_udp = ngtcp2_conn_get_path_max_tx_udp_payload_size(conn_);
  uint8_t* const buffer = SendBuffer();
  const ngtcp2_ssize n =
      ngtcp2_conn_write_pkt(conn_, &ps.path, &pi, buffer, max_udp, ToNanos(loop_->now()));
  // An error here changes nothing: the connection closes next.
  if (n > 0) {
    const size_t len = static_cast<size_t>(n);
    FlushBatch(buffer, len, len, ps.path, pi.ecn);
  }
  in_write_ = false;
}

void Connection::WritePackets() {
  if (state_ != State::kOpen || in_write_) return;
  if (pending_close_.has_value()) {
    const ngtcp2_connection_close_error ccerr = *pending_close_;
    pending_close_.reset();
    WriteOwedFrames();
    EnterClosing(ccerr);
    return;
  }
  // No new packet while kept ones wait or the socket is known full: OnSocketWritable resumes.
  if (!SendUnsent()) {
    ArmTimer();
    return;
  }
  if (sender_->blocked() && sender_->can_wait()) {
    if (waiting_on_ == nullptr) {
      waiting_on_ = sender_;
      sender_->Wait(this);
    }
    ArmTimer();
    return;
  }
  in_write_ = true;
  const ngtcp2_tstamp ts = ToNanos(loop_->now());
  // Packets are as large as the path is known to carry (1200 bytes until Path MTU Discovery
  // has confirmed more); ngtcp2 gets room for the largest it may send, or its PMTUD probes —
  // larger than the path's size by definition — would never fit and every packet would stay
  // at 1200 bytes.
  const size_t max_udp = ngtcp2_conn_get_path_max_tx_udp_payload_size(conn_);
  const size_t max_room = std::max(max_udp, ngtcp2_conn_get_max_tx_udp_payload_size(conn_));
  constexpr size_t kBufferSize = UdpSocket::kMaxGsoBytes;
  size_t max_pkts = std::min(UdpSocket::kMaxGsoSegments, kBufferSize / max_udp);
  const size_t quantum = ngtcp2_conn_get_send_quantum(conn_);
  max_pkts = std::max<size_t>(1, std::min(max_pkts, quantum / max_udp));

  uint8_t* base = BatchSpace(sender_);
  ngtcp2_path_storage ps;
  ngtcp2_path_storage batch_ps;
  ngtcp2_path_storage_zero(&ps);
  ngtcp2_path_storage_zero(&batch_ps);
  size_t used = 0;
  size_t count = 0;
  size_t segment = 0;
  uint8_t batch_ecn = 0;
  int batches = 0;
  bool more = false;
  ngtcp2_vec vecs[kMaxVecs];
  if (path_order_.TakeRelease(ts)) SendHeldPacket();

  Stream* pulled_stream = nullptr;  // the Stream of the last pull's id (most pulls repeat it)
  // What the last pull offered and no packet has taken yet: the next packets take it before the
  // source is asked again (a pull per packet would cost the source's scheduling each time).
  ngtcp2_vec offered[kMaxVecs];
  size_t offered_first = 0;
  size_t offered_count = 0;
  int64_t offered_stream = -1;
  bool offered_fin = false;
  for (;;) {
    Stream* s = NextSendable();
    size_t nvec = 0;
    bool all = true;
    uint32_t flags = NGTCP2_WRITE_STREAM_FLAG_NONE;
    int64_t sid = -1;
    bool pulled = false;
    const ngtcp2_vec* datav = vecs;
    if (s != nullptr) {
      sid = s->id;
      flags = NGTCP2_WRITE_STREAM_FLAG_MORE;
      nvec = s->send.Unsent(vecs, kMaxVecs, max_udp, &all);
      if (all && s->send.fin_queued()) flags |= NGTCP2_WRITE_STREAM_FLAG_FIN;
    } else if (source_has_data_ && send_buffered_ < settings_.limits.connection_send_buffer) {
      if (offered_stream < 0) {
        // The same layout (quic_connection.cc checks it): the source fills ngtcp2's vectors.
        const QuicStreamSource::Pulled p =
            source_->PullStreamData(reinterpret_cast<QuicStreamVec*>(offered), kMaxVecs);
        if (p.stream >= 0 && (p.count > 0 || p.fin)) {
          offered_stream = p.stream;
          offered_first = 0;
          offered_count = p.count;
          offered_fin = p.fin;
        } else {
          source_has_data_ = false;
        }
      }
      if (offered_stream >= 0) {
        pulled = true;
        sid = offered_stream;
        datav = offered + offered_first;
        nvec = offered_count - offered_first;
        flags = NGTCP2_WRITE_STREAM_FLAG_MORE;
        if (offered_fin) flags |= NGTCP2_WRITE_STREAM_FLAG_FIN;
      }
    }
    ngtcp2_pkt_info pi{};
    ngtcp2_ssize ndatalen = -1;
    const uint64_t in_flight_before = path_order_.active() ? BytesInFlight() : 0;
    challenge_written_ = false;
    const ngtcp2_ssize n = ngtcp2_conn_writev_stream(conn_, &ps.path, &pi, base + used, max_room,
                                                     &ndatalen, flags, sid, datav, nvec, ts);
    if (s != nullptr && ndatalen >= 0) {
      size_t total = 0;
      for (size_t i = 0; i < nvec; ++i) total += vecs[i].len;
      const bool fin =
          (flags & NGTCP2_WRITE_STREAM_FLAG_FIN) != 0 && static_cast<size_t>(ndatalen) == total;
      s->send.MarkSent(static_cast<size_t>(ndatalen), fin);
    } else if (pulled && ndatalen >= 0) {
      size_t total = 0;
      for (size_t i = 0; i < nvec; ++i) total += datav[i].len;
      const size_t sent = static_cast<size_t>(ndatalen);
      if (pulled_stream == nullptr || pulled_stream->id != sid) pulled_stream = FindStream(sid);
      if (pulled_stream != nullptr) {
        pulled_stream->pulled_unacked += sent;
        send_buffered_ += sent;
      }
      source_->OnStreamDataSent(sid, sent, sent == total, sent == total && offered_fin);
      if (sent == total) {
        offered_stream = -1;
      } else {
        for (size_t left = sent; left > 0;) {
          ngtcp2_vec& v = offered[offered_first];
          const size_t taken = std::min(left, v.len);
          v.base += taken;
          v.len -= taken;
          left -= taken;
          if (v.len == 0) ++offered_first;
        }
      }
    }
    if (n < 0) {
      if (n == NGTCP2_ERR_WRITE_MORE) {
        // The next stream fills the rest of the packet.
        if (std::deque<Stream*>* q = s != nullptr ? &SendableQueue(s) : nullptr;
            q != nullptr && !q->empty() && q->front() == s) {
          q->pop_front();
          if (s->send.has_unsent()) {
            q->push_back(s);
          } else {
            s->in_sendable = false;
          }
        }
        continue;
      }
      if (n == NGTCP2_ERR_STREAM_DATA_BLOCKED && s != nullptr) {
        s->blocked = true;
        continue;
      }
      if (pulled && (n == NGTCP2_ERR_STREAM_DATA_BLOCKED || n == NGTCP2_ERR_STREAM_SHUT_WR ||
                     n == NGTCP2_ERR_STREAM_NOT_FOUND)) {
        if (n == NGTCP2_ERR_STREAM_DATA_BLOCKED) {
          if (Stream* blocked = FindStream(sid)) blocked->blocked = true;  // until extended
        }
        offered_stream = -1;
        source_->OnStreamBlocked(sid);
        continue;
      }
      if ((n == NGTCP2_ERR_STREAM_SHUT_WR || n == NGTCP2_ERR_STREAM_NOT_FOUND) && s != nullptr) {
        SendableQueue(s).pop_front();  // s is its queue's front (NextSendable)
        s->in_sendable = false;
        continue;
      }
      in_write_ = false;
      HandleError(static_cast<int>(n));
      return;
    }
    if (n == 0) break;  // nothing more, or congestion / pacing says wait
    // Round-robin. A stream alone in its queue stays put: a deque's pop_front + push_back
    // allocates a block every 64 turns, which for one bulk download was one allocation per 64
    // packets.
    if (std::deque<Stream*>* q = s != nullptr ? &SendableQueue(s) : nullptr;
        q != nullptr && q->size() > 1 && q->front() == s) {
      q->pop_front();
      q->push_back(s);
    }
    const size_t len = static_cast<size_t>(n);
    if (path_order_.active() && ngtcp2_path_eq(&ps.path, ngtcp2_conn_get_path(conn_))) {
      const bool eliciting = BytesInFlight() > in_flight_before;
      const PathOrder::Action action = path_order_.OnPacket(challenge_written_, eliciting, ts);
      if (action == PathOrder::Action::kDrop) continue;  // not added to the batch
      if (action == PathOrder::Action::kHold) {
        held_packet_.assign(base + used, base + used + len);
        ngtcp2_path_storage_zero(&held_path_);
        ngtcp2_path_copy(&held_path_.path, &ps.path);
        held_ecn_ = pi.ecn;
        continue;
      }
    }
    if (count > 0 &&
        (pi.ecn != batch_ecn || len > segment || !ngtcp2_path_eq(&ps.path, &batch_ps.path))) {
      FlushBatch(base, used, segment, batch_ps.path, batch_ecn);
      // The packet starts the next batch. Staged, the batch before it stays where it is and
      // the packet is already where the next one goes; the stage may have been sent to make
      // room, though. Blocked (by that batch or by the stage sent for room), the packet is
      // kept behind what waits, and nothing new follows.
      uint8_t* const next = unsent_.empty() ? BatchSpace(sender_) : nullptr;
      if (!unsent_.empty()) {
        FlushBatch(base + used, len, len, ps.path, pi.ecn);
        used = 0;
        break;
      }
      if (next != base + used) std::memmove(next, base + used, len);
      base = next;
      used = 0;
      count = 0;
      ++batches;
    }
    if (count == 0) {
      segment = len;
      batch_ecn = pi.ecn;
      ngtcp2_path_copy(&batch_ps.path, &ps.path);
    }
    used += len;
    ++count;
    const bool release = path_order_.TakeRelease(ts);
    if (release || len < segment || count >= max_pkts || used + max_room > kBufferSize) {
      FlushBatch(base, used, segment, batch_ps.path, batch_ecn);
      used = 0;
      count = 0;
      if (!unsent_.empty()) break;  // blocked: the rest when the socket drains
      base = BatchSpace(sender_);
      if (!unsent_.empty()) break;    // the stage was sent to make room, and refused
      if (release) SendHeldPacket();  // right behind the packet that announced the move
      if (++batches >= kMaxBatchesPerWrite) {
        more = true;
        break;
      }
    }
  }
  if (used > 0) FlushBatch(base, used, segment, batch_ps.path, batch_ecn);
  ngtcp2_conn_update_pkt_tx_time(conn_, ts);
  in_write_ = false;
  ArmTimer();
  // Resume next turn; or close: a source that failed during the pass closed the connection,
  // which waits for a write pass.
  if (more || pending_close_.has_value()) timer_.StartAt(loop_->now());
}

}  // namespace petrel::quic
