#include "server/http_metrics.h"

#include <algorithm>
#include <chrono>
#include <iterator>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

namespace petrel::server {
namespace {

constexpr const char* kProtocolLabels[] = {"h1", "h2", "h3"};

size_t Index(HttpProtocol p) { return static_cast<size_t>(p); }

// 100 µs .. 10 s: loopback answers land in the first buckets, slow uploads in the last.
std::vector<double> DurationBounds() {
  return {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
          0.05,   0.1,     0.25,   0.5,   1,      2.5,   5,    10};
}

}  // namespace

HttpMetrics::HttpMetrics(MetricsRegistry* registry, AccessLog* access_log)
    : access_log_(access_log) {
  MetricsRegistry& m = *registry;
  for (size_t p = 0; p < kProtocols; ++p) {
    const std::string proto = kProtocolLabels[p];
    requests_[p] = &m.AddCounter("petrel_http_requests_total", "HTTP requests finished",
                                 {{"protocol", proto}});
    for (size_t c = 0; c < kClasses; ++c) {
      responses_[p][c] =
          &m.AddCounter("petrel_http_responses_total", "HTTP responses sent, by status class",
                        {{"protocol", proto}, {"code", absl::StrCat(c + 1, "xx")}});
    }
    incomplete_[p] =
        &m.AddCounter("petrel_http_requests_incomplete_total",
                      "HTTP requests cancelled, reset or cut short", {{"protocol", proto}});
    body_bytes_[p] = &m.AddCounter("petrel_http_response_body_bytes_total",
                                   "HTTP response body bytes sent", {{"protocol", proto}});
    duration_[p] = &m.AddHistogram("petrel_http_request_duration_seconds",
                                   "From the request head to the whole response handed over",
                                   DurationBounds(), {{"protocol", proto}});
    connections_[p] = &m.AddCounter("petrel_http_connections_total",
                                    "Connections served, by HTTP protocol", {{"protocol", proto}});
    websocket_opened_[p] =
        &m.AddCounter("petrel_websocket_opened_total", "WebSockets opened", {{"protocol", proto}});
    for (size_t c = 0; c < kWebSocketCodeSlots; ++c) {
      websocket_closed_[p][c] = &m.AddCounter(
          "petrel_websocket_closed_total",
          "WebSockets ended, by the close code Petrel sent (1002, 1007, 1009: bad input; 1006: "
          "none, the transport ended first)",
          {{"protocol", proto},
           {"code", c < std::size(kWebSocketCodes) ? absl::StrCat(kWebSocketCodes[c]) : "other"}});
    }
    for (int l = 0; l < kPeerLimitCount; ++l) {
      peer_limits_[p][l] = &m.AddCounter(
          "petrel_http_peer_limits_total",
          "Peers that ran into a protection limit (floods, timeouts); the connection or stream "
          "was closed or reset",
          {{"protocol", proto}, {"limit", PeerLimitName(static_cast<PeerLimit>(l))}});
    }
  }
  tcp_accepted_[0] = &m.AddCounter("petrel_tcp_connections_accepted_total",
                                   "TCP connections accepted", {{"listener", "http"}});
  tcp_accepted_[1] = &m.AddCounter("petrel_tcp_connections_accepted_total",
                                   "TCP connections accepted", {{"listener", "https"}});
  tcp_open_ = &m.AddGauge("petrel_tcp_connections_open", "TCP connections open");
  // By TcpState; kNone has no series.
  constexpr const char* kStateLabels[] = {"", "handshake", "idle", "active", "closing"};
  for (size_t s = 1; s < tcp_states_.size(); ++s) {
    tcp_states_[s] = &m.AddGauge("petrel_connections", "Connections open, by state",
                                 {{"transport", "tcp"}, {"state", kStateLabels[s]}});
  }
  constexpr const char* kTcpProtocolLabels[] = {"h1", "h2", "none"};
  for (size_t p = 0; p < tcp_received_.size(); ++p) {
    tcp_received_[p] =
        &m.AddCounter("petrel_tcp_bytes_received_total", "TCP bytes received (TLS records)",
                      {{"protocol", kTcpProtocolLabels[p]}});
    tcp_sent_[p] = &m.AddCounter("petrel_tcp_bytes_sent_total", "TCP bytes sent (TLS records)",
                                 {{"protocol", kTcpProtocolLabels[p]}});
  }
  tls_tcp_ = &m.AddCounter("petrel_tls_handshakes_total", "TLS handshakes completed",
                           {{"transport", "tcp"}});
  tls_quic_ = &m.AddCounter("petrel_tls_handshakes_total", "TLS handshakes completed",
                            {{"transport", "quic"}});
  tls_tcp_failed_ =
      &m.AddCounter("petrel_tls_handshake_failures_total",
                    "TLS handshakes that failed or were abandoned", {{"transport", "tcp"}});
  reloads_[0] =
      &m.AddCounter("petrel_certificate_reloads_total",
                    "Certificate reloads (SIGHUP, ReloadCertificate)", {{"outcome", "ok"}});
  reloads_[1] =
      &m.AddCounter("petrel_certificate_reloads_total",
                    "Certificate reloads (SIGHUP, ReloadCertificate)", {{"outcome", "failed"}});
  last_reload_ = &m.AddGauge("petrel_certificate_last_reload_timestamp_seconds",
                             "When the certificate was last reloaded successfully (Unix time)");
}

void HttpMetrics::OnCertificateReload(bool ok) {
  reloads_[ok ? 0 : 1]->Inc();
  if (ok) {
    last_reload_->Set(std::chrono::duration_cast<std::chrono::seconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count());
  }
}

void HttpMetrics::OnPeerLimit(HttpProtocol protocol, PeerLimit limit) {
  peer_limits_[Index(protocol)][static_cast<size_t>(limit)]->Inc();
}

void HttpMetrics::OnWebSocketOpened(HttpProtocol protocol) {
  websocket_opened_[Index(protocol)]->Inc();
}

void HttpMetrics::OnWebSocketClosed(HttpProtocol protocol, uint16_t code) {
  const auto* known = std::find(std::begin(kWebSocketCodes), std::end(kWebSocketCodes), code);
  websocket_closed_[Index(protocol)][static_cast<size_t>(known - std::begin(kWebSocketCodes))]
      ->Inc();
}

void HttpMetrics::OnRequestDone(const RequestRecord& r) {
  const Duration duration = MonotonicNow() - r.start;
  const size_t p = Index(r.protocol);
  requests_[p]->Inc();
  if (r.status >= 100 && r.status < 600) responses_[p][r.status / 100 - 1]->Inc();
  if (!r.completed) incomplete_[p]->Inc();
  if (r.body_bytes != 0) body_bytes_[p]->Inc(r.body_bytes);
  duration_[p]->Observe(std::chrono::duration<double>(duration).count());
  if (access_log_ != nullptr) access_log_->Write(r, duration);
}

void HttpMetrics::OnEngineStarted(HttpProtocol protocol) { connections_[Index(protocol)]->Inc(); }

void HttpMetrics::OnTcpAccepted(bool tls) {
  tcp_accepted_[tls ? 1 : 0]->Inc();
  tcp_open_->Add(1);
}

void HttpMetrics::OnTcpClosed() { tcp_open_->Sub(1); }

void HttpMetrics::OnTcpStateChange(TcpState from, TcpState to) {
  if (from == to) return;
  if (Gauge* g = tcp_states_[static_cast<size_t>(from)]) g->Sub(1);
  if (Gauge* g = tcp_states_[static_cast<size_t>(to)]) g->Add(1);
}

Counter* HttpMetrics::tcp_bytes_received(HttpProtocol protocol) const {
  return tcp_received_[protocol == HttpProtocol::kHttp2 ? 1 : 0];
}

Counter* HttpMetrics::tcp_bytes_sent(HttpProtocol protocol) const {
  return tcp_sent_[protocol == HttpProtocol::kHttp2 ? 1 : 0];
}

void HttpMetrics::OnTcpClosedWithoutEngine(uint64_t bytes_received, uint64_t bytes_sent) {
  if (bytes_received != 0) tcp_received_[2]->Inc(bytes_received);
  if (bytes_sent != 0) tcp_sent_[2]->Inc(bytes_sent);
}

void HttpMetrics::OnTcpTlsHandshake(bool ok) { (ok ? tls_tcp_ : tls_tcp_failed_)->Inc(); }

void HttpMetrics::OnQuicHandshake() {
  tls_quic_->Inc();
  connections_[Index(HttpProtocol::kHttp3)]->Inc();
}

}  // namespace petrel::server
