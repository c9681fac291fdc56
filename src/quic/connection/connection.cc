#include "quic/connection/connection.h"

#include <openssl/rand.h>

#include <algorithm>
#include <cstdarg>
#include <cstdlib>
#include <cstring>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "petrel/common/log.h"
#include "quic/connection/connection_callbacks.h"

namespace petrel::quic {

ngtcp2_qlog_write ConnectionQlogWriter();  // connection_callbacks.cc

namespace {

ngtcp2_cc_algo ToNgtcp2(CongestionControl cc) {
  switch (cc) {
    case CongestionControl::kReno:
      return NGTCP2_CC_ALGO_RENO;
    case CongestionControl::kBbr:
      return NGTCP2_CC_ALGO_BBR;
    case CongestionControl::kBbr2:
      return NGTCP2_CC_ALGO_BBR2;
    case CongestionControl::kCubic:
      break;
  }
  return NGTCP2_CC_ALGO_CUBIC;
}

ngtcp2_path MakePath(const SocketAddress& local, const SocketAddress& peer) {
  ngtcp2_path path{};
  path.local.addr = const_cast<ngtcp2_sockaddr*>(local.sockaddr_ptr());
  path.local.addrlen = local.length();
  path.remote.addr = const_cast<ngtcp2_sockaddr*>(peer.sockaddr_ptr());
  path.remote.addrlen = peer.length();
  return path;
}

ngtcp2_cid RandomCid(size_t len) {
  ngtcp2_cid cid;
  cid.datalen = len;
  RAND_bytes(cid.data, len);
  return cid;
}

// PETREL_NGTCP2_DEBUG=1 in the environment: ngtcp2's own trace on stderr (debugging aid).
void Ngtcp2LogPrintf(void* /*user_data*/, const char* format, ...) {
  va_list ap;
  va_start(ap, format);
  std::vfprintf(stderr, format, ap);
  va_end(ap);
  std::fputc('\n', stderr);
}

}  // namespace

Connection::Connection(EventLoop* loop, UdpSender* sender, ConnectionHost* host,
                       ConnectionObserver* observer, const ConnectionSettings& settings,
                       bool is_server, const SocketAddress& local, const SocketAddress& peer)
    : loop_(loop),
      sender_(sender),
      host_(host),
      observer_(observer),
      settings_(settings),
      is_server_(is_server),
      local_(local),
      peer_(peer),
      timer_(loop, [this] { OnTimer(); }) {}

uint8_t* Connection::SendBuffer() {
  // Not zero-filled: every byte sent was written by ngtcp2 first.
  thread_local const std::unique_ptr<uint8_t[]> buffer(new uint8_t[UdpSocket::kMaxGsoBytes]);
  return buffer.get();
}

Connection::~Connection() {
  if (waiting_on_ != nullptr) waiting_on_->CancelWait(this);
  if (staged_on_ != nullptr) staged_on_->ForgetStaged(this);
  ngtcp2_conn_del(conn_);  // before the TlsSession (tls_session.h)
  tls_.reset();
  if (qlog_ != nullptr) std::fclose(qlog_);
}

absl::Status Connection::InitCommon(ngtcp2_settings* s, ngtcp2_transport_params* p,
                                    const ngtcp2_cid& odcid) {
  ngtcp2_settings_default(s);
  s->initial_ts = ToNanos(loop_->now());
  s->cc_algo = ToNgtcp2(settings_.cc);
  if (std::getenv("PETREL_NGTCP2_DEBUG") != nullptr) s->log_printf = Ngtcp2LogPrintf;
  s->max_window = 4 * settings_.limits.max_data;
  s->max_stream_window = 4 * settings_.limits.max_stream_data;
  // Acknowledge every ack-eliciting packet at the next write. ngtcp2 otherwise holds an ACK back
  // until min(max_ack_delay, RTT/8) has passed since the packet arrived, measured with the
  // timestamp of the write; Petrel reads the clock once per loop turn, so a response written
  // in the turn that read its request would never carry the request's ACK and the peer would
  // get a second, ACK-only packet a moment later (and a client that waits for its stream to
  // close before the next request would wait for it). Written once per batch of datagrams, the
  // ACK costs no extra packet when there is anything else to send.
  s->ack_thresh = 1;
  s->handshake_timeout = settings_.limits.handshake_timeout_ms == 0
                             ? UINT64_MAX
                             : settings_.limits.handshake_timeout_ms * NGTCP2_MILLISECONDS;
  if (!settings_.qlog_dir.empty()) {
    OpenQlog(odcid);
    if (qlog_ != nullptr) {
      s->qlog.odcid = odcid;
      s->qlog.write = ConnectionQlogWriter();
    }
  }
  ngtcp2_transport_params_default(p);
  const QuicTransportLimits& l = settings_.limits;
  p->initial_max_streams_bidi = l.max_streams_bidi;
  p->initial_max_streams_uni = l.max_streams_uni;
  p->initial_max_data = l.max_data;
  p->initial_max_stream_data_bidi_local = l.max_stream_data;
  p->initial_max_stream_data_bidi_remote = l.max_stream_data;
  p->initial_max_stream_data_uni = l.max_stream_data;
  p->max_idle_timeout = l.idle_timeout_ms * NGTCP2_MILLISECONDS;
  p->active_connection_id_limit = 4;
  if (!settings_.versions.empty()) {
    // Both point into settings_, which lives as long as the connection.
    s->preferred_versions = const_cast<uint32_t*>(settings_.versions.data());
    s->preferred_versionslen = settings_.versions.size();
    s->other_versions = s->preferred_versions;
    s->other_versionslen = s->preferred_versionslen;
  }
  return absl::OkStatus();
}

void Connection::OpenQlog(const ngtcp2_cid& odcid) {
  const std::string name =
      absl::StrCat(settings_.qlog_dir, "/",
                   absl::BytesToHexString(
                       absl::string_view(reinterpret_cast<const char*>(odcid.data), odcid.datalen)),
                   is_server_ ? "-server" : "-client", ".sqlog");
  qlog_ = std::fopen(name.c_str(), "w");
  if (qlog_ == nullptr) PETREL_LOG(kWarning, "qlog: cannot open %s", name);
}

void Connection::WriteQlog(const void* data, size_t len, bool fin) {
  if (qlog_ == nullptr) return;
  std::fwrite(data, 1, len, qlog_);
  if (fin) {
    std::fclose(qlog_);
    qlog_ = nullptr;
  }
}

absl::StatusOr<std::unique_ptr<Connection>> Connection::CreateServer(
    EventLoop* loop, UdpSender* sender, ConnectionHost* host, ConnectionObserver* observer,
    const ConnectionSettings& settings, const SocketAddress& local, const SocketAddress& peer,
    ServerConnectionArgs args) {
  std::unique_ptr<Connection> c(
      new Connection(loop, sender, host, observer, settings, true, local, peer));
  absl::StatusOr<std::unique_ptr<crypto::TlsSession>> tls =
      crypto::TlsSession::Create(std::move(args.ssl), true);
  if (!tls.ok()) return tls.status();
  c->tls_ = std::move(*tls);
  if (!args.early_data_context.empty()) {
    if (absl::Status st = c->tls_->SetEarlyDataContext(args.early_data_context); !st.ok()) {
      return st;
    }
  }
  ngtcp2_settings s;
  ngtcp2_transport_params p;
  if (absl::Status st = c->InitCommon(&s, &p, args.original_dcid); !st.ok()) return st;
  if (args.address_validated) s.token = args.hd.token;
  p.original_dcid = args.original_dcid;
  if (args.retried) {
    p.retry_scid = args.hd.dcid;
    p.retry_scid_present = 1;
  }
  p.stateless_reset_token_present = 1;
  std::memcpy(p.stateless_reset_token, args.reset_token, sizeof(p.stateless_reset_token));
  if (!args.preferred_address.empty()) {
    ngtcp2_preferred_addr& pa = p.preferred_address;
    p.preferred_address_present = 1;
    pa.cid = args.preferred_cid;
    std::memcpy(pa.stateless_reset_token, args.preferred_reset_token,
                sizeof(pa.stateless_reset_token));
    if (args.preferred_address.is_v6()) {
      std::memcpy(&pa.ipv6, args.preferred_address.sockaddr_ptr(), sizeof(pa.ipv6));
      pa.ipv6_present = 1;
    } else {
      std::memcpy(&pa.ipv4, args.preferred_address.sockaddr_ptr(), sizeof(pa.ipv4));
      pa.ipv4_present = 1;
    }
  }
  const ngtcp2_callbacks cb = ConnectionCallbacksFor(true);
  const ngtcp2_path path = MakePath(c->local_, c->peer_);
  const int rv = ngtcp2_conn_server_new(&c->conn_, &args.hd.scid, &args.scid, &path,
                                        args.hd.version, &cb, &s, &p, c->memory_.mem(), c.get());
  if (rv != 0) return absl::InternalError(ngtcp2_strerror(rv));
  if (absl::Status st = c->tls_->Attach(c->conn_); !st.ok()) return st;
  c->ApplyKeepAlive();
  return c;
}

absl::StatusOr<std::unique_ptr<Connection>> Connection::CreateClient(
    EventLoop* loop, UdpSender* sender, ConnectionHost* host, ConnectionObserver* observer,
    const ConnectionSettings& settings, const SocketAddress& local, const SocketAddress& peer,
    ClientConnectionArgs args) {
  std::unique_ptr<Connection> c(
      new Connection(loop, sender, host, observer, settings, false, local, peer));
  absl::StatusOr<std::unique_ptr<crypto::TlsSession>> tls =
      crypto::TlsSession::Create(std::move(args.ssl), false);
  if (!tls.ok()) return tls.status();
  c->tls_ = std::move(*tls);
  const ngtcp2_cid dcid = RandomCid(18);
  const ngtcp2_cid scid = RandomCid(16);
  ngtcp2_settings s;
  ngtcp2_transport_params p;
  if (absl::Status st = c->InitCommon(&s, &p, dcid); !st.ok()) return st;
  const ngtcp2_callbacks cb = ConnectionCallbacksFor(false);
  const ngtcp2_path path = MakePath(c->local_, c->peer_);
  const int rv = ngtcp2_conn_client_new(&c->conn_, &dcid, &scid, &path, args.version, &cb, &s, &p,
                                        c->memory_.mem(), c.get());
  if (rv != 0) return absl::InternalError(ngtcp2_strerror(rv));
  if (absl::Status st = c->tls_->Attach(c->conn_); !st.ok()) return st;
  c->ApplyKeepAlive();
  c->tls_->set_on_early_data_rejected([raw = c.get()] { raw->OnEarlyDataRejected(); });
  if (!args.early_transport_params.empty()) {
    ngtcp2_transport_params early;
    const int drv = ngtcp2_decode_transport_params(
        &early, NGTCP2_TRANSPORT_PARAMS_TYPE_ENCRYPTED_EXTENSIONS,
        reinterpret_cast<const uint8_t*>(args.early_transport_params.data()),
        args.early_transport_params.size());
    if (drv == 0) ngtcp2_conn_set_early_remote_transport_params(c->conn_, &early);
  }
  return c;
}

std::string Connection::EncodedRemoteTransportParams() const {
  const ngtcp2_transport_params* p = ngtcp2_conn_get_remote_transport_params(conn_);
  if (p == nullptr) return {};
  uint8_t buf[512];
  const ngtcp2_ssize n = ngtcp2_encode_transport_params(
      buf, sizeof(buf), NGTCP2_TRANSPORT_PARAMS_TYPE_ENCRYPTED_EXTENSIONS, p);
  if (n <= 0) return {};
  return std::string(reinterpret_cast<const char*>(buf), static_cast<size_t>(n));
}

void Connection::OnDatagram(const uint8_t* data, size_t len, const SocketAddress& local,
                            const SocketAddress& peer, uint8_t ecn, TimePoint received) {
  if (state_ == State::kClosed || state_ == State::kDraining) return;
  if (state_ == State::kClosing) {
    if (!close_packet_.empty()) {
      const SendBatch batch{
          close_packet_.data(), close_packet_.size(), 0, &peer_, is_server_ ? &local_ : nullptr, 0};
      sender_->Send(batch);
    }
    return;
  }
  if (!handshake_completed_) handshake_bytes_in_ += len;
  const ngtcp2_path path = MakePath(local, peer);
  ngtcp2_pkt_info pi{};
  pi.ecn = ecn;
  (void)received;  // ngtcp2 wants the loop's clock, read once per turn
  const int rv = ngtcp2_conn_read_pkt(conn_, &path, &pi, data, len, ToNanos(loop_->now()));
  if (rv != 0) {
    HandleError(rv);
    return;
  }
  // The packet may have acknowledged the last of what was sent.
  if (watch_for_idle_) host_->OnMaybeIdle(*this);
  if (peer != peer_ || local != local_) {  // ngtcp2 validates a new path itself
    const SocketAddress before = peer_;
    SyncPath();
    if (is_server_ && peer_ != before) {
      const ngtcp2_tstamp now = ToNanos(loop_->now());
      path_order_.ExpectChallengeFirst(PathOrderDeadline(now));
    }
  }
  ScheduleWrite();
}

void Connection::ScheduleWrite() {
  if (state_ != State::kOpen || in_write_) return;
  // A request asks two or three times in one turn (each stream write, each credit): the first
  // made the timer due, the rest would only restart it in the same place.
  if (write_due_) return;
  write_due_ = true;
  timer_.StartAt(loop_->now());
}

void Connection::ArmTimer() {
  write_due_ = false;
  if (state_ != State::kOpen) return;
  ngtcp2_tstamp expiry = ngtcp2_conn_get_expiry(conn_);
  if (path_order_.holding()) expiry = std::min<ngtcp2_tstamp>(expiry, path_order_.deadline());
  if (expiry == UINT64_MAX) {
    timer_.Cancel();
    return;
  }
  // Waiting for a full socket: what is due now (a send, a probe) waits for the socket too;
  // re-arming for it would spin.
  if (waiting_on_ != nullptr && FromNanos(expiry) <= loop_->now()) {
    timer_.Cancel();
    return;
  }
  timer_.StartAt(FromNanos(expiry));
}

void Connection::OnTimer() {
  write_due_ = false;
  if (state_ == State::kClosing || state_ == State::kDraining) {
    Finish();
    return;
  }
  if (state_ != State::kOpen) return;
  // Before the handshake completes, whether this expiry was a PTO (ngtcp2 counts them): what
  // it sends then is the loss probe, sent twice (see duplicate_probes_). Not a pacing or
  // ACK-delay expiry.
  size_t ptos_before = 0;
  if (!handshake_completed_) {
    ngtcp2_conn_stat stat;
    ngtcp2_conn_get_conn_stat(conn_, &stat);
    ptos_before = stat.pto_count;
  }
  const int rv = ngtcp2_conn_handle_expiry(conn_, ToNanos(loop_->now()));
  if (rv != 0) {
    HandleError(rv);
    return;
  }
  if (!handshake_completed_) {
    ngtcp2_conn_stat stat;
    ngtcp2_conn_get_conn_stat(conn_, &stat);
    duplicate_probes_ = stat.pto_count > ptos_before;
  }
  WritePackets();
  duplicate_probes_ = false;
  // Whatever the application had queued has gone out now (or waits for credit).
  if (watch_for_idle_ && state_ == State::kOpen) host_->OnMaybeIdle(*this);
}

void Connection::HandleError(int liberr) {
  if (last_error_ == 0) last_error_ = liberr;
  // Why connections end, for an operator looking into failures (--log-level debug): an idle
  // timeout, a peer's CONNECTION_CLOSE (draining), or an error of ours or the peer's.
  PETREL_LOG(kDebug, "quic: connection with %s ends: %s", peer_.ToString(),
             ngtcp2_strerror(liberr));
  switch (liberr) {
    case NGTCP2_ERR_DRAINING:
      EnterDraining();
      return;
    case NGTCP2_ERR_DROP_CONN:
    case NGTCP2_ERR_IDLE_CLOSE:
      Finish();
      return;
    default:
      break;
  }
  if (state_ == State::kOpen) host_->OnTransportError(*this, liberr);
  ngtcp2_connection_close_error ccerr;
  ngtcp2_connection_close_error_default(&ccerr);
  const uint8_t alert = ngtcp2_conn_get_tls_alert(conn_);
  if (liberr == NGTCP2_ERR_CRYPTO && alert != 0) {
    ngtcp2_connection_close_error_set_transport_error_tls_alert(&ccerr, alert, nullptr, 0);
  } else {
    ngtcp2_connection_close_error_set_transport_error_liberr(&ccerr, liberr, nullptr, 0);
  }
  EnterClosing(ccerr);
}

void Connection::EnterClosing(const ngtcp2_connection_close_error& ccerr) {
  if (state_ != State::kOpen) return;
  ngtcp2_path_storage ps;
  ngtcp2_path_storage_zero(&ps);
  ngtcp2_pkt_info pi{};
  uint8_t* const buffer = SendBuffer();
  const ngtcp2_ssize n = ngtcp2_conn_write_connection_close(
      conn_, &ps.path, &pi, buffer, UdpSocket::kMaxGsoBytes, &ccerr, ToNanos(loop_->now()));
  state_ = State::kClosing;
  host_->OnClosing(*this);
  if (n <= 0) {
    Finish();  // nothing to tell the peer (e.g. no keys yet)
    return;
  }
  close_packet_.assign(buffer, buffer + n);
  const SendBatch batch{close_packet_.data(),           close_packet_.size(),        0, &peer_,
                        is_server_ ? &local_ : nullptr, static_cast<uint8_t>(pi.ecn)};
  sender_->Send(batch);
  ++datagrams_sent_;
  // Before the handshake completed the peer may not even exist: nothing worth the closing
  // period's retransmissions (RFC 9000 §10.2 lets an endpoint discard its state at once).
  if (!handshake_completed()) {
    Finish();
    return;
  }
  timer_.StartAfter(std::chrono::nanoseconds(3 * ngtcp2_conn_get_pto(conn_)));
}

void Connection::EnterDraining() {
  if (state_ != State::kOpen) return;
  state_ = State::kDraining;
  host_->OnClosing(*this);
  timer_.StartAfter(std::chrono::nanoseconds(3 * ngtcp2_conn_get_pto(conn_)));
}

void Connection::Finish() {
  if (state_ == State::kClosed) return;
  state_ = State::kClosed;
  timer_.Cancel();
  observer_->OnConnectionClosed(handle_);
  host_->Release(*this);
}

void Connection::CloseNow(uint64_t app_error) {
  if (state_ == State::kOpen && !in_write_) {
    ngtcp2_connection_close_error ccerr;
    ngtcp2_connection_close_error_default(&ccerr);
    ngtcp2_connection_close_error_set_application_error(&ccerr, app_error, nullptr, 0);
    pending_close_.reset();
    EnterClosing(ccerr);
  }
  Finish();
}

void Connection::Close(uint64_t app_error) {
  if (state_ != State::kOpen || pending_close_.has_value()) return;
  ngtcp2_connection_close_error ccerr;
  ngtcp2_connection_close_error_default(&ccerr);
  ngtcp2_connection_close_error_set_application_error(&ccerr, app_error, nullptr, 0);
  // Never write from inside an ngtcp2 callback: the write loop sends it.
  pending_close_ = ccerr;
  ScheduleWrite();
}

void Connection::ApplyKeepAlive() {
  if (settings_.limits.keep_alive_ms == 0) return;
  ngtcp2_conn_set_keep_alive_timeout(conn_, settings_.limits.keep_alive_ms * NGTCP2_MILLISECONDS);
}

void Connection::SyncPath() {
  const ngtcp2_path* cur = ngtcp2_conn_get_path(conn_);
  peer_ = SocketAddress(reinterpret_cast<const sockaddr*>(cur->remote.addr), cur->remote.addrlen);
  if (!is_server_) return;
  const SocketAddress local(reinterpret_cast<const sockaddr*>(cur->local.addr), cur->local.addrlen);
  if (local == local_) return;
  if (UdpSender* s = host_->SenderFor(local); s != nullptr) sender_ = s;
  local_ = local;
}

ngtcp2_tstamp Connection::PathOrderDeadline(ngtcp2_tstamp now) const {
  if (is_server_) {
    // A rebinding keeps the congestion state (RFC 9000 §9.4), and ngtcp2 writes no
    // PATH_CHALLENGE while the window is full (of packets to the old port, often lost): at the
    // latest the PTO's probe, which the window does not limit, carries it.
    return now + ngtcp2_conn_get_pto(conn_) + NGTCP2_MILLISECONDS;
  }
  ngtcp2_conn_stat cstat;
  ngtcp2_conn_get_conn_stat(conn_, &cstat);
  // An immediate migration resets the congestion state: the next write can carry the
  // non-probing packet; the floor covers a loop turn on a fast path.
  constexpr ngtcp2_duration kFloor = 5 * NGTCP2_MILLISECONDS;
  return now + std::max<ngtcp2_duration>(cstat.smoothed_rtt, kFloor);
}

bool Connection::AllDelivered() const {
  if (BytesInFlight() != 0) return false;
  bool delivered = true;
  streams_.ForEach([&delivered](int64_t, const Stream& s) {
    if (s.send.buffered() != 0 || (s.send.fin_queued() && !s.send.fin_sent()) ||
        s.pulled_unacked != 0) {
      delivered = false;
    }
  });
  return delivered;
}

uint64_t Connection::BytesInFlight() const {
  ngtcp2_conn_stat cstat;
  ngtcp2_conn_get_conn_stat(conn_, &cstat);
  return cstat.bytes_in_flight;
}

int Connection::OnPathValidation(const ngtcp2_path* path, ngtcp2_path_validation_result res) {
  (void)path;
  SyncPath();
  host_->OnPathValidated(*this, res == NGTCP2_PATH_VALIDATION_RESULT_SUCCESS);
  return 0;
}

int Connection::OnSelectPreferredAddress(ngtcp2_path* dest, const ngtcp2_preferred_addr* paddr) {
  if (!settings_.use_preferred_address) return 0;  // dest untouched: stay
  const ngtcp2_path* cur = ngtcp2_conn_get_path(conn_);
  if (peer_.is_v6()) {
    if (!paddr->ipv6_present) return 0;
    std::memcpy(dest->remote.addr, &paddr->ipv6, sizeof(paddr->ipv6));
    dest->remote.addrlen = sizeof(paddr->ipv6);
  } else {
    if (!paddr->ipv4_present) return 0;
    std::memcpy(dest->remote.addr, &paddr->ipv4, sizeof(paddr->ipv4));
    dest->remote.addrlen = sizeof(paddr->ipv4);
  }
  if (settings_.preferred_address_by_host) {
    // ngtcp2 keeps the preferred address's CID unused, for the host's migration.
    preferred_address_ =
        SocketAddress(reinterpret_cast<const sockaddr*>(dest->remote.addr), dest->remote.addrlen);
    dest->remote.addrlen = 0;
    return 0;
  }
  std::memcpy(dest->local.addr, cur->local.addr, cur->local.addrlen);  // same socket
  dest->local.addrlen = cur->local.addrlen;
  return 0;
}

bool Connection::InitiateKeyUpdate() {
  // ngtcp2 0.12.1 asserts if the handshake is not confirmed yet.
  if (state_ != State::kOpen || !handshake_confirmed_) return false;
  const int rv = ngtcp2_conn_initiate_key_update(conn_, ToNanos(loop_->now()));
  ScheduleWrite();
  return rv == 0;
}

bool Connection::MigrateTo(const SocketAddress& local, const SocketAddress& remote,
                           UdpSender* sender, bool immediate) {
  if (state_ != State::kOpen || !handshake_confirmed_) return false;
  const ngtcp2_path path = MakePath(local, remote);
  const ngtcp2_tstamp now = ToNanos(loop_->now());
  const int rv = immediate ? ngtcp2_conn_initiate_immediate_migration(conn_, &path, now)
                           : ngtcp2_conn_initiate_migration(conn_, &path, now);
  if (rv != 0) return false;
  local_ = local;
  sender_ = sender;
  if (immediate) {
    path_order_.ExpectNonProbingFirst(PathOrderDeadline(now));
    SyncPath();  // ngtcp2 uses the new path at once
  }
  ScheduleWrite();
  return true;
}

int Connection::OnHandshakeConfirmed() {
  handshake_confirmed_ = true;
  if (!is_server_ && !preferred_address_.empty()) {
    host_->OnPreferredAddress(*this, preferred_address_);
  }
  return 0;
}

int Connection::OnHandshakeCompleted() {
  handshake_completed_ = true;
  if (is_server_) handshake_confirmed_ = true;
  host_->OnHandshakeCompleted(*this);
  observer_->OnHandshakeCompleted(handle_);
  return 0;
}

}  // namespace petrel::quic
