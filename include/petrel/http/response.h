// Public: an HTTP response as handlers build it and engines (h1, h2, h3) send it.
#ifndef PETREL_HTTP_RESPONSE_H_
#define PETREL_HTTP_RESPONSE_H_

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "petrel/common/clock.h"
#include "petrel/http/body.h"
#include "petrel/http/header_map.h"
#include "petrel/http/request_observer.h"

namespace petrel {

class Request;
class Response;
class Router;

// Engine-facing: how a Response tells its engine that the handler committed it.
class ResponseSink {
 public:
  virtual ~ResponseSink() = default;
  // Status, headers and body kind are final: send the head, then the body. For producer
  // bodies the engine installs its resume callback and pulls (see BodyProducer); for HEAD it
  // still pulls to the end, discarding the bytes, so a streaming handler completes. Called once,
  // often inside the handler's call: schedule output, do not destroy the Response here.
  virtual void OnResponseStart(Response& response) = 0;
};

// One response. The engine owns it next to its Request and keeps both alive until the response
// is sent or the stream is reset; a handler may keep the reference and commit later (from the
// loop thread). A handler that returns without committing must have arranged to commit later.
//
// Engines own framing: they set Content-Length / Transfer-Encoding from the body and drop
// connection-specific fields (Connection, Keep-Alive, ...) a handler set; responses to HEAD
// send no body bytes.
class Response {
 public:
  Response() = default;
  Response(const Response&) = delete;
  Response& operator=(const Response&) = delete;
  ~Response();

  // ---- Handler-facing (loop thread) ----

  int status() const { return status_; }
  // Before commit only; the Send* calls set it too.
  void set_status(int status);

  // Mutate before commit only; engines read them at OnResponseStart.
  HeaderMap& headers() { return headers_; }
  const HeaderMap& headers() const { return headers_; }
  // Sent after the body (h1 only with chunked framing and "TE: trailers"). For producer bodies
  // the producer's own trailers follow these.
  HeaderMap& trailers() { return trailers_; }
  const HeaderMap& trailers() const { return trailers_; }

  // Replace / append a field. False (and nothing changes) if the name is not a token, the value
  // is invalid (IsValidFieldValue: CR, LF, NUL, ... — response splitting) or the response is
  // already committed.
  bool SetHeader(absl::string_view name, absl::string_view value);
  bool AddHeader(absl::string_view name, absl::string_view value);

  // The committing calls: each sets the status and the body and hands the response to the
  // engine. Exactly one of them takes effect; later calls (and calls after cancellation) are
  // ignored. A status outside 200..599 becomes 500.
  void Send(int status, std::string body);
  // Also sets Content-Type (if non-empty and a valid field value).
  void Send(int status, std::string body, absl::string_view content_type);
  void SendFile(int status, FileBody file, absl::string_view content_type = {});
  // Opens `path` (FileBody::Open) and sends it; on error nothing is committed and the error is
  // returned so the handler can answer (404, 403, ...). FailedPrecondition if already committed.
  absl::Status SendFile(int status, const std::string& path, absl::string_view content_type = {});
  // Any body, e.g. a custom BodyProducer: SendBody(200, ResponseBody(std::move(producer))).
  void SendBody(int status, ResponseBody body);
  // Commits the head now and returns the body to write into; the reference is valid until the
  // stream ends (see SetOnCancel). If already committed or cancelled, returns a detached body
  // whose writes fail.
  StreamingBody& Stream(int status, size_t capacity = StreamingBody::kDefaultCapacity);

  // Commits the error response for `status`: the page the error handler of the router serving
  // the request renders (Router::SetErrorHandler), else the built-in one ("404 Not Found\n",
  // text/plain). `reason` says what went wrong, for the error handler and logs; the built-in
  // page never shows it. Ignored once committed, like the calls above. Petrel answers every
  // error it generates itself (404, 405, 413, 431, 500 for a handler that threw, ...) this way.
  void SendError(int status, absl::string_view reason = {});

  // Middleware hooks (see middleware.h). OnCommit: runs when the response is committed, before
  // the engine sends anything; it may change the status and the fields (commits inside it are
  // ignored). Hooks run innermost first — the last added first — so the outermost middleware
  // sees the final head. OnDone: runs once when the request is over — the response sent, or
  // the stream reset or the connection lost — with what happened (record.start is not set:
  // measure from your own clock); it must not call into the Response or the engine.
  void OnCommit(absl::AnyInvocable<void(Response&)> hook) {
    MutableHooks().commit.push_back(std::move(hook));
  }
  void OnDone(absl::AnyInvocable<void(const RequestRecord&)> hook) {
    MutableHooks().done.push_back(std::move(hook));
  }

