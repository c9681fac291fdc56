// HttpServer: TcpHosts on their loop threads + a QuicServer with the h3 engine on its own
// thread, the same certificates and sites (virtual hosts) for both.
#include "petrel/http/http_server.h"

#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <functional>
#include <future>
#include <mutex>
#include <optional>
#include <thread>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/host_name.h"
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
#include "server/inherited_sockets.h"
#include "server/listen_address.h"
#include "server/port_reservation.h"
#include "server/tcp_host.h"
#include "server/virtual_hosts.h"

namespace petrel {

namespace {

constexpr uint64_t kH3NoError = 0x100;

// A certificate and key from their files, checked; errors name the files.
absl::StatusOr<quic::CertificatePem> ReadCertificate(const std::string& certificate_file,
                                                     const std::string& key_file) {
  absl::StatusOr<quic::CertificatePem> p = quic::ReadPemFiles(certificate_file, key_file);
  absl::Status s = p.ok() ? quic::CheckServerCertificate(*p) : p.status();
  if (!s.ok()) {
    return absl::Status(s.code(), absl::StrCat("certificate ", certificate_file, ", key ", key_file,
                                               ": ", s.message()));
  }
  return p;
}

// The QUIC server's form of the virtual hosts' certificates.
std::vector<QuicNamedCertificate> ForQuic(const std::vector<quic::NamedCertificate>& named) {
  std::vector<QuicNamedCertificate> out;
  out.reserve(named.size());
  for (const quic::NamedCertificate& n : named) {
    out.push_back({n.names, n.pem.certificate_chain, n.pem.private_key});
  }
  return out;
}

// The default certificate: the config's files, else a self-signed one for its names.
absl::StatusOr<quic::CertificatePem> DefaultCertificate(const HttpServerConfig& c) {
  if (!c.certificate_file.empty() || !c.key_file.empty()) {
    return ReadCertificate(c.certificate_file, c.key_file);
  }
  return quic::GenerateSelfSigned(c.self_signed_names);
}

// The engines' and the QUIC transport's settings that a config gives every new connection.
struct ConnectionOptions {
  http::H1Options h1;
  http::H2Options h2;
  http::H3Options h3;
  QuicTransportLimits quic;
};

ConnectionOptions ConnectionOptionsFor(const HttpServerConfig& c, server::HttpMetrics* metrics) {
  ConnectionOptions o;
  o.h1.max_request_body = c.max_request_body;
  o.h1.limits.max_header_section = c.max_header_bytes;
  o.h1.header_timeout = c.header_timeout;
  o.h1.idle_timeout = c.idle_timeout;
  if (c.body_timeout > Duration::zero()) o.h1.body_read_timeout = c.body_timeout;
  if (c.send_timeout > Duration::zero()) o.h1.send_timeout = c.send_timeout;
  o.h1.observer = metrics;
  o.h2.max_header_list_size = static_cast<uint32_t>(c.max_header_bytes);
  o.h2.max_request_body = c.max_request_body;
  o.h2.idle_timeout = c.idle_timeout;
  o.h2.header_timeout = c.header_timeout;
  o.h2.body_timeout = c.body_timeout;
  o.h2.send_timeout = c.send_timeout;
  o.h2.observer = metrics;
  o.h3.max_request_body = c.max_request_body;
  o.h3.max_field_section_size = c.max_header_bytes;
  o.h3.header_timeout = c.header_timeout;
  o.h3.body_timeout = c.body_timeout;
  o.h3.send_timeout = c.send_timeout;
  o.h3.observer = metrics;
  o.quic.idle_timeout_ms = static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(c.idle_timeout).count());
  o.quic.handshake_timeout_ms = static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(c.quic_handshake_timeout).count());
  return o;
}

// h3 requests through `sites` (kept alive by the server's VirtualHosts).
http::H3Dispatcher H3DispatcherFor(const server::SiteTable* sites) {
  return [sites](Request& q, Response& s) { sites->Handle(q, s, {}); };
}

