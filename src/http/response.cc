#include "petrel/http/response.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "petrel/common/event_loop.h"
#include "petrel/http/request.h"
#include "petrel/http/router.h"
#include "petrel/http/status.h"

namespace petrel {
namespace {

bool IsValidField(absl::string_view name, absl::string_view value) {
  return IsValidFieldName(name) && IsValidFieldValue(value);
}

}  // namespace

Response::~Response() = default;

void Response::set_status(int status) {
  if (!committed_) status_ = status;
}

bool Response::SetHeader(absl::string_view name, absl::string_view value) {
  if (committed_ || !IsValidField(name, value)) return false;
  headers_.Set(name, value);
  return true;
}

bool Response::AddHeader(absl::string_view name, absl::string_view value) {
  if (committed_ || !IsValidField(name, value)) return false;
  headers_.Add(name, value);
  return true;
}

void Response::Send(int status, std::string body) { Commit(status, ResponseBody(std::move(body))); }

void Response::Send(int status, std::string body, absl::string_view content_type) {
  if (committed_ || cancelled_) return;
  if (!content_type.empty()) SetHeader("Content-Type", content_type);
  Commit(status, ResponseBody(std::move(body)));
}

void Response::SendFile(int status, FileBody file, absl::string_view content_type) {
  if (committed_ || cancelled_) return;
  if (!content_type.empty()) SetHeader("Content-Type", content_type);
  Commit(status, ResponseBody(std::move(file)));
}

absl::Status Response::SendFile(int status, const std::string& path,
                                absl::string_view content_type) {
  if (committed_ || cancelled_) return absl::FailedPreconditionError("response already finished");
  absl::StatusOr<FileBody> file = FileBody::Open(path);
  if (!file.ok()) return file.status();
  SendFile(status, *std::move(file), content_type);
  return absl::OkStatus();
}

void Response::SendBody(int status, ResponseBody body) { Commit(status, std::move(body)); }

StreamingBody& Response::Stream(int status, size_t capacity) {
  if (committed_ || cancelled_ || rejected_status_ != 0) {
    if (detached_ == nullptr) {
      detached_ = std::make_unique<StreamingBody>(1);
      detached_->Fail(absl::FailedPreconditionError("response already committed or cancelled"));
    }
    return *detached_;
  }
  auto owned = std::make_unique<StreamingBody>(capacity);
  StreamingBody& stream = *owned;
  streaming_ = &stream;
  if (stream_idle_ > Duration::zero()) stream.SetIdleLimit(EventLoop::Current(), stream_idle_);
  Commit(status, ResponseBody(std::move(owned)));
  return stream;
}

void Response::FailStreamingBody(absl::Status why) {
  if (streaming_ != nullptr && !streaming_->closed()) streaming_->Fail(std::move(why));
}

void Response::SendError(int status, absl::string_view reason) {
  if (committed_ || cancelled_) return;
  rejected_status_ = 0;
  if (error_router_ != nullptr && error_request_ != nullptr && !in_error_handler_) {
    in_error_handler_ = true;
    error_router_->RenderError(HttpError{status, reason}, *error_request_, *this);
    in_error_handler_ = false;
    if (committed_ || cancelled_) return;
  }
  SendBuiltInError(status);
}

void Response::ExpireHandler(int status) {
  if (committed_ || cancelled_) return;
  auto callback = std::exchange(on_cancel_, nullptr);
  if (callback) callback();
  SendError(status, "the handler did not answer in time");
}

void Response::SendBuiltInError(int status) {
  if (status < 200 || status > 599) status = HttpStatus::kInternalServerError;
  const absl::string_view phrase = ReasonPhrase(status);
  headers_.Set("content-type", "text/plain; charset=utf-8");
  Commit(status, ResponseBody(phrase.empty() ? absl::StrCat(status, "\n")
                                             : absl::StrCat(status, " ", phrase, "\n")));
}

void Response::Commit(int status, ResponseBody&& body) {
  // A rejected request is answered by SendError (which clears the rejection) and nothing else.
  if (committed_ || cancelled_ || rejected_status_ != 0) return;
  if (hooks_ != nullptr && hooks_->running_commit) return;
  // 101 only answers an HTTP/1.1 request that asked to upgrade (Request::upgrade, which no
  // other engine sets): anything else would be a head its engine cannot send.
  const bool switching =
      status == 101 && error_request_ != nullptr && !error_request_->upgrade().empty();
  status_ =
      (status >= 200 && status <= 599) || switching ? status : HttpStatus::kInternalServerError;
  body_ = std::move(body);
  if (hooks_ != nullptr && !hooks_->commit.empty()) RunCommitHooks();
  committed_ = true;
  if (sink_ != nullptr) {
    sink_notified_ = true;
    sink_->OnResponseStart(*this);
  }
}

void Response::RunCommitHooks() {
  hooks_->running_commit = true;
  for (size_t i = hooks_->commit.size(); i-- > 0;) hooks_->commit[i](*this);
  hooks_->running_commit = false;
  if (status_ < 200 || status_ > 599) status_ = HttpStatus::kInternalServerError;
}

void Response::RunDone(const RequestRecord& record) {
  if (hooks_ == nullptr) return;
  // Run in place and emptied after, so that a recycled response keeps the vector's room.
  if (hooks_->running_done) return;
  hooks_->running_done = true;
  std::vector<absl::AnyInvocable<void(const RequestRecord&)>>& done = hooks_->done;
  for (size_t i = done.size(); i-- > 0;) done[i](record);
  done.clear();
  hooks_->running_done = false;
}

void Response::set_sink(ResponseSink* sink) {
  sink_ = sink;
  if (sink_ != nullptr && committed_ && !sink_notified_ && !cancelled_) {
    sink_notified_ = true;
    sink_->OnResponseStart(*this);
  }
}

void Response::Cancel() {
  if (cancelled_) return;
  cancelled_ = true;
  auto callback = std::exchange(on_cancel_, nullptr);
  if (callback) callback();
}

void Response::Reset() {
  status_ = 200;
  committed_ = false;
  cancelled_ = false;
  sink_notified_ = false;
  headers_.Clear();
  trailers_.Clear();
  body_.Clear();
  sink_ = nullptr;
  on_cancel_ = nullptr;
  detached_.reset();
  streaming_ = nullptr;
  error_router_ = nullptr;
  error_request_ = nullptr;
  in_error_handler_ = false;
  rejected_status_ = 0;
  rejection_reason_ = {};
  stream_idle_ = Duration::zero();
  if (hooks_ != nullptr) {
    hooks_->running_commit = false;
    hooks_->running_done = false;
    hooks_->commit.clear();
    hooks_->done.clear();
  }
}

}  // namespace petrel
