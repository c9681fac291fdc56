// Internal: the allocator an H2Connection hands nghttp2 (nghttp2_mem). nghttp2 allocates a few
// small objects for every stream (the stream, the outbound HEADERS and DATA items, the copied
// field list) and frees them when the stream ends; the pool keeps freed small blocks in
// per-size free lists and hands them out again, so a steady stream of requests does not go
// to malloc. Bigger blocks (frame and HPACK buffers, allocated once per connection) go
// straight to malloc.
//
// Bounded: at most kMaxCachedBytes of free blocks are kept; beyond that freed blocks go back to
// free(). One pool per connection, loop thread only; it must outlive the nghttp2 session that
// uses it (every block must be back when the pool is destroyed, or it leaks).
#ifndef PETREL_HTTP_H2_H2_MEM_POOL_H_
#define PETREL_HTTP_H2_H2_MEM_POOL_H_

#include <nghttp2/nghttp2.h>

#include <array>
#include <cstddef>
#include <cstdint>

namespace petrel::http {

class H2MemPool {
 public:
  // Blocks up to this size come from the free lists, in classes of kGranule bytes.
  static constexpr size_t kGranule = 64;
  static constexpr size_t kMaxPooledSize = 1024;
  // Enough for the per-stream objects of the streams that turn over in one loop turn at
  // typical concurrency, small enough not to matter per idle connection.
  static constexpr size_t kMaxCachedBytes = 32 * 1024;

  H2MemPool();
  ~H2MemPool();
  H2MemPool(const H2MemPool&) = delete;
  H2MemPool& operator=(const H2MemPool&) = delete;

  // For nghttp2_session_server_new3; points at this pool, which must not move.
  nghttp2_mem* mem() { return &mem_; }

  // Observability / tests: blocks handed out from a free list, and blocks from malloc.
  uint64_t reused() const { return reused_; }
  uint64_t fresh() const { return fresh_; }
  size_t cached_bytes() const { return cached_bytes_; }

 private:
  // Precedes every block; keeps the user pointer 16-byte aligned as malloc's.
  struct alignas(16) Header {
    uint32_t size_class;  // kLarge for malloc'd blocks
    uint32_t size;        // requested size, for realloc's copy
  };
  // A free block's payload links it to the next free block of its class.
  struct FreeBlock {
    FreeBlock* next;
  };
  static constexpr uint32_t kClasses = kMaxPooledSize / kGranule;
  static constexpr uint32_t kLarge = UINT32_MAX;

  void* Allocate(size_t size);
  void Release(void* ptr);
  void* Reallocate(void* ptr, size_t size);

  static void* MallocCb(size_t size, void* self);
  static void FreeCb(void* ptr, void* self);
  static void* CallocCb(size_t nmemb, size_t size, void* self);
  static void* ReallocCb(void* ptr, size_t size, void* self);

  nghttp2_mem mem_;
  std::array<FreeBlock*, kClasses> free_{};
  size_t cached_bytes_ = 0;
  uint64_t reused_ = 0;
  uint64_t fresh_ = 0;
};

}  // namespace petrel::http

#endif  // PETREL_HTTP_H2_H2_MEM_POOL_H_
