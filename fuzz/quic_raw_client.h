// A QUIC client that a fuzz target, a test or a flood tool drives by hand against a Petrel
// server: an ngtcp2 client connection with Petrel's crypto glue (TlsSession and the ngtcp2 crypto
// callbacks, as a worker uses them) on a UDP socket of its own, registered on the caller's
// EventLoop. The caller decides what goes on which stream and when, turns the loop and asks the
// client to handle its timer and flush; it may stop the client and speak for it.
//
// The client's TLS key log gives it the 1-RTT traffic secrets of both directions. It opens every
// 1-RTT packet the server sends (quic_one_rtt.h) to see its CONNECTION_CLOSE and ACKs, and the
// caller may seal packets of its own as the client and send them from the client's socket.
//
// Time is MonotonicNow(): the real clock, or a fuzz target's virtual one (virtual_clock.h).
// One client at a time per process hears the key log (the one that connected last).
#ifndef PETREL_FUZZ_QUIC_RAW_CLIENT_H_
#define PETREL_FUZZ_QUIC_RAW_CLIENT_H_

#include <ngtcp2/ngtcp2.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "petrel/common/clock.h"
#include "petrel/common/event_loop.h"
#include "petrel/common/socket_address.h"
#include "quic/crypto/ngtcp2_callbacks.h"
#include "quic/crypto/quic_method.h"
#include "quic/crypto/tls_session.h"
#include "quic/tls/tls_context.h"
#include "quic/udp/udp_socket.h"
#include "quic_one_rtt.h"

namespace petrel::fuzz {

class QuicRawClient final : private IoHandler {
 public:
  // What the client received on one stream.
  struct Stream {
    std::string data;
    bool fin = false;
    bool reset = false;
  };

  // A client on `loop` (which must outlive it) that talks to `server` from a new socket on
  // 127.0.0.1 (or ::1 for an IPv6 server), with ALPN "h3" and no certificate check. False from
  // ok() when the socket could not be made.
  QuicRawClient(EventLoop* loop, const SocketAddress& server) : loop_(loop), server_(server) {
    quic::UdpSocketOptions opts;
    opts.enable_gro = false;  // 2 KiB datagram buffers instead of 64 KiB ones
    absl::StatusOr<std::unique_ptr<quic::UdpSocket>> socket =
        quic::UdpSocket::Bind(*SocketAddress::Parse(server.is_v6() ? "::1" : "127.0.0.1", 0), opts);
    if (!socket.ok()) return;
    socket_ = *std::move(socket);
    local_ = socket_->local_address();
    if (!loop_->Register(socket_->fd(), EventLoop::kReadable, this).ok()) {
      socket_.reset();
      return;
    }
    for (size_t i = 0; i < slots_.size(); ++i) {
      slots_[i].data = buffers_[i].data();
      slots_[i].capacity = buffers_[i].size();
    }
  }
  ~QuicRawClient() override {
    Drop();
    if (socket_ != nullptr) loop_->Unregister(socket_->fd());
    if (current_ == this) current_ = nullptr;
  }
  QuicRawClient(const QuicRawClient&) = delete;
  QuicRawClient& operator=(const QuicRawClient&) = delete;

  bool ok() const { return socket_ != nullptr; }

