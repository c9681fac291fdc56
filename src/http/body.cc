#include "petrel/http/body.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cassert>
#include <cerrno>
#include <utility>

#include "absl/strings/str_cat.h"
#include "petrel/common/event_loop.h"
#include "petrel/common/timer.h"

namespace petrel {
namespace {

// Serves a ResponseBody's bytes to an engine that wants a producer. The last bytes come with
// kEnd so h2/h3 can set END_STREAM on the final DATA frame.
class BufferProducer final : public BodyProducer {
 public:
  explicit BufferProducer(std::string bytes) : bytes_(std::move(bytes)) {}
  std::optional<uint64_t> Length() const override { return bytes_.size(); }

 private:
  BodyReadResult DoRead(size_t max_bytes, std::string* out) override {
    const size_t n = std::min(max_bytes, bytes_.size() - position_);
    if (position_ == 0 && n == bytes_.size() && out->empty()) {
      out->swap(bytes_);  // The whole body in one go: hand over the allocation.
      bytes_.clear();
      position_ = 0;
      return BodyReadResult::End();
    }
    out->append(bytes_, position_, n);
    position_ += n;
    return position_ == bytes_.size() ? BodyReadResult::End() : BodyReadResult::Data();
  }

  std::string bytes_;
  size_t position_ = 0;
};

// Shared bytes, copied out piece by piece (they are never handed over: others may send them).
class SharedBytesProducer final : public BodyProducer {
 public:
  explicit SharedBytesProducer(SharedBytes bytes) : bytes_(std::move(bytes)) {}
  std::optional<uint64_t> Length() const override { return bytes_.size(); }

 private:
  BodyReadResult DoRead(size_t max_bytes, std::string* out) override {
    const std::string& all = bytes_.bytes();
    const size_t n = std::min(max_bytes, all.size() - position_);
    out->append(all, position_, n);
    position_ += n;
    return position_ == all.size() ? BodyReadResult::End() : BodyReadResult::Data();
  }

  SharedBytes bytes_;
  size_t position_ = 0;
};

// Serves a FileBody through pread, for engines that cannot sendfile.
class FileProducer final : public BodyProducer {
 public:
  explicit FileProducer(FileBody file) : file_(std::move(file)) {}
  std::optional<uint64_t> Length() const override { return file_.length(); }

 private:
  BodyReadResult DoRead(size_t max_bytes, std::string* out) override {
    if (position_ == file_.length()) return BodyReadResult::End();
    absl::StatusOr<size_t> n = file_.ReadAt(position_, max_bytes, out);
    if (!n.ok()) return BodyReadResult::Error(n.status());
    position_ += *n;
    return position_ == file_.length() ? BodyReadResult::End() : BodyReadResult::Data();
  }

