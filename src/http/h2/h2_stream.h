// Internal: the state of one h2 request stream inside an H2Connection — the Request and
// Response the handler sees, and the engine's bookkeeping for both directions: request-body
// flow control (credit goes back to the peer only when the handler consumed bytes) and the
// response body nghttp2 pulls DATA from.
//
// Owned by its H2Connection (which registers it as nghttp2 stream user data); lives until
// nghttp2 closes the stream, then until the end of the connection's current entry point, so
// nothing on the call stack still refers to it. Then the connection recycles it for a later
// stream (Reset), keeping the capacity of its strings and header maps: a steady stream of
// requests allocates no streams. Loop thread only.
#ifndef PETREL_HTTP_H2_H2_STREAM_H_
#define PETREL_HTTP_H2_H2_STREAM_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "http/received_head.h"
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

  // Makes a closed stream (nothing refers to it any more) new again, releasing what its
  // request and response held (body source, file, callbacks) but keeping their storage.
  void Reset();
  // True if the storage it keeps is small enough to be worth keeping in a free list.
  bool Recyclable() const;

  int32_t id() const { return id_; }
  void set_id(int32_t id) { id_ = id; }
  Request& request() { return request_; }
  Response& response() { return response_; }

  // ResponseSink / RequestBodySource: forwarded to the connection, which only records and
  // schedules work here (these may run inside handler calls).
  void OnResponseStart(Response& response) override;
  void OnFirstRead() override {}
  void OnConsumed(size_t bytes) override;
  void OnAbandoned() override;

  // Where DATA comes from. Buffer and file bodies are read in place (from the Response's
  // buffer, or pread straight into nghttp2's frame buffer); only producers go through `out`.
  enum class Source : uint8_t { kNone, kBuffer, kFile, kProducer };

  // ---- Request side (pseudo-headers go straight into the Request as they arrive) ----
  http_internal::ReceivedHead head;
  HeaderMap trailers;           // request trailers being received
  bool dispatched = false;      // the handler (or an engine answer) ran
  uint64_t body_received = 0;   // DATA payload bytes received
  size_t unconsumed = 0;        // delivered to the handler, credit not yet returned
  bool body_abandoned = false;  // the handler discarded the body, or the limit was hit
  bool peer_ended = false;      // END_STREAM received (or the watchdog gave up on the body)
  TimePoint peer_active;        // its last DATA arrived, or the watchdog first saw it

  // ---- Response side ----
  Source source = Source::kNone;
  uint64_t source_offset = 0;  // bytes of the buffer / file range already sent
  uint64_t source_length = 0;  // buffer / file range length
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
  // The watchdog's view of a response the peer's flow-control window holds back: since when
  // (TimePoint() while the window is open) and body_sent then.
  TimePoint window_shut_since;
  uint64_t window_shut_sent = 0;
  bool reported = false;  // the RequestObserver heard of it
  size_t slot = 0;        // index in the connection's open-stream list
  // Response field values nghttp2 refers to (NO_COPY) until it has sent the HEADERS frame.
  std::string names;  // the response field names, lowercased (StartResponse)
  char length_text[24] = {};

 private:
  H2Connection* const connection_;
  int32_t id_;
  Request request_;
  Response response_;
};

inline void H2Stream::Reset() {
  request_.Reset();
  response_.Reset();
  head.Reset();
  trailers.Clear();
  dispatched = false;
  body_received = 0;
  unconsumed = 0;
  body_abandoned = false;
  peer_ended = false;
  peer_active = TimePoint();
  source = Source::kNone;
  source_offset = 0;
  source_length = 0;
  producer.reset();
  out.clear();
  out_offset = 0;
  producer_ended = false;
  discard_body = false;
  response_submitted = false;
  response_done = false;
  closed = false;
  started = TimePoint();
  body_sent = 0;
  window_shut_since = TimePoint();
  window_shut_sent = 0;
  reported = false;
}

inline bool H2Stream::Recyclable() const {
  // A stream that once carried big header sections or producer chunks would pin that memory in
  // the free list; such streams are freed instead.
  constexpr size_t kMaxKeptBytes = 4096;
  return request_.headers().arena_size() <= kMaxKeptBytes &&
         response_.headers().arena_size() <= kMaxKeptBytes &&
         trailers.arena_size() <= kMaxKeptBytes && out.capacity() <= kMaxKeptBytes &&
         names.capacity() <= kMaxKeptBytes;
}

}  // namespace petrel::http

#endif  // PETREL_HTTP_H2_H2_STREAM_H_