  // Starts a new connection (forgetting the previous one, and all the client knew of it) and
  // sends its first flight. The caller then turns the loop (Flush() and OnTimer() included)
  // until Ready(), and calls TakeKeys().
  bool Start() {
    Drop();
    confirmed_ = false;
    error_ = 0;
    send_.clear();
    closed_.clear();
    streams_.clear();
    client_secret_.clear();
    server_secret_.clear();
    client_keys_[0] = client_keys_[1] = server_keys_[0] = server_keys_[1] = std::nullopt;
    largest_server_pn_ = -1;
    server_close_.reset();
    acked_.clear();
    if (!ok()) return false;
    current_ = this;
    absl::StatusOr<bssl::UniquePtr<SSL>> ssl = ClientTls().NewSsl("localhost");
    if (!ssl.ok()) return false;
    absl::StatusOr<std::unique_ptr<quic::crypto::TlsSession>> tls =
        quic::crypto::TlsSession::Create(*std::move(ssl), /*is_server=*/false);
    if (!tls.ok()) return false;
    tls_ = *std::move(tls);
    ngtcp2_callbacks cb{};
    quic::crypto::SetCryptoCallbacks(&cb, /*is_server=*/false);
    cb.recv_stream_data = &OnRecvStreamData;
    cb.stream_reset = &OnStreamReset;
    cb.stream_close = &OnStreamClose;
    cb.handshake_confirmed = &OnHandshakeConfirmed;
    cb.get_new_connection_id = &OnNewConnectionId;
    ngtcp2_settings settings;
    ngtcp2_settings_default(&settings);
    settings.initial_ts = Now();
    settings.initial_rtt = NGTCP2_MILLISECONDS;
    settings.ack_thresh = 1;  // acknowledge at once, as Petrel does: no delayed-ACK waits
    ngtcp2_transport_params params;
    ngtcp2_transport_params_default(&params);
    params.initial_max_streams_bidi = 0;
    params.initial_max_streams_uni = 100;
    params.initial_max_data = 16 << 20;
    params.initial_max_stream_data_bidi_local = 4 << 20;
    params.initial_max_stream_data_uni = 4 << 20;
    params.max_idle_timeout = 30 * NGTCP2_SECONDS;
    ngtcp2_cid scid;
    conn_ = NewConn(cb, settings, params, &scid);
    if (conn_ == nullptr) return false;
    if (!tls_->Attach(conn_).ok()) return false;
    client_cid_lens_ = {scid.datalen};
    Flush();
    return true;
  }
  // Whether the handshake is confirmed (HANDSHAKE_DONE came) and both 1-RTT secrets are known.
  bool Ready() const { return confirmed_ && !client_secret_.empty() && !server_secret_.empty(); }
  // Once Ready(): derives the 1-RTT keys of both directions (this key phase and the next) and
  // learns the connection ID the client sends to. False if that fails.
  bool TakeKeys() {
    if (!Ready() || !open()) return false;
    const SSL_CIPHER* cipher = SSL_get_current_cipher(tls_->ssl());
    if (cipher == nullptr) return false;
    const uint16_t suite = SSL_CIPHER_get_protocol_id(cipher);
    client_keys_[0] = DeriveOneRttKeys(suite, client_secret_);
    server_keys_[0] = DeriveOneRttKeys(suite, server_secret_);
    if (!client_keys_[0].has_value() || !server_keys_[0].has_value()) return false;
    client_keys_[1] = NextKeyPhase(*client_keys_[0]);
    server_keys_[1] = NextKeyPhase(*server_keys_[0]);
    const ngtcp2_cid* server_cid = ngtcp2_conn_get_dcid(conn_);
    server_cid_.assign(server_cid->data, server_cid->data + server_cid->datalen);
    return true;
  }

