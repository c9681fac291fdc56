// H1Connection's output side: 100 Continue, the response head and its framing, the body
// (sendfile, or pulled from a producer under backpressure), engine-generated error responses,
// and retiring an exchange under the unread-body rule.
#include <errno.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "http/ascii.h"
#include "http/h1/h1_connection.h"
#include "http/h1/response_writer.h"
#include "petrel/http/status.h"

namespace petrel::http {

void H1Connection::SendOut() {
  if (out_.empty() || closed_) return;
  if (!stream_->Write(out_.Readable())) write_blocked_ = true;
  out_.ConsumeAll();
}

bool H1Connection::WriteOutput(size_t* produced) {
  if (current_ == nullptr || closed_) return false;
  H1Exchange& ex = *current_;
  bool progress = false;
  if (ex.continue_wanted && !ex.continue_sent && !ex.head_written && !ex.body_done) {
    ex.continue_sent = true;
    ex.continue_wanted = false;
    ++continues_sent_;
    h1::WriteContinue(out_);
    SendOut();
    progress = true;
  }
  if (!ex.response_started || closed_) return progress;
  if (!ex.head_written) {
    WriteHead(ex);
    progress = true;
    if (closed_ || current_ == nullptr) {
      SendOut();
      return true;
    }
  }
  if (!ex.response_done) progress |= WriteBody(ex, produced);
  // The head waits in out_ for the first body bytes, so that a small response leaves in one
  // write; whatever is there goes out now.
  SendOut();
  return progress;
}

bool H1Connection::CanDiscardRest(const H1Exchange& ex, bool at_head) const {
  if (ex.body_done) return true;
  // A body refused as too large is not read for nothing, however small the excess.
  if (ex.request().body().KnownOverLimit()) return false;
  // The client waits for a 100 that will not come: it may never send the body, or send all of
  // it later; either way the connection cannot be reused safely.
  if (ex.expect_continue && !ex.continue_sent) return false;
  if (ex.fixed.has_value()) return ex.fixed->remaining() <= kMaxDiscard;
  // Chunked: the size of the rest is unknown in advance; once the response is out the engine
  // tries (up to kMaxDiscard bytes).
  return !at_head;
}

void H1Connection::WriteHead(H1Exchange& ex) {
  ex.head_written = true;
  Response& res = ex.response();
  const int status = res.status();
  if (status == 101) {
    if (ex.upgrade_pending) return WriteSwitchingHead(ex);
    stream_->Close(absl::InternalError("h1: 101 for a request that did not ask to upgrade"));
    return;
  }
  if (ex.upgrade_pending) EndUpgradeBody(ex);  // no switch: its body was empty
  const HttpVersion version = ex.request().version();
  const bool bodiless_status = status < 200 || status == 204 || status == 304;
  const bool is_producer = res.body().kind() == ResponseBody::Kind::kProducer;
  const std::optional<uint64_t> length = res.body().length();

  bool keep_alive = ex.keep_alive && !shutdown_requested_ && !ex.close_after;
  // The handler answered without reading the body: decide now whether the rest can be
  // discarded, so the head can say Connection: close when it cannot. A response that is not
  // produced is complete, so the body is abandoned already (the unread-body rule); what of it
  // has arrived is dropped first, which settles a small chunked body, or one sent after
  // `Expect: 100-continue` without waiting, that came whole with the request.
  const bool reading = ex.request().body().read_started() && !ex.body_abandoned;
  if (!ex.body_done && !reading && !is_producer && !ex.close_after) DropArrivedBody(ex);
  if (!ex.body_done && !reading && !CanDiscardRest(ex, /*at_head=*/true)) keep_alive = false;

  h1::HeadFraming framing;
  const bool want_trailers = ex.te_trailers && version == HttpVersion::k11 && !bodiless_status &&
                             !ex.head_request &&
                             (!res.trailers().empty() || (is_producer && !length.has_value()));
  if (!bodiless_status) {
    if (length.has_value() && !want_trailers) {
      framing.content_length = length;
      ex.out_length = length;
    } else if (version == HttpVersion::k11) {
      if (!ex.head_request) ex.chunked_out = true;
      framing.chunked = true;
    } else if (!ex.head_request) {
      keep_alive = false;  // HTTP/1.0, unknown length: the close delimits the body
    }
  }
  ex.send_trailers = ex.chunked_out && ex.te_trailers;
  if (!keep_alive) {
    ex.close_after = true;
    framing.connection = "close";
  } else if (version == HttpVersion::k10) {
    framing.connection = "keep-alive";
  }
  // 426 must name what to upgrade to (RFC 9110 §15.5.22); Upgrade is a connection option, so
  // Connection lists it.
  if (status == 426) {
    if (const std::optional<absl::string_view> upgrade = res.headers().Get("upgrade")) {
      framing.upgrade = *upgrade;
      framing.connection = !keep_alive                   ? absl::string_view("Upgrade, close")
                           : version == HttpVersion::k10 ? absl::string_view("Upgrade, keep-alive")
                                                         : absl::string_view("Upgrade");
    }
  }
  if (absl::Status st = h1::WriteResponseHead(status, res.headers(), framing, date_cache_->Get(),
                                              out_, &head_memo_);
      !st.ok()) {
    out_.ConsumeAll();
    stream_->Close(absl::InternalError(absl::StrCat("h1: bad response head: ", st.message())));
    return;
  }

  ex.discard_output = ex.head_request || bodiless_status;
  if (ex.discard_output && !is_producer) {
    ex.response_done = true;  // nothing to send; a buffer or file is just dropped
    return;
  }
  if (!ex.chunked_out && res.body().buffer() != nullptr) {
    ex.buffer_out = true;  // WriteBody copies it after the head
    return;
  }
  if (FileBody* file = res.body().file(); file != nullptr && !ex.chunked_out) {
    ex.file.emplace(std::move(*file));
    if (ex.file->length() == 0) {
      ex.response_done = true;
      return;
    }
    // Small files are read into the write that carries the head: one send instead of a send
    // plus a sendfile.
    if (!options_.use_sendfile || stream_->tls() || ex.file->length() < options_.sendfile_min) {
      return;  // WriteBody preads it
    }
    SendOut();  // the head first
    if (closed_) return;
    if (!stream_->SendFile(ex.file->fd(), static_cast<off_t>(ex.file->offset()),
                           static_cast<size_t>(ex.file->length()))) {
      stream_->Close(absl::InternalError("h1: sendfile refused"));
      return;
    }
    ex.file_in_flight = true;
    ++sendfile_responses_;
    return;
  }
  ex.producer = res.body().ReleaseAsProducer();
  ex.producer->SetResumeCallback([this] { RequestPump(); });
  if (shutdown_requested_) ex.producer->OnServerStopping();
}

void H1Connection::WriteSwitchingHead(H1Exchange& ex) {
  // RFC 9110 §15.2.2: 101 names the protocol in Upgrade; the connection then carries it until
  // either side closes, so the exchange ends the connection.
  ex.upgrade_pending = false;
  ex.tunnel = true;
  ex.close_after = true;
  Response& res = ex.response();
  h1::HeadFraming framing;
  framing.connection = "Upgrade";
  framing.upgrade = res.headers().Get("upgrade").value_or(ex.request().upgrade());
  if (absl::Status st =
          h1::WriteResponseHead(101, res.headers(), framing, date_cache_->Get(), out_, &head_memo_);
      !st.ok()) {
    out_.ConsumeAll();
    stream_->Close(absl::InternalError(absl::StrCat("h1: bad response head: ", st.message())));
    return;
  }
  ex.producer = res.body().ReleaseAsProducer();
  ex.producer->SetResumeCallback([this] { RequestPump(); });
  if (shutdown_requested_) ex.producer->OnServerStopping();
}

bool H1Connection::WriteBufferBody(H1Exchange& ex, size_t* produced) {
  const std::string& bytes = *ex.response().body().buffer();
  bool progress = false;
  while (!write_blocked_ && !closed_ && !ex.response_done &&
         *produced < options_.write_share_per_event) {
    const size_t n = std::min<size_t>(bytes.size() - ex.out_sent, options_.max_output_chunk);
    out_.Append(bytes.data() + ex.out_sent, n);
    ex.out_sent += n;
    *produced += n;
    ex.response_done = ex.out_sent == bytes.size();
    progress = true;
    SendOut();
    if (!closed_) max_pending_output_ = std::max(max_pending_output_, stream_->pending_output());
  }
  return progress;
}

bool H1Connection::WriteFileBody(H1Exchange& ex, size_t* produced) {
  const FileBody& file = *ex.file;
  bool progress = false;
  while (!write_blocked_ && !closed_ && !ex.response_done &&
         *produced < options_.write_share_per_event) {
    const size_t n = static_cast<size_t>(
        std::min<uint64_t>(file.length() - ex.out_sent, options_.max_output_chunk));
    char* tail = out_.WritableTail(n);
    ssize_t r;
    do {
      r = pread(file.fd(), tail, n, static_cast<off_t>(file.offset() + ex.out_sent));
    } while (r < 0 && errno == EINTR);
    if (r <= 0) {
      // The peer must not take a short body as complete: close without it.
      stream_->Close(r < 0 ? absl::ErrnoToStatus(errno, "h1: pread")
                           : absl::DataLossError("h1: file shorter than its announced length"));
      return true;
    }
    out_.CommitWrite(static_cast<size_t>(r));
    ex.out_sent += static_cast<uint64_t>(r);
    *produced += static_cast<size_t>(r);
    ex.response_done = ex.out_sent == file.length();
    if (ex.response_done) ex.file.reset();
    progress = true;
    SendOut();
    if (!closed_) max_pending_output_ = std::max(max_pending_output_, stream_->pending_output());
  }
  return progress;
}

bool H1Connection::WriteBody(H1Exchange& ex, size_t* produced) {
  if (ex.file_in_flight) {
    if (stream_->pending_output() != 0) return false;  // OnWritable when it went out
    ex.file_in_flight = false;
    ex.out_sent = ex.file->length();
    ex.file.reset();
    ex.response_done = true;
    return true;
  }
  if (ex.buffer_out) return WriteBufferBody(ex, produced);
  if (ex.file.has_value()) return WriteFileBody(ex, produced);
  if (ex.producer == nullptr) return false;
  bool progress = false;
  while (!write_blocked_ && !closed_ && !ex.response_done &&
         *produced < options_.write_share_per_event) {
    ex.scratch.clear();
    const BodyReadResult r = ex.producer->Read(options_.max_output_chunk, &ex.scratch);
    if (r.status == BodyReadStatus::kWouldBlock) break;  // the resume callback pumps again
    if (r.status == BodyReadStatus::kError) {
      // No terminating chunk / short body: the peer must not take the response as complete.
      stream_->Close(absl::AbortedError(absl::StrCat("h1: response body: ", r.error.message())));
      return true;
    }
    progress = true;
    const size_t n = ex.scratch.size();
    *produced += n;
    if (!ex.discard_output && n > 0) {
      if (ex.out_length.has_value() && ex.out_sent + n > *ex.out_length) {
        stream_->Close(absl::InternalError("h1: body longer than its Content-Length"));
        return true;
      }
      ex.out_sent += n;
      if (ex.chunked_out) {
        h1::WriteChunk(ex.scratch, out_);
      } else {
        out_.Append(ex.scratch);
      }
    }
    if (r.status == BodyReadStatus::kEnd) {
      if (!ex.discard_output && ex.out_length.has_value() && ex.out_sent != *ex.out_length) {
        SendOut();
        stream_->Close(absl::InternalError("h1: body shorter than its Content-Length"));
        return true;
      }
      if (ex.chunked_out) {
        HeaderMap trailers;
        if (ex.send_trailers) {
          trailers = ex.response().trailers();
          for (const HeaderField f : ex.producer->TakeTrailers()) trailers.Add(f.name, f.value);
        }
        if (!h1::WriteLastChunk(ex.send_trailers ? &trailers : nullptr, out_).ok()) {
          (void)h1::WriteLastChunk(nullptr, out_);  // invalid trailers are dropped
        }
      }
      ex.response_done = true;
    }
    SendOut();
    if (!closed_) max_pending_output_ = std::max(max_pending_output_, stream_->pending_output());
  }
  return progress;
}

bool H1Connection::MaybeRetire() {
  if (current_ == nullptr || closed_ || finishing_) return false;
  H1Exchange& ex = *current_;
  if (!ex.response_done) return false;
  if (ex.close_after) {
    DropCurrent();
    Finish();
    return true;
  }
  if (!ex.body_done) {
    if (ex.discarding) return false;  // ReadBody drops the rest
    if (!CanDiscardRest(ex, /*at_head=*/false)) {
      DropCurrent();
      Finish();
      return true;
    }
    // The unread-body rule: drop what is buffered and what follows, then serve the next
    // request. The handler hears nothing more of this body.
    StartDiscarding(ex);
    return true;
  }
  DropCurrent();
  if (shutdown_requested_) Finish();
  return true;
}

void H1Connection::StartDiscarding(H1Exchange& ex) {
  ex.discarding = true;
  ex.request().body().set_source(nullptr);
  ex.request().body().Discard();
  ex.unconsumed = 0;
}

void H1Connection::DropArrivedBody(H1Exchange& ex) {
  StartDiscarding(ex);
  ByteBuffer& in = stream_->input();
  while (!ex.body_done && !in.empty() && ex.discarded <= kMaxDiscard) {
    if (ex.fixed.has_value()) {
      const size_t n = ex.fixed->Take(in.Readable()).size();
      ex.discarded += n;
      ex.body_done = ex.fixed->done();
      in.Consume(n);
      continue;
    }
    const h1::ChunkedDecoder::Result r = ex.chunked->Decode(in.Readable());
    // A malformed body is left to ReadBody, which answers it once the head is out (by closing).
    if (r.status == h1::ChunkedDecoder::Status::kError) return;
    if (r.status == h1::ChunkedDecoder::Status::kData) ex.discarded += r.data.size();
    if (r.status == h1::ChunkedDecoder::Status::kDone) ex.body_done = true;
    in.Consume(r.consumed);
    if (r.status == h1::ChunkedDecoder::Status::kNeedMore) return;
  }
}

namespace {

// Error pages larger than this are not sent on a connection that is about to close (the
// built-in page is): the page is read at once, in the loop thread.
constexpr uint64_t kMaxClosingPage = 1 << 20;

// The bytes of a committed error page's body: its buffer, or its file read whole. False for a
// producer or a file that is too large or unreadable.
bool TakePageBody(Response& page, std::string* bytes) {
  ResponseBody& body = page.body();
  if (body.buffer() != nullptr) {
    *bytes = body.TakeBuffer();
    return true;
  }
  const FileBody* file = body.file();
  if (file == nullptr || file->length() > kMaxClosingPage) return false;
  bytes->resize(file->length());
  size_t done = 0;
  while (done < bytes->size()) {
    const ssize_t n = pread(file->fd(), bytes->data() + done, bytes->size() - done,
                            static_cast<off_t>(file->offset() + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

void H1Connection::SendErrorAndFinish(int status, absl::string_view reason) {
  if (closed_ || finishing_) return;
  ++error_responses_;
  // The page comes from the site's error handler: the dispatcher answers a rejected Response
  // with it, synchronously. A head that never became a request has a request with the
  // connection's facts only.
  Request scratch;
  const bool head_request = current_ != nullptr && current_->head_request;
  Request& req = current_ != nullptr ? current_->request() : scratch;
  if (current_ == nullptr) {
    scratch.set_version(HttpVersion::k11);
    scratch.set_scheme(stream_->tls() ? "https" : "http");
    scratch.set_peer_address(stream_->peer());
    scratch.set_local_address(stream_->local());
    scratch.set_alpn(alpn_);
    scratch.set_sni(sni_);
  }
  Response page;
  page.Reject(status, reason);
  dispatcher_(req, page);
  if (page.rejected_status() != 0) page.SendError(status, reason);  // no Router: built-in
  std::string body;
  Response built_in;
  Response* sent = &page;
  if (!page.committed() || !TakePageBody(page, &body)) {
    built_in.SendError(status, reason);
    body = built_in.body().TakeBuffer();
    sent = &built_in;
  }
  h1::HeadFraming framing;
  framing.content_length = body.size();
  framing.connection = "close";
  if (head_request) body.clear();  // the head says how long the page is (RFC 9110 §9.3.2)
  if (current_ != nullptr) {
    current_->engine_status = sent->status();
    current_->out_sent = body.size();
    DropCurrent();
  } else if (options_.observer != nullptr) {
    // Bytes that never became a request (parse error, head timeout): reported without one.
    RequestRecord r;
    r.protocol = HttpProtocol::kHttp1;
    r.peer = &stream_->peer();
    r.status = sent->status();
    r.body_bytes = body.size();
    r.start = MonotonicNow();
    r.completed = true;
    options_.observer->OnRequestDone(r);
  }
  if (h1::WriteResponseHead(sent->status(), sent->headers(), framing, date_cache_->Get(), out_)
          .ok()) {
    out_.Append(body);
    SendOut();
  }
  if (closed_) return;
  stream_->input().ConsumeAll();  // nothing after a bad request is processed
  Finish();
}

}  // namespace petrel::http