// Every address of `listen` that serves the server port configured as `configured` (0: picked
// at start), with the port it got, `bound`.
std::vector<SocketAddress> BoundAddressesFor(const std::vector<server::ListenAddress>& listen,
                                             uint16_t configured, uint16_t bound) {
  std::vector<SocketAddress> out = server::AddressesFor(listen, configured);
  for (SocketAddress& a : out) a.set_port(bound);
  return out;
}

// `config.listen` parsed, without the default addresses this machine cannot bind.
absl::StatusOr<std::vector<server::ListenAddress>> ListenAddressesOf(const HttpServerConfig& c) {
  absl::StatusOr<std::vector<server::ListenAddress>> parsed =
      server::ParseListenAddresses(c.listen, c.http_port, c.https_port);
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("listen: ", parsed.status().message()));
  }
  std::vector<server::ListenAddress> out;
  for (server::ListenAddress& a : *parsed) {
    if (!a.required && !server::CanBind(a.ip)) {
      PETREL_LOG(kInfo, "petrel: not listening on %s: this machine cannot bind it",
                 a.ip.HostString());
      continue;
    }
    out.push_back(std::move(a));
  }
  return out;
}

}  // namespace

class HttpServer::Impl {
 public:
  Impl(const HttpServerConfig& c, const HttpRoutes* r) : config(c), routes(r) {}
  ~Impl() {
    for (const auto& [address, fd] : inherited_tcp) close(fd);
    for (const auto& [address, fd] : inherited_udp) close(fd);
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
  // Sorts config.listen_fds by protocol and checks each against `listen` and the ports.
  absl::Status AdoptListenFds();
  absl::Status StartTcp();
  absl::Status StartQuic();
  absl::Status StartObservability();
  absl::Status StartAdmin();
  absl::Status ReloadCertificate();
  absl::Status Reload(HttpServerConfig next, HttpRoutes next_routes);
  // Reload's listeners: binds what `next_listen` adds (TCP on every loop, QUIC) and closes what
  // it drops; on error nothing changes. reload_mu held.
  absl::Status ReplaceListeners(std::vector<server::ListenAddress> next_listen);
  // Runs f(host) on each public TcpHost's loop and waits; the first error.
  absl::Status OnEveryHost(const std::function<absl::Status(server::TcpHost&)>& f);
  // What a config and its routes make: the sites, and the virtual hosts' certificates read
  // from their files.
  struct Generation {
    std::unique_ptr<server::SiteTable> table;
    std::vector<quic::NamedCertificate> named;
  };
  absl::StatusOr<Generation> Prepare(const HttpServerConfig& c, const HttpRoutes& r,
                                     const quic::CertificatePem& default_pem) const;
  // Every handshake from now on: TCP and QUIC.
  absl::Status ReplaceCertificates(const quic::CertificatePem& default_pem,
                                   const std::vector<quic::NamedCertificate>& named);
  void Stop(Duration deadline);
  void Wait();

  // The running configuration (a Reload replaces it) and its routes; reload_mu guards both
  // after Start().
  HttpServerConfig config;
  const HttpRoutes* routes;
  std::vector<std::unique_ptr<HttpRoutes>> reloaded_routes;  // every generation, kept
  server::VirtualHosts sites;
  server::VirtualHosts admin_sites;
  // Before everything that counts into them: destroyed after the hosts and the QUIC server.
  std::unique_ptr<MetricsRegistry> registry;
  std::unique_ptr<server::AccessLog> access_log;
  std::unique_ptr<server::HttpMetrics> metrics;  // null: neither metrics nor access log
  Router admin_router;
  quic::CertificatePem pem;                   // the default certificate in use
  std::vector<quic::NamedCertificate> named;  // the virtual hosts' own certificates in use
  std::unique_ptr<quic::KeyLogFile> key_log;
  std::unique_ptr<quic::TlsServerContext> tcp_tls;
  std::vector<std::unique_ptr<EventLoopThread>> threads;
  std::vector<std::unique_ptr<server::TcpHost>> hosts;  // hosts[i] lives on threads[i]
  std::unique_ptr<server::TcpHost> admin_host;          // /metrics, on threads[0]
  std::unique_ptr<http::H3ServerCallbacks> h3;
  std::unique_ptr<QuicServer> quic;
  std::thread quic_thread;
  // Asked for any https port with h3: a number free on TCP and UDP, held on TCP until the
  // listeners bind it and on UDP for the server's life (its sockets are the QUIC server's).
  std::optional<server::PortReservation> https_reservation;
  std::vector<server::ListenAddress> listen;  // parsed config.listen, unbindable defaults out
  // config.listen_fds by the address each is bound to (owned).
  absl::flat_hash_map<SocketAddress, int> inherited_tcp;
  absl::flat_hash_map<SocketAddress, int> inherited_udp;
  // Public TCP listeners, then QUIC sockets; reload_mu guards them after Start().
  std::vector<SocketAddress> bound;
  size_t bound_tcp = 0;  // how many of `bound` are TCP
  uint16_t http_port = 0;
  uint16_t https_port = 0;
  uint16_t metrics_port = 0;

  std::mutex reload_mu;
  std::mutex mu;
  std::condition_variable cv;
  size_t hosts_stopped = 0;   // guarded by mu
  bool stop_started = false;  // guarded by mu
  bool waited = false;
};

absl::Status HttpServer::Impl::Start() {
  absl::StatusOr<quic::CertificatePem> p = DefaultCertificate(config);
  if (!p.ok()) return p.status();
  pem = *std::move(p);
  if (!config.key_log_file.empty()) {
    absl::StatusOr<std::unique_ptr<quic::KeyLogFile>> kl =
        quic::KeyLogFile::Open(config.key_log_file);
    if (!kl.ok()) return kl.status();
    key_log = *std::move(kl);
  }
  absl::StatusOr<std::vector<server::ListenAddress>> parsed = ListenAddressesOf(config);
  if (!parsed.ok()) return parsed.status();
  listen = *std::move(parsed);
  if (absl::Status s = AdoptListenFds(); !s.ok()) return s;
  if (absl::Status s = StartObservability(); !s.ok()) return s;
  absl::StatusOr<Generation> first = Prepare(config, *routes, pem);
  if (!first.ok()) return first.status();
  named = std::move(first->named);
  sites.Install(std::move(first->table));
  if (config.h3 && config.https_port == 0) {
    const std::vector<SocketAddress> any = server::AddressesFor(listen, 0);
    if (any.empty()) return absl::InvalidArgumentError("listen: no address for the https port");
    absl::StatusOr<server::PortReservation> r =
        server::PortReservation::Reserve(any, config.ipv6_only);
    if (!r.ok()) return r.status();
    https_reservation = *std::move(r);
  }
  if (absl::Status s = StartTcp(); !s.ok()) return s;
  if (https_reservation.has_value()) https_reservation->ReleaseTcp();  // the listeners hold it now
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

absl::Status HttpServer::Impl::AdoptListenFds() {
  std::vector<server::InheritedSocket> sockets;
  for (int fd : config.listen_fds) {
    absl::StatusOr<server::InheritedSocket> s = server::DescribeSocket(fd);
    if (!s.ok()) return s.status();
    sockets.push_back(*s);
    (s->tcp ? inherited_tcp : inherited_udp)[s->address] = fd;  // the destructor closes them
  }
  auto serves = [&](const std::optional<uint16_t>& port, const SocketAddress& a) {
    if (!port.has_value()) return false;
    const std::vector<SocketAddress> all = server::AddressesFor(listen, *port);
    return std::find(all.begin(), all.end(), a) != all.end();
  };
  for (const server::InheritedSocket& s : sockets) {
    const bool used =
        s.tcp ? serves(config.http_port, s.address) || serves(config.https_port, s.address)
              : config.h3 && serves(config.https_port, s.address);
    if (!used) {
      return absl::InvalidArgumentError(
          absl::StrCat("listen_fds: fd ", s.fd, " (", s.tcp ? "TCP " : "UDP ", s.address.ToString(),
                       ") is no listen address and port of this configuration (listen, http_port, "
                       "https_port",
                       s.tcp ? "" : ", h3", ")"));
    }
  }
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
  absl::StatusOr<std::unique_ptr<server::SiteTable>> admin_table =
      server::SiteTable::Build(&admin_router, /*default_alt_svc=*/false, {}, nullptr, {}, nullptr);
  if (!admin_table.ok()) return admin_table.status();
  admin_sites.Install(*std::move(admin_table));
  server::TcpHostConfig hc;
  hc.http = {*a};
  hc.sites = &admin_sites;
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
    tls.named_certificates = named;
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
    hc.inherited = inherited_tcp;
    hc.tls = tcp_tls.get();
    hc.sites = &sites;
    const ConnectionOptions options = ConnectionOptionsFor(config, metrics.get());
    hc.h1 = options.h1;
    hc.h2 = options.h2;
    hc.max_connections = config.max_tcp_connections;
    hc.metrics = metrics.get();
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
  const ConnectionOptions options = ConnectionOptionsFor(config, metrics.get());
  h3 = std::make_unique<http::H3ServerCallbacks>(H3DispatcherFor(sites.current()), options.h3);
  QuicServerConfig qc;
  uint16_t port = https_port != 0 ? https_port : *config.https_port;
  if (port == 0 && https_reservation.has_value()) port = https_reservation->port();
  qc.listen = server::AddressesFor(listen, port);
  if (qc.listen.empty()) return absl::OkStatus();  // every address is for the http port only
  qc.ipv6_only = config.ipv6_only;
  for (const auto& [address, fd] : inherited_udp) qc.listen_fds.push_back(fd);
  // The reserved sockets themselves, so that the number is never unbound in between; they stay
  // open (like inherited ones) for as long as the server may bind its addresses again.
  if (https_reservation.has_value()) {
    for (int fd : https_reservation->udp_fds()) qc.listen_fds.push_back(fd);
  }
  qc.workers = config.quic_workers;
  qc.certificate_pem = pem.certificate_chain;
  qc.key_pem = pem.private_key;
  qc.named_certificates = ForQuic(named);
  qc.alpn = {"h3"};
  qc.limits = options.quic;
  qc.qlog_dir = config.qlog_dir;
  qc.key_log_file = config.key_log_file;
  qc.retry = config.retry;
  qc.cc = config.cc;
  qc.shutdown_error_code = kH3NoError;
  // QuicServer wants to be created on the thread that runs it.
  std::promise<absl::Status> created;
  qc.metrics = registry.get();
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
  {  // the sites decide whether a response carries it (alt_svc, per host)
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
  impl_ = std::make_unique<Impl>(config_, &routes_);
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
  if (impl_ == nullptr) return {};
  std::lock_guard<std::mutex> lock(impl_->reload_mu);
  return impl_->bound;
}

absl::Status HttpServer::ReloadCertificate() {
  if (impl_ == nullptr) return absl::FailedPreconditionError("the server is not started");
  absl::Status s = impl_->ReloadCertificate();
  if (impl_->metrics != nullptr) impl_->metrics->OnCertificateReload(s.ok());
  return s;
}

absl::StatusOr<HttpServer::Impl::Generation> HttpServer::Impl::Prepare(
    const HttpServerConfig& c, const HttpRoutes& r, const quic::CertificatePem& default_pem) const {
  // The configured hosts, then one per name asked of `r` that none of them lists.
  std::vector<VirtualHostConfig> hosts = c.hosts;
  std::vector<const Router*> routers(hosts.size(), nullptr);
  std::vector<std::string> asked_as(hosts.size());
  for (const HttpRoutes::HostRoutes& h : r.hosts()) {
    size_t i = 0;
    while (i < hosts.size() &&
           std::none_of(hosts[i].names.begin(), hosts[i].names.end(),
                        [&](const std::string& n) { return SameHost(n, h.name); })) {
      ++i;
    }
    if (i == hosts.size()) {
      VirtualHostConfig added;
      added.names = {h.name};
      hosts.push_back(std::move(added));
      routers.push_back(nullptr);
      asked_as.emplace_back();
    }
    if (routers[i] != nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("hosts: routes asked for as ", asked_as[i],
                                                     " and as ", h.name,
                                                     ": one host, ask for its Router once"));
    }
    routers[i] = h.router.get();
    asked_as[i] = h.name;
  }
  Generation g;
  std::vector<server::SiteTable::SiteSpec> specs;
  for (size_t i = 0; i < hosts.size(); ++i) {
    const VirtualHostConfig& h = hosts[i];
    specs.push_back({h.names, routers[i] != nullptr ? routers[i] : &r.router(), h.alt_svc});
    if (h.certificate_file.empty() && h.key_file.empty()) continue;
    const std::string label = h.names.empty() ? std::string() : h.names[0];
    if (h.certificate_file.empty() || h.key_file.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("host ", label, ": a certificate file and a key file go together"));
    }
    absl::StatusOr<quic::CertificatePem> p = ReadCertificate(h.certificate_file, h.key_file);
    if (!p.ok()) {
      return absl::Status(p.status().code(),
                          absl::StrCat("host ", label, ": ", p.status().message()));
    }
    g.named.push_back({h.names, *std::move(p)});
  }
  absl::StatusOr<std::unique_ptr<server::SiteTable>> table = server::SiteTable::Build(
      &r.router(), c.alt_svc, specs, c.https_port.has_value() ? &default_pem : nullptr, g.named,
      registry.get());
  if (!table.ok()) {
    return absl::Status(table.status().code(), absl::StrCat("hosts: ", table.status().message()));
  }
  g.table = *std::move(table);
  return g;
}

absl::Status HttpServer::Impl::ReplaceCertificates(
    const quic::CertificatePem& default_pem, const std::vector<quic::NamedCertificate>& next) {
  // TCP first: it checks every pair; QUIC then gets the same, known-good set.
  if (tcp_tls != nullptr) {
    if (absl::Status s = tcp_tls->ReplaceCertificates(default_pem, next); !s.ok()) return s;
  }
  if (quic == nullptr) return absl::OkStatus();
  return quic->ReplaceCertificates(default_pem.certificate_chain, default_pem.private_key,
                                   ForQuic(next));
}

absl::Status HttpServer::Impl::ReloadCertificate() {
  std::lock_guard<std::mutex> lock(reload_mu);
  const bool own_files = !config.certificate_file.empty() && !config.key_file.empty();
  const bool host_files =
      std::any_of(config.hosts.begin(), config.hosts.end(),
                  [](const VirtualHostConfig& h) { return !h.certificate_file.empty(); });
  if (!own_files && !host_files) {
    return absl::FailedPreconditionError("no certificate files to read again (self-signed)");
  }
  quic::CertificatePem next = pem;  // a self-signed default stays as it is
  if (own_files) {
    absl::StatusOr<quic::CertificatePem> p =
        ReadCertificate(config.certificate_file, config.key_file);
    if (!p.ok()) return p.status();
    next = *std::move(p);
  }
  absl::StatusOr<Generation> g = Prepare(config, *routes, next);
  if (!g.ok()) return g.status();
  if (absl::Status s = ReplaceCertificates(next, g->named); !s.ok()) return s;
  sites.Install(std::move(g->table));
  pem = std::move(next);
  named = std::move(g->named);
  return absl::OkStatus();
}

absl::Status HttpServer::Impl::Reload(HttpServerConfig next, HttpRoutes next_routes) {
  std::lock_guard<std::mutex> lock(reload_mu);
  if (std::vector<std::string> fixed = RestartOnlyChanges(config, next); !fixed.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("these settings need a restart: ", absl::StrJoin(fixed, ", ")));
  }
  absl::StatusOr<std::vector<server::ListenAddress>> next_listen = ListenAddressesOf(next);
  if (!next_listen.ok()) return next_listen.status();
  quic::CertificatePem next_pem = pem;  // the self-signed one stays while there are no files
  const bool files = !next.certificate_file.empty() || !next.key_file.empty();
  const bool had_files = !config.certificate_file.empty() || !config.key_file.empty();
  if (files || had_files) {
    absl::StatusOr<quic::CertificatePem> p = DefaultCertificate(next);
    if (!p.ok()) return p.status();
    next_pem = *std::move(p);
  }
  auto owned = std::make_unique<HttpRoutes>(std::move(next_routes));
  absl::StatusOr<Generation> g = Prepare(next, *owned, next_pem);
  if (!g.ok()) return g.status();
  // Certificates first: they were checked by Prepare, and if the listeners then fail the old
  // (known good) ones go back.
  if (absl::Status s = ReplaceCertificates(next_pem, g->named); !s.ok()) return s;
  if (absl::Status s = ReplaceListeners(*std::move(next_listen)); !s.ok()) {
    if (absl::Status back = ReplaceCertificates(pem, named); !back.ok()) {
      PETREL_LOG(kError, "petrel: reload: the previous certificates did not go back: %s",
                 back.ToString());
    }
    return s;
  }
  // Connections from here on: the new sites and limits; those open keep theirs.
  const server::SiteTable* table = g->table.get();
  sites.Install(std::move(g->table));
  const ConnectionOptions options = ConnectionOptionsFor(next, metrics.get());
  (void)OnEveryHost([&](server::TcpHost& host) {
    host.SetConnectionOptions(options.h1, options.h2, next.max_tcp_connections);
    return absl::OkStatus();
  });
  if (quic != nullptr) {
    h3->Replace(H3DispatcherFor(table), options.h3);
    if (absl::Status s = quic->SetTransportLimits(options.quic); !s.ok()) {
      PETREL_LOG(kWarning, "petrel: reload: QUIC limits not changed: %s", s.ToString());
    }
  }
  routes = owned.get();
  reloaded_routes.push_back(std::move(owned));
  config = std::move(next);
  pem = std::move(next_pem);
  named = std::move(g->named);
  return absl::OkStatus();
}

