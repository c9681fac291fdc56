#include "server/tcp_host.h"

#include <utility>

#include "http/h2/protocol_detect.h"
#include "petrel/common/log.h"

namespace petrel::server {

// One accepted socket: waits for the protocol (TLS handshake or the first bytes), then hands
// the stream to an engine.
struct TcpHost::Conn final : http::StreamHandler {
  using State = HttpMetrics::TcpState;

  TcpHost* host = nullptr;
  http::TcpListener* listener = nullptr;  // to tell when the socket is gone
  std::unique_ptr<http::TcpStream> stream;
  // Declared after `stream`: destroyed first.
  std::unique_ptr<http::H1Connection> h1;
  std::unique_ptr<http::H2Connection> h2;
  bool released = false;
  State state = State::kNone;  // what petrel_connections counts it as (metrics only)

  ~Conn() {
    if (HttpMetrics* m = metrics()) {
      if (h1 == nullptr && h2 == nullptr) {
        m->OnTcpClosedWithoutEngine(stream->bytes_received(), stream->bytes_sent());
      }
      SetState(State::kNone);  // already so unless the host is destroyed with it open
      m->OnTcpClosed();
    }
  }
  HttpMetrics* metrics() const { return host->config_.metrics; }

  // Metrics on only.
  void SetState(State to) {
    metrics()->OnTcpStateChange(state, to);
    state = to;
  }
  void OnActivity(http::ConnectionActivity a) {
    switch (a) {
      case http::ConnectionActivity::kIdle:
        SetState(State::kIdle);
        break;
      case http::ConnectionActivity::kActive:
        SetState(State::kActive);
        break;
      case http::ConnectionActivity::kClosing:
        SetState(State::kClosing);
        break;
    }
  }
  // The engine's stream closed.
  void OnEngineClosed() {
    if (metrics() != nullptr) SetState(State::kNone);
    host->Release(this);
  }
  // An engine for `protocol` takes the connection: its bytes so far and from now on count for
  // that protocol, and it starts idle (the engine reports what follows).
  void CountFor(HttpProtocol protocol) {
    HttpMetrics* m = metrics();
    if (m == nullptr) return;
    m->OnEngineStarted(protocol);
    stream->set_byte_counters(m->tcp_bytes_received(protocol), m->tcp_bytes_sent(protocol));
    SetState(State::kIdle);
  }

  void StartH1() {
    CountFor(HttpProtocol::kHttp1);
    h1 = std::make_unique<http::H1Connection>(
        host->loop_, stream.get(), [h = host](Request& q, Response& r) { h->Dispatch(q, r); },
        host->config_.h1);
    h1->set_on_closed([this](const absl::Status&) { OnEngineClosed(); });
    if (metrics() != nullptr) {
      h1->set_on_activity([this](http::ConnectionActivity a) { OnActivity(a); });
    }
    if (absl::Status s = h1->Start(); !s.ok()) stream->Close(s);
    if (host->stopping_ && h1 != nullptr) h1->Shutdown();
  }
  void StartH2() {
    CountFor(HttpProtocol::kHttp2);
    h2 = std::make_unique<http::H2Connection>(
        host->loop_, stream.get(), [h = host](Request& q, Response& r) { h->Dispatch(q, r); },
        host->config_.h2);
    h2->set_on_closed([this](const absl::Status&) { OnEngineClosed(); });
    if (metrics() != nullptr) {
      h2->set_on_activity([this](http::ConnectionActivity a) { OnActivity(a); });
    }
    if (absl::Status s = h2->Start(); !s.ok()) stream->Close(s);
    if (host->stopping_ && h2 != nullptr) h2->Shutdown();
  }
  void Shutdown() {
    if (h1 != nullptr) {
      h1->Shutdown();
    } else if (h2 != nullptr) {
      h2->Shutdown();
    } else {
      stream->Close(absl::CancelledError("server shutting down"));
    }
  }

