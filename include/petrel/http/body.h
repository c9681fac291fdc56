// Public: message bodies. Response bodies flow handler -> engine as a buffer, a file or a
// pull-based producer; request bodies flow engine -> handler through RequestBody, paced by the
// handler. Every engine (h1, h2, h3) adapts to exactly these types.
//
// Threading: every object here belongs to one stream on one loop thread; all calls, including
// every callback, happen on that thread. Work on other threads posts back to the loop first.
//
// Re-entrancy rules (they keep engines simple and the call graph shallow):
//  - A callback the engine receives (resume, OnConsumed, OnFirstRead, OnAbandoned) may run
//    inside a call the handler made; the engine only records/schedules work there and never
//    destroys the stream's objects from inside it.
//  - A callback the handler receives (on_writable, on_data, on_error, ReadAll's done) may run
//    inside a call the engine made; the handler may call back into the same object from there.
#ifndef PETREL_HTTP_BODY_H_
#define PETREL_HTTP_BODY_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <variant>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "petrel/common/clock.h"
#include "petrel/http/header_map.h"

namespace petrel {

class EventLoop;
class Timer;

// ---------------------------------------------------------------------------------------------
// Response bodies: producers
// ---------------------------------------------------------------------------------------------

enum class BodyReadStatus : uint8_t {
  kData,        // Appended at least one byte; call Read again when there is room.
  kWouldBlock,  // Appended nothing; park the stream until the resume callback runs.
  kEnd,         // The body is complete; may have appended final bytes (zero or more).
  kError,       // The body failed (see `error`): reset the stream / close the connection.
};

struct BodyReadResult {
  BodyReadStatus status = BodyReadStatus::kWouldBlock;
  absl::Status error;  // Not OK exactly when status == kError.

  static BodyReadResult Data() { return {BodyReadStatus::kData, absl::OkStatus()}; }
  static BodyReadResult WouldBlock() { return {BodyReadStatus::kWouldBlock, absl::OkStatus()}; }
  static BodyReadResult End() { return {BodyReadStatus::kEnd, absl::OkStatus()}; }
  static BodyReadResult Error(absl::Status status) {
    return {BodyReadStatus::kError, std::move(status)};
  }
};

// A pull-based body source (h2o's generator model). The engine calls Read() whenever it has room
// to send — one chunk in flight is the whole backpressure story. When Read() returns
// kWouldBlock the engine parks the stream; the producer calls NotifyResume() when it can make
// progress, which runs the engine's resume callback exactly once. Then the engine calls Read()
// again (later, not from inside the callback).
class BodyProducer {
 public:
  BodyProducer() = default;
  BodyProducer(const BodyProducer&) = delete;
  BodyProducer& operator=(const BodyProducer&) = delete;
  virtual ~BodyProducer();

  // Engine-facing. Appends up to `max_bytes` (> 0) bytes to `*out` and says what happened (see
  // BodyReadStatus). After kEnd or kError the engine does not call Read again.
  BodyReadResult Read(size_t max_bytes, std::string* out);

  // Engine-facing. Set once, before the first Read. The callback runs on the loop thread after
  // a kWouldBlock, at most once per kWouldBlock; it must only schedule the next Read and must not
  // destroy the producer.
  void SetResumeCallback(absl::AnyInvocable<void()> resume) { resume_ = std::move(resume); }

  // The total size, if known before the end (lets h1 send Content-Length rather than chunked).
  // A producer that reports a length must produce exactly that many bytes.
  virtual std::optional<uint64_t> Length() const { return std::nullopt; }

  // Engine-facing: trailers to send after kEnd (engines send Response::trailers() first, then
  // these). Called at most once, after kEnd. Empty by default.
  virtual HeaderMap TakeTrailers() { return HeaderMap(); }

