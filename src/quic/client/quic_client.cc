// QuicClient: one Connection on its own UdpSocket and EventLoop.
#include "petrel/quic/quic_client.h"

#include <array>
#include <memory>

#include "quic/connection/connection.h"
#include "quic/crypto/ngtcp2_callbacks.h"
#include "quic/crypto/quic_method.h"
#include "quic/packet/versions.h"
#include "quic/tls/key_log.h"
#include "quic/tls/tls_context.h"
#include "quic/udp/udp_socket.h"

namespace petrel {

using quic::Connection;

class QuicClient::Impl final : public quic::ConnectionHost,
                               public quic::ConnectionObserver,
                               public IoHandler {
 public:
  static constexpr size_t kSlotBytes = 2048;  // GRO off: one datagram per slot

  Impl(QuicClientConfig c, QuicClientCallbacks cb)
      : config(std::move(c)),
        callbacks(std::move(cb)),
        owned_loop(config.loop == nullptr ? std::make_unique<EventLoop>() : nullptr),
        loop(config.loop == nullptr ? *owned_loop : *config.loop) {}
  ~Impl() override {
    conn.reset();  // before the sockets and senders it uses
    for (auto& s : sockets) loop.Unregister(s->fd());
    *alive = false;
  }

  absl::Status BindSocket(const SocketAddress& local) {
    quic::UdpSocketOptions opts;
    opts.enable_gro = false;
    opts.test_rx_loss = config.test_loss;
    absl::StatusOr<std::unique_ptr<quic::UdpSocket>> s = quic::UdpSocket::Bind(local, opts);
    if (!s.ok()) return s.status();
    if (absl::Status st = loop.Register((*s)->fd(), EventLoop::kReadable, this); !st.ok()) {
      return st;
    }
    sockets.push_back(*std::move(s));
    quic::UdpSenderOptions sender_opts;
    sender_opts.test_tx_loss = config.test_loss;
    senders.push_back(std::make_unique<quic::UdpSender>(*sockets.back(), sender_opts));
    return senders.back()->WatchWritability(&loop);
  }

  // IoHandler: read every socket (level-triggered; a bounded number of batches per event).
  void OnIoEvent(uint32_t) override {
    // By index: a callback may migrate, which appends to `sockets` (the sockets themselves
    // stay put, the vector may move).
    for (size_t i_sock = 0; i_sock < sockets.size(); ++i_sock) {
      quic::UdpSocket* s = sockets[i_sock].get();
      for (int round = 0; round < 16; ++round) {
        absl::StatusOr<size_t> n = s->Receive(absl::MakeSpan(slots));
        if (!n.ok() || *n == 0) break;
        for (size_t i = 0; i < *n && conn != nullptr && !conn->closed(); ++i) {
          conn->OnDatagram(slots[i].data, slots[i].length, s->local_address(), slots[i].peer,
                           slots[i].ecn, loop.now());
        }
        if (*n < slots.size()) break;
      }
    }
  }

  // ConnectionHost.
  bool IssueConnectionId(Connection&, absl::Span<uint8_t> cid, uint8_t* token) override {
    return quic::crypto::RandomConnectionId(cid, token);
  }
  void RetireConnectionId(Connection&, absl::Span<const uint8_t>) override {}
  // An immediate move to the preferred address, from a new port of the current local address.
  // If it cannot be made, the connection stays where it is (the move is optional).
  void OnPreferredAddress(Connection&, const SocketAddress& address) override {
    // Posted: migrating from inside ngtcp2's packet processing would re-enter it.
    loop.Post([this, alive = alive, address] {
      if (!*alive || conn == nullptr || finished) return;
      SocketAddress local = sockets.back()->local_address();
      local.set_port(0);
      if (!BindSocket(local).ok()) return;
      conn->MigrateTo(sockets.back()->local_address(), address, senders.back().get(),
                      /*immediate=*/true);
    });
  }
  void Release(Connection&) override {
    finished = true;
    loop.RunAfterBatch([this, alive = alive] {
      if (!*alive) return;
      const bool own_loop = owned_loop != nullptr;
      // on_closed may destroy the client (shared loop): nothing of it is used afterwards.
      if (callbacks.on_closed) callbacks.on_closed();
      if (own_loop) loop.Stop();
    });
  }

  // ConnectionObserver.
  void OnHandshakeCompleted(QuicConnection& c) override {
    if (callbacks.on_connected) callbacks.on_connected(c);
  }
  void OnStreamData(QuicConnection& c, int64_t s, absl::string_view d, bool fin) override {
    if (callbacks.on_stream_data) {
      callbacks.on_stream_data(c, s, d, fin);
    } else {
      c.Consume(s, d.size());
    }
  }
  void OnStreamReset(QuicConnection& c, int64_t s, uint64_t e) override {
    if (callbacks.on_stream_reset) callbacks.on_stream_reset(c, s, e);
  }
  void OnStreamStopSending(QuicConnection& c, int64_t s, uint64_t e) override {
    if (callbacks.on_stream_stop_sending) callbacks.on_stream_stop_sending(c, s, e);
  }
  void OnEarlyDataRejected(QuicConnection& c) override {
    if (callbacks.on_early_data_rejected) callbacks.on_early_data_rejected(c);
  }
  void OnStreamWritable(QuicConnection& c, int64_t s) override {
    if (callbacks.on_stream_writable) callbacks.on_stream_writable(c, s);
  }
  void OnStreamClosed(QuicConnection& c, int64_t s) override {
    if (callbacks.on_stream_closed) callbacks.on_stream_closed(c, s);
  }
  void OnStreamsAvailable(QuicConnection& c) override {
    if (callbacks.on_streams_available) callbacks.on_streams_available(c);
  }

  QuicClientConfig config;
  QuicClientCallbacks callbacks;
  std::unique_ptr<EventLoop> owned_loop;  // null with a shared loop
  EventLoop& loop;
  // Tasks posted to a shared loop may outlive the client.
  std::shared_ptr<bool> alive = std::make_shared<bool>(true);
  std::unique_ptr<quic::KeyLogFile> key_log;
  std::unique_ptr<quic::TlsClientContext> tls;
  std::vector<std::unique_ptr<quic::UdpSocket>> sockets;
  std::vector<std::unique_ptr<quic::UdpSender>> senders;
  std::unique_ptr<Connection> conn;
  bool finished = false;
  std::array<std::array<uint8_t, kSlotBytes>, quic::UdpSocket::kMaxBatch> buffers{};
  std::array<quic::RecvSlot, quic::UdpSocket::kMaxBatch> slots{};
};

QuicClient::QuicClient(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
QuicClient::~QuicClient() = default;

absl::StatusOr<std::unique_ptr<QuicClient>> QuicClient::Create(QuicClientConfig config,
                                                               QuicClientCallbacks callbacks) {
  auto impl = std::make_unique<Impl>(std::move(config), std::move(callbacks));
  for (size_t i = 0; i < impl->slots.size(); ++i) {
    impl->slots[i].data = impl->buffers[i].data();
    impl->slots[i].capacity = Impl::kSlotBytes;
  }
  const QuicClientConfig& cfg = impl->config;
  quic::TlsClientConfig tls;
  tls.alpn = cfg.alpn;
  tls.verify_peer = cfg.verify_peer;
  tls.ca_file = cfg.ca_file;
  tls.early_data = cfg.early_data;
  tls.quic_method = quic::crypto::PetrelQuicMethod();
  if (!cfg.key_log_file.empty()) {
    absl::StatusOr<std::unique_ptr<quic::KeyLogFile>> kl = quic::KeyLogFile::Open(cfg.key_log_file);
    if (!kl.ok()) return kl.status();
    impl->key_log = *std::move(kl);
    tls.key_log = impl->key_log.get();
  }
  Impl* raw = impl.get();
  tls.on_new_session = [raw](const SSL*, std::string session) {
    if (raw->callbacks.on_session && raw->conn != nullptr) {
      raw->callbacks.on_session(std::move(session), raw->conn->EncodedRemoteTransportParams());
    }
  };
  absl::StatusOr<std::unique_ptr<quic::TlsClientContext>> ctx = quic::TlsClientContext::Create(tls);
  if (!ctx.ok()) return ctx.status();
  impl->tls = *std::move(ctx);
  SocketAddress local = cfg.local;
  if (local.empty()) {
    absl::StatusOr<SocketAddress> any =
        SocketAddress::Parse(cfg.server.is_v6() ? "::" : "0.0.0.0", 0);
    if (!any.ok()) return any.status();
    local = *any;
  }
  if (absl::Status s = impl->BindSocket(local); !s.ok()) return s;
  return std::unique_ptr<QuicClient>(new QuicClient(std::move(impl)));
}

absl::Status QuicClient::Connect(absl::AnyInvocable<void(QuicConnection&)> before_first_flight) {
  Impl& m = *impl_;
  if (m.conn != nullptr) return absl::FailedPreconditionError("already connected");
  absl::StatusOr<bssl::UniquePtr<SSL>> ssl = m.tls->NewSsl(m.config.server_name, m.config.session);
  if (!ssl.ok()) return ssl.status();
  quic::ConnectionSettings settings;
  settings.limits = m.config.limits;
  settings.cc = m.config.cc;
  settings.qlog_dir = m.config.qlog_dir;
  settings.use_preferred_address = m.config.use_preferred_address;
  settings.preferred_address_by_host = m.config.preferred_address_move == QuicMigration::kImmediate;
  if (!quic::IsSupportedVersion(m.config.version)) {
    return absl::InvalidArgumentError("unsupported QUIC version");
  }
  // Offered versions: the first Initial's, then the others (RFC 9368 wants it in the list).
  settings.versions.push_back(m.config.version);
  if (m.config.other_versions.empty()) {
    for (uint32_t v : quic::SupportedVersions()) {
      if (v != m.config.version) settings.versions.push_back(v);
    }
  } else {
    for (uint32_t v : m.config.other_versions) {
      if (v != m.config.version && quic::IsSupportedVersion(v)) settings.versions.push_back(v);
    }
  }
  quic::ClientConnectionArgs args;
  args.ssl = *std::move(ssl);
  args.version = m.config.version;
  if (!m.config.session.empty() && m.config.early_data) {
    args.early_transport_params = m.config.transport_params;
  }
  // A wildcard-bound socket still needs a concrete local address on the path: use the
  // loopback or the socket's address as the kernel reports it.
  SocketAddress local = m.sockets[0]->local_address();
  absl::StatusOr<std::unique_ptr<Connection>> conn = Connection::CreateClient(
      &m.loop, m.senders[0].get(), &m, &m, settings, local, m.config.server, std::move(args));
  if (!conn.ok()) return conn.status();
  m.conn = *std::move(conn);
  if (before_first_flight) before_first_flight(m.conn->handle());
  m.conn->Start();
  return absl::OkStatus();
}

void QuicClient::Run() {
  if (impl_->finished || impl_->owned_loop == nullptr) return;
  impl_->loop.Run();
}

void QuicClient::Stop() {
  Impl* m = impl_.get();
  m->loop.Post([m, alive = m->alive] {
    if (!*alive) return;
    if (m->conn != nullptr && !m->finished) {
      m->conn->CloseNow(0);  // Release() then ends Run() (own loop) and reports on_closed
    } else if (m->owned_loop != nullptr) {
      m->loop.Stop();
    }
  });
}

QuicConnection* QuicClient::connection() {
  return impl_->conn == nullptr ? nullptr : &impl_->conn->handle();
}
EventLoop* QuicClient::loop() { return &impl_->loop; }

bool QuicClient::InitiateKeyUpdate() {
  return impl_->conn != nullptr && impl_->conn->InitiateKeyUpdate();
}

absl::Status QuicClient::MigrateTo(const SocketAddress& local, Migration how) {
  Impl& m = *impl_;
  if (m.conn == nullptr) return absl::FailedPreconditionError("not connected");
  if (absl::Status s = m.BindSocket(local); !s.ok()) return s;
  if (!m.conn->MigrateTo(m.sockets.back()->local_address(), m.conn->peer(), m.senders.back().get(),
                         how == Migration::kImmediate)) {
    return absl::FailedPreconditionError("migration refused (handshake not confirmed?)");
  }
  return absl::OkStatus();
}

bool QuicClient::handshake_completed() const {
  return impl_->conn != nullptr && impl_->conn->handshake_completed();
}
bool QuicClient::session_reused() const {
  return impl_->conn != nullptr && SSL_session_reused(impl_->conn->ssl()) == 1;
}
bool QuicClient::early_data_accepted() const {
  return impl_->conn != nullptr && SSL_early_data_accepted(impl_->conn->ssl()) == 1;
}
int QuicClient::close_error() const {
  return impl_->conn == nullptr ? 0 : impl_->conn->last_error();
}
uint64_t QuicClient::peer_close_code() const {
  return impl_->conn == nullptr ? 0 : impl_->conn->peer_close_code();
}
SocketAddress QuicClient::remote_address() const {
  return impl_->conn == nullptr ? impl_->config.server : impl_->conn->peer();
}
SocketAddress QuicClient::local_address() const { return impl_->sockets.back()->local_address(); }
bool QuicClient::closed() const { return impl_->finished; }

}  // namespace petrel
