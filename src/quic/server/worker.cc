#include "quic/server/worker.h"

#include <malloc.h>

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "petrel/common/log.h"
#include "quic/packet/invariant_header.h"

namespace petrel::quic {
Worker::CidKey Worker::CidKey::Of(absl::Span<const uint8_t> cid) {
  CidKey k;
  k.len = static_cast<uint8_t>(std::min(cid.size(), k.data.size()));
  std::memcpy(k.data.data(), cid.data(), k.len);
  return k;
}

Worker::Worker(EventLoop* loop, WorkerConfig config, ConnectionObserver* app)
    : loop_(loop),
      config_(std::move(config)),
      app_(app),
      connection_(config_.connection),
      early_data_context_(config_.early_data_context),
      reset_tokens_(config_.reset_key),
      responder_(config_.reset_key, config_.resets_per_second, config_.reset_burst),
      shutdown_timer_(loop, [this] { OnShutdownDeadline(); }),
      trim_timer_(loop, [this] { OnTrimTimer(); }) {
  if (MetricsRegistry* m = config_.metrics; m != nullptr) {
    const MetricLabels w = {{"worker", absl::StrCat(config_.worker_id)}};
    metrics_.datagrams_in = &m->AddCounter("petrel_quic_worker_datagrams_received_total",
                                           "Datagrams a QUIC worker took from the master", w);
    metrics_.bytes_in = &m->AddCounter("petrel_quic_worker_bytes_received_total",
                                       "UDP payload bytes a QUIC worker took", w);
    metrics_.datagrams_out = &m->AddCounter("petrel_quic_worker_datagrams_sent_total",
                                            "Datagrams a QUIC worker sent", w);
    metrics_.bytes_out = &m->AddCounter("petrel_quic_worker_bytes_sent_total",
                                        "UDP payload bytes a QUIC worker sent", w);
    metrics_.send_blocked =
        &m->AddCounter("petrel_quic_worker_send_blocked_total",
                       "Sends a QUIC worker's socket refused for a full buffer (kept, sent "
                       "once it drained)",
                       w);
    metrics_.unknown_drops = &m->AddCounter(
        "petrel_quic_worker_drops_total", "Datagrams a QUIC worker dropped, by reason",
        {{"reason", "unknown_connection"}, {"worker", absl::StrCat(config_.worker_id)}});
    metrics_.accepted = &m->AddCounter("petrel_quic_connections_accepted_total",
                                       "QUIC connections a worker accepted", w);
    metrics_.retries = &m->AddCounter(
        "petrel_quic_retries_sent_total",
        "Retry packets a QUIC worker sent instead of taking a connection (Retry always, or "
        "auto past its threshold of unfinished handshakes: an Initial flood)",
        w);
    metrics_.handshakes = &m->AddCounter("petrel_quic_handshakes_completed_total",
                                         "QUIC handshakes a worker completed", w);
    metrics_.open = &m->AddGauge("petrel_quic_connections_open", "QUIC connections open", w);
    metrics_.memory_trims = &m->AddCounter(
        "petrel_quic_memory_trims_total",
        "Times a QUIC worker gave freed memory back to the system after connections closed", w);
    metrics_.transport_errors = &m->AddCounter(
        "petrel_quic_transport_errors_total",
        "QUIC connections a worker closed with a transport error: the peer broke QUIC (a frame, "
        "a limit, flow control) or the connection failed",
        w);
    constexpr const char* kPhases[] = {"handshake", "established", "closing"};
    for (size_t i = 0; i < metrics_.phases.size(); ++i) {
      metrics_.phases[i] = &m->AddGauge("petrel_connections", "Connections open, by state",
                                        {{"transport", "quic"}, {"state", kPhases[i]}});
    }
  }
}

Worker::~Worker() {
  by_cid_.clear();
  entries_.clear();  // connections go before the senders they use
}

uint64_t Worker::sends_blocked() const {
  uint64_t n = 0;
  for (const SocketSlot& s : sockets_) n += s.sender->blocked_sends();
  return n;
}

uint64_t Worker::sendmsg_calls() const {
  uint64_t n = 0;
  for (const SocketSlot& s : sockets_) n += s.sender->sendmsg_calls();
  return n;
}

uint64_t Worker::sendmmsg_calls() const {
  uint64_t n = 0;
  for (const SocketSlot& s : sockets_) n += s.sender->sendmmsg_calls();
  return n;
}

uint64_t Worker::send_wakeups() const {
  uint64_t n = 0;
  for (const SocketSlot& s : sockets_) n += s.sender->writable_events();
  return n;
}

void Worker::Attach(const Master& master) {
  codec_.emplace(master.cid_codec());
  for (size_t i = 0; i < master.sockets().size(); ++i) {
    if (const auto& socket = master.sockets()[i]; socket != nullptr) AddSocket(i, *socket);
  }
  if (config_.preferred_socket.has_value() && *config_.preferred_socket < sockets_.size()) {
    preferred_address_ = sockets_[*config_.preferred_socket].address;
  }
}

void Worker::AddSocket(size_t index, const UdpSocket& socket) {
  loop_->AssertInLoopThread();
  if (index >= sockets_.size()) sockets_.resize(index + 1);
  SocketSlot& slot = sockets_[index];
  UdpSenderOptions opts = config_.sender_options;
  opts.test_loss_seed += config_.worker_id;
  opts.datagrams_sent = metrics_.datagrams_out;
  opts.bytes_sent = metrics_.bytes_out;
  opts.send_blocked = metrics_.send_blocked;
  opts.stage = true;  // one sendmmsg per loop turn for all of this worker's connections
  slot.sender = std::make_unique<UdpSender>(socket, opts);
  // Without it a send the socket refuses is lost (loss recovery resends it), as before.
  if (absl::Status s = slot.sender->WatchWritability(loop_); !s.ok()) {
    PETREL_LOG(kWarning, "worker %d: cannot wait for socket writability: %s", config_.worker_id,
               s.ToString().c_str());
  }
  slot.address = socket.local_address();
}

void Worker::RetireSocket(size_t index) {
  loop_->AssertInLoopThread();
  if (index >= sockets_.size() || sockets_[index].retiring) return;
  sockets_[index].retiring = true;
  ReleaseSocketIfDone(index);
}

void Worker::ForgetSocket(size_t index) {
  loop_->AssertInLoopThread();
  if (index >= sockets_.size() || sockets_[index].sender == nullptr) return;
  sockets_[index].retiring = true;
  sockets_[index].sender->Close();
  sockets_[index].address = SocketAddress();
}

void Worker::ReleaseSocketIfDone(size_t index) {
  SocketSlot& slot = sockets_[index];
  if (!slot.retiring || slot.connections > 0 || slot.sender->closed()) return;
  slot.sender->Close();
  slot.address = SocketAddress();
  if (config_.on_socket_released) config_.on_socket_released(index);
}

void Worker::SetConnectionLimits(const QuicTransportLimits& limits,
                                 std::vector<uint8_t> early_data_context) {
  loop_->AssertInLoopThread();
  connection_.limits = limits;
  early_data_context_ = std::move(early_data_context);
}

void Worker::OnPackets(absl::Span<const ReceivedPacket> packets) {
  for (const ReceivedPacket& p : packets) {
    const size_t seg = p.segment_size == 0 ? p.length : p.segment_size;
    for (size_t off = 0; off < p.length; off += seg) {
      HandleDatagram(p.data + off, std::min(seg, p.length - off), p);
    }
  }
}

void Worker::HandleDatagram(const uint8_t* data, size_t len, const ReceivedPacket& p) {
  if (metrics_.datagrams_in != nullptr) {
    metrics_.datagrams_in->Inc();
    metrics_.bytes_in->Inc(len);
  }
  InvariantHeader h;
  if (ParseInvariantHeader(absl::MakeConstSpan(data, len), codec_->cid_len(), &h) !=
      HeaderParse::kOk) {
    return;
  }
  if (auto it = by_cid_.find(CidKey::Of(h.dcid)); it != by_cid_.end()) {
    Connection* c = it->second;
    // Our CIDs name their worker: the master must have brought them here.
    if (std::optional<uint8_t> w = codec_->WorkerOf(h.dcid);
        w.has_value() && *w != config_.worker_id) {
      ++misrouted_;
    }
    if (!c->closed()) c->OnDatagram(data, len, p.local, p.peer, p.ecn, p.received);
    return;
  }
  if (h.long_form && h.type == LongPacketType::kInitial) {
    Accept(data, len, p);
    return;
  }
  ++unknown_drops_;
  if (metrics_.unknown_drops != nullptr) metrics_.unknown_drops->Inc();
  if (!h.long_form && codec_->WorkerOf(h.dcid).has_value()) {
    SendStatelessReset(h.dcid, len, p);
  }
}

void Worker::SendStatelessReset(absl::Span<const uint8_t> dcid, size_t len,
                                const ReceivedPacket& p) {
  uint8_t out[StatelessResponder::kMaxReplyLen];
  const size_t n = responder_.WriteStatelessReset(dcid, len, loop_->now(), out);
  if (n == 0) return;
  const SendBatch batch{out, n, 0, &p.peer, &p.local, 0};
  sockets_[p.socket_index].sender->Send(batch);
  ++resets_sent_;
}

void Worker::Accept(const uint8_t* data, size_t len, const ReceivedPacket& p) {
  // A retiring socket's count may only fall; an Initial the master routed before it stopped
  // accepting is dropped here (its client retries, and the master drops that).
  if (stopping_ || sockets_[p.socket_index].retiring) return;
  ngtcp2_pkt_hd hd;
  if (ngtcp2_accept(&hd, data, len) != 0) return;
  const WallTime wall = std::chrono::system_clock::now();
  const absl::Span<const uint8_t> token(hd.token.base, hd.token.len);
  bool validated = false;
  bool retried = false;
  ngtcp2_cid odcid = hd.dcid;
  if (AddressTokenCodec::LooksLike(token, TokenKind::kRetry)) {
    RetryTokenContents contents;
    if (config_.tokens->CheckRetryToken(token, p.peer, wall, config_.retry_token_lifetime,
                                        &contents) != TokenCheck::kValid) {
      return;  // forged, stale or for another address: drop (RFC 9000 §8.1.2 allows it)
    }
    ngtcp2_cid_init(&odcid, contents.odcid.data(), contents.odcid_len);
    validated = retried = true;
  } else if (AddressTokenCodec::LooksLike(token, TokenKind::kNewToken)) {
    validated = config_.tokens->CheckNewToken(token, p.peer, wall, config_.new_token_lifetime) ==
                TokenCheck::kValid;
  }
  const bool want_retry =
      config_.retry == RetryPolicy::kAlways ||
      (config_.retry == RetryPolicy::kAuto && unfinished_handshakes_ >= config_.retry_threshold);
  if (!validated && want_retry) {
    SendRetry(hd, p);
    return;
  }

  ServerConnectionArgs args;
  args.hd = hd;
  args.scid.datalen = codec_->cid_len();
  codec_->Generate(config_.worker_id, args.scid.data);
  reset_tokens_.Compute(absl::MakeConstSpan(args.scid.data, args.scid.datalen), args.reset_token);
  args.original_dcid = odcid;
  args.retried = retried;
  args.address_validated = validated;
  args.ssl = config_.tls->NewSsl();
  args.early_data_context = early_data_context_;
  if (!preferred_address_.empty()) {
    args.preferred_address = preferred_address_;
    args.preferred_cid.datalen = codec_->cid_len();
    codec_->Generate(config_.worker_id, args.preferred_cid.data);
    reset_tokens_.Compute(absl::MakeConstSpan(args.preferred_cid.data, args.preferred_cid.datalen),
                          args.preferred_reset_token);
  }
  const ngtcp2_cid our_scid = args.scid;
  const ngtcp2_cid preferred_cid = args.preferred_cid;
  absl::StatusOr<std::unique_ptr<Connection>> conn =
      Connection::CreateServer(loop_, sockets_[p.socket_index].sender.get(), this, app_,
                               connection_, p.local, p.peer, std::move(args));
  if (!conn.ok()) {
    PETREL_LOG(kWarning, "worker %d: cannot create connection: %s", config_.worker_id,
               conn.status().ToString());
    return;
  }
  Connection* c = conn->get();
  Entry& entry = entries_[c];
  entry.conn = std::move(*conn);
  entry.socket_index = p.socket_index;
  ++sockets_[p.socket_index].connections;
  if (Gauge* g = metrics_.phases[static_cast<size_t>(Phase::kHandshake)]) g->Add(1);
  peak_since_trim_ = std::max(peak_since_trim_, entries_.size());
  ++unfinished_handshakes_;
  ++accepted_;
  if (metrics_.accepted != nullptr) {
    metrics_.accepted->Inc();
    metrics_.open->Add(1);
  }
  // Not ngtcp2_conn_get_scid: it writes every SCID (the preferred address's too) to its array.
  Register(c, absl::MakeConstSpan(our_scid.data, our_scid.datalen));
  Register(c, absl::MakeConstSpan(hd.dcid.data, hd.dcid.datalen));
  if (preferred_cid.datalen > 0) {
    Register(c, absl::MakeConstSpan(preferred_cid.data, preferred_cid.datalen));
  }
  c->OnDatagram(data, len, p.local, p.peer, p.ecn, p.received);
}

void Worker::SendRetry(const ngtcp2_pkt_hd& hd, const ReceivedPacket& p) {
  uint8_t token[AddressTokenCodec::kMaxTokenLen];
  const size_t tlen =
      config_.tokens->MakeRetryToken(p.peer, absl::MakeConstSpan(hd.dcid.data, hd.dcid.datalen),
                                     std::chrono::system_clock::now(), token);
  if (tlen == 0) return;
  ngtcp2_cid scid;
  scid.datalen = codec_->cid_len();
  codec_->Generate(config_.worker_id, scid.data);
  uint8_t out[256];
  absl::StatusOr<size_t> n = config_.retry_writer->Write(hd.version, hd.scid, scid, hd.dcid,
                                                         absl::MakeConstSpan(token, tlen), out);
  if (!n.ok()) return;
  const SendBatch batch{out, *n, 0, &p.peer, &p.local, 0};
  sockets_[p.socket_index].sender->Send(batch);
  ++retries_sent_;
  if (metrics_.retries != nullptr) metrics_.retries->Inc();
}

void Worker::Register(Connection* conn, absl::Span<const uint8_t> cid) {
  const CidKey key = CidKey::Of(cid);
  if (!by_cid_.try_emplace(key, conn).second) return;
  entries_[conn].cids.push_back(key);
}

bool Worker::IssueConnectionId(Connection& conn, absl::Span<uint8_t> cid, uint8_t* token) {
  if (cid.size() != codec_->cid_len()) return false;
  codec_->Generate(config_.worker_id, cid.data());
  reset_tokens_.Compute(cid, token);
  Register(&conn, cid);
  return true;
}

void Worker::RetireConnectionId(Connection& conn, absl::Span<const uint8_t> cid) {
  const CidKey key = CidKey::Of(cid);
  by_cid_.erase(key);
  auto it = entries_.find(&conn);
  if (it == entries_.end()) return;
  auto& cids = it->second.cids;
  cids.erase(std::remove(cids.begin(), cids.end(), key), cids.end());
}

void Worker::MoveTo(Entry& e, Phase phase) {
  if (e.phase == phase || e.phase == Phase::kCount) return;
  if (e.phase == Phase::kHandshake) --unfinished_handshakes_;
  if (Gauge* g = metrics_.phases[static_cast<size_t>(e.phase)]) g->Sub(1);
  if (Gauge* g = metrics_.phases[static_cast<size_t>(phase)]) g->Add(1);
  e.phase = phase;
}

void Worker::OnClosing(Connection& conn) {
  if (auto it = entries_.find(&conn); it != entries_.end()) MoveTo(it->second, Phase::kClosing);
}

void Worker::OnHandshakeCompleted(Connection& conn) {
  auto it = entries_.find(&conn);
  if (it != entries_.end() && it->second.phase == Phase::kHandshake) {
    MoveTo(it->second, Phase::kEstablished);
  }
  if (metrics_.handshakes != nullptr) metrics_.handshakes->Inc();
  uint8_t token[AddressTokenCodec::kMaxTokenLen];
  const size_t n =
      config_.tokens->MakeNewToken(conn.peer(), std::chrono::system_clock::now(), token);
  if (n > 0) ngtcp2_conn_submit_new_token(conn.conn(), token, n);
}

void Worker::OnTransportError(Connection&, int) {
  ++transport_errors_;
  if (metrics_.transport_errors != nullptr) metrics_.transport_errors->Inc();
}

void Worker::OnPathValidated(Connection&, bool success) {
  if (success) ++paths_validated_;
}

UdpSender* Worker::SenderFor(const SocketAddress& local) {
  for (const SocketSlot& slot : sockets_) {
    const SocketAddress& a = slot.address;
    if (a.empty()) continue;  // released, or never added
    if (a == local || (a.port() == local.port() && a.is_v6() == local.is_v6() && a.is_any())) {
      return slot.sender.get();
    }
  }
  return nullptr;
}

void Worker::Release(Connection& conn) {
  auto it = entries_.find(&conn);
  if (it == entries_.end()) return;
  for (const CidKey& k : it->second.cids) by_cid_.erase(k);
  it->second.cids.clear();
  if (it->second.phase == Phase::kHandshake) --unfinished_handshakes_;
  if (it->second.phase != Phase::kCount) {
    if (Gauge* g = metrics_.phases[static_cast<size_t>(it->second.phase)]) g->Sub(1);
    it->second.phase = Phase::kCount;  // counted nowhere any more
  }
  Connection* c = &conn;
  // The connection may be running one of its own handlers: free it after the batch.
  loop_->RunAfterBatch([this, c] {
    if (auto e = entries_.find(c); e != entries_.end()) {
      const uint32_t socket_index = e->second.socket_index;
      entries_.erase(e);
      if (metrics_.open != nullptr) metrics_.open->Sub(1);
      --sockets_[socket_index].connections;
      ReleaseSocketIfDone(socket_index);
    }
    MaybeScheduleTrim();
    FinishShutdownIfEmpty();
  });
}

void Worker::MaybeScheduleTrim() {
  if (config_.memory_trim_delay.count() <= 0 || peak_since_trim_ < kMinPeakToTrim) return;
  if (entries_.size() * 2 > peak_since_trim_ || trim_timer_.armed()) return;
  trim_timer_.StartAfter(config_.memory_trim_delay);
}

void Worker::OnTrimTimer() {
  // New connections may have come in the meantime; then the next fall schedules it again.
  if (entries_.size() * 2 > peak_since_trim_) return;
  malloc_trim(0);
  ++memory_trims_;
  if (metrics_.memory_trims != nullptr) metrics_.memory_trims->Inc();
  peak_since_trim_ = entries_.size();
}

void Worker::OnMaybeIdle(Connection& conn) {
  if (!stopping_ || conn.closing()) return;
  // Not from inside ngtcp2's callback: after the batch, when the connection is between events.
  if (idle_candidates_.empty()) loop_->RunAfterBatch([this] { CloseIdleConnections(); });
  if (idle_candidates_.empty() || idle_candidates_.back() != &conn) {
    idle_candidates_.push_back(&conn);  // a batch of its packets asks once
  }
}

void Worker::CloseIdleConnections() {
  std::vector<Connection*> candidates = std::move(idle_candidates_);
  idle_candidates_.clear();
  for (Connection* c : candidates) {
    // Released in the meantime (the same batch)? Then it is no longer an entry.
    if (entries_.contains(c)) CloseIfDone(*c, /*late=*/false);
  }
}

void Worker::CloseIfDone(Connection& conn, bool late) {
  if (conn.closing()) return;
  // Idle is not enough: what the application sent last (HTTP/3's GOAWAY) must have reached the
  // peer, or its requests in flight could not be told from processed ones.
  if (late || (conn.observer()->IsIdle(conn.handle()) && conn.AllDelivered())) {
    conn.Close(config_.shutdown_error_code);
  }
}

void Worker::Shutdown(TimePoint deadline, std::function<void()> done) {
  stopping_ = true;
  shutdown_done_ = std::move(done);
  std::vector<Connection*> open;
  for (auto& [c, e] : entries_) {
    if (!c->closing()) open.push_back(c);
  }
  for (Connection* c : open) c->observer()->OnShutdown(c->handle());
  // Asked once what OnShutdown queued (HTTP/3's GOAWAY, flushed after the batch) has been
  // written, and again after each packet: an acknowledgement may be what makes one done.
  // OnShutdown may have closed some (they are released after the batch).
  for (Connection* c : open) {
    if (entries_.contains(c) && !c->closing()) c->WatchForIdle();
  }
  if (entries_.empty()) {
    FinishShutdownIfEmpty();
    return;
  }
  shutdown_timer_.StartAt(deadline);
}

void Worker::OnShutdownDeadline() {
  std::vector<Connection*> open;
  for (auto& [c, e] : entries_) open.push_back(c);
  for (Connection* c : open) {
    if (entries_.contains(c)) CloseIfDone(*c, /*late=*/true);
  }
}

void Worker::FinishShutdownIfEmpty() {
  if (!stopping_ || !entries_.empty() || !shutdown_done_) return;
  shutdown_timer_.Cancel();
  auto done = std::move(shutdown_done_);
  shutdown_done_ = nullptr;
  done();
}

}  // namespace petrel::quic
