// HttpServer: TcpHosts on their loop threads + a QuicServer with the h3 engine on its own
// thread, one certificate for both.
#include "petrel/http/http_server.h"

#include <condition_variable>
#include <future>
#include <mutex>
#include <optional>
#include <thread>

#include "absl/strings/str_cat.h"
#include "http/h3/h3_server_callbacks.h"
#include "petrel/common/event_loop_thread.h"
#include "petrel/common/log.h"
#include "petrel/common/metrics.h"
#include "petrel/quic/quic_server.h"
#include "quic/tls/certificate.h"
#include "quic/tls/key_log.h"
#include "quic/tls/tls_context.h"
#include "server/access_log.h"
#include "server/http_metrics.h"
#include "server/listen_address.h"
#include "server/port_reservation.h"
#include "server/tcp_host.h"

namespace petrel {

namespace {
constexpr uint64_t kH3NoError = 0x100;
}  // namespace

class HttpServer::Impl {
 public:
  Impl(const HttpServerConfig& c, const Router* r) : config(c), router(r) {}
  ~Impl() {
    // Hosts go on their own loop threads, before the loops.
    if (admin_host != nullptr) {
      std::promise<void> gone;
      threads[0]->loop()->RunInLoop([&] {
        admin_host.reset();
        gone.set_value();
      });
      gone.get_future().wait();
    }
    for (size_t i = 0; i < hosts.size(); ++i) {
      if (hosts[i] == nullptr) continue;
      std::promise<void> gone;
      threads[i]->loop()->RunInLoop([&] {
        hosts[i].reset();
        gone.set_value();
      });
      gone.get_future().wait();
    }
    for (auto& t : threads) t->Stop();
    if (quic_thread.joinable()) {
      quic->Stop(Duration::zero());
      quic_thread.join();
    }
  }

  absl::Status Start();
  absl::Status StartTcp();
  absl::Status StartQuic();
  absl::Status StartObservability();
  absl::Status StartAdmin();
  absl::Status ReloadCertificate();
  void Stop(Duration deadline);
  void Wait();

  const HttpServerConfig config;
  const Router* const router;
  // Before everything that counts into them: destroyed after the hosts and the QUIC server.
  std::unique_ptr<MetricsRegistry> registry;
  std::unique_ptr<server::AccessLog> access_log;
  std::unique_ptr<server::HttpMetrics> metrics;  // null: neither metrics nor access log
  Router admin_router;
  quic::CertificatePem pem;
  std::unique_ptr<quic::KeyLogFile> key_log;
  std::unique_ptr<quic::TlsServerContext> tcp_tls;
  std::vector<std::unique_ptr<EventLoopThread>> threads;
  std::vector<std::unique_ptr<server::TcpHost>> hosts;  // hosts[i] lives on threads[i]
  std::unique_ptr<server::TcpHost> admin_host;          // /metrics, on threads[0]
  std::unique_ptr<http::H3ServerCallbacks> h3;
  std::unique_ptr<QuicServer> quic;
  std::thread quic_thread;
  // Asked for any https port with h3: a number free on TCP and UDP, held until QUIC binds it.
  std::optional<server::PortReservation> https_reservation;
  std::vector<server::ListenAddress> listen;  // parsed config.listen, unbindable defaults out
  std::vector<SocketAddress> bound;           // public TCP listeners, then QUIC sockets
  size_t bound_tcp = 0;                       // how many of `bound` are TCP
  uint16_t http_port = 0;
  uint16_t https_port = 0;
  uint16_t metrics_port = 0;