  // Engine-facing: the server began a graceful stop (h1: no new request on this connection;
  // h2/h3: GOAWAY). A body with no natural end (a WebSocket, an event stream) should come to
  // one, as the engine goes on reading it only until the stop's grace period is over. Called
  // at most once, on the loop thread; the default does nothing.
  virtual void OnServerStopping() {}

  // True between a kWouldBlock and the resume notification.
  bool parked() const { return parked_; }

 protected:
  // Implementations: the contract of Read(). Returning kData with nothing appended is a bug.
  virtual BodyReadResult DoRead(size_t max_bytes, std::string* out) = 0;

  // Implementations call this when they have data, reached the end or failed. Runs the resume
  // callback if (and only if) the engine is parked on this producer; otherwise a no-op, so it
  // is always safe to call.
  void NotifyResume();

 private:
  absl::AnyInvocable<void()> resume_;
  bool parked_ = false;
};

// A producer that a handler writes into: the usual way to stream a response.
//
// Write() always accepts the chunk (nothing is lost) and returns false once `capacity` bytes are
// buffered: the handler should then stop and wait for on_writable, which runs when the engine has
// drained the buffer to at most half its capacity. A handler that keeps writing after false
// grows the buffer past its bound; that is a handler bug, not an engine one.
class StreamingBody final : public BodyProducer {
 public:
  static constexpr size_t kDefaultCapacity = 64 * 1024;

  explicit StreamingBody(size_t capacity = kDefaultCapacity);
  ~StreamingBody() override;

  // Handler-facing. Appends `chunk`. Returns false when the buffer is now full, or when the body
  // was already finished or failed (the chunk is then dropped).
  bool Write(absl::string_view chunk);
  // Handler-facing. Runs (inside an engine Read) each time the buffer drains to at most half its
  // capacity after a Write returned false. The handler may Write/Finish/Fail from it.
  void SetOnWritable(absl::AnyInvocable<void()> on_writable);
  // Handler-facing. Ends the body once the buffered bytes are sent, then `trailers`.
  void Finish(HeaderMap trailers = HeaderMap());
  // Handler-facing. Aborts the body: buffered bytes are dropped and the engine resets the stream
  // (h2 RST_STREAM, h3 reset; h1 closes the connection without a terminating chunk).
  void Fail(absl::Status status);

  // The body fails (as Fail) if the handler writes nothing for `idle` while nothing of it
  // waits to be sent: a handler that stalls does not hold its stream (a peer that does not read
  // is the engine's send timeout). Checked every `idle` on `loop` (the handler's), so a stall
  // ends within two of them. Zero: off. RouteOptions::stream_idle_timeout sets it.
  void SetIdleLimit(EventLoop* loop, Duration idle);

  size_t capacity() const { return capacity_; }
  size_t buffered() const { return buffer_.size() - head_; }
  // Finish or Fail was called.
  bool closed() const { return finished_ || !error_.ok(); }

  HeaderMap TakeTrailers() override;

 private:
  BodyReadResult DoRead(size_t max_bytes, std::string* out) override;

  const size_t capacity_;
  std::string buffer_;
  size_t head_ = 0;  // Bytes before head_ were already read.
  bool finished_ = false;
  bool want_writable_ = false;  // A Write returned false and on_writable has not run since.
  absl::Status error_;
  HeaderMap trailers_;
  absl::AnyInvocable<void()> on_writable_;
  // The idle limit: writes counted, and the count the last check saw.
  uint64_t writes_ = 0;
  uint64_t writes_checked_ = 0;
  Duration idle_limit_ = Duration::zero();
  std::unique_ptr<Timer> idle_timer_;
};

// ---------------------------------------------------------------------------------------------
// Response bodies: files
// ---------------------------------------------------------------------------------------------

// An open descriptor shared by several owners, closed when the last reference goes. It lets a
// cache (StaticFiles' open-file cache) hand the same descriptor to many FileBodies and evict its
// entry while a response still streams from it. The count is deliberately not atomic: every
// copy is made and dropped on one loop thread (the one that opened the descriptor), or after that
// thread was joined.
class SharedFd {
 public:
  SharedFd() = default;
  // Takes ownership of `fd` (>= 0); the one allocation a shared descriptor costs.
  static SharedFd Adopt(int fd);

