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
//   petrel_tcp_connections_accepted_total{listener}   listener = http | https
//   petrel_tcp_connections_open
//   petrel_tls_handshakes_total{transport}            transport = tcp | quic (completed)
//   petrel_tls_handshake_failures_total{transport="tcp"}
//   petrel_certificate_reloads_total{outcome}         outcome = ok | failed
//   petrel_certificate_last_reload_timestamp_seconds  the last reload that took, Unix time
//
// Threads: every method may be called from any thread and never locks (the access log takes
// its own mutex per line). Metric pointers are resolved once, in the constructor, so a request
// costs a few sharded counter updates and one histogram observation — no allocation.
#ifndef PETREL_SERVER_HTTP_METRICS_H_
#define PETREL_SERVER_HTTP_METRICS_H_

#include <array>
#include <cstddef>

#include "petrel/common/metrics.h"
#include "petrel/http/request_observer.h"
#include "server/access_log.h"

namespace petrel::server {

class HttpMetrics final : public RequestObserver {
 public:
  // `registry` and `access_log` (null: no log) are not owned and must outlive this object.
  HttpMetrics(MetricsRegistry* registry, AccessLog* access_log);

  void OnRequestDone(const RequestRecord& record) override;

  void OnEngineStarted(HttpProtocol protocol);  // an engine took a connection
  void OnTcpAccepted(bool tls);
  void OnTcpClosed();
  void OnTcpTlsHandshake(bool ok);
  void OnQuicHandshake();  // an h3 connection completed its handshake
  void OnCertificateReload(bool ok);

 private:
  static constexpr size_t kProtocols = 3;
  static constexpr size_t kClasses = 5;  // 1xx .. 5xx

  AccessLog* const access_log_;
  std::array<Counter*, kProtocols> requests_{};
  std::array<std::array<Counter*, kClasses>, kProtocols> responses_{};
  std::array<Counter*, kProtocols> incomplete_{};
  std::array<Counter*, kProtocols> body_bytes_{};
  std::array<Histogram*, kProtocols> duration_{};
  std::array<Counter*, kProtocols> connections_{};
  std::array<Counter*, 2> tcp_accepted_{};  // http, https
  Gauge* tcp_open_ = nullptr;
  Counter* tls_tcp_ = nullptr;
  Counter* tls_tcp_failed_ = nullptr;
  Counter* tls_quic_ = nullptr;
  std::array<Counter*, 2> reloads_{};  // ok, failed
  Gauge* last_reload_ = nullptr;
};

}  // namespace petrel::server

#endif  // PETREL_SERVER_HTTP_METRICS_H_