  // ---- Driving it ----
  // When the connection's timer expires (monotonic nanoseconds); UINT64_MAX without one.
  ngtcp2_tstamp expiry() const { return open() ? ngtcp2_conn_get_expiry(conn_) : UINT64_MAX; }
  static ngtcp2_tstamp Now() { return ToNanos(MonotonicNow()); }
  // Handles an expired timer (retransmission, idle timeout).
  void OnTimer() {
    if (open() && ngtcp2_conn_get_expiry(conn_) <= Now()) {
      if (const int rv = ngtcp2_conn_handle_expiry(conn_, Now()); rv != 0) Fail(rv);
    }
  }
  // Writes what the client has to send: stream data in stream order, then whatever else ngtcp2
  // has (ACKs, flow control). One stream per packet keeps this simple.
  void Flush() {
    if (!open()) return;
    for (const int64_t id : closed_) send_.erase(id);
    closed_.clear();
    for (auto& [id, s] : send_) s.blocked = false;
    for (int packets = 0; packets < 64; ++packets) {
      auto it = std::find_if(send_.begin(), send_.end(), [](const auto& e) {
        const SendStream& s = e.second;
        return s.pending() && (s.chunk < s.chunks.size() || s.fin_queued);
      });
      int64_t id = -1;
      std::vector<ngtcp2_vec> vecs;
      bool fin = false;
      if (it != send_.end()) {
        id = it->first;
        SendStream& s = it->second;
        for (size_t i = s.chunk; i < s.chunks.size() && vecs.size() < 16; ++i) {
          std::string& c = s.chunks[i];
          const size_t skip = i == s.chunk ? s.offset : 0;
          vecs.push_back({reinterpret_cast<uint8_t*>(c.data()) + skip, c.size() - skip});
        }
        fin = s.fin_queued && s.chunks.size() - s.chunk <= 16;
      }
      ngtcp2_path_storage ps;
      ngtcp2_path_storage_zero(&ps);
      ngtcp2_pkt_info pi{};
      ngtcp2_ssize consumed = -1;
      uint8_t buf[1500];
      const ngtcp2_ssize n = ngtcp2_conn_writev_stream(
          conn_, &ps.path, &pi, buf, sizeof(buf), &consumed,
          fin ? NGTCP2_WRITE_STREAM_FLAG_FIN : NGTCP2_WRITE_STREAM_FLAG_NONE, id, vecs.data(),
          vecs.size(), Now());
      if (n == NGTCP2_ERR_STREAM_DATA_BLOCKED) {
        it->second.blocked = true;
        continue;
      }
      if (n == NGTCP2_ERR_STREAM_SHUT_WR || n == NGTCP2_ERR_STREAM_NOT_FOUND) {
        it->second.dead = true;
        continue;
      }
      if (n < 0) return Fail(static_cast<int>(n));
      if (consumed >= 0 && id >= 0) Advance(it->second, static_cast<size_t>(consumed), fin);
      if (n == 0) return;  // congestion or pacing: a later flush
      Send(absl::MakeConstSpan(buf, static_cast<size_t>(n)));
    }
  }
  // Datagrams the client's socket sent and received: a turn that moves none is a quiet one.
  uint64_t moved() const { return received_ + sent_; }

  // ---- The client's streams (only while open()) ----
  int64_t OpenStream(bool bidi) {
    if (!open()) return -1;
    int64_t id = -1;
    const int rv = bidi ? ngtcp2_conn_open_bidi_stream(conn_, &id, nullptr)
                        : ngtcp2_conn_open_uni_stream(conn_, &id, nullptr);
    if (rv != 0) return -1;
    send_[id];
    return id;
  }
  // Queues `data` (and FIN) on a stream OpenStream made; sent at the next flush. False once the
  // stream has ended.
  bool Write(int64_t id, std::string data, bool fin) {
    auto it = send_.find(id);
    if (it == send_.end() || it->second.fin_queued || it->second.dead) return false;
    if (!data.empty()) it->second.chunks.push_back(std::move(data));
    it->second.fin_queued = fin;
    return true;
  }
  // Octets queued on stream `id` and not yet sent (a flood waits on flow control with it).
  size_t Unsent(int64_t id) const {
    auto it = send_.find(id);
    if (it == send_.end() || it->second.dead) return 0;
    size_t n = 0;
    for (size_t i = it->second.chunk; i < it->second.chunks.size(); ++i) {
      n += it->second.chunks[i].size();
    }
    return n - it->second.offset;
  }
  // RESET_STREAM (and STOP_SENDING on a bidirectional stream); what was queued is forgotten.
  void ResetStream(int64_t id, uint64_t app_error) {
    if (!open()) return;
    (void)ngtcp2_conn_shutdown_stream(conn_, id, app_error);
    send_.erase(id);
  }
  void StopSending(int64_t id, uint64_t app_error) {
    if (open()) (void)ngtcp2_conn_shutdown_stream_read(conn_, id, app_error);
  }
  std::map<int64_t, Stream>& streams() { return streams_; }

  // Whether the connection is up: not failed, not closing or draining, not dropped.
  bool open() const { return conn_ != nullptr && error_ == 0; }
  // The connection's first error: NGTCP2_ERR_DRAINING when the server closed it.
  int error() const { return error_; }
  // Forgets the connection without a word to the server: from now on only the caller's own
  // packets reach it.
  void Drop() {
    if (conn_ != nullptr) ngtcp2_conn_del(conn_);  // before its TlsSession (tls_session.h)
    conn_ = nullptr;
    tls_.reset();
  }