  // Runs once if the stream is reset or the connection lost before the response completed.
  // After it returns the engine may destroy the Request and Response: drop every reference to
  // them (and to a StreamingBody) inside the callback.
  void SetOnCancel(absl::AnyInvocable<void()> on_cancel) { on_cancel_ = std::move(on_cancel); }

  bool committed() const { return committed_; }
  bool cancelled() const { return cancelled_; }

  // The body, for engines and for middleware that inspects it after commit.
  ResponseBody& body() { return body_; }
  const ResponseBody& body() const { return body_; }

  // ---- Engine-facing ----

  // Attach before running the handler; not owned. If the response is already committed,
  // OnResponseStart runs at once.
  void set_sink(ResponseSink* sink);
  // The stream ended abnormally before the response was sent: runs on_cancel once; later
  // commits are ignored.
  void Cancel();
  // Where SendError renders: the router serving `request` (Router::Handle sets itself); null:
  // the built-in page. Both must outlive the response's commit.
  void set_error_pages(const Router* router, const Request* request) {
    error_router_ = router;
    error_request_ = request;
  }
  // The engine rejects the request before any handler may see it (bad method, head too large,
  // a body over the limit, early data that may not be replayed): the dispatcher must answer it
  // with SendError(rejected_status(), rejection_reason()) instead of running a handler, and no
  // other commit takes effect until it does. `reason` must stay valid until then.
  void Reject(int status, absl::string_view reason) {
    rejected_status_ = status;
    rejection_reason_ = reason;
  }
  int rejected_status() const { return rejected_status_; }
  absl::string_view rejection_reason() const { return rejection_reason_; }

  // The request is over: runs the OnDone hooks (once; later calls do nothing).
  bool wants_done() const { return hooks_ != nullptr && !hooks_->done.empty(); }
  void RunDone(const RequestRecord& record);

  // Back to the state of a new Response, keeping the capacity of its header storage, for
  // engines that recycle Responses across streams (h2). Only when nothing refers to the
  // response any more: the body is dropped and on_cancel is dropped unrun.
  void Reset();

 private:
  // Its exception boundary fails a body the handler was streaming; its deadline expires
  // handlers; it sets the route's stream idle limit.
  friend class Router;

  void Commit(int status, ResponseBody&& body);
  void SendBuiltInError(int status);
  // The route's handler deadline passed uncommitted: runs on_cancel, then SendError(status).
  void ExpireHandler(int status);
  // The StreamingBody of Stream() fails (the engine resets the stream, or closes an HTTP/1.1
  // connection) unless it has ended. Only while it is valid: inside the handler's call.
  void FailStreamingBody(absl::Status why);

  int status_ = 200;
  bool committed_ = false;
  bool cancelled_ = false;
  bool sink_notified_ = false;
  HeaderMap headers_;
  HeaderMap trailers_;
  ResponseBody body_;
  ResponseSink* sink_ = nullptr;
  absl::AnyInvocable<void()> on_cancel_;
  // Returned by Stream() when it cannot stream, so a misusing handler gets failures, not UB.
  std::unique_ptr<StreamingBody> detached_;
  StreamingBody* streaming_ = nullptr;  // what Stream() committed (owned by the body's holder)
  const Router* error_router_ = nullptr;
  const Request* error_request_ = nullptr;
  bool in_error_handler_ = false;  // a SendError inside the error handler is the built-in page
  int rejected_status_ = 0;
  absl::string_view rejection_reason_;
  Duration stream_idle_ = Duration::zero();  // the route's, for the body Stream() makes
  // Middleware's hooks: made on first use, so a response without middleware pays one pointer
  // test where they would run; kept (emptied) by Reset for a recycled response.
  struct Hooks {
    bool running_commit = false;  // commits inside a commit hook are ignored
    bool running_done = false;    // RunDone runs the done hooks once
    std::vector<absl::AnyInvocable<void(Response&)>> commit;
    std::vector<absl::AnyInvocable<void(const RequestRecord&)>> done;
  };
  Hooks& MutableHooks() {
    if (hooks_ == nullptr) hooks_ = std::make_unique<Hooks>();
    return *hooks_;
  }
  void RunCommitHooks();
  std::unique_ptr<Hooks> hooks_;
};

}  // namespace petrel

#endif  // PETREL_HTTP_RESPONSE_H_
