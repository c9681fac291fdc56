// Public: ByteBuffer, the growable byte queue behind TCP connection input and output.
#ifndef PETREL_COMMON_BYTE_BUFFER_H_
#define PETREL_COMMON_BYTE_BUFFER_H_

#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace petrel {

// A contiguous buffer with a read index and a write index:
//
//   [ consumed (front space) | readable bytes | writable tail ]
//   0                        read_            write_          capacity
//
// Bytes are appended at the write index and consumed from the read index, so a parser can look at
// Readable() as one contiguous view. Making room prefers compaction (moving the readable bytes to
// the front) over growth whenever the front space and the tail together suffice, so a connection
// that keeps up with its input stays at a constant capacity. Storage is allocated lazily: a
// default-constructed buffer owns no memory until the first write.
//
// Not thread-safe: a buffer belongs to the connection (and so the loop thread) that owns it.
// Pointers and views into the buffer are invalidated by any call that may make room (Append,
// WritableTail, ReadFromFd, Shrink); Consume and CommitWrite keep the storage in place.
class ByteBuffer {
 public:
  // The stack spill ReadFromFd uses, so a read can take in up to this many bytes beyond the
  // writable tail without first growing the buffer for a peer that might send little.
  static constexpr size_t kReadSpillBytes = size_t{64} * 1024;

  explicit ByteBuffer(size_t initial_capacity = 0);
  ByteBuffer(ByteBuffer&& other) noexcept;
  ByteBuffer& operator=(ByteBuffer&& other) noexcept;
  ByteBuffer(const ByteBuffer&) = delete;
  ByteBuffer& operator=(const ByteBuffer&) = delete;
  ~ByteBuffer();

  // ---- Reading ----
  const char* data() const { return storage_.get() + read_; }
  size_t ReadableBytes() const { return write_ - read_; }
  absl::string_view Readable() const { return absl::string_view(data(), ReadableBytes()); }
  bool empty() const { return read_ == write_; }

  // Drops the first n readable bytes. Requires n <= ReadableBytes(). When the buffer becomes
  // empty both indices return to 0, so the next write starts at the front at no cost.
  void Consume(size_t n);
  void ConsumeAll() { read_ = write_ = 0; }

  // ---- Writing ----
  void Append(absl::string_view bytes) { Append(bytes.data(), bytes.size()); }
  void Append(const void* bytes, size_t n);

  // Returns the write position with at least min_bytes writable behind it, compacting when the
  // front space makes that possible and growing (at least doubling) otherwise. Fill some prefix of
  // it, then CommitWrite() the number of bytes written.
  char* WritableTail(size_t min_bytes);
  // Marks n bytes after the write index as readable. Requires n <= WritableBytes().
  void CommitWrite(size_t n);

  size_t WritableBytes() const { return capacity_ - write_; }
  size_t capacity() const { return capacity_; }

  // Releases unused memory: the capacity becomes ReadableBytes() (0 frees the storage). For idle
  // connections after a burst.
  void Shrink();

  // ---- File descriptors (non-blocking sockets and pipes) ----

  // Reads at most `max` bytes with one readv(): into the writable tail and, past it, into a
  // kReadSpillBytes stack buffer whose contents are then appended (growing the buffer only by what
  // actually arrived). Returns the number of bytes read, 0 at end of file. Errors carry
  // absl::ErrnoToStatus codes: EAGAIN/EWOULDBLOCK is kUnavailable (nothing to read now) and
  // nothing else is (a reset is kAborted, not absl's kUnavailable). EINTR is retried. A read may
  // return fewer bytes than are available; call again until kUnavailable.
  absl::StatusOr<size_t> ReadFromFd(int fd, size_t max = kReadSpillBytes);

  // Writes at most `max` readable bytes with one call and consumes what was written. Sockets are
  // written with send(MSG_NOSIGNAL) so a closed peer yields EPIPE instead of SIGPIPE; other fds
  // with write() (a pipe whose reader has gone raises SIGPIPE unless the process ignores it).
  // Returns the number of bytes written; EAGAIN is kUnavailable and nothing else is (a reset is
  // kAborted), EINTR is retried.
  absl::StatusOr<size_t> WriteToFd(int fd, size_t max = std::numeric_limits<size_t>::max());

 private:
  void MakeRoom(size_t min_bytes);

  std::unique_ptr<char[]> storage_;
  size_t capacity_ = 0;
  size_t read_ = 0;
  size_t write_ = 0;
};

}  // namespace petrel

#endif  // PETREL_COMMON_BYTE_BUFFER_H_
