// Connection: stream bookkeeping — the stream API and the ngtcp2 stream events.
#include <algorithm>

#include "quic/connection/connection.h"

namespace petrel::quic {

Connection::Stream* Connection::FindStream(int64_t id) { return streams_.Find(id); }

Connection::Stream* Connection::GetOrCreateStream(int64_t id) {
  if (Stream* found = streams_.Find(id)) return found;
  std::unique_ptr<Stream> made;
  if (free_streams_.empty()) {
    made = std::make_unique<Stream>(id, settings_.limits.stream_send_buffer);
  } else {
    made = std::move(free_streams_.back());
    free_streams_.pop_back();
    made->Reuse(id);
  }
  Stream* const s = streams_.Add(id, std::move(made));
  // ngtcp2 hands the Stream back with every event of the stream (see OnRecvStreamData). It
  // refuses only ids it has no stream for, whose events never come.
  (void)ngtcp2_conn_set_stream_user_data(conn_, id, s);
  return s;
}

void Connection::EraseStream(int64_t id) {
  std::unique_ptr<Stream> closed = streams_.Take(id);
  if (closed == nullptr) return;
  Stream* s = closed.get();
  // A reset stream's unsent and unacknowledged bytes are never acknowledged.
  send_buffered_ -= s->send.buffered() + s->pulled_unacked;
  if (s->in_sendable) {
    std::deque<Stream*>& q = SendableQueue(s);
    q.erase(std::find(q.begin(), q.end(), s));
  }
  if (free_streams_.size() < settings_.limits.max_streams_bidi) {
    free_streams_.push_back(std::move(closed));
  }
}

void Connection::MarkSendable(Stream* s) {
  if (s->in_sendable) return;
  s->in_sendable = true;
  SendableQueue(s).push_back(s);
}

void Connection::SetUrgent(int64_t stream) {
  Stream* s = FindStream(stream);
  if (s == nullptr || s->urgent) return;
  if (s->in_sendable) {
    sendable_.erase(std::find(sendable_.begin(), sendable_.end(), s));
    urgent_sendable_.push_back(s);
  }
  s->urgent = true;
}

bool Connection::Write(int64_t stream, absl::string_view data, bool fin, bool copy) {
  if (state_ != State::kOpen || pending_close_.has_value() || source_ != nullptr) return false;
  Stream* s = FindStream(stream);
  if (s == nullptr) return false;
  if (send_buffered_ >= settings_.limits.connection_send_buffer && !data.empty() && !s->urgent &&
      !s->send.fin_queued()) {
    if (!s->want_room) {
      s->want_room = true;
      waiting_for_room_.push_back(stream);
    }
    return false;
  }
  const size_t before = s->send.buffered();
  if (!(copy ? s->send.Append(data, fin) : s->send.AppendRef(data, fin))) {
    if (s->send.full() && !s->send.fin_queued()) s->want_writable = true;
    return false;
  }
  send_buffered_ += s->send.buffered() - before;
  MarkSendable(s);
  ScheduleWrite();
  return true;
}

void Connection::Consume(int64_t stream, size_t n) {
  if (state_ != State::kOpen || n == 0) return;
  ngtcp2_conn_extend_max_stream_offset(conn_, stream, n);
  ngtcp2_conn_extend_max_offset(conn_, n);
  ScheduleWrite();
}

int64_t Connection::OpenStream(bool bidi) {
  if (state_ != State::kOpen) return -1;
  int64_t id = -1;
  const int rv = bidi ? ngtcp2_conn_open_bidi_stream(conn_, &id, nullptr)
                      : ngtcp2_conn_open_uni_stream(conn_, &id, nullptr);
  if (rv != 0) return -1;
  GetOrCreateStream(id);
  return id;
}

void Connection::ResetStream(int64_t stream, uint64_t app_error) {
  if (state_ != State::kOpen) return;
  ngtcp2_conn_shutdown_stream(conn_, stream, app_error);
  ScheduleWrite();
}

int Connection::OnRecvStreamData(uint32_t flags, int64_t id, Stream* s, const uint8_t* data,
                                 size_t len) {
  if (s == nullptr) s = GetOrCreateStream(id);
  if ((flags & NGTCP2_STREAM_DATA_FLAG_EARLY) != 0) {
    s->early = true;
    early_stream_data_ = true;
  }
  observer_->OnStreamData(handle_, id, absl::string_view(reinterpret_cast<const char*>(data), len),
                          (flags & NGTCP2_STREAM_DATA_FLAG_FIN) != 0);
  return 0;
}

int Connection::OnAckedStreamData(Stream* s, uint64_t offset, uint64_t len) {
  if (s == nullptr) return 0;
  const int64_t id = s->id;
  if (source_ != nullptr) {
    const uint64_t n = std::min(len, s->pulled_unacked);
    s->pulled_unacked -= n;
    send_buffered_ -= n;
    if (len > 0) source_->OnStreamDataAcked(id, len);
    return 0;
  }
  const size_t before = s->send.buffered();
  s->send.Ack(offset, len);
  send_buffered_ -= before - s->send.buffered();
  const bool writable = s->want_writable && !s->send.full();
  if (writable) s->want_writable = false;
  // The application may reset the stream from its callbacks, which can close it and recycle
  // `s`: not used past here. Acknowledged before writable, so that an application writing by
  // reference learns first that its bytes are free.
  if (len > 0) observer_->OnStreamDataAcked(handle_, id, len);
  if (writable) observer_->OnStreamWritable(handle_, id);
  if (!waiting_for_room_.empty()) WakeStreamsWaitingForRoom();
  return 0;
}

void Connection::WakeStreamsWaitingForRoom() {
  // In the order they were refused, while there is room: a woken stream that fills the buffer
  // again queues itself at the end, behind those still waiting. In place, so that a connection
  // held at its send buffer does not allocate per acknowledgement; a callback that closes a
  // stream would call back in here, and the loop already goes on while there is room.
  if (waking_for_room_) return;
  waking_for_room_ = true;
  const size_t waiting = waiting_for_room_.size();
  size_t woken = 0;
  // (Bounded by the current size too: a rejected 0-RTT clears the list.)
  for (; woken < std::min(waiting, waiting_for_room_.size()) &&
         send_buffered_ < settings_.limits.connection_send_buffer;
       ++woken) {
    const int64_t id = waiting_for_room_[woken];  // a copy: the callback may append
    Stream* s = FindStream(id);
    if (s == nullptr || !s->want_room) continue;
    s->want_room = false;
    observer_->OnStreamWritable(handle_, id);
  }
  woken = std::min(woken, waiting_for_room_.size());
  waiting_for_room_.erase(waiting_for_room_.begin(),
                          waiting_for_room_.begin() + static_cast<std::ptrdiff_t>(woken));
  waking_for_room_ = false;
}

int Connection::OnStreamClose(int64_t id, Stream* s) {
  // ngtcp2 does not raise the peer's stream limit by itself: one closed, one more allowed.
  const bool remote = (id & 1) != (is_server_ ? 1 : 0);
  if (remote && (id & 2) == 0) ngtcp2_conn_extend_max_streams_bidi(conn_, 1);
  if (remote && (id & 2) != 0) ngtcp2_conn_extend_max_streams_uni(conn_, 1);
  if (s == nullptr) return 0;
  observer_->OnStreamClosed(handle_, id);
  EraseStream(id);
  // What it held is free now (a reset stream's unsent bytes are never acknowledged).
  if (!waiting_for_room_.empty()) WakeStreamsWaitingForRoom();
  host_->OnMaybeIdle(*this);
  return 0;
}

int Connection::OnStreamReset(int64_t id, uint64_t err) {
  observer_->OnStreamReset(handle_, id, err);
  return 0;
}

int Connection::OnStreamStopSending(int64_t id, uint64_t err) {
  observer_->OnStreamStopSending(handle_, id, err);
  return 0;
}

int Connection::OnExtendMaxStreamData(Stream* s) {
  if (s != nullptr && s->blocked) {
    s->blocked = false;
    if (s->send.has_unsent()) MarkSendable(s);
    if (source_ != nullptr) {
      source_->OnStreamUnblocked(s->id);
      WantWrite();
    }
  }
  return 0;
}

void Connection::OnEarlyDataRejected() {
  // ngtcp2 dropped every stream opened in 0-RTT without closing them one by one: drop their
  // queues too, so that reused stream ids start clean, then let the application start over.
  urgent_sendable_.clear();
  sendable_.clear();
  // Should ngtcp2 keep any of them, its events must not reach a destroyed Stream.
  streams_.ForEach([this](int64_t id, const Stream&) {
    (void)ngtcp2_conn_set_stream_user_data(conn_, id, nullptr);
  });
  streams_.Clear();
  send_buffered_ = 0;
  waiting_for_room_.clear();
  observer_->OnEarlyDataRejected(handle_);
}

void Connection::StopSending(int64_t stream, uint64_t app_error) {
  if (state_ != State::kOpen) return;
  ngtcp2_conn_shutdown_stream_read(conn_, stream, app_error);
  ScheduleWrite();
}

bool Connection::StreamEarlyData(int64_t id) const {
  if (!early_stream_data_) return false;  // no 0-RTT stream data at all: no lookup per request
  const Stream* s = streams_.Find(id);
  return s != nullptr && s->early;
}

}  // namespace petrel::quic