  // The server's first CONNECTION_CLOSE (in a 1-RTT packet), once one came.
  const std::optional<FrameWalk>& server_close() const { return server_close_; }
  // Whether the server acknowledged the client's 1-RTT packet `pn`.
  bool Acked(uint64_t pn) const {
    for (const auto& [low, high] : acked_) {
      if (low <= pn && pn <= high) return true;
    }
    return false;
  }
  // Forgets the acknowledgements seen so far (a long flood would otherwise keep every one).
  void ForgetAcks() { acked_.clear(); }

  // The client's 1-RTT keys by key phase (the phase after the first one: 1), after TakeKeys().
  const OneRttKeys& keys(int phase) const { return *client_keys_[phase]; }
  // The connection ID the client sends to.
  absl::Span<const uint8_t> server_cid() const { return server_cid_; }
  // A connection ID the caller gave the server (NEW_CONNECTION_ID) in its own packets: the
  // server may send to it, and its length tells where the server's packet numbers are.
  void AddClientCid(absl::Span<const uint8_t> cid) {
    if (std::find(client_cid_lens_.begin(), client_cid_lens_.end(), cid.size()) ==
        client_cid_lens_.end()) {
      client_cid_lens_.push_back(cid.size());
    }
  }
  // A client's first Initial datagram (a ClientHello, padded to 1200 octets) for a new
  // connection of its own: a fresh ngtcp2 client, dropped once it has written it. Empty on
  // failure.
  std::vector<uint8_t> FreshInitial() {
    absl::StatusOr<bssl::UniquePtr<SSL>> ssl = ClientTls().NewSsl("localhost");
    if (!ssl.ok()) return {};
    absl::StatusOr<std::unique_ptr<quic::crypto::TlsSession>> tls =
        quic::crypto::TlsSession::Create(*std::move(ssl), /*is_server=*/false);
    if (!tls.ok()) return {};
    ngtcp2_callbacks cb{};
    quic::crypto::SetCryptoCallbacks(&cb, /*is_server=*/false);
    cb.get_new_connection_id = &OnNewConnectionId;
    ngtcp2_settings settings;
    ngtcp2_settings_default(&settings);
    settings.initial_ts = Now();
    ngtcp2_transport_params params;
    ngtcp2_transport_params_default(&params);
    ngtcp2_cid scid;
    ngtcp2_conn* conn = NewConn(cb, settings, params, &scid);
    if (conn == nullptr) return {};
    std::vector<uint8_t> out(1500);
    ngtcp2_ssize n = -1;
    if ((*tls)->Attach(conn).ok()) {
      ngtcp2_pkt_info pi{};
      n = ngtcp2_conn_write_pkt(conn, nullptr, &pi, out.data(), out.size(), Now());
    }
    ngtcp2_conn_del(conn);  // before its TlsSession
    out.resize(n > 0 ? static_cast<size_t>(n) : 0);
    return out;
  }
  // Sends `datagram` from the client's socket to the server, as the client would.
  void Send(absl::Span<const uint8_t> datagram) {
    if (::sendto(socket_->fd(), datagram.data(), datagram.size(), MSG_NOSIGNAL,
                 server_.sockaddr_ptr(), server_.length()) > 0) {
      ++sent_;
      sent_bytes_ += datagram.size();
    }
  }
  // UDP payload octets the client's socket sent and received (the server's datagrams).
  uint64_t sent_bytes() const { return sent_bytes_; }
  uint64_t received_bytes() const { return received_bytes_; }

 private:
  // What the client has queued on one stream. ngtcp2 keeps pointers into the chunks until they
  // are acknowledged, so they are never changed or freed before the stream closes.
  struct SendStream {
    std::deque<std::string> chunks;
    size_t chunk = 0;   // the first chunk with unsent octets
    size_t offset = 0;  // into it
    bool fin_queued = false;
    bool fin_sent = false;
    bool blocked = false;  // flow control; tried again at the next flush
    bool dead = false;     // ngtcp2 refuses it
    bool pending() const { return !dead && !blocked && !fin_sent; }
  };

