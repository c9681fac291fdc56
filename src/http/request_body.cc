// RequestBody: the handler-paced request body stream declared in petrel/http/body.h.
#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "petrel/http/body.h"

namespace petrel {

void RequestBody::Read(DataCallback on_data, ErrorCallback on_error) {
  if (reading_ || finished_ || abandoned_) return;
  reading_ = true;
  on_data_ = std::move(on_data);
  on_error_ = std::move(on_error);
  if (!error_.ok()) {
    on_data_ = nullptr;
    auto callback = std::exchange(on_error_, nullptr);
    if (callback) callback(error_);
    return;
  }
  if (source_ != nullptr) source_->OnFirstRead();
  if (CanDispatch()) Pump({});
}

void RequestBody::ReadAll(size_t limit, ReadAllCallback done) {
  if (reading_ || finished_ || abandoned_) return;
  if (expected_length_.has_value() && *expected_length_ > limit) {
    Discard();
    if (done)
      done(absl::ResourceExhaustedError(
          absl::StrCat("request body of ", *expected_length_, " bytes exceeds ", limit)));
    return;
  }
  read_all_limit_ = limit;
  read_all_done_ = std::move(done);
  read_all_body_.clear();
  if (expected_length_.has_value()) read_all_body_.reserve(static_cast<size_t>(*expected_length_));
  Read([this](absl::string_view chunk, bool last) { OnReadAllChunk(chunk, last); },
       [this](const absl::Status& status) {
         auto callback = std::exchange(read_all_done_, nullptr);
         read_all_body_.clear();
         if (callback) callback(status);
       });
}

void RequestBody::OnReadAllChunk(absl::string_view chunk, bool last) {
  if (chunk.size() > read_all_limit_ - read_all_body_.size()) {
    auto callback = std::exchange(read_all_done_, nullptr);
    read_all_body_.clear();
    read_all_body_.shrink_to_fit();
    Discard();
    if (callback)
      callback(absl::ResourceExhaustedError(
          absl::StrCat("request body exceeds ", read_all_limit_, " bytes")));
    return;
  }
  read_all_body_.append(chunk.data(), chunk.size());
  if (!last) return;
  auto callback = std::exchange(read_all_done_, nullptr);
  if (callback) callback(std::exchange(read_all_body_, std::string()));
}

void RequestBody::Resume() {
  paused_ = false;
  if (CanDispatch()) Pump({});
}

void RequestBody::Discard() {
  if (finished_ || abandoned_) return;
  abandoned_ = true;
  buffer_.clear();
  buffer_.shrink_to_fit();
  on_data_ = nullptr;
  on_error_ = nullptr;
  if (source_ != nullptr && error_.ok()) source_->OnAbandoned();
}

void RequestBody::Deliver(absl::string_view data, bool last) {
  if (eof_ || abandoned_ || !error_.ok()) return;
  eof_ = last;
  if (CanDispatch() && buffer_.empty()) {
    Pump(data);  // Fast path: the handler is reading, hand the engine's bytes over uncopied.
    return;
  }
  if (!data.empty()) buffer_.append(data.data(), data.size());
  if (CanDispatch()) Pump({});
}

void RequestBody::DeliverTrailers(HeaderMap trailers) {
  if (eof_ || abandoned_ || !error_.ok()) return;
  trailers_ = std::move(trailers);
  Deliver({}, true);
}

namespace {

// Empties `s` as a new string would be: heap bytes are freed, inline ones just cleared.
void EmptyLikeNew(std::string& s) {
  if (s.capacity() > std::string().capacity()) {
    std::string().swap(s);
  } else {
    s.clear();
  }
}

}  // namespace

void RequestBody::Reset() {
  // Field by field rather than destroying and rebuilding the body: most of it is already in a
  // new body's state (nothing was read, nothing failed), and those fields cost a test each.
  source_ = nullptr;
  expected_length_.reset();
  limit_ = UINT64_MAX;
  EmptyLikeNew(buffer_);
  if (!trailers_.empty() || trailers_.arena_size() != 0) trailers_ = HeaderMap();
  if (!error_.ok()) error_ = absl::OkStatus();
  on_data_ = nullptr;
  on_error_ = nullptr;
  read_all_done_ = nullptr;
  EmptyLikeNew(read_all_body_);
  read_all_limit_ = 0;
  reading_ = paused_ = eof_ = finished_ = abandoned_ = dispatching_ = false;
}

void RequestBody::Fail(absl::Status status) {
  if (finished_ || abandoned_ || !error_.ok()) return;
  error_ = status.ok() ? absl::UnknownError("request body failed") : std::move(status);
  buffer_.clear();
  on_data_ = nullptr;
  if (!reading_) return;  // Reported when the handler starts reading.
  auto callback = std::exchange(on_error_, nullptr);
  if (callback) callback(error_);
}

void RequestBody::Pump(absl::string_view direct) {
  dispatching_ = true;
  std::string taken;  // Owns a chunk moved out of buffer_ while the handler sees it.
  while (reading_ && !paused_ && !finished_ && !abandoned_ && error_.ok()) {
    absl::string_view chunk;
    if (!direct.empty()) {
      chunk = std::exchange(direct, absl::string_view());
    } else if (!buffer_.empty()) {
      taken.clear();
      taken.swap(buffer_);  // Later deliveries go to the (recycled) other allocation.
      chunk = taken;
    } else if (!eof_) {
      break;  // Out of data.
    }
    const bool last = eof_ && buffer_.empty() && direct.empty();
    if (last) finished_ = true;
    // Taken out while it runs: the handler may Discard() or get Fail()ed from inside.
    DataCallback callback = std::exchange(on_data_, nullptr);
    if (callback) callback(chunk, last);
    const bool alive = !abandoned_ && error_.ok();
    if (!last && alive && !on_data_) on_data_ = std::move(callback);
    if (!chunk.empty() && alive && source_ != nullptr) source_->OnConsumed(chunk.size());
    if (last) on_error_ = nullptr;
  }
  dispatching_ = false;
}

}  // namespace petrel
