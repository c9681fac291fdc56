// Internal: Http3Client::Impl, the client engine — an nghttp3 client session over one
// QuicClient connection, and the requests it carries.
//
// Requests wait in `waiting_` until a stream can be opened (before the handshake without
// 0-RTT, or at the server's stream limit), then live in `active_` by stream id. Like the server
// engine (H3Connection), nghttp3 is entered only from this object's entry points: QUIC
// callbacks, posted work and the public calls. Calls a handler makes from inside a callback
// (Submit, Cancel, pause) only record work; the outermost entry point then does it, flushes
// output and runs completions. Completions (on_complete) run last, outside nghttp3, so a
// handler may submit its next request from there.
//
// 0-RTT: requests submitted before the handshake go out in 0-RTT when resuming. If the server
// declines it, the transport forgets those streams; the session is rebuilt and the requests
// whose bodies can be sent again are requeued in order (the others fail).
#ifndef PETREL_HTTP_H3_H3_CLIENT_H_
#define PETREL_HTTP_H3_H3_CLIENT_H_

#include <nghttp3/nghttp3.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "http/h3/h3_output.h"
#include "petrel/http/http3_client.h"
#include "petrel/quic/quic_client.h"

namespace petrel {

// Unavailable, marked so that Http3Client::IsRefused knows the server did not process the
// request.
absl::Status RefusedError(absl::string_view message);

class Http3Client::Impl {
 public:
  struct Request {
    uint64_t id = 0;
    Http3Request request;
    Http3ResponseHandler handler;
    int64_t stream = -1;
    // Request body as a producer (null: no body). Pulled as nghttp3 asks.
    std::unique_ptr<BodyProducer> producer;
    bool producer_read = false;  // bytes were pulled: the body cannot be sent again
    bool producer_ended = false;
    bool trailers_due = false;
    http::H3ChunkQueue out;
    // Response.
    int status = 0;
    HeaderMap headers;
    HeaderMap trailers;
    size_t field_bytes = 0;
    bool head_done = false;
    bool in_trailers = false;
    bool ended = false;  // the response's end of stream arrived
    bool paused = false;
    std::string held;  // data that arrived while paused, not yet credited
    uint64_t reset_error = 0;
    absl::Status failure;  // set when the request fails before its stream closes
    bool done = false;
  };

  Impl(Http3ClientConfig config, Http3ClientCallbacks callbacks);
  ~Impl();

  absl::Status Init();
  absl::Status Connect();
  void Run();
  void Stop();
  void CloseWhenDone();
  absl::StatusOr<uint64_t> Submit(Http3Request request, Http3ResponseHandler handler);
  void Cancel(uint64_t id);
  void SetReadingPaused(uint64_t id, bool paused);

  size_t pending_requests() const { return requests_.size(); }
  QuicClient& quic() { return *quic_; }
  bool connected() const { return quic_->handshake_completed(); }
  bool closed() const { return quic_closed_; }
  size_t qpack_blocked_sections() const { return qpack_blocked_sections_; }

  // ---- nghttp3 callbacks (h3_client_callbacks.cc) ----
  int OnAckedStreamData(int64_t stream, uint64_t bytes);
  int OnStreamClose(int64_t stream, uint64_t app_error);
  int OnRecvData(int64_t stream, absl::string_view data);
  int OnDeferredConsume(int64_t stream, size_t bytes);
  int OnBeginHeaders(int64_t stream, bool trailers);
  int OnRecvHeader(int64_t stream, absl::string_view name, absl::string_view value);
  int OnEndHeaders(int64_t stream, bool trailers);
  int OnEndStream(int64_t stream);
  int OnResetStream(int64_t stream, uint64_t app_error);
  int OnGoaway(int64_t stream);
  nghttp3_ssize ReadBody(Request& r, nghttp3_vec* vec, size_t veccnt, uint32_t* pflags);
  static nghttp3_callbacks Callbacks();

 private:
  class Entry {
   public:
    explicit Entry(Impl* impl) : impl_(impl) { ++impl_->depth_; }
    ~Entry() {
      if (impl_->depth_ == 1) impl_->AfterEntry();
      --impl_->depth_;
    }
    Entry(const Entry&) = delete;
    Entry& operator=(const Entry&) = delete;

   private:
    Impl* const impl_;
  };

  // QUIC callbacks.
  void OnConnected();
  void OnStreamData(int64_t stream, absl::string_view data, bool fin);
  void OnStreamReset(int64_t stream, uint64_t app_error);
  void OnStreamWritable(int64_t stream);
  void OnStreamClosed(int64_t stream);
  void OnEarlyDataRejected();
  void OnClosed();

  // Creates the nghttp3 session and binds its three streams; false while the transport cannot
  // open them yet.
  bool StartSession();
  void DeleteSession();
  // Gives waiting requests streams, in order.
  void Pump();
  bool SubmitOnStream(Request& r, int64_t stream);
  // Ends a request's stream both ways (RESET_STREAM + STOP_SENDING) and fails it.
  void Abort(Request& r, uint64_t app_error, absl::Status why);
  void Finish(Request& r, absl::Status status);
  void DeliverHeld(Request& r);
  void Fail(int liberr);
  void RequestFlush();
  void AfterEntry();
  void Flush();
  Request* ByStream(int64_t stream);
  Request* ById(uint64_t id);

  Http3ClientConfig config_;
  Http3ClientCallbacks callbacks_;
  std::unique_ptr<QuicClient> quic_;
  QuicConnection* conn_ = nullptr;
  nghttp3_conn* h3_ = nullptr;
  std::string authority_;

  absl::flat_hash_map<uint64_t, std::unique_ptr<Request>> requests_;  // every pending request
  absl::flat_hash_map<int64_t, Request*> active_;                     // by stream
  std::deque<uint64_t> waiting_;                                      // ids without a stream
  std::vector<uint64_t> resumes_;   // requests whose body producer asked to resume
  std::vector<uint64_t> cancels_;   // Cancel() inside an entry point
  std::vector<uint64_t> unpaused_;  // held data to deliver
  std::vector<uint64_t> finished_;  // completions to run after the entry point
  absl::flat_hash_set<int64_t> blocked_;
  uint64_t next_id_ = 1;
  int64_t goaway_stream_ = -1;  // streams from here on are refused
  int depth_ = 0;
  bool flush_posted_ = false;
  bool close_when_done_ = false;
  bool close_sent_ = false;
  bool failed_ = false;
  bool quic_closed_ = false;
  // The stream whose bytes nghttp3 is reading: a field section that ends while another stream
  // is read (the encoder stream) had waited for QPACK inserts.
  int64_t reading_stream_ = -1;
  size_t qpack_blocked_sections_ = 0;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace petrel

#endif  // PETREL_HTTP_H3_H3_CLIENT_H_
