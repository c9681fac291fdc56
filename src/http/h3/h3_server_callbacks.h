// Internal: the glue between QuicServer and the h3 engine — QuicServerCallbacks that give each
// QUIC connection an H3Connection (its AppData, created on the first callback, since 0-RTT
// stream data may come before the handshake completes) and route every callback into it.
#ifndef PETREL_HTTP_H3_H3_SERVER_CALLBACKS_H_
#define PETREL_HTTP_H3_H3_SERVER_CALLBACKS_H_

#include "http/h3/h3_connection.h"
#include "petrel/quic/quic_connection.h"
#include "petrel/quic/quic_server.h"

namespace petrel::http {

// Immutable after construction: one instance serves every worker thread of a QuicServer. It must
// outlive the QuicServer whose callbacks Build() made (they refer to it).
class H3ServerCallbacks {
 public:
  explicit H3ServerCallbacks(H3Dispatcher dispatcher, const H3Options& options = {});
  H3ServerCallbacks(const H3ServerCallbacks&) = delete;
  H3ServerCallbacks& operator=(const H3ServerCallbacks&) = delete;

  // For QuicServer::Create (with alpn {"h3"}).
  QuicServerCallbacks Build() const;

  // The connection's engine; with `create`, makes it if there is none yet. Connection thread.
  H3Connection* Get(QuicConnection& conn, bool create) const;

  const H3Options& options() const { return options_; }

 private:
  const H3Dispatcher dispatcher_;
  const H3Options options_;
};

}  // namespace petrel::http

#endif  // PETREL_HTTP_H3_H3_SERVER_CALLBACKS_H_
