// Internal: adapts a set of std::function callbacks (the public API's) to ConnectionObserver.
// Immutable after construction, so one instance serves every worker thread.
#ifndef PETREL_QUIC_SERVER_CALLBACK_OBSERVER_H_
#define PETREL_QUIC_SERVER_CALLBACK_OBSERVER_H_

#include "petrel/quic/quic_server.h"
#include "quic/connection/connection.h"

namespace petrel::quic {

class CallbackObserver final : public ConnectionObserver {
 public:
  explicit CallbackObserver(QuicServerCallbacks callbacks) : cb_(std::move(callbacks)) {}

  void OnHandshakeCompleted(QuicConnection& c) override {
    if (cb_.on_connection) cb_.on_connection(c);
  }
  void OnStreamData(QuicConnection& c, int64_t s, absl::string_view data, bool fin) override {
    if (cb_.on_stream_data) {
      cb_.on_stream_data(c, s, data, fin);
    } else {
      c.Consume(s, data.size());
    }
  }
  void OnStreamReset(QuicConnection& c, int64_t s, uint64_t err) override {
    if (cb_.on_stream_reset) cb_.on_stream_reset(c, s, err);
  }
  void OnStreamStopSending(QuicConnection& c, int64_t s, uint64_t err) override {
    if (cb_.on_stream_stop_sending) cb_.on_stream_stop_sending(c, s, err);
  }
  void OnStreamWritable(QuicConnection& c, int64_t s) override {
    if (cb_.on_stream_writable) cb_.on_stream_writable(c, s);
  }
  void OnStreamDataAcked(QuicConnection& c, int64_t s, uint64_t bytes) override {
    if (cb_.on_stream_data_acked) cb_.on_stream_data_acked(c, s, bytes);
  }
  void OnStreamClosed(QuicConnection& c, int64_t s) override {
    if (cb_.on_stream_closed) cb_.on_stream_closed(c, s);
  }
  void OnShutdown(QuicConnection& c) override {
    if (cb_.on_shutdown) cb_.on_shutdown(c);
  }
  bool IsIdle(QuicConnection& c) override {
    return cb_.is_idle ? cb_.is_idle(c) : c.open_streams() == 0;
  }
  void OnConnectionClosed(QuicConnection& c) override {
    if (cb_.on_connection_closed) cb_.on_connection_closed(c);
  }

 private:
  const QuicServerCallbacks cb_;
};

}  // namespace petrel::quic

#endif  // PETREL_QUIC_SERVER_CALLBACK_OBSERVER_H_