  std::mutex mu;
  std::condition_variable cv;
  size_t hosts_stopped = 0;   // guarded by mu
  bool stop_started = false;  // guarded by mu
  bool waited = false;
};

absl::Status HttpServer::Impl::Start() {
  if (!config.certificate_file.empty() || !config.key_file.empty()) {
    absl::StatusOr<quic::CertificatePem> p =
        quic::ReadPemFiles(config.certificate_file, config.key_file);
    if (!p.ok()) return p.status();
    pem = *std::move(p);
  } else {
    absl::StatusOr<quic::CertificatePem> p = quic::GenerateSelfSigned(config.self_signed_names);
    if (!p.ok()) return p.status();
    pem = *std::move(p);
  }
  if (!config.key_log_file.empty()) {
    absl::StatusOr<std::unique_ptr<quic::KeyLogFile>> kl =
        quic::KeyLogFile::Open(config.key_log_file);
    if (!kl.ok()) return kl.status();
    key_log = *std::move(kl);
  }
  absl::StatusOr<std::vector<server::ListenAddress>> parsed =
      server::ParseListenAddresses(config.listen, config.http_port, config.https_port);
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("listen: ", parsed.status().message()));
  }
  for (server::ListenAddress& a : *parsed) {
    if (!a.required && !server::CanBind(a.ip)) {
      PETREL_LOG(kInfo, "petrel: not listening on %s: this machine cannot bind it",
                 a.ip.HostString());
      continue;
    }
    listen.push_back(std::move(a));
  }
  if (absl::Status s = StartObservability(); !s.ok()) return s;
  if (config.h3 && config.https_port == 0) {
    const std::vector<SocketAddress> any = server::AddressesFor(listen, 0);
    if (any.empty()) return absl::InvalidArgumentError("listen: no address for the https port");
    absl::StatusOr<server::PortReservation> r = server::PortReservation::Reserve(any);
    if (!r.ok()) return r.status();
    https_reservation = *std::move(r);
  }
  if (absl::Status s = StartTcp(); !s.ok()) return s;
  if (config.h3 && config.https_port.has_value()) {
    if (absl::Status s = StartQuic(); !s.ok()) return s;
  }
  if (absl::Status s = StartAdmin(); !s.ok()) return s;
  std::string tcp;
  std::string udp;
  for (size_t i = 0; i < bound.size(); ++i) {
    absl::StrAppend(i < bound_tcp ? &tcp : &udp, " ", bound[i].ToString());
  }
  PETREL_LOG(kInfo, "petrel: listening on TCP%s%s%s (http %d, https %d)", tcp,
             udp.empty() ? "" : ", UDP", udp, http_port, https_port);
  return absl::OkStatus();
}

absl::Status HttpServer::Impl::StartObservability() {
  if (config.metrics_listen.empty() && config.access_log == AccessLogFormat::kOff) {
    return absl::OkStatus();  // no observer at all: the engines skip even the clock reads
  }
  registry = std::make_unique<MetricsRegistry>();
  if (config.access_log != AccessLogFormat::kOff) {
    absl::StatusOr<std::unique_ptr<server::AccessLog>> log =
        server::AccessLog::Open(config.access_log, config.access_log_file);
    if (!log.ok()) return log.status();
    access_log = *std::move(log);
  }
  metrics = std::make_unique<server::HttpMetrics>(registry.get(), access_log.get());
  return absl::OkStatus();
}

// The admin listener: cleartext h1 on its own address, on the first TCP loop, serving only
// GET /metrics, so that scrapes never share the public ports (and are not counted themselves).
absl::Status HttpServer::Impl::StartAdmin() {
  if (config.metrics_listen.empty()) return absl::OkStatus();
  absl::StatusOr<SocketAddress> a = SocketAddress::ParseHostPort(config.metrics_listen);
  if (!a.ok()) return a.status();
  auto scrape = [r = registry.get()](Request&, Response& res) {
    res.Send(200, r->RenderPrometheus(), "text/plain; version=0.0.4");
  };
  if (absl::Status s = admin_router.Get("/metrics", std::move(scrape)); !s.ok()) return s;
  if (threads.empty()) {  // no public TCP listener: a loop of its own (with no host)
    threads.push_back(std::make_unique<EventLoopThread>("petrel-admin"));
    if (absl::Status s = threads.back()->Start(); !s.ok()) return s;
  }
  server::TcpHostConfig hc;
  hc.http = {*a};
  hc.router = &admin_router;
  hc.h1.header_timeout = config.header_timeout;
  hc.h1.idle_timeout = config.idle_timeout;
  hc.max_connections = 64;
  std::promise<absl::Status> listening;
  EventLoop* loop = threads[0]->loop();
  loop->RunInLoop([this, loop, hc = std::move(hc), &listening]() mutable {
    admin_host = std::make_unique<server::TcpHost>(loop, std::move(hc));
    absl::Status s = admin_host->Listen();
    if (s.ok()) metrics_port = admin_host->http_port();
    listening.set_value(std::move(s));
  });
  return listening.get_future().get();
}

