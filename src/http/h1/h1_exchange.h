// Internal: one request/response exchange on an HTTP/1.1 connection — the Request and Response
// the handler sees, and the H1Connection's bookkeeping for both directions: the request body's
// framing and flow (bytes delivered but not yet consumed by the handler), `Expect:
// 100-continue`, and the response's framing and body source.
//
// Owned by its H1Connection; exactly one exchange is current at a time (pipelined requests wait
// in the input buffer). It serves until its response is written and its request body is read or
// discarded, then waits until the end of the connection's current entry point (so nothing on
// the call stack still refers to it); then the connection Reset()s it and reuses it, buffers and
// all, for a later request — a steady stream of requests allocates no exchanges. Loop thread
// only.
#ifndef PETREL_HTTP_H1_H1_EXCHANGE_H_
#define PETREL_HTTP_H1_H1_EXCHANGE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "http/h1/body_framing.h"
#include "http/h1/chunked_decoder.h"
#include "petrel/common/clock.h"
#include "petrel/http/body.h"
#include "petrel/http/request.h"
#include "petrel/http/response.h"

namespace petrel::http {

class H1Connection;

class H1Exchange final : public ResponseSink, public RequestBodySource {
 public:
  explicit H1Exchange(H1Connection* connection) : connection_(connection) {}
  H1Exchange(const H1Exchange&) = delete;
  H1Exchange& operator=(const H1Exchange&) = delete;
  ~H1Exchange() override { request_.body().set_source(nullptr); }

  Request& request() { return request_; }
  const Request& request() const { return request_; }
  Response& response() { return response_; }

  // Back to the state of a new exchange, keeping the capacity of the request's, the response's
  // and the scratch buffers. Drops what the handler left behind (callbacks, producer, file).
  void Reset();

  // ResponseSink / RequestBodySource: forwarded to the connection, which only records work and
  // asks for a flush here (these run inside handler calls).
  void OnResponseStart(Response& response) override;
  void OnFirstRead() override;
  void OnConsumed(size_t bytes) override;
  void OnAbandoned() override;

  // ---- Request side ----
  std::optional<h1::FixedLengthBody> fixed;   // Content-Length body
  std::optional<h1::ChunkedDecoder> chunked;  // chunked body
  bool body_done = false;        // the whole body has been received (or the body failed)
  bool body_abandoned = false;   // the handler discarded the body
  bool discarding = false;       // unread-body rule: the engine drops the rest of the body
  uint64_t discarded = 0;        // bytes dropped while discarding
  size_t unconsumed = 0;         // delivered to the handler, not yet consumed
  bool expect_continue = false;  // `Expect: 100-continue` with a body to come
  bool continue_wanted = false;  // the handler started reading: send 100 if still possible
  bool continue_sent = false;
  bool keep_alive = true;    // what the request allows (RFC 9112 §9.3)
  bool te_trailers = false;  // `TE: trailers`: the client accepts response trailers
  bool head_request = false;
  // A request with Upgrade (Request::upgrade) and no body: its body stays open until the
  // response says whether the connection switches (101: the bytes that follow are the new
  // protocol's) or not (then it is empty, as any bodiless request's).
  bool upgrade_pending = false;
  bool upgrade_read = false;  // the handler started reading it before any 101
  bool tunnel = false;        // 101 sent: input and output are raw bytes until the close

  // ---- Response side ----
  bool response_started = false;  // the handler committed the response
  bool head_written = false;
  bool chunked_out = false;            // Transfer-Encoding: chunked
  bool send_trailers = false;          // chunked and te_trailers
  bool discard_output = false;         // HEAD / 204 / 304: a producer is drained, nothing sent
  bool close_after = false;            // the head said Connection: close (or it must be closed)
  std::optional<uint64_t> out_length;  // Content-Length sent, checked against the producer
  uint64_t out_sent = 0;
  std::unique_ptr<BodyProducer> producer;
  // The body is the Response's own buffer: copied into the output as is (no producer).
  bool buffer_out = false;
  // A file body: sendfile on cleartext above a size threshold (open until the stream sent it),
  // otherwise pread straight into the output, at out_sent.
  std::optional<FileBody> file;
  bool file_in_flight = false;  // handed to TcpStream::SendFile
  std::string scratch;          // producer output, reused
  // Fields the request's HeaderMap has room for (its capacity survives Reset).
  size_t fields_reserved = 0;
  bool response_done = false;  // every byte of the response was handed to the TcpStream
  TimePoint started;           // the head was parsed (only with a RequestObserver)
  int engine_status = 0;       // the engine answered instead of the handler (408, 413 ...)

 private:
  H1Connection* const connection_;
  Request request_;
  Response response_;
};

}  // namespace petrel::http

#endif  // PETREL_HTTP_H1_H1_EXCHANGE_H_
