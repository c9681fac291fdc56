// Internal: the state of one h2 request stream inside an H2Connection — the Request and
// Response the handler sees, and the engine's bookkeeping for both directions: request-body
// flow control (credit goes back to the peer only when the handler consumed bytes) and the
// response producer nghttp2 pulls DATA from.
//
// Owned by its H2Connection (which registers it as nghttp2 stream user data); lives until
// nghttp2 closes the stream, then until the end of the connection's current entry point, so
// nothing on the call stack still refers to it. Loop thread only.
#ifndef PETREL_HTTP_H2_H2_STREAM_H_
#define PETREL_HTTP_H2_H2_STREAM_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "petrel/common/clock.h"
#include "petrel/http/body.h"
#include "petrel/http/header_map.h"
#include "petrel/http/request.h"
#include "petrel/http/response.h"

namespace petrel::http {

class H2Connection;

class H2Stream final : public ResponseSink, public RequestBodySource {
 public:
  H2Stream(H2Connection* connection, int32_t id) : connection_(connection), id_(id) {}
  H2Stream(const H2Stream&) = delete;
  H2Stream& operator=(const H2Stream&) = delete;
  ~H2Stream() override { request_.body().set_source(nullptr); }

  int32_t id() const { return id_; }
  Request& request() { return request_; }
  Response& response() { return response_; }

  // ResponseSink / RequestBodySource: forwarded to the connection, which only records and
  // schedules work here (these may run inside handler calls).
  void OnResponseStart(Response& response) override;
  void OnFirstRead() override {}
  void OnConsumed(size_t bytes) override;
  void OnAbandoned() override;

  // ---- Request side ----
  std::string method;  // raw pseudo-header values until the request is built
  std::string scheme;
  std::string authority;
  std::string path;
  bool bad_request = false;  // a pseudo-header the engine cannot use (e.g. unknown method)
  size_t header_bytes = 0;   // RFC 9113 §6.5.2 size of the field section so far
  bool headers_too_large = false;
  HeaderMap trailers;           // request trailers being received
  bool dispatched = false;      // the handler (or an engine answer) ran
  uint64_t body_received = 0;   // DATA payload bytes received
  size_t unconsumed = 0;        // delivered to the handler, credit not yet returned
  bool body_abandoned = false;  // the handler discarded the body, or the limit was hit

  // ---- Response side ----
  std::unique_ptr<BodyProducer> producer;
  std::string out;  // bytes read from the producer, not yet copied into DATA frames
  size_t out_offset = 0;
  bool producer_ended = false;
  bool discard_body = false;  // HEAD: pull the producer to its end, send no bytes
  bool response_submitted = false;
  bool response_done = false;  // END_STREAM sent
  bool closed = false;         // nghttp2 closed the stream
  TimePoint started;           // dispatched (only with a RequestObserver)
  uint64_t body_sent = 0;      // DATA payload bytes handed to nghttp2
  bool reported = false;       // the RequestObserver heard of it

 private:
  H2Connection* const connection_;
  const int32_t id_;
  Request request_;
  Response response_;
};

}  // namespace petrel::http

#endif  // PETREL_HTTP_H2_H2_STREAM_H_
