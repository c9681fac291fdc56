#include "server/tcp_host.h"

#include <algorithm>
#include <utility>

#include "http/h2/protocol_detect.h"
#include "petrel/common/log.h"

namespace petrel::server {

// One accepted socket: waits for the protocol (TLS handshake or the first bytes), then hands
// the stream to an engine.
struct TcpHost::Conn final : http::StreamHandler {
  using State = HttpMetrics::TcpState;

  explicit Conn(TcpHost* h)
      : host(h), protocol_timer(h->loop_, [this] {
          // Not even a protocol within the header timeout: a TLS handshake left unfinished, or
          // a cleartext connection that sent too little to tell h1 from h2c. Such a peer would
          // otherwise hold its socket (and a max_connections slot) forever.
          stream->Close(absl::DeadlineExceededError("no request within the header timeout"));
        }) {}

  TcpHost* host = nullptr;
  http::TcpListener* listener = nullptr;  // to tell when the socket is gone
  const SiteTable* sites = nullptr;       // those installed when it was accepted
  std::unique_ptr<http::TcpStream> stream;
  // Declared after `stream`: destroyed first.
  std::unique_ptr<http::H1Connection> h1;
  std::unique_ptr<http::H2Connection> h2;
  bool released = false;
  State state = State::kNone;  // what petrel_connections counts it as (metrics only)
  // From accept until an engine takes over (the engines have their own timeouts after that).
  Timer protocol_timer;

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
    protocol_timer.Cancel();
    HttpMetrics* m = metrics();
    if (m == nullptr) return;
    m->OnEngineStarted(protocol);
    stream->set_byte_counters(m->tcp_bytes_received(protocol), m->tcp_bytes_sent(protocol));
    SetState(State::kIdle);
  }

  void StartH1() {
    CountFor(HttpProtocol::kHttp1);
    h1 = std::make_unique<http::H1Connection>(
        host->loop_, stream.get(), [this](Request& q, Response& r) { Dispatch(q, r); },
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
        host->loop_, stream.get(), [this](Request& q, Response& r) { Dispatch(q, r); },
        host->config_.h2);
    h2->set_on_closed([this](const absl::Status&) { OnEngineClosed(); });
    if (metrics() != nullptr) {
      h2->set_on_activity([this](http::ConnectionActivity a) { OnActivity(a); });
    }
    if (absl::Status s = h2->Start(); !s.ok()) stream->Close(s);
    if (host->stopping_ && h2 != nullptr) h2->Shutdown();
  }
  void Dispatch(Request& request, Response& response) {
    // Only an https origin can be reached over HTTP/3: a client may use h3 for an http origin
    // only after RFC 8164's opportunistic check, which Petrel does not offer (RFC 9114, 3.1.2).
    sites->Handle(request, response,
                  stream->tls() ? absl::string_view(host->config_.alt_svc) : absl::string_view());
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
    protocol_timer.Cancel();
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

absl::Status TcpHost::Listen() { return OpenListeners(config_.http, config_.https); }

absl::Status TcpHost::OpenListener(SocketAddress address, bool tls, uint16_t* port) {
  // Addresses of one kind share a port: when the first picks one (port 0), the rest take it.
  if (address.port() == 0 && *port != 0) address.set_port(*port);
  http::TcpListenerOptions opts;
  opts.reuse_port = config_.reuse_port;
  opts.max_connections = config_.max_connections;
  opts.ipv6_only = config_.ipv6_only;
  if (auto it = config_.inherited.find(address); it != config_.inherited.end()) {
    opts.inherited_fd = it->second;
  }
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
  return absl::OkStatus();
}

TcpHost::Listener* TcpHost::FindOpen(const SocketAddress& address, bool tls) {
  for (auto& l : listeners_) {
    if (!l->closed && l->tls == tls && l->socket->local_address() == address) return l.get();
  }
  return nullptr;
}

absl::Status TcpHost::OpenListeners(const std::vector<SocketAddress>& http,
                                    const std::vector<SocketAddress>& https) {
  if (!https.empty() && config_.tls == nullptr) {
    return absl::InvalidArgumentError("https without a TLS context");
  }
  if (stopping_) return absl::FailedPreconditionError("the server is stopping");
  const size_t before = listeners_.size();
  absl::Status status;
  for (const SocketAddress& a : http) {
    if (a.port() != 0 && FindOpen(a, false) != nullptr) continue;
    status = OpenListener(a, /*tls=*/false, &http_port_);
    if (!status.ok()) break;
  }
  for (const SocketAddress& a : https) {
    if (!status.ok()) break;
    if (a.port() != 0 && FindOpen(a, true) != nullptr) continue;
    status = OpenListener(a, /*tls=*/true, &https_port_);
  }
  if (!status.ok()) {  // nothing accepted yet on those just opened: this loop runs here
    listeners_.resize(before);
  }
  return status;
}

void TcpHost::CloseListenersExcept(const std::vector<SocketAddress>& http,
                                   const std::vector<SocketAddress>& https) {
  for (size_t i = 0; i < listeners_.size();) {
    Listener& l = *listeners_[i];
    const std::vector<SocketAddress>& keep = l.tls ? https : http;
    if (l.closed || std::find(keep.begin(), keep.end(), l.socket->local_address()) != keep.end()) {
      ++i;
      continue;
    }
    PETREL_LOG(kInfo, "tcp: no longer listening on %s; connections accepted there go on: %zu",
               l.socket->local_address().ToString(), l.socket->open_connections());
    l.socket->Close();
    if (l.socket->open_connections() == 0) {
      listeners_.erase(listeners_.begin() + static_cast<ptrdiff_t>(i));
      continue;
    }
    l.closed = true;
    ++closed_listeners_;
    ++i;
  }
}

void TcpHost::ForgetClosedListener(http::TcpListener* socket) {
  for (auto it = listeners_.begin(); it != listeners_.end(); ++it) {
    if ((*it)->socket.get() != socket) continue;
    if ((*it)->closed && socket->open_connections() == 0) {
      listeners_.erase(it);
      --closed_listeners_;
    }
    return;
  }
}

void TcpHost::SetConnectionOptions(const http::H1Options& h1, const http::H2Options& h2,
                                   size_t max_connections) {
  config_.h1 = h1;
  config_.h1.date_cache = &date_cache_;
  config_.h2 = h2;
  config_.max_connections = max_connections;
  for (auto& l : listeners_) {
    if (!l->closed) l->socket->set_max_connections(max_connections);
  }
}

std::vector<SocketAddress> TcpHost::local_addresses() const {
  std::vector<SocketAddress> out;
  for (bool tls : {false, true}) {
    for (const auto& l : listeners_) {
      if (!l->closed && l->tls == tls) out.push_back(l->socket->local_address());
    }
  }
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
  auto c = std::make_unique<Conn>(this);
  if (config_.metrics != nullptr) config_.metrics->OnTcpAccepted(tls);
  c->listener = listener;
  c->sites = config_.sites->current();
  c->stream = *std::move(s);
  c->stream->set_handler(c.get());
  if (config_.h1.header_timeout > Duration::zero()) {
    c->protocol_timer.StartAfter(config_.h1.header_timeout);
  }
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
    if (listener != nullptr) {
      listener->ConnectionClosed();
      if (closed_listeners_ > 0) ForgetClosedListener(listener);
    }
    MaybeDone();
  });
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