absl::Status HttpServer::Impl::OnEveryHost(const std::function<absl::Status(server::TcpHost&)>& f) {
  absl::Status first;
  for (size_t i = 0; i < hosts.size(); ++i) {
    std::promise<absl::Status> done;
    threads[i]->loop()->RunInLoop([&, i] { done.set_value(f(*hosts[i])); });
    if (absl::Status s = done.get_future().get(); !s.ok() && first.ok()) first = s;
  }
  return first;
}

absl::Status HttpServer::Impl::ReplaceListeners(std::vector<server::ListenAddress> next_listen) {
  // Ports need a restart: the new addresses take the ports bound at start.
  auto on = [&](const std::vector<server::ListenAddress>& l, const std::optional<uint16_t>& port,
                uint16_t bound_port) {
    if (!port.has_value()) return std::vector<SocketAddress>();
    return BoundAddressesFor(l, *port, bound_port);
  };
  const std::vector<SocketAddress> http_now = on(listen, config.http_port, http_port);
  const std::vector<SocketAddress> https_now = on(listen, config.https_port, https_port);
  const std::vector<SocketAddress> http_next = on(next_listen, config.http_port, http_port);
  const std::vector<SocketAddress> https_next = on(next_listen, config.https_port, https_port);
  const bool h3_next = config.h3 && !https_next.empty();
  if (h3_next && quic == nullptr) {
    return absl::InvalidArgumentError(
        "listen: HTTP/3 did not start (no address had the https port); it needs a restart");
  }
  if (http_now == http_next && https_now == https_next) {
    listen = std::move(next_listen);  // the same addresses, perhaps written differently
    return absl::OkStatus();
  }
  // Open what is new (TCP on every loop, then QUIC, which changes all or nothing), and only
  // then close what is gone: a failure on the way leaves the old set listening.
  absl::Status s =
      OnEveryHost([&](server::TcpHost& host) { return host.OpenListeners(http_next, https_next); });
  if (s.ok() && quic != nullptr) s = quic->SetListenAddresses(https_next);
  if (!s.ok()) {
    (void)OnEveryHost([&](server::TcpHost& host) {
      host.CloseListenersExcept(http_now, https_now);
      return absl::OkStatus();
    });
    return absl::Status(s.code(), absl::StrCat("listen: ", s.message()));
  }
  (void)OnEveryHost([&](server::TcpHost& host) {
    host.CloseListenersExcept(http_next, https_next);
    return absl::OkStatus();
  });
  listen = std::move(next_listen);
  bound.clear();
  if (!hosts.empty()) {
    std::promise<std::vector<SocketAddress>> tcp;
    threads[0]->loop()->RunInLoop([&] { tcp.set_value(hosts[0]->local_addresses()); });
    bound = tcp.get_future().get();
  }
  bound_tcp = bound.size();
  if (quic != nullptr) {
    for (const SocketAddress& a : quic->local_addresses()) bound.push_back(a);
  }
  return absl::OkStatus();
}