  SharedFd(const SharedFd& other) noexcept : shared_(other.shared_) {
    if (shared_ != nullptr) ++shared_->references;
  }
  SharedFd& operator=(const SharedFd& other) noexcept {
    SharedFd copy(other);
    std::swap(shared_, copy.shared_);
    return *this;
  }
  SharedFd(SharedFd&& other) noexcept : shared_(std::exchange(other.shared_, nullptr)) {}
  SharedFd& operator=(SharedFd&& other) noexcept {
    SharedFd moved(std::move(other));
    std::swap(shared_, moved.shared_);
    return *this;
  }
  ~SharedFd() { Release(); }

  // The descriptor, or -1 for an empty SharedFd.
  int get() const { return shared_ != nullptr ? shared_->fd : -1; }
  explicit operator bool() const { return shared_ != nullptr; }
  // References to this descriptor (0 for an empty SharedFd): 1 means this is the last one, so
  // dropping it closes the descriptor.
  uint32_t use_count() const { return shared_ != nullptr ? shared_->references : 0; }

  // A reader found the file shorter than expected (or failed to read): the owner of a cache may
  // check this to stop handing the descriptor out. Shared by all copies.
  void MarkSuspect() const {
    if (shared_ != nullptr) shared_->suspect = true;
  }
  bool suspect() const { return shared_ != nullptr && shared_->suspect; }

 private:
  struct Shared {
    int fd;
    uint32_t references;
    bool suspect;
  };
  void Release() noexcept;

  Shared* shared_ = nullptr;
};

// An open file and the byte range of it to send. Owns the fd and closes it, or holds a reference
// to a SharedFd (which closes it with its last reference). Engines either sendfile() it
// (cleartext h1) or ReadAt() into their buffers (TLS, h2, h3).
class FileBody {
 public:
  // Opens `path` read-only and serves the whole file. Errors: NotFound, PermissionDenied, ...
  // (from errno); FailedPrecondition if it is not a regular file.
  static absl::StatusOr<FileBody> Open(const std::string& path);
  // Serves [offset, offset + length) of `path`; `length` nullopt means to the end of the file.
  // OutOfRange if the range does not lie within the file.
  static absl::StatusOr<FileBody> Open(const std::string& path, uint64_t offset,
                                       std::optional<uint64_t> length);

  // Adopts `fd` (closed by this object) and the range, without checking either.
  FileBody(int fd, uint64_t offset, uint64_t length);
  // Shares `fd` (which must not be empty) and serves the range, without checking it. This body
  // never closes the descriptor itself; it drops its reference when destroyed. A failed or short
  // ReadAt marks the descriptor suspect (SharedFd::suspect) for its other owners.
  FileBody(SharedFd fd, uint64_t offset, uint64_t length);
  FileBody(FileBody&& other) noexcept;
  FileBody& operator=(FileBody&& other) noexcept;
  FileBody(const FileBody&) = delete;
  FileBody& operator=(const FileBody&) = delete;
  ~FileBody();

  int fd() const { return fd_; }
  uint64_t offset() const { return offset_; }
  uint64_t length() const { return length_; }

  // pread()s up to `max_bytes` of the range starting `position` bytes into it, appending them to
  // `*out`; returns how many were read (0 at or past the end of the range). DataLoss if the file
  // is now shorter than the range.
  absl::StatusOr<size_t> ReadAt(uint64_t position, size_t max_bytes, std::string* out) const;
  // The same into `dst`, which has room for `max_bytes`: for callers with buffers of their own,
  // which a std::string would zero before the read.
  absl::StatusOr<size_t> ReadInto(uint64_t position, char* dst, size_t max_bytes) const;

