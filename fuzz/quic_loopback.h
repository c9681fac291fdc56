// A Petrel QUIC server and a QUIC client talking over two UDP sockets on 127.0.0.1, on one
// EventLoop that the fuzz target turns. The server is what QuicServer runs with workers = 0: a
// Master reading its socket and routing to a Worker, which accepts the connection and runs the
// application's callbacks (the h3 engine) on it. Everything but the TLS contexts and the token
// key is made anew for each input: no connection, socket, timer or CID of one input reaches the
// next.
//
// The client is an ngtcp2 connection driven here, with Petrel's crypto glue (TlsSession and the
// ngtcp2 crypto callbacks) as a worker uses it: the target decides what goes on which stream and
// when, and may stop the client and speak for it. Time is the process's virtual monotonic clock
// (virtual_clock.h): where nothing moves, the harness moves the clock instead of sleeping.
//
// The client's TLS key log gives the harness the 1-RTT traffic secrets of both directions. It
// opens every 1-RTT packet the server sends (quic_one_rtt.h) to see its CONNECTION_CLOSE and
// ACKs, and a target may seal packets of its own as the client and send them from the client's
// socket.
#ifndef PETREL_FUZZ_QUIC_LOOPBACK_H_
#define PETREL_FUZZ_QUIC_LOOPBACK_H_

#include <ngtcp2/ngtcp2.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "fuzz_check.h"
#include "petrel/common/clock.h"
#include "petrel/common/event_loop.h"
#include "petrel/common/log.h"
#include "petrel/common/socket_address.h"
#include "petrel/quic/quic_server.h"
#include "quic/cid/stateless_reset.h"
#include "quic/crypto/ngtcp2_callbacks.h"
#include "quic/crypto/quic_method.h"
#include "quic/crypto/retry.h"
#include "quic/crypto/tls_session.h"
#include "quic/dispatch/master.h"
#include "quic/packet/versions.h"
#include "quic/server/callback_observer.h"
#include "quic/server/worker.h"
#include "quic/tls/certificate.h"
#include "quic/tls/tls_context.h"
#include "quic/token/address_token.h"
#include "quic/udp/udp_socket.h"
#include "quic_one_rtt.h"
#include "virtual_clock.h"

namespace petrel::fuzz {

class QuicLoopback final : private IoHandler {
 public:
  // What the client received on one stream.
  struct Stream {
    std::string data;
    bool fin = false;
    bool reset = false;
  };

  // `callbacks` are the server application's, for ALPN "h3". `retry` and `retry_threshold` are
  // the worker's Retry policy (WorkerConfig).
  explicit QuicLoopback(QuicServerCallbacks callbacks,
                        quic::RetryPolicy retry = quic::RetryPolicy::kNever,
                        size_t retry_threshold = 64)
      : observer_(NoticeEnd(std::move(callbacks), &server_ended_)) {
    const Shared& shared = GetShared();
    current_ = this;
    quic::WorkerConfig wc;
    wc.connection.versions.assign(quic::SupportedVersions().begin(),
                                  quic::SupportedVersions().end());
    wc.reset_key = quic::StatelessResetTokens::RandomKey();
    wc.tls = shared.server_tls.get();
    wc.tokens = shared.tokens.get();
    wc.retry_writer = shared.retry_writer.get();
    wc.retry = retry;
    wc.retry_threshold = retry_threshold;
    wc.memory_trim_delay = std::chrono::milliseconds(0);
    worker_ = std::make_unique<quic::Worker>(&loop_, std::move(wc), &observer_);
    quic::MasterConfig mc;
    mc.listen = {*SocketAddress::Parse("127.0.0.1", 0)};
    mc.socket_options.enable_gro = false;  // 2 KiB datagram buffers instead of 64 KiB ones
    absl::StatusOr<std::unique_ptr<quic::Master>> master =
        quic::Master::Create(mc, &loop_, {quic::WorkerPort{&loop_, worker_.get()}});
    PETREL_FUZZ_CHECK(master.ok());
    master_ = *std::move(master);
    worker_->Attach(*master_);
    PETREL_FUZZ_CHECK(master_->Start().ok());
    server_address_ = master_->sockets()[0]->local_address();

    quic::UdpSocketOptions opts;
    opts.enable_gro = false;
    absl::StatusOr<std::unique_ptr<quic::UdpSocket>> socket =
        quic::UdpSocket::Bind(*SocketAddress::Parse("127.0.0.1", 0), opts);
    PETREL_FUZZ_CHECK(socket.ok());
    socket_ = *std::move(socket);
    client_address_ = socket_->local_address();
    PETREL_FUZZ_CHECK(loop_.Register(socket_->fd(), EventLoop::kReadable, this).ok());
    for (size_t i = 0; i < slots_.size(); ++i) {
      slots_[i].data = buffers_[i].data();
      slots_[i].capacity = buffers_[i].size();
    }
  }

