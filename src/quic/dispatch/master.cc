#include "quic/dispatch/master.h"

#include <algorithm>
#include <cstring>

#include "absl/hash/hash.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "quic/packet/invariant_header.h"

namespace petrel::quic {
namespace {

constexpr size_t kMinInitialDatagram = 1200;
constexpr size_t kGroBufferBytes = 65536;
constexpr size_t kPlainBufferBytes = 2048;

}  // namespace

const char* DropReasonName(DropReason r) {
  switch (r) {
    case DropReason::kMalformed:
      return "malformed";
    case DropReason::kShortInitial:
      return "short_initial";
    case DropReason::kUnroutable:
      return "unroutable";
    case DropReason::kRingFull:
      return "ring_full";
    case DropReason::kNoBuffer:
      return "no_buffer";
    case DropReason::kVersionNegotiation:
      return "version_negotiation";
    case DropReason::kResetLimited:
      return "reset_limited";
    case DropReason::kNotListening:
      return "not_listening";
    case DropReason::kOverload:
      return "overload";
    case DropReason::kCount:
      break;
  }
  return "unknown";
}

absl::StatusOr<std::unique_ptr<Master>> Master::Create(const MasterConfig& config, EventLoop* loop,
                                                       std::vector<WorkerPort> workers,
                                                       MetricsRegistry* metrics) {
  if (workers.empty() || workers.size() > 256) {
    return absl::InvalidArgumentError(
        absl::StrCat("a QUIC server needs 1..256 worker loops, not ", workers.size()));
  }
  if (config.listen.empty()) return absl::InvalidArgumentError("no UDP listen address");
  for (const WorkerPort& w : workers) {
    if (w.loop == nullptr || w.sink == nullptr) {
      return absl::InvalidArgumentError("worker without loop or sink");
    }
  }
  auto codec = ServerCidCodec::Create(config.cid);
  if (!codec.ok()) return codec.status();
  auto m = std::unique_ptr<Master>(new Master(config, loop, *codec, std::move(workers)));
  for (const SocketAddress& addr : config.listen) {
    auto sock = UdpSocket::Bind(addr, config.socket_options);
    if (!sock.ok()) return sock.status();
    m->senders_.push_back(std::make_unique<UdpSender>(**sock));
    m->sockets_.push_back(*std::move(sock));
  }
  m->accepting_.assign(m->sockets_.size(), 1);
  m->released_by_.assign(m->sockets_.size(), 0);
  const bool gro = std::any_of(m->sockets_.begin(), m->sockets_.end(),
                               [](const auto& s) { return s->gro_enabled(); });
  PacketPool::Options pool;
  pool.buffer_size = WorkerInbox::kPayloadOffset + (gro ? kGroBufferBytes : kPlainBufferBytes);
  pool.buffers_per_slab = UdpSocket::kMaxBatch;
  // Enough for one batch in the master plus what the workers hold; a worker that falls behind
  // fills its share and further datagrams are dropped (counted), not queued without bound.
  pool.max_buffers =
      config.max_datagram_buffers != 0
          ? config.max_datagram_buffers
          : UdpSocket::kMaxBatch * 2 +
                (m->direct_ ? 0
                            : m->workers_.size() *
                                  std::min<size_t>(config.ring_capacity, gro ? 256 : 4096));
  m->pool_ = std::make_unique<PacketPool>(pool);
  if (!m->direct_) m->shed_above_ = pool.max_buffers / 4 * 3;
  if (config.preallocate_buffers && !m->pool_->Reserve(pool.max_buffers)) {
    return absl::ResourceExhaustedError("cannot preallocate the datagram buffers");
  }
  if (gro && !m->direct_) {
    PacketPool::Options small;
    small.buffer_size = WorkerInbox::kPayloadOffset + kPlainBufferBytes;
    small.buffers_per_slab = UdpSocket::kMaxBatch;
    small.max_buffers = config.max_datagram_buffers != 0
                            ? config.max_datagram_buffers
                            : m->workers_.size() * std::min<size_t>(config.ring_capacity, 4096);
    m->small_pool_ = std::make_unique<PacketPool>(small);
    m->small_shed_above_ = small.max_buffers / 4 * 3;
    if (config.preallocate_buffers && !m->small_pool_->Reserve(small.max_buffers)) {
      return absl::ResourceExhaustedError("cannot preallocate the datagram buffers");
    }
  }
  m->scratch_.resize(kGroBufferBytes);
  if (!m->direct_) {
    for (const WorkerPort& w : m->workers_) {
      m->inboxes_.push_back(
          std::make_unique<WorkerInbox>(config.ring_capacity, config.drain_budget, w.sink));
      m->per_worker_.emplace_back().reserve(UdpSocket::kMaxBatch);
    }
  }
  if (metrics != nullptr) {
    m->datagrams_metric_ = &metrics->AddCounter("petrel_quic_datagrams_received_total",
                                                "UDP datagrams the QUIC master received");
    for (size_t r = 0; r < static_cast<size_t>(DropReason::kCount); ++r) {
      m->drop_metrics_[r] = &metrics->AddCounter(
          "petrel_quic_master_drops_total", "Datagrams the QUIC master dropped, by reason",
          {{"reason", DropReasonName(static_cast<DropReason>(r))}});
    }
    m->ring_depth_metrics_.assign(m->inboxes_.size(), nullptr);
    for (size_t w = 0; w < m->inboxes_.size(); ++w) {
      m->ring_depth_metrics_[w] = &metrics->AddGauge(
          "petrel_quic_ring_depth",
          "Datagrams queued from the master to a worker (after the last push or drain)",
          {{"worker", absl::StrCat(w)}});
      m->inboxes_[w]->set_depth_gauge(m->ring_depth_metrics_[w]);
    }
  } else {
    m->ring_depth_metrics_.assign(m->inboxes_.size(), nullptr);
  }
  return m;
}

Master::Master(const MasterConfig& config, EventLoop* loop, ServerCidCodec codec,
               std::vector<WorkerPort> workers)
    : config_(config),
      loop_(loop),
      cid_codec_(codec),
      workers_(std::move(workers)),
      direct_(workers_.size() == 1 && workers_[0].loop == loop),
      responder_(config.reset_key, config.resets_per_second, config.reset_burst),
      routed_(workers_.size(), 0) {
  direct_batch_.reserve(UdpSocket::kMaxBatch);
  reclaimed_.resize(UdpSocket::kMaxBatch * 4);
}

Master::~Master() {
  DisarmSlots();
  // The worker loops have stopped by now (DESIGN §3: join, then free): every buffer still in an
  // inbox, returned or never drained, goes back to the pool before the pool goes.
  for (auto& inbox : inboxes_) {
    size_t n;
    while ((n = inbox->ReclaimReturned(reclaimed_.data(), reclaimed_.size())) > 0 ||
           (n = inbox->ReclaimUndelivered(reclaimed_.data(), reclaimed_.size())) > 0) {
      for (size_t i = 0; i < n; ++i) ReleaseBuffer(reclaimed_[i]);
    }
  }
}

absl::Status Master::Start() {
  loop_->AssertInLoopThread();
  for (const auto& sock : sockets_) {
    if (sock == nullptr) continue;
    if (absl::Status s = loop_->Register(sock->fd(), EventLoop::kReadable, this); !s.ok()) {
      return s;
    }
  }
  for (size_t i = 0; i < inboxes_.size(); ++i) {
    WorkerInbox* inbox = inboxes_[i].get();
    EventLoop* wl = workers_[i].loop;
    wl->RunInLoop([inbox, wl] { (void)inbox->Register(wl); });
  }
  started_ = true;
  return absl::OkStatus();
}

void Master::StopReceiving() {
  loop_->AssertInLoopThread();
  if (!started_) return;
  for (const auto& sock : sockets_) {
    if (sock != nullptr) loop_->Unregister(sock->fd());
  }
  started_ = false;
}

absl::Status Master::AddSockets(std::vector<std::unique_ptr<UdpSocket>>& sockets) {
  loop_->AssertInLoopThread();
  if (started_) {
    for (size_t i = 0; i < sockets.size(); ++i) {
      if (absl::Status s = loop_->Register(sockets[i]->fd(), EventLoop::kReadable, this); !s.ok()) {
        for (size_t j = 0; j < i; ++j) loop_->Unregister(sockets[j]->fd());
        return s;
      }
    }
  }
  for (auto& sock : sockets) {
    senders_.push_back(std::make_unique<UdpSender>(*sock));
    sockets_.push_back(std::move(sock));
    accepting_.push_back(1);
    released_by_.push_back(0);
  }
  sockets.clear();
  return absl::OkStatus();
}

void Master::StopAccepting(size_t index) {
  loop_->AssertInLoopThread();
  accepting_[index] = 0;
  // Workers may have released it already (they are told to retire it first, or had nothing).
  OnSocketReleased(index, /*count=*/false);
}

void Master::OnSocketReleased(size_t index) { OnSocketReleased(index, /*count=*/true); }

void Master::OnSocketReleased(size_t index, bool count) {
  loop_->AssertInLoopThread();
  if (count) ++released_by_[index];
  if (accepting_[index] != 0 || released_by_[index] < workers_.size() ||
      sockets_[index] == nullptr) {
    return;
  }
  if (started_) loop_->Unregister(sockets_[index]->fd());
  senders_[index].reset();
  sockets_[index].reset();  // closes the fd: the port is free again
}

void Master::OnIoEvent(uint32_t /*events*/) {
  // Level-triggered: each readable socket gets a bounded share per turn.
  for (size_t i = 0; i < sockets_.size(); ++i) {
    if (sockets_[i] != nullptr) ReadSocket(i);
  }
}

void Master::ReleaseBuffer(PacketBuffer* b) {
  if (IsSmall(b)) {
    small_pool_->Release(b);
  } else {
    pool_->Release(b);
  }
}

void Master::ReclaimBuffers() {
  for (auto& inbox : inboxes_) {
    size_t n;
    while ((n = inbox->ReclaimReturned(reclaimed_.data(), reclaimed_.size())) > 0) {
      for (size_t i = 0; i < n; ++i) ReleaseBuffer(reclaimed_[i]);
      if (n < reclaimed_.size()) break;
    }
  }
}

void Master::Reply(size_t socket_index, const RecvSlot& slot, const uint8_t* data, size_t len) {
  SendBatch b;
  b.data = data;
  b.length = len;
  b.peer = &slot.peer;
  b.local = &slot.local;
  senders_[socket_index]->Send(b);
}

int Master::Route(const uint8_t* data, size_t length, size_t first_segment, const RecvSlot& slot,
                  size_t socket_index, bool shed_new) {
  InvariantHeader h;
  const HeaderParse parse =
      ParseInvariantHeader(absl::MakeConstSpan(data, first_segment), cid_codec_.cid_len(), &h);
  switch (parse) {
    case HeaderParse::kMalformed:
      Drop(DropReason::kMalformed);
      return -1;
    case HeaderParse::kVersionNegotiation:
      Drop(DropReason::kVersionNegotiation);
      return -1;
    case HeaderParse::kUnsupportedVersion: {
      // Only a client starting a connection uses a version we do not speak.
      if (accepting_[socket_index] == 0) {
        Drop(DropReason::kNotListening);
        return -1;
      }
      uint8_t reply[StatelessResponder::kMaxReplyLen];
      const size_t n = responder_.WriteVersionNegotiation(h, first_segment, reply);
      if (n == 0) {
        Drop(DropReason::kShortInitial);
        return -1;
      }
      Reply(socket_index, slot, reply, n);
      ++vn_sent_;
      return -1;
    }
    case HeaderParse::kOk:
      break;
  }
  const size_t n = workers_.size();
  if (std::optional<uint8_t> w = cid_codec_.WorkerOf(h.dcid); w.has_value() && *w < n) {
    return *w;
  }
  if (h.long_form) {
    if (h.type == LongPacketType::kInitial || h.type == LongPacketType::kZeroRtt) {
      // A client-chosen DCID: a new connection, or the first flight of one whose client has
      // not yet heard the server's reply (and so not yet switched to the server's CID). The
      // master cannot tell them apart without state; dropping both ends intake at once, and
      // such a handshake recovers when the client gets the reply to its first Initial.
      if (accepting_[socket_index] == 0) {
        Drop(DropReason::kNotListening);
        return -1;
      }
      if (h.type == LongPacketType::kInitial && first_segment < kMinInitialDatagram) {
        Drop(DropReason::kShortInitial);
        return -1;
      }
      // A client that has not seen our transport parameters may not grease the fixed bit.
      if (!h.fixed_bit) {
        Drop(DropReason::kMalformed);
        return -1;
      }
      if (shed_new) {
        Drop(DropReason::kOverload);
        return -1;
      }
      const absl::string_view dcid(reinterpret_cast<const char*>(h.dcid.data()), h.dcid.size());
      return static_cast<int>(absl::HashOf(dcid) % n);
    }
    Drop(DropReason::kUnroutable);
    return -1;
  }
  // A short header for a CID we never issued (or for a worker we do not have).
  uint8_t reply[StatelessResponder::kMaxReplyLen];
  const size_t len = responder_.WriteStatelessReset(h.dcid, length, loop_->now(), reply);
  if (len == 0) {
    Drop(DropReason::kResetLimited);
    return -1;
  }
  Reply(socket_index, slot, reply, len);
  ++resets_sent_;
  return -1;
}

size_t Master::ArmSlots() {
  const size_t payload_capacity = pool_->buffer_size() - WorkerInbox::kPayloadOffset;
  while (armed_ < slots_.size()) {
    PacketBuffer* b = pool_->Acquire();
    if (b == nullptr) break;
    RecvSlot& s = slots_[armed_++];
    s.data = WorkerInbox::Payload(b);
    s.capacity = payload_capacity;
    s.owner = b;
  }
  return armed_;
}

void Master::DisarmSlots() {
  for (size_t i = 0; i < armed_; ++i) pool_->Release(static_cast<PacketBuffer*>(slots_[i].owner));
  armed_ = 0;
}

void Master::ReadSocket(size_t socket_index) {
  UdpSocket& sock = *sockets_[socket_index];
  // In direct mode each read is served before the next, and the responses it produced leave after
  // the turn's I/O (the connections flush after the batch), as do the timers' packets: one read
  // per turn, as a worker takes its drain budget per turn, so that a backlog of datagrams holds
  // them back by one batch, not by sixteen.
  const size_t rounds = direct_ ? 1 : config_.recv_batches_per_event;
  for (size_t round = 0; round < rounds; ++round) {
    ReclaimBuffers();
    // What the workers hold, and with it what this round hands them. The slots keep their
    // buffers from one read to the next: a read that returns one datagram costs one buffer.
    size_t held = pool_->in_use() - armed_;
    size_t held_small = small_pool_ != nullptr ? small_pool_->in_use() : 0;
    const size_t slots = ArmSlots();
    if (slots == 0) {
      // Out of buffers: read into scratch and drop, so a readable socket cannot spin the loop.
      RecvSlot s;
      s.data = scratch_.data();
      s.capacity = scratch_.size();
      auto got = sock.Receive(absl::MakeSpan(&s, 1));
      if (!got.ok() || *got == 0) return;
      Drop(DropReason::kNoBuffer);
      continue;
    }
    auto got = sock.Receive(absl::MakeSpan(slots_.data(), slots));
    const size_t n = got.ok() ? *got : 0;
    const uint64_t datagrams_before = datagrams_received_;
    size_t handed_over = 0;  // slots whose buffer went to a worker: refilled below
    for (size_t i = 0; i < n; ++i) {
      RecvSlot& s = slots_[i];
      if (s.length == 0) {  // truncated: larger than any datagram we accept
        Drop(DropReason::kMalformed);
        continue;  // the slot keeps its buffer
      }
      const size_t first = s.segment_size != 0 ? s.segment_size : s.length;
      datagrams_received_ += s.segment_size != 0 ? (s.length + first - 1) / first : 1;
      const int w = Route(s.data, s.length, first, s, socket_index,
                          held >= shed_above_ || held_small >= small_shed_above_);
      if (w < 0) continue;
      ++routed_[w];
      ReceivedPacket p;
      p.data = s.data;
      p.length = s.length;
      p.segment_size = s.segment_size;
      p.peer = s.peer;
      p.local = s.local;
      p.ecn = s.ecn;
      p.received = loop_->now();
      p.socket_index = static_cast<uint32_t>(socket_index);
      if (direct_) {
        // Served before the next read, so the bytes stay in the slot's buffer.
        direct_batch_.push_back(p);
        continue;
      }
      auto* b = static_cast<PacketBuffer*>(s.owner);
      if (small_pool_ != nullptr && s.length <= kPlainBufferBytes &&
          (s.segment_size == 0 || s.segment_size >= s.length)) {
        if (PacketBuffer* small = small_pool_->Acquire(); small != nullptr) {
          std::memcpy(WorkerInbox::Payload(small), s.data, s.length);
          p.data = WorkerInbox::Payload(small);
          b = small;  // the slot keeps the large buffer
        }
      }
      if (IsSmall(b)) {
        ++held_small;
      } else {
        ++held;
        s.owner = nullptr;  // the worker has it now
        ++handed_over;
      }
      *WorkerInbox::Header(b) = p;
      per_worker_[w].push_back(b);
    }
    if (handed_over > 0) {
      // Close the gaps: the last armed slots' buffers move into the emptied ones.
      size_t i = 0;
      while (i < armed_) {
        if (slots_[i].owner != nullptr) {
          ++i;
          continue;
        }
        RecvSlot& last = slots_[--armed_];
        if (i == armed_) break;
        slots_[i].data = last.data;
        slots_[i].capacity = last.capacity;
        slots_[i].owner = last.owner;
      }
    }

    if (direct_) {
      if (!direct_batch_.empty()) workers_[0].sink->OnPackets(direct_batch_);
      direct_batch_.clear();
    } else {
      for (size_t w = 0; w < per_worker_.size(); ++w) {
        std::vector<PacketBuffer*>& q = per_worker_[w];
        if (q.empty()) continue;
        const size_t pushed = inboxes_[w]->Push(q.data(), q.size());
        if (ring_depth_metrics_[w] != nullptr) {
          ring_depth_metrics_[w]->Set(static_cast<int64_t>(inboxes_[w]->depth()));
        }
        for (size_t i = pushed; i < q.size(); ++i) {
          Drop(DropReason::kRingFull);
          ReleaseBuffer(q[i]);
        }
        q.clear();
      }
    }
    if (datagrams_metric_ != nullptr)
      datagrams_metric_->Inc(datagrams_received_ - datagrams_before);
    if (n < slots) return;  // drained: the socket has nothing more for now
  }
}

}  // namespace petrel::quic