absl::Status HttpServer::Impl::StartTcp() {
  if (config.https_port.has_value()) {
    quic::TlsServerConfig tls;
    tls.certificate = pem;
    tls.alpn = {"h2", "http/1.1"};
    tls.tls13_only = false;
    tls.early_data = false;  // replayable requests over TCP are not worth it
    tls.key_log = key_log.get();
    absl::StatusOr<std::unique_ptr<quic::TlsServerContext>> ctx =
        quic::TlsServerContext::Create(tls);
    if (!ctx.ok()) return ctx.status();
    tcp_tls = *std::move(ctx);
  }
  if (!config.http_port.has_value() && !config.https_port.has_value()) return absl::OkStatus();
  const size_t n = std::max<size_t>(config.tcp_loops, 1);
  for (size_t i = 0; i < n; ++i) {
    threads.push_back(std::make_unique<EventLoopThread>(absl::StrCat("petrel-tcp", i)));
    if (absl::Status s = threads.back()->Start(); !s.ok()) return s;
    server::TcpHostConfig hc;
    // The first host picks the ports (0: any free one); the others share them (SO_REUSEPORT).
    if (config.http_port.has_value()) {
      hc.http = server::AddressesFor(listen, i == 0 ? *config.http_port : http_port);
    }
    if (config.https_port.has_value()) {
      uint16_t port = i == 0 ? *config.https_port : https_port;
      if (i == 0 && https_reservation.has_value()) port = https_reservation->port();
      hc.https = server::AddressesFor(listen, port);
    }
    hc.reuse_port = n > 1;
    hc.ipv6_only = config.ipv6_only;
    hc.tls = tcp_tls.get();
    hc.router = router;
    hc.h1.max_request_body = config.max_request_body;
    hc.h1.limits.max_header_section = config.max_header_bytes;
    hc.h2.max_header_list_size = static_cast<uint32_t>(config.max_header_bytes);
    hc.h1.header_timeout = config.header_timeout;
    hc.h1.idle_timeout = config.idle_timeout;
    hc.h2.max_request_body = config.max_request_body;
    hc.max_connections = config.max_tcp_connections;
    hc.metrics = metrics.get();
    hc.h1.observer = metrics.get();
    hc.h2.observer = metrics.get();
    hosts.push_back(nullptr);
    std::promise<absl::Status> listening;
    EventLoop* loop = threads.back()->loop();
    loop->RunInLoop([this, i, loop, hc = std::move(hc), &listening]() mutable {
      hosts[i] = std::make_unique<server::TcpHost>(loop, std::move(hc));
      listening.set_value(hosts[i]->Listen());
    });
    if (absl::Status s = listening.get_future().get(); !s.ok()) return s;
    if (i == 0) {
      http_port = hosts[0]->http_port();
      https_port = hosts[0]->https_port();
      bound = hosts[0]->local_addresses();  // fixed once listening
      bound_tcp = bound.size();
    }
  }
  return absl::OkStatus();
}

absl::Status HttpServer::Impl::StartQuic() {
  http::H3Options h3_options;
  h3_options.max_request_body = config.max_request_body;
  h3_options.observer = metrics.get();
  h3_options.max_field_section_size = config.max_header_bytes;
  h3 = std::make_unique<http::H3ServerCallbacks>(
      [r = router](Request& q, Response& s) { r->Handle(q, s); }, h3_options);
  QuicServerConfig qc;
  uint16_t port = https_port != 0 ? https_port : *config.https_port;
  if (port == 0 && https_reservation.has_value()) port = https_reservation->port();
  qc.listen = server::AddressesFor(listen, port);
  if (qc.listen.empty()) return absl::OkStatus();  // every address is for the http port only
  qc.ipv6_only = config.ipv6_only;
  qc.workers = config.quic_workers;
  qc.certificate_pem = pem.certificate_chain;
  qc.key_pem = pem.private_key;
  qc.alpn = {"h3"};
  qc.limits.idle_timeout_ms = static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(config.idle_timeout).count());
  qc.limits.handshake_timeout_ms = static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(config.quic_handshake_timeout).count());
  qc.qlog_dir = config.qlog_dir;
  qc.key_log_file = config.key_log_file;
  qc.retry = config.retry;
  qc.cc = config.cc;
  qc.shutdown_error_code = kH3NoError;
  // QuicServer wants to be created on the thread that runs it.
  std::promise<absl::Status> created;
  qc.metrics = registry.get();
  if (https_reservation.has_value()) https_reservation->Release();
  QuicServerCallbacks callbacks = h3->Build();
  if (metrics != nullptr) {
    callbacks.on_connection = [m = metrics.get(),
                               inner = std::move(callbacks.on_connection)](QuicConnection& c) {
      m->OnQuicHandshake();
      inner(c);
    };
  }
  quic_thread =
      std::thread([this, qc = std::move(qc), cb = std::move(callbacks), &created]() mutable {
        absl::StatusOr<std::unique_ptr<QuicServer>> s =
            QuicServer::Create(std::move(qc), std::move(cb));
        if (!s.ok()) {
          created.set_value(s.status());
          return;
        }
        quic = *std::move(s);
        created.set_value(absl::OkStatus());
        if (absl::Status r = quic->Run(); !r.ok()) {
          PETREL_LOG(kError, "petrel: QUIC server stopped: %s", r.ToString());
        }
      });
  absl::Status s = created.get_future().get();
  if (!s.ok()) {
    quic_thread.join();
    return s;
  }
  if (https_port == 0) https_port = quic->local_addresses()[0].port();
  for (const SocketAddress& a : quic->local_addresses()) bound.push_back(a);
  if (config.alt_svc) {
    const std::string alt_svc =
        absl::StrCat("h3=\":", quic->local_addresses()[0].port(), "\"; ma=86400");
    for (size_t i = 0; i < hosts.size(); ++i) {
      std::promise<void> set;
      threads[i]->loop()->RunInLoop([&, i] {
        hosts[i]->set_alt_svc(alt_svc);
        set.set_value();
      });
      set.get_future().wait();
    }
  }
  return absl::OkStatus();
}