  // Teardown: the client (its ngtcp2 connection before its TlsSession), then the server's
  // connections (the Worker), then the sockets they send on (the Master), the loop last.
  ~QuicLoopback() override {
    loop_.Unregister(socket_->fd());
    DropClient();
    socket_.reset();
    master_->StopReceiving();
    worker_.reset();
    master_.reset();
    current_ = nullptr;
  }

  QuicLoopback(const QuicLoopback&) = delete;
  QuicLoopback& operator=(const QuicLoopback&) = delete;

  // Connects, and turns the loop until the client has the server's HANDSHAKE_DONE (the server's
  // handshake is complete) and both 1-RTT secrets. False if that takes too long.
  // A second Connect (after DropClient) starts a new client connection from the same socket;
  // what the harness knew of the first is forgotten.
  bool Connect() {
    DropClient();
    confirmed_ = false;
    client_error_ = 0;
    send_.clear();
    streams_.clear();
    client_secret_.clear();
    server_secret_.clear();
    client_keys_[0] = client_keys_[1] = server_keys_[0] = server_keys_[1] = std::nullopt;
    largest_server_pn_ = -1;
    server_close_.reset();
    acked_.clear();
    absl::StatusOr<bssl::UniquePtr<SSL>> ssl = GetShared().client_tls->NewSsl("localhost");
    if (!ssl.ok()) return false;
    absl::StatusOr<std::unique_ptr<quic::crypto::TlsSession>> tls =
        quic::crypto::TlsSession::Create(*std::move(ssl), /*is_server=*/false);
    if (!tls.ok()) return false;
    tls_ = *std::move(tls);
    ngtcp2_callbacks cb{};
    quic::crypto::SetCryptoCallbacks(&cb, /*is_server=*/false);
    cb.recv_stream_data = &OnRecvStreamData;
    cb.stream_reset = &OnStreamReset;
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
    conn_ = NewClientConn(cb, settings, params, &scid);
    if (conn_ == nullptr) return false;
    if (!tls_->Attach(conn_).ok()) return false;
    Flush();
    const bool up =
        Pump([this] { return confirmed_ && !client_secret_.empty() && !server_secret_.empty(); },
             /*max_turns=*/500, /*quiet_turns=*/500, std::chrono::milliseconds(1));
    if (!up || !client_open()) return false;
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
    client_cid_lens_ = {scid.datalen};
    return true;
  }

  // Turns the loop until `done()` (asked before every turn), until `quiet_turns` turns in a row
  // moved no datagram, or for `max_turns` turns. Before a quiet turn the clock moves forward by
  // `idle_step` (at most to the client's next timer), as a loop waiting for its timers would.
  // Returns done().
  bool Pump(absl::FunctionRef<bool()> done, int max_turns, int quiet_turns,
            Duration idle_step = Duration::zero()) {
    return Turn(done, max_turns, quiet_turns, idle_step) == End::kDone;
  }
  // Turns the loop until `quiet_turns` turns in a row moved no datagram, each after moving the
  // clock by `idle_step`. False if that did not happen within `max_turns` turns.
  bool Settle(int max_turns, int quiet_turns, Duration idle_step) {
    return Turn([] { return false; }, max_turns, quiet_turns, idle_step) == End::kQuiet;
  }

