#include "http/h3/h3_server_callbacks.h"

#include <memory>
#include <utility>

namespace petrel::http {

H3ServerCallbacks::H3ServerCallbacks(H3Dispatcher dispatcher, const H3Options& options) {
  Replace(std::move(dispatcher), options);
}

void H3ServerCallbacks::Replace(H3Dispatcher dispatcher, const H3Options& options) {
  auto next = std::make_unique<const Generation>(Generation{std::move(dispatcher), options});
  std::lock_guard<std::mutex> lock(mu_);
  current_.store(next.get(), std::memory_order_release);
  generations_.push_back(std::move(next));
}

H3Connection* H3ServerCallbacks::Get(QuicConnection& conn, bool create) const {
  // Every connection of a server built from these callbacks carries an H3Connection (ALPN h3
  // only), so the AppData is ours.
  auto* h3 = static_cast<H3Connection*>(conn.app_data());
  if (h3 != nullptr || !create) return h3;
  const Generation* g = current_.load(std::memory_order_acquire);
  auto fresh = std::make_unique<H3Connection>(&conn, &g->dispatcher, conn.loop(), g->options);
  h3 = fresh.get();
  conn.set_app_data(std::move(fresh));
  h3->Start();
  return h3;
}

QuicServerCallbacks H3ServerCallbacks::Build() const {
  QuicServerCallbacks cb;
  cb.on_connection = [this](QuicConnection& c) { Get(c, true)->OnHandshakeCompleted(); };
  cb.on_stream_data = [this](QuicConnection& c, int64_t s, absl::string_view data, bool fin) {
    Get(c, true)->OnStreamData(s, data, fin);
  };
  cb.on_stream_reset = [this](QuicConnection& c, int64_t s, uint64_t err) {
    if (H3Connection* h3 = Get(c, false)) h3->OnStreamReset(s, err);
  };
  cb.on_stream_stop_sending = [this](QuicConnection& c, int64_t s, uint64_t err) {
    if (H3Connection* h3 = Get(c, false)) h3->OnStreamStopSending(s, err);
  };
  // Writes, writability and acknowledgements go between the connection and the H3Connection
  // directly: it is the connection's stream source.
  cb.on_stream_closed = [this](QuicConnection& c, int64_t s) {
    if (H3Connection* h3 = Get(c, false)) h3->OnStreamClosed(s);
  };
  cb.on_connection_closed = [this](QuicConnection& c) {
    if (H3Connection* h3 = Get(c, false)) h3->OnConnectionClosed();
  };
  // Graceful stop: GOAWAY, then the connection closes once its requests are done and the
  // GOAWAY is out (the control and QPACK streams stay open for the connection's life, so QUIC's
  // own count cannot tell).
  cb.on_shutdown = [this](QuicConnection& c) {
    if (H3Connection* h3 = Get(c, false)) h3->Shutdown();
  };
  cb.is_idle = [this](QuicConnection& c) {
    H3Connection* h3 = Get(c, false);
    return h3 == nullptr || (h3->open_streams() == 0 && !h3->goaway_unsent());
  };
  return cb;
}

}  // namespace petrel::http