 private:
  int fd_ = -1;
  uint64_t offset_ = 0;
  uint64_t length_ = 0;
  SharedFd shared_;  // Set when fd_ is shared: then fd_ is shared_.get() and is not closed here.
};

// ---------------------------------------------------------------------------------------------
// Response bodies: shared bytes
// ---------------------------------------------------------------------------------------------

// Bytes several owners share and nobody changes, freed with the last reference. It lets a cache
// (StaticFiles' in-memory files) answer every request with the same bytes, no copy per response,
// and evict its entry while a response still sends them. As SharedFd's, the count is not atomic:
// every copy is made and dropped on one loop thread (the one whose cache made the bytes).
class SharedBytes {
 public:
  SharedBytes() = default;
  // Takes `bytes`; the one allocation sharing costs.
  static SharedBytes Adopt(std::string bytes);

  SharedBytes(const SharedBytes& other) noexcept : shared_(other.shared_) {
    if (shared_ != nullptr) ++shared_->references;
  }
  SharedBytes& operator=(const SharedBytes& other) noexcept {
    SharedBytes copy(other);
    std::swap(shared_, copy.shared_);
    return *this;
  }
  SharedBytes(SharedBytes&& other) noexcept : shared_(std::exchange(other.shared_, nullptr)) {}
  SharedBytes& operator=(SharedBytes&& other) noexcept {
    SharedBytes moved(std::move(other));
    std::swap(shared_, moved.shared_);
    return *this;
  }
  ~SharedBytes() { Release(); }

  // The bytes; an empty string for an empty SharedBytes.
  const std::string& bytes() const { return shared_ != nullptr ? shared_->bytes : Empty(); }
  size_t size() const { return shared_ != nullptr ? shared_->bytes.size() : 0; }
  // References to these bytes (0 for an empty SharedBytes).
  uint32_t use_count() const { return shared_ != nullptr ? shared_->references : 0; }

 private:
  struct Shared {
    std::string bytes;
    uint32_t references;
  };
  static const std::string& Empty();
  void Release() noexcept;

  Shared* shared_ = nullptr;
};

// ---------------------------------------------------------------------------------------------
// Response bodies: the three kinds together
// ---------------------------------------------------------------------------------------------

// What a Response carries: bytes (its own or shared), a file range, or a producer. Default: no
// bytes.
class ResponseBody {
 public:
  enum class Kind : uint8_t { kBuffer, kFile, kProducer };

  ResponseBody() = default;
  explicit ResponseBody(std::string bytes) : body_(std::move(bytes)) {}
  // A kBuffer body of shared bytes: sent from where they are, never copied into the body.
  explicit ResponseBody(SharedBytes bytes) : body_(std::move(bytes)) {}
  explicit ResponseBody(FileBody file) : body_(std::move(file)) {}
  // A null producer gives an empty buffer body.
  explicit ResponseBody(std::unique_ptr<BodyProducer> producer);

  Kind kind() const {
    return body_.index() == kSharedIndex ? Kind::kBuffer : static_cast<Kind>(body_.index());
  }
  // Each accessor returns nullptr unless the body is of that kind. A buffer is read-only (shared
  // bytes must not change); TakeBuffer moves its bytes out.
  const std::string* buffer() const {
    if (const std::string* own = std::get_if<std::string>(&body_)) return own;
    if (const SharedBytes* shared = std::get_if<SharedBytes>(&body_)) return &shared->bytes();
    return nullptr;
  }
  FileBody* file() { return std::get_if<FileBody>(&body_); }
  const FileBody* file() const { return std::get_if<FileBody>(&body_); }
  BodyProducer* producer();

  // Bytes the body will have, when known up front (buffer, file, producers that know).
  std::optional<uint64_t> length() const;