  // ---- The client's streams (only while client_open()) ----
  int64_t OpenStream(bool bidi) {
    if (!client_open()) return -1;
    int64_t id = -1;
    const int rv = bidi ? ngtcp2_conn_open_bidi_stream(conn_, &id, nullptr)
                        : ngtcp2_conn_open_uni_stream(conn_, &id, nullptr);
    if (rv != 0) return -1;
    send_[id];
    return id;
  }
  // Queues `data` (and FIN) on a stream OpenStream made; sent at the next turn. False once the
  // stream has ended.
  bool Write(int64_t id, std::string data, bool fin) {
    auto it = send_.find(id);
    if (it == send_.end() || it->second.fin_queued || it->second.dead) return false;
    if (!data.empty()) it->second.chunks.push_back(std::move(data));
    it->second.fin_queued = fin;
    return true;
  }
  // RESET_STREAM (and STOP_SENDING on a bidirectional stream).
  void ResetStream(int64_t id, uint64_t app_error) {
    if (!client_open()) return;
    (void)ngtcp2_conn_shutdown_stream(conn_, id, app_error);
    if (auto it = send_.find(id); it != send_.end()) it->second.dead = true;
  }
  void StopSending(int64_t id, uint64_t app_error) {
    if (client_open()) (void)ngtcp2_conn_shutdown_stream_read(conn_, id, app_error);
  }
  std::map<int64_t, Stream>& streams() { return streams_; }

  // Whether the client's connection is up: not failed, not closing or draining, not dropped.
  bool client_open() const { return conn_ != nullptr && client_error_ == 0; }
  // The client connection's first error: NGTCP2_ERR_DRAINING when the server closed it.
  int client_error() const { return client_error_; }
  // Forgets the client connection without a word to the server: from now on only the target's
  // own packets reach it.
  void DropClient() {
    if (conn_ != nullptr) ngtcp2_conn_del(conn_);  // before its TlsSession (tls_session.h)
    conn_ = nullptr;
    tls_.reset();
  }

  // The server's worker (its counters) and address.
  const quic::Worker& worker() const { return *worker_; }
  const SocketAddress& server_address() const { return server_address_; }
  // Whether the server's connection has ended (its closing or draining period over, or dropped):
  // the application heard on_connection_closed.
  bool server_ended() const { return server_ended_; }
  // The server's first CONNECTION_CLOSE, once one came.
  const std::optional<FrameWalk>& server_close() const { return server_close_; }
  // Whether the server acknowledged the client's 1-RTT packet `pn`.
  bool Acked(uint64_t pn) const {
    for (const auto& [low, high] : acked_) {
      if (low <= pn && pn <= high) return true;
    }
    return false;
  }

  // The client's 1-RTT keys by key phase (the phase after the first one: 1).
  const OneRttKeys& client_keys(int phase) const { return *client_keys_[phase]; }
  // The connection ID the client sends to.
  absl::Span<const uint8_t> server_cid() const { return server_cid_; }
  // A connection ID the target gave the server (NEW_CONNECTION_ID) in its own packets: the
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
    absl::StatusOr<bssl::UniquePtr<SSL>> ssl = GetShared().client_tls->NewSsl("localhost");
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
    ngtcp2_conn* conn = NewClientConn(cb, settings, params, &scid);
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
  // Sends `datagram` from the client's socket to the server's, as the client would.
  void SendFromClient(absl::Span<const uint8_t> datagram) {
    if (::sendto(socket_->fd(), datagram.data(), datagram.size(), MSG_NOSIGNAL,
                 server_address_.sockaddr_ptr(), server_address_.length()) > 0) {
      ++client_sent_;
      client_sent_bytes_ += datagram.size();
    }
  }
  // UDP payload octets the client's socket sent and received (the server's datagrams).
  uint64_t client_sent_bytes() const { return client_sent_bytes_; }
  uint64_t client_received_bytes() const { return client_received_bytes_; }