  FileBody file_;
  uint64_t position_ = 0;
};

}  // namespace

// ---- BodyProducer ----

BodyProducer::~BodyProducer() = default;

BodyReadResult BodyProducer::Read(size_t max_bytes, std::string* out) {
  assert(max_bytes > 0);
  parked_ = false;
  BodyReadResult result = DoRead(max_bytes, out);
  parked_ = result.status == BodyReadStatus::kWouldBlock;
  return result;
}

void BodyProducer::NotifyResume() {
  if (!parked_) return;
  parked_ = false;
  if (resume_) resume_();
}

// ---- StreamingBody ----

StreamingBody::StreamingBody(size_t capacity) : capacity_(std::max<size_t>(capacity, 1)) {}

StreamingBody::~StreamingBody() = default;

void StreamingBody::SetIdleLimit(EventLoop* loop, Duration idle) {
  idle_limit_ = idle;
  if (idle <= Duration::zero() || loop == nullptr) {
    idle_timer_.reset();
    return;
  }
  writes_checked_ = writes_;
  idle_timer_ = std::make_unique<Timer>(loop, [this, loop] {
    if (closed()) return;
    if (writes_ == writes_checked_ && buffered() == 0) {
      Fail(absl::DeadlineExceededError(absl::StrCat(
          "streaming response idle for ",
          std::chrono::duration_cast<std::chrono::milliseconds>(idle_limit_).count(), " ms")));
      return;
    }
    writes_checked_ = writes_;
    idle_timer_->StartAt(loop->now() + idle_limit_);
  });
  idle_timer_->StartAt(loop->now() + idle);
}

bool StreamingBody::Write(absl::string_view chunk) {
  if (closed()) return false;
  ++writes_;
  buffer_.append(chunk.data(), chunk.size());
  const bool full = buffered() >= capacity_;
  if (full) want_writable_ = true;
  // State is final before the engine hears of it.
  if (!chunk.empty()) NotifyResume();
  return !full;
}

void StreamingBody::SetOnWritable(absl::AnyInvocable<void()> on_writable) {
  on_writable_ = std::move(on_writable);
  // A Write returned false and the engine drained the buffer before the callback existed: run
  // it now rather than never.
  if (on_writable_ && want_writable_ && !closed() && buffered() <= capacity_ / 2) {
    want_writable_ = false;
    auto callback = std::exchange(on_writable_, nullptr);
    callback();
    if (!on_writable_) on_writable_ = std::move(callback);
  }
}

void StreamingBody::Finish(HeaderMap trailers) {
  if (closed()) return;
  finished_ = true;
  trailers_ = std::move(trailers);
  NotifyResume();
}

void StreamingBody::Fail(absl::Status status) {
  if (closed()) return;
  error_ = status.ok() ? absl::UnknownError("streaming body failed") : std::move(status);
  buffer_.clear();
  head_ = 0;
  NotifyResume();
}

HeaderMap StreamingBody::TakeTrailers() { return std::exchange(trailers_, HeaderMap()); }

BodyReadResult StreamingBody::DoRead(size_t max_bytes, std::string* out) {
  if (!error_.ok()) return BodyReadResult::Error(error_);
  const size_t n = std::min(max_bytes, buffered());
  if (n > 0) {
    if (head_ == 0 && n == buffer_.size() && out->empty()) {
      out->swap(buffer_);
      buffer_.clear();
    } else {
      out->append(buffer_, head_, n);
      head_ += n;
    }
    if (head_ == buffer_.size()) {
      buffer_.clear();
      head_ = 0;
    } else if (head_ > buffer_.size() / 2) {
      buffer_.erase(0, head_);  // Keeps the buffer from creeping; amortized O(1) per byte.
      head_ = 0;
    }
  }
  if (finished_ && buffered() == 0) return BodyReadResult::End();
  if (n == 0) return BodyReadResult::WouldBlock();
  if (want_writable_ && on_writable_ && buffered() <= capacity_ / 2) {
    want_writable_ = false;
    // Taken out while it runs, so the handler may replace it (or drop the last reference to
    // whatever it captured) from inside.
    auto callback = std::exchange(on_writable_, nullptr);
    callback();
    if (!on_writable_) on_writable_ = std::move(callback);
  }
  return BodyReadResult::Data();
}

// ---- SharedFd ----

// ---- SharedBytes ----

SharedBytes SharedBytes::Adopt(std::string bytes) {
  SharedBytes result;
  result.shared_ = new Shared{std::move(bytes), 1};
  return result;
}

const std::string& SharedBytes::Empty() {
  static const std::string* const kEmpty = new std::string();
  return *kEmpty;
}

void SharedBytes::Release() noexcept {
  if (shared_ == nullptr) return;
  if (--shared_->references == 0) delete shared_;
  shared_ = nullptr;
}

SharedFd SharedFd::Adopt(int fd) {
  SharedFd result;
  result.shared_ = new Shared{fd, 1, false};
  return result;
}

void SharedFd::Release() noexcept {
  if (shared_ == nullptr) return;
  if (--shared_->references == 0) {
    ::close(shared_->fd);
    delete shared_;
  }
  shared_ = nullptr;
}

// ---- FileBody ----

absl::StatusOr<FileBody> FileBody::Open(const std::string& path) {
  return Open(path, 0, std::nullopt);
}

absl::StatusOr<FileBody> FileBody::Open(const std::string& path, uint64_t offset,
                                        std::optional<uint64_t> length) {
  // O_NONBLOCK: opening a FIFO must not block the loop; regular files ignore it.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return absl::ErrnoToStatus(errno, absl::StrCat("open ", path));
  FileBody body(fd, 0, 0);
  struct stat st;
  if (::fstat(fd, &st) != 0) return absl::ErrnoToStatus(errno, absl::StrCat("fstat ", path));
  if (!S_ISREG(st.st_mode)) {
    return absl::FailedPreconditionError(absl::StrCat(path, " is not a regular file"));
  }
  const auto size = static_cast<uint64_t>(st.st_size);
  if (offset > size || (length.has_value() && *length > size - offset)) {
    return absl::OutOfRangeError(absl::StrCat("range outside ", path, " (", size, " bytes)"));
  }
  body.offset_ = offset;
  body.length_ = length.value_or(size - offset);
  return body;
}

FileBody::FileBody(int fd, uint64_t offset, uint64_t length)
    : fd_(fd), offset_(offset), length_(length) {}

FileBody::FileBody(SharedFd fd, uint64_t offset, uint64_t length)
    : fd_(fd.get()), offset_(offset), length_(length), shared_(std::move(fd)) {}

FileBody::FileBody(FileBody&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)),
      offset_(other.offset_),
      length_(other.length_),
      shared_(std::move(other.shared_)) {}

