#include "petrel/common/byte_buffer.h"

#include <errno.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cassert>
#include <cstring>
#include <utility>

#include "absl/status/status.h"

namespace petrel {

ByteBuffer::ByteBuffer(size_t initial_capacity) {
  if (initial_capacity > 0) {
    // new char[] without () leaves the bytes uninitialized: nobody reads them before writing.
    storage_.reset(new char[initial_capacity]);
    capacity_ = initial_capacity;
  }
}

ByteBuffer::ByteBuffer(ByteBuffer&& other) noexcept
    : storage_(std::move(other.storage_)),
      capacity_(std::exchange(other.capacity_, 0)),
      read_(std::exchange(other.read_, 0)),
      write_(std::exchange(other.write_, 0)) {}

ByteBuffer& ByteBuffer::operator=(ByteBuffer&& other) noexcept {
  if (this != &other) {
    storage_ = std::move(other.storage_);
    capacity_ = std::exchange(other.capacity_, 0);
    read_ = std::exchange(other.read_, 0);
    write_ = std::exchange(other.write_, 0);
  }
  return *this;
}

ByteBuffer::~ByteBuffer() = default;

void ByteBuffer::Consume(size_t n) {
  assert(n <= ReadableBytes());
  read_ += n;
  if (read_ == write_) read_ = write_ = 0;
}

void ByteBuffer::Append(const void* bytes, size_t n) {
  if (n == 0) return;
  std::memcpy(WritableTail(n), bytes, n);
  write_ += n;
}

char* ByteBuffer::WritableTail(size_t min_bytes) {
  if (WritableBytes() < min_bytes) MakeRoom(min_bytes);
  return storage_.get() + write_;
}

void ByteBuffer::CommitWrite(size_t n) {
  assert(n <= WritableBytes());
  write_ += n;
}

void ByteBuffer::MakeRoom(size_t min_bytes) {
  const size_t readable = ReadableBytes();
  if (read_ + WritableBytes() >= min_bytes) {
    // Enough space counting the consumed front: slide the readable bytes down, keep capacity.
    std::memmove(storage_.get(), storage_.get() + read_, readable);
  } else {
    // Grow geometrically so that a stream of appends costs amortized O(1) per byte.
    const size_t new_capacity = std::max(capacity_ * 2, readable + min_bytes);
    std::unique_ptr<char[]> grown(new char[new_capacity]);
    if (readable > 0) std::memcpy(grown.get(), storage_.get() + read_, readable);
    storage_ = std::move(grown);
    capacity_ = new_capacity;
  }
  read_ = 0;
  write_ = readable;
}

void ByteBuffer::Shrink() {
  const size_t readable = ReadableBytes();
  if (readable == capacity_) return;
  std::unique_ptr<char[]> shrunk;
  if (readable > 0) {
    shrunk.reset(new char[readable]);
    std::memcpy(shrunk.get(), storage_.get() + read_, readable);
  }
  storage_ = std::move(shrunk);
  capacity_ = readable;
  read_ = 0;
  write_ = readable;
}

namespace {

// kUnavailable means "not now, wait for readiness" and nothing else: absl maps ECONNRESET,
// ECONNREFUSED and the like to kUnavailable too, which would make a reset look like an empty
// socket (noticed a read later, as end of file, with the reason lost). Those are kAborted here.
absl::Status IoError(int err, absl::string_view what) {
  absl::Status s = absl::ErrnoToStatus(err, what);
  if (err == EAGAIN || err == EWOULDBLOCK || s.code() != absl::StatusCode::kUnavailable) return s;
  return absl::AbortedError(s.message());
}

}  // namespace

absl::StatusOr<size_t> ByteBuffer::ReadFromFd(int fd, size_t max) {
  if (max == 0) return 0;
  char spill[kReadSpillBytes];
  const size_t tail = std::min(WritableBytes(), max);
  iovec iov[2];
  int iovcnt = 0;
  if (tail > 0) {
    iov[iovcnt].iov_base = storage_.get() + write_;
    iov[iovcnt].iov_len = tail;
    ++iovcnt;
  }
  const size_t spill_len = std::min(sizeof(spill), max - tail);
  if (spill_len > 0) {
    iov[iovcnt].iov_base = spill;
    iov[iovcnt].iov_len = spill_len;
    ++iovcnt;
  }
  ssize_t n = -1;
  do {
    n = ::readv(fd, iov, iovcnt);
  } while (n < 0 && errno == EINTR);
  if (n < 0) return IoError(errno, "readv");
  const size_t got = static_cast<size_t>(n);
  if (got <= tail) {
    write_ += got;
  } else {
    write_ += tail;
    Append(spill, got - tail);
  }
  return got;
}

absl::StatusOr<size_t> ByteBuffer::WriteToFd(int fd, size_t max) {
  const size_t len = std::min(ReadableBytes(), max);
  if (len == 0) return 0;
  ssize_t n = -1;
  do {
    n = ::send(fd, data(), len, MSG_NOSIGNAL);
    if (n < 0 && errno == ENOTSOCK) {
      // Pipes and files: write() cannot raise SIGPIPE for a file, and for a pipe the caller owns
      // the signal disposition.
      do {
        n = ::write(fd, data(), len);
      } while (n < 0 && errno == EINTR);
    }
  } while (n < 0 && errno == EINTR);
  if (n < 0) return IoError(errno, "write");
  Consume(static_cast<size_t>(n));
  return static_cast<size_t>(n);
}

}  // namespace petrel
