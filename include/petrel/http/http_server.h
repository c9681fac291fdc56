// Public: HttpServer, one process serving the same Router over HTTP/1.1 and HTTP/2 (cleartext
// and TLS over TCP) and HTTP/3 (QUIC over UDP).
//
//   petrel::HttpServerConfig config;
//   config.https_port = 8443;
//   petrel::HttpServer server(config);
//   server.router().Get("/hello", [](petrel::Request&, petrel::Response& res) {
//     res.Send(200, "hello", "text/plain");
//   });
//   server.router().Get("/*", petrel::StaticFiles("./www"));
//   if (absl::Status s = server.Start(); !s.ok()) ...
//   server.Wait();   // until Stop() (from a signal handler thread, a handler, ...)
//
// Virtual hosts: server.Host("a.example") is the Router for requests whose Host / :authority is
// a.example; requests for any other host go to router(). A host may have its own certificate,
// which TLS handshakes (TCP and QUIC) that name it by SNI get (HttpServerConfig::hosts).
//
// Threads: TCP connections live on `tcp_loops` event-loop threads, each with its own
// SO_REUSEPORT listeners; QUIC runs a master thread and `quic_workers` workers (QuicServer).
// Handlers run on the loop that owns their connection, so the Router must not change after
// Start() and handlers that share state must synchronise it themselves.
#ifndef PETREL_HTTP_HTTP_SERVER_H_
#define PETREL_HTTP_HTTP_SERVER_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "petrel/common/clock.h"
#include "petrel/http/router.h"
#include "petrel/quic/quic_server.h"

namespace petrel {

// Access log lines, one per finished request.
enum class AccessLogFormat : uint8_t { kOff, kCommon, kJson };

// A virtual host: a site of its own for some host names, optionally with its own certificate.
struct VirtualHostConfig {
  // Exact names ("a.example", case-insensitive) or one-label wildcards ("*.a.example" matches
  // "x.a.example", not "a.example" nor "y.x.a.example"). Exact names win over wildcards.
  std::vector<std::string> names;
  // PEM files presented to TLS clients that name one of `names` by SNI; both empty: the
  // server's certificate.
  std::string certificate_file;
  std::string key_file;
  // Its h1/h2 responses advertise h3 (with the server's alt_svc on).
  bool alt_svc = true;
};

struct HttpServerConfig {
  // Addresses the listeners bind: "127.0.0.1", "::1", "[::1]", "0.0.0.0", "::" serve every
  // port below on that address; "10.0.0.1:8443" or "[2001:db8::1]:8080" serve only the port
  // with that number. Empty: loopback on both families, 127.0.0.1 and ::1 (::1 left out where
  // the machine has no IPv6), so that `localhost` reaches the server whatever it resolves to.
  std::vector<std::string> listen;
  // IPv6 addresses take IPv6 only; false lets "::" take IPv4 too (one socket for both).
  bool ipv6_only = true;
  // Sockets already bound for the server (a service manager's socket activation, LISTEN_FDS):
  // listening TCP and bound UDP sockets, each used instead of binding the listen address and
  // port it is bound to, which the configuration must have (else Start fails naming it). The
  // server owns them from Start on (closed when it is destroyed).
  std::vector<int> listen_fds;
  // Cleartext TCP: HTTP/1.1, and HTTP/2 with prior knowledge. 0 picks a free port; nullopt: off.
  std::optional<uint16_t> http_port = 8080;
  // TLS over TCP (ALPN h2, http/1.1) and, if `h3`, QUIC on the same UDP port. nullopt: off.
  std::optional<uint16_t> https_port = 8443;
  bool h3 = true;
  // Loops for TCP connections (one listener per loop and port), and QUIC workers (0: the QUIC
  // master loop runs the connections too).
  size_t tcp_loops = 1;
  size_t quic_workers = 0;
  // PEM files; both empty: a self-signed ECDSA P-256 certificate for `self_signed_names`.
  std::string certificate_file;
  std::string key_file;
  std::vector<std::string> self_signed_names = {"localhost", "127.0.0.1"};
  // Virtual hosts (see Host()); requests for any other host go to router().
  std::vector<VirtualHostConfig> hosts;
  // Limits shared by every protocol.
  uint64_t max_request_body = 10 << 20;
  // Largest request head (h1 header section, h2 header list, h3 field section); bigger → 431.
  size_t max_header_bytes = 64 * 1024;
  size_t max_tcp_connections = 10000;  // per loop
  // TCP: from accept to a complete request head (TLS handshake and, on the cleartext port, the
  // first bytes that tell h1 from h2c included); then 408 (h1) or a silent close. h2: each
  // request head (HEADERS and CONTINUATIONs) from its first frame; then GOAWAY and close. h3:
  // each request head from its stream's opening; then the stream is reset.
  Duration header_timeout = std::chrono::seconds(10);
  // How long a request body may stall while the server waits for it (h1: while the handler
  // reads; h2 and h3: while the peer has flow-control credit, or once the response is done).
  // Then h1 answers 408 (or closes, once the response began), h2 and h3 reset the stream. Zero:
  // no limit.
  Duration body_timeout = std::chrono::seconds(60);
  // How long a response may wait for a peer that does not read: h1 and h2 output blocked (the
  // connection closes); an h2 stream's window shut, or an h3 response of which the peer
  // acknowledges nothing (the stream is reset). Zero: no limit.
  Duration send_timeout = std::chrono::seconds(60);
  // h1: between requests; h2: with no stream open (then GOAWAY); h3: QUIC's idle timeout.
  Duration idle_timeout = std::chrono::seconds(60);
  // QUIC: a handshake not done by then closes the connection; zero: no limit but the idle one.
  Duration quic_handshake_timeout = std::chrono::seconds(10);
  // h1 and h2 responses advertise h3 (RFC 7838) when it is on.
  bool alt_svc = true;
  std::string qlog_dir;      // QUIC: one qlog per connection; empty: off
  std::string key_log_file;  // TLS secrets of every protocol (SSLKEYLOGFILE format); empty: off
  // QUIC: when to make clients prove their address with a Retry (kAuto: under handshake load),
  // and the congestion controller of every connection.
  QuicRetryPolicy retry = QuicRetryPolicy::kNever;
  CongestionControl cc = CongestionControl::kCubic;
  // Prometheus text at GET /metrics on this address ("127.0.0.1:9100"); empty: off.
  std::string metrics_listen;
  AccessLogFormat access_log = AccessLogFormat::kOff;
  std::string access_log_file;  // empty: stdout
};

// The routes an HttpServer serves: a default Router for every host no virtual host claims, and
// one per virtual host. HttpServer has one (router(), Host()); Reload() takes a new one.
class HttpRoutes {
 public:
  HttpRoutes();
  HttpRoutes(HttpRoutes&&) noexcept;
  HttpRoutes& operator=(HttpRoutes&&) noexcept;
  ~HttpRoutes();