  // StreamHandler, until an engine takes over.
  void OnHandshakeDone() override {
    if (HttpMetrics* m = metrics()) m->OnTcpTlsHandshake(true);
    if (quic::SelectedAlpn(stream->ssl()) == "h2") {
      StartH2();
    } else {
      StartH1();  // "http/1.1", or no ALPN at all
    }
  }
  void OnReadable(ByteBuffer& input) override {
    switch (http::DetectCleartextProtocol(input.Readable())) {
      case http::CleartextProtocol::kNeedMore:
        return;
      case http::CleartextProtocol::kH2:
        StartH2();  // reads `input` in place
        return;
      case http::CleartextProtocol::kH1:
        StartH1();
        return;
    }
  }
  void OnClosed(const absl::Status&) override {
    // Closed before an engine took over: under TLS, the handshake never finished.
    HttpMetrics* m = metrics();
    if (m != nullptr) {
      if (stream->tls() && !stream->handshake_done()) m->OnTcpTlsHandshake(false);
      SetState(State::kNone);
    }
    host->Release(this);
  }
};

TcpHost::TcpHost(EventLoop* loop, TcpHostConfig config)
    : loop_(loop), config_(std::move(config)), deadline_timer_(loop, [this] {
        for (auto& [raw, c] : conns_) {
          if (!c->stream->closed()) c->stream->Close(absl::DeadlineExceededError("shutdown"));
        }
        MaybeDone();
      }) {
  config_.h1.date_cache = &date_cache_;
}

TcpHost::~TcpHost() {
  destroying_ = true;  // connections closing now must not schedule work on a dead host
  conns_.clear();
}

absl::Status TcpHost::Listen() {
  http::TcpListenerOptions opts;
  opts.reuse_port = config_.reuse_port;
  opts.max_connections = config_.max_connections;
  opts.ipv6_only = config_.ipv6_only;
  if (!config_.https.empty() && config_.tls == nullptr) {
    return absl::InvalidArgumentError("https without a TLS context");
  }
  // Addresses of one kind share a port: when the first picks one (port 0), the rest take it.
  auto listen_all = [&](const std::vector<SocketAddress>& addresses, bool tls,
                        uint16_t* port) -> absl::Status {
    for (SocketAddress address : addresses) {
      if (address.port() == 0 && *port != 0) address.set_port(*port);
      auto listener = std::make_unique<Listener>();
      listener->tls = tls;
      Listener* raw = listener.get();
      absl::StatusOr<std::unique_ptr<http::TcpListener>> l = http::TcpListener::Listen(
          loop_, address, opts,
          [this, raw](int fd, const SocketAddress& peer, const SocketAddress& local) {
            Accept(raw->socket.get(), fd, peer, local, raw->tls);
          });
      if (!l.ok()) return l.status();
      listener->socket = *std::move(l);
      if (*port == 0) *port = listener->socket->local_address().port();
      listeners_.push_back(std::move(listener));
    }
    return absl::OkStatus();
  };
  if (absl::Status s = listen_all(config_.http, /*tls=*/false, &http_port_); !s.ok()) return s;
  return listen_all(config_.https, /*tls=*/true, &https_port_);
}

std::vector<SocketAddress> TcpHost::local_addresses() const {
  std::vector<SocketAddress> out;
  for (const auto& l : listeners_) out.push_back(l->socket->local_address());
  return out;
}

void TcpHost::Accept(http::TcpListener* listener, int fd, const SocketAddress& peer,
                     const SocketAddress& local, bool tls) {
  absl::StatusOr<std::unique_ptr<http::TcpStream>> s = http::TcpStream::Create(
      loop_, fd, peer, local, tls ? config_.tls->NewSsl() : bssl::UniquePtr<SSL>());
  if (!s.ok()) {
    PETREL_LOG(kWarning, "tcp: cannot set up a connection from %s: %s", peer.ToString(),
               s.status().ToString());
    listener->ConnectionClosed();
    return;
  }
  auto c = std::make_unique<Conn>();
  c->host = this;
  if (config_.metrics != nullptr) config_.metrics->OnTcpAccepted(tls);
  c->listener = listener;
  c->stream = *std::move(s);
  c->stream->set_handler(c.get());
  if (config_.metrics != nullptr) c->SetState(tls ? Conn::State::kHandshake : Conn::State::kIdle);
  Conn* raw = c.get();
  conns_[raw] = std::move(c);
}

void TcpHost::Release(Conn* conn) {
  if (conn->released || destroying_) return;
  conn->released = true;
  loop_->RunAfterBatch([this, conn] {
    auto it = conns_.find(conn);
    if (it == conns_.end()) return;
    http::TcpListener* listener = conn->listener;
    conns_.erase(it);
    if (listener != nullptr) listener->ConnectionClosed();
    MaybeDone();
  });
}

void TcpHost::Dispatch(Request& request, Response& response) {
  config_.sites->Handle(request, response, config_.alt_svc);
}

void TcpHost::Shutdown(TimePoint deadline, absl::AnyInvocable<void()> done) {
  if (stopping_) return;
  stopping_ = true;
  done_ = std::move(done);
  for (auto& l : listeners_) l->socket->Close();
  for (auto& [raw, c] : conns_) c->Shutdown();
  deadline_timer_.StartAt(deadline);
  MaybeDone();
}

void TcpHost::MaybeDone() {
  if (!stopping_ || !conns_.empty() || !done_) return;
  deadline_timer_.Cancel();
  auto done = std::move(done_);
  done_ = nullptr;
  done();
}

}  // namespace petrel::server