  // Made once per process: it holds no state of a connection (no session cache; the client
  // never resumes).
  static const quic::TlsClientContext& ClientTls() {
    static const quic::TlsClientContext* tls = [] {
      quic::TlsClientConfig client;
      client.alpn = {"h3"};
      client.verify_peer = false;
      client.early_data = false;
      client.quic_method = quic::crypto::PetrelQuicMethod();
      absl::StatusOr<std::unique_ptr<quic::TlsClientContext>> ct =
          quic::TlsClientContext::Create(client);
      if (!ct.ok()) std::abort();
      SSL_CTX_set_keylog_callback((*ct)->ctx(), &KeyLogLine);
      return ct->release();
    }();
    return *tls;
  }

  // NSS key log lines: "LABEL <client random> <secret>", in hex.
  static void KeyLogLine(const SSL* /*ssl*/, const char* line) {
    if (current_ == nullptr) return;
    const std::vector<absl::string_view> parts = absl::StrSplit(line, ' ');
    if (parts.size() != 3) return;
    std::vector<uint8_t>* out = nullptr;
    if (parts[0] == "CLIENT_TRAFFIC_SECRET_0") out = &current_->client_secret_;
    if (parts[0] == "SERVER_TRAFFIC_SECRET_0") out = &current_->server_secret_;
    if (out == nullptr) return;
    const std::string bytes = absl::HexStringToBytes(parts[2]);
    out->assign(bytes.begin(), bytes.end());
  }

  // A client connection to the server with random CIDs (its own in `scid`); null on failure.
  ngtcp2_conn* NewConn(const ngtcp2_callbacks& cb, const ngtcp2_settings& settings,
                       const ngtcp2_transport_params& params, ngtcp2_cid* scid) {
    ngtcp2_cid dcid;
    dcid.datalen = 18;
    scid->datalen = 16;
    RAND_bytes(dcid.data, dcid.datalen);
    RAND_bytes(scid->data, scid->datalen);
    const ngtcp2_path path = Path();
    ngtcp2_conn* conn = nullptr;
    if (ngtcp2_conn_client_new(&conn, &dcid, scid, &path, NGTCP2_PROTO_VER_V1, &cb, &settings,
                               &params, nullptr, this) != 0) {
      return nullptr;
    }
    return conn;
  }

  ngtcp2_path Path() {
    ngtcp2_path path{};
    path.local.addr = const_cast<ngtcp2_sockaddr*>(local_.sockaddr_ptr());
    path.local.addrlen = local_.length();
    path.remote.addr = const_cast<ngtcp2_sockaddr*>(server_.sockaddr_ptr());
    path.remote.addrlen = server_.length();
    return path;
  }

  void Fail(int liberr) {
    if (error_ == 0) error_ = liberr;
  }

  static void Advance(SendStream& s, size_t n, bool fin) {
    while (n > 0 && s.chunk < s.chunks.size()) {
      const size_t left = s.chunks[s.chunk].size() - s.offset;
      const size_t step = std::min(left, n);
      s.offset += step;
      n -= step;
      if (s.offset == s.chunks[s.chunk].size()) {
        ++s.chunk;
        s.offset = 0;
      }
    }
    if (fin && s.chunk == s.chunks.size()) s.fin_sent = true;
  }

  // IoHandler: the client's socket. Each datagram is looked into, then given to the client.
  void OnIoEvent(uint32_t) override {
    for (int round = 0; round < 16; ++round) {
      absl::StatusOr<size_t> n = socket_->Receive(absl::MakeSpan(slots_));
      if (!n.ok() || *n == 0) return;
      for (size_t i = 0; i < *n; ++i) {
        ++received_;
        received_bytes_ += slots_[i].length;
        LookInto(absl::MakeConstSpan(slots_[i].data, slots_[i].length));
        if (!open()) continue;
        const ngtcp2_path path = Path();
        const ngtcp2_pkt_info pi{};
        if (const int rv =
                ngtcp2_conn_read_pkt(conn_, &path, &pi, slots_[i].data, slots_[i].length, Now());
            rv != 0) {
          Fail(rv);
        }
      }
      if (*n < slots_.size()) return;
    }
  }

