// Internal: the allocator Petrel hands the protocol libraries (nghttp2_mem, nghttp3_mem). They
// allocate a few small objects for every stream (the stream, queued frames, copied field
// lists) and free them when the stream ends; the pool keeps freed small blocks in per-size free
// lists and hands them out again, so a steady stream of requests does not go to malloc. Bigger
// blocks (frame and header-compression buffers, allocated once per connection) go straight to
// malloc.
//
// Bounded: at most max_cached_bytes() of free blocks are kept; beyond that freed blocks go back
// to free(), and Trim() gives back more when the owner goes idle. One pool per connection, loop
// thread only; it must outlive the library object that uses it (every block must be back when
// the pool is destroyed, or it leaks).
#ifndef PETREL_COMMON_SMALL_BLOCK_POOL_H_
#define PETREL_COMMON_SMALL_BLOCK_POOL_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "absl/base/attributes.h"

namespace petrel {

class SmallBlockPool {
 public:
  // Blocks up to this size come from the free lists, in classes of kGranule bytes.
  static constexpr size_t kGranule = 64;
  static constexpr size_t kMaxPooledSize = 1024;
  // Default bound: enough for the per-stream objects of the streams that turn over in one loop
  // turn at typical concurrency, small enough not to matter per idle connection.
  static constexpr size_t kDefaultMaxCachedBytes = 32 * 1024;

  explicit SmallBlockPool(size_t max_cached_bytes = kDefaultMaxCachedBytes)
      : max_cached_bytes_(max_cached_bytes) {}
  ~SmallBlockPool();
  SmallBlockPool(const SmallBlockPool&) = delete;
  SmallBlockPool& operator=(const SmallBlockPool&) = delete;

  // malloc / free / realloc / calloc semantics (16-byte aligned; null when out of memory or
  // when the size overflows).
  void* Allocate(size_t size) {
    // The common case inline (the libraries' callbacks below): a pooled class with a free
    // block. Size 0 wraps around to a class past the last and goes with the large sizes.
    const size_t c = (size - 1) / kGranule;
    if (c >= kClasses) return AllocateOther(size);
    FreeBlock* b = free_[c];
    if (b == nullptr) return AllocateFresh(c);
    free_[c] = b->next;
    cached_bytes_ -= (c + 1) * kGranule;
    return b;
  }
  void Release(void* ptr) {
    if (ptr == nullptr) return;
    Header* h = static_cast<Header*>(ptr) - 1;
    const uint32_t c = h->size_class;
    const size_t block = (size_t{c} + 1) * kGranule;
    if (c == kLarge || cached_bytes_ + block > max_cached_bytes_) {
      std::free(h);
      return;
    }
    auto* b = static_cast<FreeBlock*>(ptr);
    b->next = free_[c];
    free_[c] = b;
    cached_bytes_ += block;
  }
  void* Reallocate(void* ptr, size_t size);
  void* AllocateZeroed(size_t nmemb, size_t size);
  // Frees cached blocks until at most `keep_bytes` are left.
  void Trim(size_t keep_bytes);

  // The libraries' callback shapes, `self` being the pool: fill a nghttp2_mem / nghttp3_mem
  // (mem_user_data / user_data = this) with these.
  static void* MallocFn(size_t size, void* self);
  static void FreeFn(void* ptr, void* self);
  static void* CallocFn(size_t nmemb, size_t size, void* self);
  static void* ReallocFn(void* ptr, size_t size, void* self);

  // Observability / tests: blocks taken from malloc for the free lists' classes.
  uint64_t fresh() const { return fresh_; }
  size_t cached_bytes() const { return cached_bytes_; }
  size_t max_cached_bytes() const { return max_cached_bytes_; }

 private:
  // Precedes every block; keeps the user pointer 16-byte aligned as malloc's.
  struct alignas(16) Header {
    uint32_t size_class;  // kLarge for malloc'd blocks
    uint32_t size;        // kLarge blocks: the requested size, for realloc's copy
  };
  // A free block's payload links it to the next free block of its class.
  struct FreeBlock {
    FreeBlock* next;
  };
  static constexpr uint32_t kClasses = kMaxPooledSize / kGranule;

  // Allocate's path for sizes 0 (as 1) and above kMaxPooledSize (malloc, never cached). Both
  // slow paths stay out of line, even under LTO: inlined, their calls to malloc make every
  // Allocate save and restore registers (26 instructions per call instead of 15).
  ABSL_ATTRIBUTE_NOINLINE void* AllocateOther(size_t size);
  // Allocate's path for a pooled class with no free block: a new block from malloc.
  ABSL_ATTRIBUTE_NOINLINE void* AllocateFresh(size_t size_class);
  static constexpr uint32_t kLarge = UINT32_MAX;

  const size_t max_cached_bytes_;
  std::array<FreeBlock*, kClasses> free_{};
  size_t cached_bytes_ = 0;
  uint64_t fresh_ = 0;
};

}  // namespace petrel

#endif  // PETREL_COMMON_SMALL_BLOCK_POOL_H_