absl::Status HttpServer::Reload(HttpServerConfig config, HttpRoutes routes) {
  if (impl_ == nullptr) return absl::FailedPreconditionError("the server is not started");
  absl::Status s = impl_->Reload(std::move(config), std::move(routes));
  if (impl_->metrics != nullptr) impl_->metrics->OnCertificateReload(s.ok());
  return s;
}

namespace {

// Calls f(a.field, b.field, "field") for every field Reload cannot apply: one list for
// RestartOnlyChanges and KeepRestartOnly.
template <typename A, typename B, typename F>
void ForEachRestartOnly(A& a, B& b, F f) {
  f(a.ipv6_only, b.ipv6_only, "ipv6_only");
  f(a.listen_fds, b.listen_fds, "listen_fds");
  f(a.http_port, b.http_port, "http_port");
  f(a.https_port, b.https_port, "https_port");
  f(a.h3, b.h3, "h3");
  f(a.tcp_loops, b.tcp_loops, "tcp_loops");
  f(a.quic_workers, b.quic_workers, "quic_workers");
  f(a.self_signed_names, b.self_signed_names, "self_signed_names");
  f(a.qlog_dir, b.qlog_dir, "qlog_dir");
  f(a.key_log_file, b.key_log_file, "key_log_file");
  f(a.retry, b.retry, "retry");
  f(a.cc, b.cc, "cc");
  f(a.metrics_listen, b.metrics_listen, "metrics_listen");
  f(a.access_log, b.access_log, "access_log");
  f(a.access_log_file, b.access_log_file, "access_log_file");
}

}  // namespace

