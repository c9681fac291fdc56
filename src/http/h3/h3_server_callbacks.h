// Internal: the glue between QuicServer and the h3 engine — QuicServerCallbacks that give each
// QUIC connection an H3Connection (its AppData, created on the first callback, since 0-RTT
// stream data may come before the handshake completes) and route every callback into it.
#ifndef PETREL_HTTP_H3_H3_SERVER_CALLBACKS_H_
#define PETREL_HTTP_H3_H3_SERVER_CALLBACKS_H_

#include <atomic>
#include <memory>
#include <mutex>
#include <vector>

#include "http/h3/h3_connection.h"
#include "petrel/quic/quic_connection.h"
#include "petrel/quic/quic_server.h"

namespace petrel::http {

// One instance serves every worker thread of a QuicServer. It must outlive the QuicServer whose
// callbacks Build() made (they refer to it).
//
// Reloads: Replace() gives connections created from then on another dispatcher and options;
// a connection keeps the pair it started with until it closes (so every earlier pair is kept
// until this object goes: a few hundred bytes per reload). One atomic load per connection.
class H3ServerCallbacks {
 public:
  explicit H3ServerCallbacks(H3Dispatcher dispatcher, const H3Options& options = {});
  H3ServerCallbacks(const H3ServerCallbacks&) = delete;
  H3ServerCallbacks& operator=(const H3ServerCallbacks&) = delete;

  // For QuicServer::Create (with alpn {"h3"}).
  QuicServerCallbacks Build() const;

  // The connection's engine; with `create`, makes it if there is none yet. Connection thread.
  H3Connection* Get(QuicConnection& conn, bool create) const;

  // Connections from now on dispatch through `dispatcher` with `options`. Any thread.
  void Replace(H3Dispatcher dispatcher, const H3Options& options);

  // The options new connections get. Any thread.
  const H3Options& options() const { return current_.load(std::memory_order_acquire)->options; }

 private:
  struct Generation {
    H3Dispatcher dispatcher;
    H3Options options;
  };

  std::mutex mu_;
  std::vector<std::unique_ptr<const Generation>> generations_;  // guarded by mu_; all of them
  std::atomic<const Generation*> current_{nullptr};
};

}  // namespace petrel::http

#endif  // PETREL_HTTP_H3_H3_SERVER_CALLBACKS_H_