 private:
  struct Shared {
    std::unique_ptr<quic::TlsServerContext> server_tls;
    std::unique_ptr<quic::TlsClientContext> client_tls;
    std::unique_ptr<quic::AddressTokenCodec> tokens;
    std::unique_ptr<quic::crypto::RetryPacketWriter> retry_writer;
  };

  // What the client has queued on one stream. ngtcp2 keeps pointers into the chunks until they
  // are acknowledged, so they are never changed or freed before the connection.
  struct SendStream {
    std::deque<std::string> chunks;
    size_t chunk = 0;   // the first chunk with unsent octets
    size_t offset = 0;  // into it
    bool fin_queued = false;
    bool fin_sent = false;
    bool blocked = false;  // flow control; tried again at the next flush
    bool dead = false;     // reset, or ngtcp2 refuses it
    bool pending() const { return !dead && !blocked && !fin_sent; }
  };

  static QuicServerCallbacks NoticeEnd(QuicServerCallbacks callbacks, bool* ended) {
    callbacks.on_connection_closed =
        [ended, app = std::move(callbacks.on_connection_closed)](QuicConnection& conn) {
          *ended = true;
          if (app) app(conn);
        };
    return callbacks;
  }

  // Made once per process: a self-signed certificate takes a while, and these hold no state of
  // a connection (no session cache on either side; the client never resumes).
  static const Shared& GetShared() {
    static const Shared* shared = [] {
      SetLogLevel(LogLevel::kError);
      auto* s = new Shared;
      quic::TlsServerConfig server;
      absl::StatusOr<quic::CertificatePem> pem = quic::GenerateSelfSigned({"localhost"});
      PETREL_FUZZ_CHECK(pem.ok());
      server.certificate = *std::move(pem);
      server.alpn = {"h3"};
      server.early_data = false;
      server.quic_method = quic::crypto::PetrelQuicMethod();
      absl::StatusOr<std::unique_ptr<quic::TlsServerContext>> st =
          quic::TlsServerContext::Create(server);
      PETREL_FUZZ_CHECK(st.ok());
      s->server_tls = *std::move(st);
      quic::TlsClientConfig client;
      client.alpn = {"h3"};
      client.verify_peer = false;
      client.early_data = false;
      client.quic_method = quic::crypto::PetrelQuicMethod();
      absl::StatusOr<std::unique_ptr<quic::TlsClientContext>> ct =
          quic::TlsClientContext::Create(client);
      PETREL_FUZZ_CHECK(ct.ok());
      s->client_tls = *std::move(ct);
      SSL_CTX_set_keylog_callback(s->client_tls->ctx(), &KeyLogLine);
      s->tokens = std::make_unique<quic::AddressTokenCodec>(quic::AddressTokenCodec::RandomKey());
      absl::StatusOr<quic::crypto::RetryPacketWriter> rw =
          quic::crypto::RetryPacketWriter::Create();
      PETREL_FUZZ_CHECK(rw.ok());
      s->retry_writer = std::make_unique<quic::crypto::RetryPacketWriter>(*std::move(rw));
      return s;
    }();
    return *shared;
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

  enum class End { kDone, kQuiet, kTurns };
  End Turn(absl::FunctionRef<bool()> done, int max_turns, int quiet_turns, Duration idle_step) {
    int quiet = 0;
    for (int turn = 0; turn < max_turns; ++turn) {
      if (done()) return End::kDone;
      const uint64_t before = Moved();
      Duration step = quiet == 0 ? Duration::zero() : idle_step;
      if (client_open()) {
        const ngtcp2_tstamp expiry = ngtcp2_conn_get_expiry(conn_);
        const ngtcp2_tstamp now = Now();
        step = std::min<Duration>(
            step, expiry <= now ? Duration::zero() : std::chrono::nanoseconds(expiry - now));
      }
      AdvanceMonotonicClock(step);
      loop_.RunOnce(Duration::zero());
      if (client_open() && ngtcp2_conn_get_expiry(conn_) <= Now()) {
        if (const int rv = ngtcp2_conn_handle_expiry(conn_, Now()); rv != 0) Fail(rv);
      }
      Flush();
      if (Moved() != before) {
        quiet = 0;
      } else if (++quiet >= quiet_turns) {
        return done() ? End::kDone : End::kQuiet;
      }
    }
    return done() ? End::kDone : End::kTurns;
  }

  static ngtcp2_tstamp Now() { return ToNanos(MonotonicNow()); }

  // A client connection to the server with random CIDs (its own in `scid`); null on failure.
  ngtcp2_conn* NewClientConn(const ngtcp2_callbacks& cb, const ngtcp2_settings& settings,
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
    path.local.addr = const_cast<ngtcp2_sockaddr*>(client_address_.sockaddr_ptr());
    path.local.addrlen = client_address_.length();
    path.remote.addr = const_cast<ngtcp2_sockaddr*>(server_address_.sockaddr_ptr());
    path.remote.addrlen = server_address_.length();
    return path;
  }

  uint64_t Moved() const { return master_->datagrams_received() + client_received_ + client_sent_; }

  void Fail(int liberr) {
    if (client_error_ == 0) client_error_ = liberr;
  }

  // Writes what the client has to send: stream data in stream order, then whatever else ngtcp2
  // has (ACKs, flow control). One stream per packet keeps this simple; inputs are small.
  void Flush() {
    if (!client_open()) return;
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
      if (n == 0) return;  // congestion or pacing: a later turn
      SendFromClient(absl::MakeConstSpan(buf, static_cast<size_t>(n)));
    }
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
        ++client_received_;
        client_received_bytes_ += slots_[i].length;
        LookInto(absl::MakeConstSpan(slots_[i].data, slots_[i].length));
        if (!client_open()) continue;
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

  // ---- ngtcp2 callbacks of the client (user_data: this) ----
  static QuicLoopback* Of(void* user_data) { return static_cast<QuicLoopback*>(user_data); }
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
  static int OnHandshakeConfirmed(ngtcp2_conn*, void* user_data) {
    Of(user_data)->confirmed_ = true;
    return 0;
  }
  static int OnNewConnectionId(ngtcp2_conn*, ngtcp2_cid* cid, uint8_t* token, size_t cidlen,
                               void*) {
    return quic::crypto::GenerateConnectionId(cid, token, cidlen, quic::crypto::RandomConnectionId);
  }

  static inline QuicLoopback* current_ = nullptr;  // whose secrets the key log is reporting

  EventLoop loop_;  // destroyed last
  bool server_ended_ = false;
  quic::CallbackObserver observer_;
  std::unique_ptr<quic::Worker> worker_;
  std::unique_ptr<quic::Master> master_;
  SocketAddress server_address_;

  std::unique_ptr<quic::UdpSocket> socket_;
  SocketAddress client_address_;
  std::unique_ptr<quic::crypto::TlsSession> tls_;
  ngtcp2_conn* conn_ = nullptr;
  bool confirmed_ = false;
  int client_error_ = 0;
  std::map<int64_t, SendStream> send_;
  std::map<int64_t, Stream> streams_;
  std::array<std::array<uint8_t, 2048>, 16> buffers_{};
  std::array<quic::RecvSlot, 16> slots_{};
  uint64_t client_received_ = 0;
  uint64_t client_sent_ = 0;
  uint64_t client_received_bytes_ = 0;
  uint64_t client_sent_bytes_ = 0;

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

#endif  // PETREL_FUZZ_QUIC_LOOPBACK_H_