std::vector<std::string> RestartOnlyChanges(const HttpServerConfig& running,
                                            const HttpServerConfig& next) {
  std::vector<std::string> out;
  ForEachRestartOnly(running, next, [&out](const auto& a, const auto& b, const char* name) {
    if (!(a == b)) out.push_back(name);
  });
  return out;
}

HttpServerConfig KeepRestartOnly(const HttpServerConfig& running, HttpServerConfig next) {
  ForEachRestartOnly(running, next, [](const auto& a, auto& b, const char*) { b = a; });
  return next;
}

HttpRoutes::HttpRoutes() = default;
HttpRoutes::HttpRoutes(HttpRoutes&&) noexcept = default;
HttpRoutes& HttpRoutes::operator=(HttpRoutes&&) noexcept = default;
HttpRoutes::~HttpRoutes() = default;

Router& HttpRoutes::Host(absl::string_view name) {
  for (HostRoutes& h : hosts_) {
    if (SameHost(h.name, name)) return *h.router;
  }
  hosts_.push_back({std::string(name), std::make_unique<Router>()});
  return *hosts_.back().router;
}

absl::Status HttpServer::ReopenLogs() {
  if (impl_ == nullptr || impl_->access_log == nullptr) return absl::OkStatus();
  return impl_->access_log->Reopen();
}

}  // namespace petrel