FileBody& FileBody::operator=(FileBody&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0 && !shared_) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    offset_ = other.offset_;
    length_ = other.length_;
    shared_ = std::move(other.shared_);
  }
  return *this;
}

FileBody::~FileBody() {
  if (fd_ >= 0 && !shared_) ::close(fd_);
}

absl::StatusOr<size_t> FileBody::ReadAt(uint64_t position, size_t max_bytes,
                                        std::string* out) const {
  if (position >= length_ || max_bytes == 0) return 0;
  const size_t n = static_cast<size_t>(std::min<uint64_t>(max_bytes, length_ - position));
  const size_t old_size = out->size();
  out->resize(old_size + n);
  absl::StatusOr<size_t> r = ReadInto(position, out->data() + old_size, n);
  out->resize(old_size + (r.ok() ? *r : 0));
  return r;
}

absl::StatusOr<size_t> FileBody::ReadInto(uint64_t position, char* dst, size_t max_bytes) const {
  if (position >= length_ || max_bytes == 0) return 0;
  const size_t n = static_cast<size_t>(std::min<uint64_t>(max_bytes, length_ - position));
  ssize_t r;
  do {
    r = ::pread(fd_, dst, n, static_cast<off_t>(offset_ + position));
  } while (r < 0 && errno == EINTR);
  if (r <= 0) {
    const int error = errno;
    shared_.MarkSuspect();  // The cache that shared it must look at the file again.
    if (r < 0) return absl::ErrnoToStatus(error, "pread");
    return absl::DataLossError("file is shorter than the range being sent");
  }
  return static_cast<size_t>(r);
}

// ---- ResponseBody ----

ResponseBody::ResponseBody(std::unique_ptr<BodyProducer> producer) {
  if (producer != nullptr) body_ = std::move(producer);
}

BodyProducer* ResponseBody::producer() {
  auto* p = std::get_if<std::unique_ptr<BodyProducer>>(&body_);
  return p != nullptr ? p->get() : nullptr;
}

std::optional<uint64_t> ResponseBody::length() const {
  if (const std::string* b = buffer()) return b->size();
  if (const FileBody* f = file()) return f->length();
  return std::get_if<std::unique_ptr<BodyProducer>>(&body_)->get()->Length();
}

std::unique_ptr<BodyProducer> ResponseBody::ReleaseAsProducer() {
  std::unique_ptr<BodyProducer> result;
  if (std::string* b = std::get_if<std::string>(&body_)) {
    result = std::make_unique<BufferProducer>(std::move(*b));
  } else if (SharedBytes* shared = std::get_if<SharedBytes>(&body_)) {
    result = std::make_unique<SharedBytesProducer>(std::move(*shared));
  } else if (FileBody* f = file()) {
    result = std::make_unique<FileProducer>(std::move(*f));
  } else {
    result = std::move(*std::get_if<std::unique_ptr<BodyProducer>>(&body_));
  }
  body_ = std::string();
  return result;
}

std::string ResponseBody::TakeBuffer() {
  std::string bytes;
  if (std::string* own = std::get_if<std::string>(&body_)) {
    bytes = std::move(*own);
  } else if (const SharedBytes* shared = std::get_if<SharedBytes>(&body_)) {
    bytes = shared->bytes();
  } else {
    return bytes;
  }
  body_ = std::string();
  return bytes;
}

}  // namespace petrel