  Router& router() { return default_; }
  const Router& router() const { return default_; }
  // The Router of the virtual host that lists `name` in HttpServerConfig::hosts; a name no
  // configured host lists gets a host of its own (with the server's certificate). The same
  // name (case-insensitive) gives the same Router. A configured host whose Router is never
  // asked for serves router()'s routes (a host for its certificate only).
  Router& Host(absl::string_view name);

  struct HostRoutes {
    std::string name;
    std::unique_ptr<Router> router;
  };
  const std::vector<HostRoutes>& hosts() const { return hosts_; }

 private:
  Router default_;
  std::vector<HostRoutes> hosts_;
};

// The fields of `next` that differ from `running` and that HttpServer::Reload cannot apply
// (they need a restart), by their names in HttpServerConfig ("listen", "https_port", ...).
std::vector<std::string> RestartOnlyChanges(const HttpServerConfig& running,
                                            const HttpServerConfig& next);
// `next` with those fields set back to `running`'s: what Reload can take.
HttpServerConfig KeepRestartOnly(const HttpServerConfig& running, HttpServerConfig next);

class HttpServer {
 public:
  explicit HttpServer(HttpServerConfig config);
  ~HttpServer();  // stops (deadline 0) if still running
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Register routes before Start() (HttpRoutes). Names are checked by Start().
  Router& router() { return routes_.router(); }
  Router& Host(absl::string_view name) { return routes_.Host(name); }
  HttpRoutes& routes() { return routes_; }

  // Binds every listener and starts the threads; returns once all of them accept.
  absl::Status Start();
  // Graceful stop, safe from any thread: listeners close, idle connections close now, busy ones
  // finish what they accepted (h2/h3 announce GOAWAY), and whatever is left at `deadline` from
  // now is closed. Returns at once; Wait() returns when everything is down.
  void Stop(Duration deadline = std::chrono::seconds(5));
  void Wait();

  // The bound ports (after Start()); 0 when off.
  uint16_t http_port() const;
  uint16_t https_port() const;
  // The bound admin port (metrics_listen); 0 when off.
  uint16_t metrics_port() const;
  // Every bound public listener (TCP, then QUIC), with its port.
  std::vector<SocketAddress> local_addresses() const;

  // Reads every certificate and key file again (the server's and the virtual hosts': renewed
  // certificates) and presents them in every handshake from now on, TCP and QUIC; connections
  // already up keep theirs and session tickets stay valid. On any error (unreadable, not PEM,
  // a key that does not match) nothing changes. Needs files in the config. Any thread, after
  // Start().
  absl::Status ReloadCertificate();
  // A new configuration without a restart, for the connections accepted from now on: `config`'s
  // listen addresses (new ones bound, TCP and QUIC; a dropped one accepts nothing new while
  // the connections it accepted go on), certificates (every file read again), virtual hosts,
  // alt_svc, limits and timeouts, and `routes`. Connections already open finish on what they
  // began with: certificate, routes, limits. Session tickets stay valid. The other fields need
  // a restart and must be unchanged (RestartOnlyChanges; else InvalidArgument naming them). On
  // any error (a file that does not load, an address that does not bind) nothing changes.
  // Routers of earlier generations are kept until the server is destroyed (connections may
  // still use them). A QUIC address dropped by one reload can be listed again once its last
  // connection has closed (until then its socket holds the port). Any thread but the server's
  // own, after Start().
  absl::Status Reload(HttpServerConfig config, HttpRoutes routes);
  // Opens the access log file again, for log rotation. Any thread.
  absl::Status ReopenLogs();

  class Impl;

 private:
  HttpServerConfig config_;
  HttpRoutes routes_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace petrel

#endif  // PETREL_HTTP_HTTP_SERVER_H_
