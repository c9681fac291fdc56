// Internal: HttpMetrics, HttpServer's RequestObserver — per-protocol request, response, byte and
// latency series in a MetricsRegistry, connection and handshake counts from TcpHost and the h3
// glue, and the access log line of each request.
//
// Series (protocol = h1 | h2 | h3):
//   petrel_http_requests_total{protocol}              every finished request
//   petrel_http_responses_total{protocol,code}        by status class, code = 1xx .. 5xx
//   petrel_http_requests_incomplete_total{protocol}   cancelled, reset or cut short
//   petrel_http_response_body_bytes_total{protocol}
//   petrel_http_request_duration_seconds{protocol}    head received to response handed over
//   petrel_http_connections_total{protocol}           connections an engine took
//   petrel_http_peer_limits_total{protocol,limit}     a peer ran into a protection limit
//                                                     (PeerLimitName: rapid_reset, ping_flood,
//                                                     header_timeout, ...)
//   petrel_tcp_connections_accepted_total{listener}   listener = http | https
//   petrel_tcp_connections_open
//   petrel_connections{transport="tcp",state}         state = handshake | idle | active | closing
//   petrel_connections{transport="quic",state}        state = handshake | established | closing
//                                                     (kept by the QUIC workers)
//   petrel_http_requests_by_host_total{host}          per virtual host (server/virtual_hosts)
//   petrel_tcp_bytes_received_total{protocol}         protocol = h1 | h2 | none
//   petrel_tcp_bytes_sent_total{protocol}
//   petrel_tls_handshakes_total{transport}            transport = tcp | quic (completed)
//   petrel_tls_handshake_failures_total{transport="tcp"}
//   petrel_certificate_reloads_total{outcome}         outcome = ok | failed
//   petrel_certificate_last_reload_timestamp_seconds  the last reload that took, Unix time
//
// TCP connection states (a gauge per state; their sum is petrel_tcp_connections_open, except
// for the moment between a connection's close and its release at the end of the loop turn):
//   handshake  TLS handshake not done yet
//   idle       waiting for the next request: keep-alive between requests on h1, no open stream
//              on h2; also a cleartext connection whose first bytes have not come yet
//   active     a request in progress on h1 (its head started, or its response still going
//              out), at least one open stream on h2
//   closing    taking nothing new and finishing: graceful shutdown, GOAWAY sent or received,
//              Connection: close, an error answered, the lingering close
// The engines report a change at the end of an entry point, so a request answered within one
// readiness event never leaves idle and costs the gauges nothing; a change is two relaxed
// atomic adds. QUIC connection states come from the workers: handshake from the first Initial
// until the handshake completes, established until the closing or draining period begins,
// closing until the connection is released.
//
// TCP bytes are what the kernel took and handed over: under TLS the record bytes, handshake
// included. A connection's bytes count for the protocol its engine speaks, those before the
// engine took it (TLS handshake, the cleartext bytes that told the protocol) included; those of
// a connection closed before any engine took it (a failed handshake, a client that sent
// nothing) count as protocol="none" when it closes. Each TcpStream adds its bytes to the
// sharded counters at the end of each readiness event; without metrics it updates nothing
// shared.
//
// Threads: every method may be called from any thread and never locks (the access log takes
// its own mutex per line). Metric pointers are resolved once, in the constructor, so a request
// costs a few sharded counter updates and one histogram observation — no allocation.
#ifndef PETREL_SERVER_HTTP_METRICS_H_
#define PETREL_SERVER_HTTP_METRICS_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <iterator>

#include "petrel/common/metrics.h"
#include "petrel/http/request_observer.h"
#include "server/access_log.h"

namespace petrel::server {

class HttpMetrics final : public RequestObserver {
 public:
  // `registry` and `access_log` (null: no log) are not owned and must outlive this object.
  HttpMetrics(MetricsRegistry* registry, AccessLog* access_log);

  void OnRequestDone(const RequestRecord& record) override;
  void OnPeerLimit(HttpProtocol protocol, PeerLimit limit) override;
  void OnWebSocketOpened(HttpProtocol protocol) override;
  void OnWebSocketClosed(HttpProtocol protocol, uint16_t code) override;

  void OnEngineStarted(HttpProtocol protocol);  // an engine took a connection
  void OnTcpAccepted(bool tls);
  void OnTcpClosed();

  // A TCP connection's state in petrel_connections; kNone: not counted (not yet, or closed).
  enum class TcpState : uint8_t { kNone, kHandshake, kIdle, kActive, kClosing };
  void OnTcpStateChange(TcpState from, TcpState to);
  // The counters a connection's TcpStream feeds once `protocol`'s engine (h1 or h2) took it.
  Counter* tcp_bytes_received(HttpProtocol protocol) const;
  Counter* tcp_bytes_sent(HttpProtocol protocol) const;
  // A connection that closed before any engine took it.
  void OnTcpClosedWithoutEngine(uint64_t bytes_received, uint64_t bytes_sent);

  void OnTcpTlsHandshake(bool ok);
  void OnQuicHandshake();  // an h3 connection completed its handshake
  void OnCertificateReload(bool ok);

 private:
  static constexpr size_t kProtocols = 3;
  static constexpr size_t kClasses = 5;  // 1xx .. 5xx
  // The close codes with a series of their own (RFC 6455 §7.4.1); the rest count as "other".
  static constexpr uint16_t kWebSocketCodes[] = {1000, 1001, 1002, 1003, 1005,
                                                 1006, 1007, 1008, 1009, 1011};
  static constexpr size_t kWebSocketCodeSlots = std::size(kWebSocketCodes) + 1;

  AccessLog* const access_log_;
  std::array<Counter*, kProtocols> requests_{};
  std::array<std::array<Counter*, kClasses>, kProtocols> responses_{};
  std::array<Counter*, kProtocols> incomplete_{};
  std::array<Counter*, kProtocols> websocket_opened_{};
  std::array<std::array<Counter*, kWebSocketCodeSlots>, kProtocols> websocket_closed_{};
  std::array<Counter*, kProtocols> body_bytes_{};
  std::array<Histogram*, kProtocols> duration_{};
  std::array<Counter*, kProtocols> connections_{};
  std::array<std::array<Counter*, kPeerLimitCount>, kProtocols> peer_limits_{};
  std::array<Counter*, 2> tcp_accepted_{};  // http, https
  Gauge* tcp_open_ = nullptr;
  std::array<Gauge*, 5> tcp_states_{};      // by TcpState; [kNone] stays null
  std::array<Counter*, 3> tcp_received_{};  // h1, h2, none
  std::array<Counter*, 3> tcp_sent_{};
  Counter* tls_tcp_ = nullptr;
  Counter* tls_tcp_failed_ = nullptr;
  Counter* tls_quic_ = nullptr;
  std::array<Counter*, 2> reloads_{};  // ok, failed
  Gauge* last_reload_ = nullptr;
};

}  // namespace petrel::server

#endif  // PETREL_SERVER_HTTP_METRICS_H_