  // Engine-facing: the body as a producer, for engines that want one code path (h2, h3). Buffer
  // and file bodies are wrapped (the last bytes come with kEnd); a producer is returned as is.
  // Leaves this body an empty buffer. Ownership moves to the caller, which must keep the
  // producer alive while the handler may still use it (a StreamingBody, until the stream ends).
  std::unique_ptr<BodyProducer> ReleaseAsProducer();
  // A kBuffer body's bytes (moved out, or copied when shared), leaving an empty buffer; empty
  // for the other kinds, which are left as they are.
  std::string TakeBuffer();
  // Engine-facing: back to an empty buffer body, as a new ResponseBody would be (a buffer's
  // heap bytes are given back), for engines that recycle their Responses: cheaper than
  // assigning a new one, which moves a string in.
  void Clear() {
    if (std::string* own = std::get_if<std::string>(&body_);
        own != nullptr && own->capacity() <= std::string().capacity()) {
      own->clear();
      return;
    }
    body_.emplace<std::string>();
  }

 private:
  static constexpr size_t kSharedIndex = 3;
  std::variant<std::string, FileBody, std::unique_ptr<BodyProducer>, SharedBytes> body_;
};

// ---------------------------------------------------------------------------------------------
// Request bodies
// ---------------------------------------------------------------------------------------------

// Engine-facing: what a RequestBody tells the engine that feeds it.
class RequestBodySource {
 public:
  virtual ~RequestBodySource() = default;

  // The handler started reading (first Read/ReadAll). The h1 engine sends "100 Continue" here
  // when the request expects it (RFC 9110 §10.1.1); others ignore it.
  virtual void OnFirstRead() = 0;
  // The handler consumed `bytes` more bytes: return that much flow-control credit (h2
  // WINDOW_UPDATE, QUIC MAX_STREAM_DATA) or, for h1, read more from the socket. Bytes the engine
  // delivered are unconsumed until reported here. May run inside Deliver().
  virtual void OnConsumed(size_t bytes) = 0;
  // The handler discarded the body (Discard, or ReadAll over its limit): delivered-but-
  // unreported bytes will never be reported, further deliveries are dropped, and the engine
  // decides what to do with the rest (h1: discard or close; h2: consume and drop; h3:
  // STOP_SENDING). No OnConsumed follows.
  virtual void OnAbandoned() = 0;
};

// The request body as the handler sees it: a stream of chunks the handler pulls at its own
// pace. The engine pushes bytes in with Deliver(); they are buffered while the handler is not
// reading (not started, or paused), and handed to the handler's callback otherwise. The buffer
// is bounded by the engine: credit comes back only through OnConsumed, after the handler's
// callback returns, so a slow handler stalls the peer rather than growing memory.
class RequestBody {
 public:
  // `chunk` is valid only during the call; `last` marks the final call (chunk may be empty).
  using DataCallback = absl::AnyInvocable<void(absl::string_view chunk, bool last)>;
  using ErrorCallback = absl::AnyInvocable<void(const absl::Status& status)>;
  using ReadAllCallback = absl::AnyInvocable<void(absl::StatusOr<std::string> body)>;

  RequestBody() = default;
  RequestBody(const RequestBody&) = delete;
  RequestBody& operator=(const RequestBody&) = delete;

  // ---- Handler-facing ----

  // Starts reading: `on_data` gets the chunks in order (buffered ones first, possibly before
  // Read returns) until one with last == true. `on_error` runs once if the body fails (peer
  // reset, timeout, engine limit); with no `on_error`, a failure just ends the calls. Call Read
  // or ReadAll once; later calls are ignored.
  void Read(DataCallback on_data, ErrorCallback on_error = nullptr);
  // Collects the whole body, then calls `done` with it, with ResourceExhausted if it exceeds
  // `limit` bytes (then the rest is discarded, see Discard), or with the body's error. When the
  // engine announced a length above `limit`, fails at once without starting to read (so h1 sends
  // no 100 Continue). `done` may run before ReadAll returns.
  void ReadAll(size_t limit, ReadAllCallback done);
  // Stops calls to on_data until Resume; arriving bytes are buffered (and not credited).
  void Pause() { paused_ = true; }
  // Resumes; may deliver buffered chunks before returning.
  void Resume();
  // The handler does not want (the rest of) the body: buffered bytes are dropped and the engine
  // is told (OnAbandoned). No callback runs afterwards.
  void Discard();

