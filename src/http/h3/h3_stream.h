// Internal: the state of one h3 request stream inside an H3Connection — the Request and
// Response the handler sees, and the engine's bookkeeping for both directions: request-body
// credit (QUIC flow control goes back only when the handler consumed bytes) and the response
// producer nghttp3 pulls DATA from.
//
// Owned by its H3Connection; lives until nghttp3 closes the stream (or the connection ends),
// then until the end of the connection's current entry point, so nothing on the call stack still
// refers to it. Loop thread only.
#ifndef PETREL_HTTP_H3_H3_STREAM_H_
#define PETREL_HTTP_H3_H3_STREAM_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "http/h3/h3_output.h"
#include "http/received_head.h"
#include "petrel/common/clock.h"
#include "petrel/http/body.h"
#include "petrel/http/header_map.h"
#include "petrel/http/request.h"
#include "petrel/http/response.h"

namespace petrel::http {

class H3Connection;

class H3Stream final : public ResponseSink, public RequestBodySource {
 public:
  H3Stream(H3Connection* connection, int64_t id) : connection_(connection), id_(id) {}
  H3Stream(const H3Stream&) = delete;
  H3Stream& operator=(const H3Stream&) = delete;
  ~H3Stream() override { request_.body().set_source(nullptr); }

  // A finished stream's object goes back to its thread's pool: Clear drops everything the
  // request held (producer, body, callbacks) but keeps the capacity of its strings and field
  // maps; Bind makes it stream `id` of `connection`. Keep Clear in step with the fields below.
  void Clear();
  void Bind(H3Connection* connection, int64_t id) {
    connection_ = connection;
    id_ = id;
  }

  int64_t id() const { return id_; }
  Request& request() { return request_; }
  Response& response() { return response_; }

  // ResponseSink / RequestBodySource: forwarded to the connection, which only records and
  // schedules work here (these may run inside handler calls).
  void OnResponseStart(Response& response) override;
  void OnFirstRead() override {}
  void OnConsumed(size_t bytes) override;
  void OnAbandoned() override;

  // ---- Request side ----
  // Pseudo-headers go into the Request as they arrive; what the checks at the end of the head
  // need to know of them stays here.
  enum PseudoHeader : uint8_t {
    kMethod = 1,
    kScheme = 2,
    kAuthority = 4,
    kPath = 8,
    kProtocol = 16
  };
  uint8_t pseudo_seen = 0;     // PseudoHeader bits
  bool scheme_http = false;    // :scheme is http or https, which need an authority
  bool path_origin = false;    // :path starts with '/'
  bool path_asterisk = false;  // :path is "*"
  bool malformed = false;      // a field the engine refuses (H3_MESSAGE_ERROR)
  http_internal::ReceivedHead head;
  bool in_trailers = false;     // between begin_trailers and end_trailers
  HeaderMap trailers;           // request trailers being received
  bool dispatched = false;      // the handler (or an engine answer) ran
  uint64_t body_received = 0;   // DATA payload bytes received
  size_t unconsumed = 0;        // delivered to the handler, credit not yet returned
  bool body_abandoned = false;  // the handler discarded the body, or the limit was hit
  bool peer_ended = false;      // the request's FIN arrived (or the watchdog gave up on it)
  TimePoint peer_active;        // its last DATA arrived, or the watchdog first saw it

  // ---- Response side ----
  std::unique_ptr<BodyProducer> producer;
  // A file body is read by the engine itself, into BodyBlocks (no producer, no zero fill).
  std::optional<FileBody> file;
  uint64_t file_position = 0;   // bytes of the file's range handed to nghttp3
  bool buffer_pending = false;  // the buffer body (left in the Response) is not read yet
  H3ChunkQueue out;             // body bytes handed to nghttp3 and not yet acknowledged by it
  uint64_t acked = 0;           // body bytes the peer has acknowledged
  uint64_t acked_seen = 0;      // `acked` when the watchdog last looked
  TimePoint send_active;        // the watchdog last saw acknowledgements (or first saw bytes wait)
  bool producer_ended = false;
  HeaderMap response_trailers;  // taken at the body's end, submitted by the next flush
  bool discard_body = false;    // HEAD: pull the producer to its end, send no bytes
  bool response_submitted = false;
  bool response_done = false;  // the response was handed to QUIC completely (FIN queued)
  bool reset = false;          // the stream was reset (either side)
  bool closed = false;         // nghttp3 (or the connection) closed the stream
  TimePoint started;           // dispatched (only with a RequestObserver)
  uint64_t body_sent = 0;      // DATA payload bytes handed to nghttp3
  bool reported = false;       // the RequestObserver heard of it
  // Response field values nghttp3 refers to (NO_COPY) until it has encoded the HEADERS frame.
  char length_text[24] = {};

 private:
  H3Connection* connection_;
  int64_t id_;
  Request request_;
  Response response_;
};

}  // namespace petrel::http

#endif  // PETREL_HTTP_H3_H3_STREAM_H_
