// Internal: TcpHost, the TCP side of HttpServer on one event loop — its listeners (cleartext
// and TLS, SO_REUSEPORT when several loops share a port), its connections, and the choice of
// engine for each: ALPN on TLS (h2, else HTTP/1.1), the first bytes on cleartext (the h2
// preface, else HTTP/1.1), read in place without copying.
//
// Thread: everything runs on the host's loop thread, including construction of the listeners
// (Listen). Ownership: the host owns its connections; each connection owns its TcpStream and
// its engine (the engine is destroyed first).
#ifndef PETREL_SERVER_TCP_HOST_H_
#define PETREL_SERVER_TCP_HOST_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "http/date_cache.h"
#include "http/h1/h1_connection.h"
#include "http/h2/h2_connection.h"
#include "http/tcp/tcp_listener.h"
#include "http/tcp/tcp_stream.h"
#include "petrel/common/event_loop.h"
#include "petrel/common/socket_address.h"
#include "petrel/common/timer.h"
#include "petrel/http/router.h"
#include "quic/tls/tls_context.h"
#include "server/http_metrics.h"
#include "server/virtual_hosts.h"

namespace petrel::server {

struct TcpHostConfig {
  // Listener addresses, cleartext and TLS (`https` needs `tls`). Those of one kind share a
  // port: port 0 on the first picks it for all.
  std::vector<SocketAddress> http;
  std::vector<SocketAddress> https;
  bool reuse_port = false;
  bool ipv6_only = true;  // IPv6 listeners take IPv6 only (false: "::" takes IPv4 too)
  // Listening sockets handed over by a service manager, by the address they are bound to (not
  // owned): a listener for one of these addresses accepts on a duplicate instead of binding.
  absl::flat_hash_map<SocketAddress, int> inherited;
  const quic::TlsServerContext* tls = nullptr;  // ALPN h2, http/1.1; not owned
  // Not owned. A connection takes the sites installed when it is accepted and keeps them (a
  // reload installs new ones for the connections after it).
  const VirtualHosts* sites = nullptr;
  http::H1Options h1;
  http::H2Options h2;
  std::string alt_svc;  // Alt-Svc value added to every response over TLS; empty: none
  size_t max_connections = 10000;
  // Connection, state, byte and handshake counts; not owned; null: none (and nothing shared is
  // updated per read or write). (Requests are counted by the engines' observer, h1.observer /
  // h2.observer.)
  HttpMetrics* metrics = nullptr;
};

class TcpHost {
 public:
  TcpHost(EventLoop* loop, TcpHostConfig config);
  ~TcpHost();
  TcpHost(const TcpHost&) = delete;
  TcpHost& operator=(const TcpHost&) = delete;

  // Binds the listeners (port 0 picks one). Loop thread.
  absl::Status Listen();

  // Reload. Loop thread.
  // Opens listeners on the addresses (with their ports) of `http` / `https` that this host does
  // not listen on yet; on error, closes those it opened and changes nothing.
  absl::Status OpenListeners(const std::vector<SocketAddress>& http,
                             const std::vector<SocketAddress>& https);
  // Stops listening on every address not in `http` / `https`; connections accepted there go on
  // (the listener is kept, closed, until its last one ends).
  void CloseListenersExcept(const std::vector<SocketAddress>& http,
                            const std::vector<SocketAddress>& https);
  // Connections accepted from now on use these; those already open keep theirs. `max_connections`
  // applies to every listener at once (accepting pauses beyond it).
  void SetConnectionOptions(const http::H1Options& h1, const http::H2Options& h2,
                            size_t max_connections);
  // The bound ports; 0 when there is no such listener.
  uint16_t http_port() const { return http_port_; }
  uint16_t https_port() const { return https_port_; }
  // Every open listener's bound address, cleartext ones first.
  std::vector<SocketAddress> local_addresses() const;

  // Graceful shutdown: listeners close, every connection is asked to finish, and those left at
  // `deadline` are closed; then `done` runs (once). Loop thread.
  void Shutdown(TimePoint deadline, absl::AnyInvocable<void()> done);

  size_t connections() const { return conns_.size(); }
  // Alt-Svc value for responses from now on (once QUIC is up); empty: none. Loop thread.
  void set_alt_svc(std::string value) { config_.alt_svc = std::move(value); }

 private:
  struct Conn;
  struct Listener {
    std::unique_ptr<http::TcpListener> socket;
    bool tls = false;
    bool closed = false;  // by a reload; kept while connections accepted on it are open
  };

  absl::Status OpenListener(SocketAddress address, bool tls, uint16_t* port);
  // The listener of this kind on `address`, open, or null.
  Listener* FindOpen(const SocketAddress& address, bool tls);
  void ForgetClosedListener(http::TcpListener* socket);

  void Accept(http::TcpListener* listener, int fd, const SocketAddress& peer,
              const SocketAddress& local, bool tls);
  void Release(Conn* conn);
  void MaybeDone();

  EventLoop* const loop_;
  TcpHostConfig config_;
  http_internal::DateCache date_cache_;
  std::vector<std::unique_ptr<Listener>> listeners_;  // in the order opened
  size_t closed_listeners_ = 0;
  uint16_t http_port_ = 0;
  uint16_t https_port_ = 0;
  absl::flat_hash_map<Conn*, std::unique_ptr<Conn>> conns_;
  bool stopping_ = false;
  bool destroying_ = false;
  Timer deadline_timer_;
  absl::AnyInvocable<void()> done_;
};

}  // namespace petrel::server

#endif  // PETREL_SERVER_TCP_HOST_H_