  // Read or ReadAll has started reading.
  bool read_started() const { return reading_; }
  bool paused() const { return paused_; }
  // The last chunk has been handed to the handler.
  bool finished() const { return finished_; }
  bool abandoned() const { return abandoned_; }
  // The engine failed the body; the error.
  bool failed() const { return !error_.ok(); }
  const absl::Status& error() const { return error_; }
  // The length the engine announced (Content-Length), if any.
  std::optional<uint64_t> expected_length() const { return expected_length_; }
  // Trailer fields; complete once finished().
  const HeaderMap& trailers() const { return trailers_; }
  // Delivered bytes not yet handed to the handler.
  size_t buffered_bytes() const { return buffer_.size(); }

  // ---- Engine-facing ----

  // The engine feeding this body; not owned, must outlive it (or be reset to null first).
  void set_source(RequestBodySource* source) { source_ = source; }
  void set_expected_length(std::optional<uint64_t> length) { expected_length_ = length; }
  // The most bytes the body may have (engines set the server's limit, a route may change it,
  // see RouteOptions); engines count what arrives against it.
  uint64_t limit() const { return limit_; }
  void set_limit(uint64_t limit) { limit_ = limit; }
  // Expected length over the limit: known to be too large before a byte is read.
  bool KnownOverLimit() const { return expected_length_.has_value() && *expected_length_ > limit_; }
  // The engine received the end of the body (DeliverTrailers ends it too).
  bool eof() const { return eof_; }
  // Hands over received bytes; `last` ends the body. A body without content is one
  // Deliver({}, true). Ignored after the end, after Fail, and once abandoned. `data` is copied
  // if it cannot be handed over at once.
  void Deliver(absl::string_view data, bool last);
  // Ends the body with trailer fields.
  void DeliverTrailers(HeaderMap trailers);
  // Back to a new body's state, for engines that recycle their Requests: callbacks are dropped
  // unrun, the source forgotten, and what a large body grew given back. Only when nothing refers
  // to the body any more (Request::Reset's contract).
  void Reset();
  // The body cannot complete: drops buffered bytes and reports `status` (must not be OK) to the
  // handler's on_error (now, or when it starts reading).
  void Fail(absl::Status status);

 private:
  bool CanDispatch() const { return reading_ && !paused_ && !dispatching_; }
  // Hands `direct` (bytes not in buffer_, which must be empty) and then buffered bytes to the
  // handler until paused, finished, failed or out of data.
  void Pump(absl::string_view direct);
  void OnReadAllChunk(absl::string_view chunk, bool last);

  // Reset() restores each of these by hand: a member added here goes there too
  // (RequestBodyResetTest compares a reset body with a new one).
  RequestBodySource* source_ = nullptr;
  std::optional<uint64_t> expected_length_;
  uint64_t limit_ = UINT64_MAX;
  std::string buffer_;
  HeaderMap trailers_;
  absl::Status error_;
  DataCallback on_data_;
  ErrorCallback on_error_;
  ReadAllCallback read_all_done_;
  std::string read_all_body_;
  size_t read_all_limit_ = 0;
  bool reading_ = false;
  bool paused_ = false;
  bool eof_ = false;
  bool finished_ = false;
  bool abandoned_ = false;
  bool dispatching_ = false;  // Inside Pump: nested deliveries only append to buffer_.
};

}  // namespace petrel

#endif  // PETREL_HTTP_BODY_H_