  void LookInto(absl::Span<const uint8_t> datagram) {
    if (!server_keys_[0].has_value()) return;  // still in the handshake
    uint64_t pn = 0;
    const bool opened =
        std::any_of(client_cid_lens_.begin(), client_cid_lens_.end(), [&](size_t cid_len) {
          return OpenShortPacket(server_keys_, cid_len, largest_server_pn_, datagram, &payload_,
                                 &pn);
        });
    if (!opened) return;
    largest_server_pn_ = std::max<int64_t>(largest_server_pn_, static_cast<int64_t>(pn));
    FrameWalk w = WalkFrames(payload_);
    acked_.insert(acked_.end(), w.acked.begin(), w.acked.end());
    if (w.close && !server_close_.has_value()) server_close_ = std::move(w);
  }

  // ---- ngtcp2 callbacks (user_data: this) ----
  static QuicRawClient* Of(void* user_data) { return static_cast<QuicRawClient*>(user_data); }
  static int OnRecvStreamData(ngtcp2_conn* conn, uint32_t flags, int64_t id, uint64_t,
                              const uint8_t* data, size_t len, void* user_data, void*) {
    Stream& s = Of(user_data)->streams_[id];
    s.data.append(reinterpret_cast<const char*>(data), len);
    s.fin = s.fin || (flags & NGTCP2_STREAM_DATA_FLAG_FIN) != 0;
    ngtcp2_conn_extend_max_stream_offset(conn, id, len);
    ngtcp2_conn_extend_max_offset(conn, len);
    return 0;
  }
  static int OnStreamReset(ngtcp2_conn*, int64_t id, uint64_t, uint64_t, void* user_data, void*) {
    Of(user_data)->streams_[id].reset = true;
    return 0;
  }
  // Closed both ways, everything it sent acknowledged: ngtcp2 holds no pointer into its chunks
  // any more, so they go at the next flush (a long flood would otherwise keep every stream's).
  static int OnStreamClose(ngtcp2_conn*, uint32_t, int64_t id, uint64_t, void* user_data, void*) {
    Of(user_data)->closed_.push_back(id);
    return 0;
  }
  static int OnHandshakeConfirmed(ngtcp2_conn*, void* user_data) {
    Of(user_data)->confirmed_ = true;
    return 0;
  }
  static int OnNewConnectionId(ngtcp2_conn*, ngtcp2_cid* cid, uint8_t* token, size_t cidlen,
                               void*) {
    return quic::crypto::GenerateConnectionId(cid, token, cidlen, quic::crypto::RandomConnectionId);
  }

  static inline QuicRawClient* current_ = nullptr;  // whose secrets the key log is reporting

  EventLoop* loop_;
  SocketAddress server_;
  std::unique_ptr<quic::UdpSocket> socket_;
  SocketAddress local_;
  std::unique_ptr<quic::crypto::TlsSession> tls_;
  ngtcp2_conn* conn_ = nullptr;
  bool confirmed_ = false;
  int error_ = 0;
  std::map<int64_t, SendStream> send_;
  std::vector<int64_t> closed_;  // streams whose SendStream goes at the next flush
  std::map<int64_t, Stream> streams_;
  std::array<std::array<uint8_t, 2048>, 16> buffers_{};
  std::array<quic::RecvSlot, 16> slots_{};
  uint64_t received_ = 0;
  uint64_t sent_ = 0;
  uint64_t received_bytes_ = 0;
  uint64_t sent_bytes_ = 0;

  std::vector<uint8_t> client_secret_;
  std::vector<uint8_t> server_secret_;
  std::optional<OneRttKeys> client_keys_[2];
  std::optional<OneRttKeys> server_keys_[2];
  std::vector<uint8_t> server_cid_;
  std::vector<size_t> client_cid_lens_;  // of the CIDs the server may send to
  int64_t largest_server_pn_ = -1;
  std::vector<uint8_t> payload_;
  std::optional<FrameWalk> server_close_;
  std::vector<std::pair<uint64_t, uint64_t>> acked_;
};

}  // namespace petrel::fuzz

#endif  // PETREL_FUZZ_QUIC_RAW_CLIENT_H_