void HttpServer::Impl::Stop(Duration deadline) {
  {
    std::lock_guard<std::mutex> lock(mu);
    if (stop_started) return;
    stop_started = true;
  }
  for (size_t i = 0; i < hosts.size(); ++i) {
    EventLoop* loop = threads[i]->loop();
    server::TcpHost* host = hosts[i].get();
    loop->RunInLoop([this, loop, host, deadline] {
      host->Shutdown(loop->now() + deadline, [this] {
        std::lock_guard<std::mutex> lock(mu);
        ++hosts_stopped;
        cv.notify_all();
      });
    });
  }
  if (admin_host != nullptr) {
    // Stops with the public hosts; counted like one of them.
    server::TcpHost* host = admin_host.get();
    EventLoop* loop = threads[0]->loop();
    loop->RunInLoop([this, loop, host, deadline] {
      host->Shutdown(loop->now() + deadline, [this] {
        std::lock_guard<std::mutex> lock(mu);
        ++hosts_stopped;
        cv.notify_all();
      });
    });
  }
  if (quic != nullptr) quic->Stop(deadline);
}

void HttpServer::Impl::Wait() {
  {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [this] {
      return stop_started && hosts_stopped == hosts.size() + (admin_host != nullptr ? 1 : 0);
    });
  }
  if (quic_thread.joinable()) quic_thread.join();  // Run() returns once QUIC is down
}

HttpServer::HttpServer(HttpServerConfig config) : config_(std::move(config)) {}

HttpServer::~HttpServer() {
  if (impl_ == nullptr) return;
  impl_->Stop(Duration::zero());
  impl_->Wait();
  impl_.reset();
}

absl::Status HttpServer::Start() {
  if (impl_ != nullptr) return absl::FailedPreconditionError("Start() called twice");
  impl_ = std::make_unique<Impl>(config_, &router_);
  absl::Status s = impl_->Start();
  if (!s.ok()) impl_.reset();
  return s;
}

void HttpServer::Stop(Duration deadline) {
  if (impl_ != nullptr) impl_->Stop(deadline);
}

void HttpServer::Wait() {
  if (impl_ != nullptr) impl_->Wait();
}

uint16_t HttpServer::http_port() const { return impl_ == nullptr ? 0 : impl_->http_port; }
uint16_t HttpServer::https_port() const { return impl_ == nullptr ? 0 : impl_->https_port; }
uint16_t HttpServer::metrics_port() const { return impl_ == nullptr ? 0 : impl_->metrics_port; }
std::vector<SocketAddress> HttpServer::local_addresses() const {
  return impl_ == nullptr ? std::vector<SocketAddress>() : impl_->bound;
}

absl::Status HttpServer::ReloadCertificate() {
  if (impl_ == nullptr) return absl::FailedPreconditionError("the server is not started");
  absl::Status s = impl_->ReloadCertificate();
  if (impl_->metrics != nullptr) impl_->metrics->OnCertificateReload(s.ok());
  return s;
}

absl::Status HttpServer::Impl::ReloadCertificate() {
  if (config.certificate_file.empty() || config.key_file.empty()) {
    return absl::FailedPreconditionError("no certificate files to read again (self-signed)");
  }
  absl::StatusOr<quic::CertificatePem> pem =
      quic::ReadPemFiles(config.certificate_file, config.key_file);
  if (!pem.ok()) return pem.status();
  // TCP first: its check parses both; QUIC then gets the same, known-good pair.
  if (tcp_tls != nullptr) {
    if (absl::Status s = tcp_tls->ReplaceCertificate(*pem); !s.ok()) return s;
  }
  if (quic != nullptr) return quic->ReplaceCertificate(pem->certificate_chain, pem->private_key);
  return absl::OkStatus();
}

absl::Status HttpServer::ReopenLogs() {
  if (impl_ == nullptr || impl_->access_log == nullptr) return absl::OkStatus();
  return impl_->access_log->Reopen();
}

}  // namespace petrel
