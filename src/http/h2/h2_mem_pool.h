// Internal: the allocator an H2Connection hands nghttp2 (nghttp2_mem): a SmallBlockPool, so the
// per-stream objects nghttp2 allocates and frees come from per-size free lists (see
// common/small_block_pool.h). One per connection, loop thread only; it must outlive the nghttp2
// session that uses it.
#ifndef PETREL_HTTP_H2_H2_MEM_POOL_H_
#define PETREL_HTTP_H2_H2_MEM_POOL_H_

#include <nghttp2/nghttp2.h>

#include <cstddef>
#include <cstdint>

#include "common/small_block_pool.h"

namespace petrel::http {

class H2MemPool {
 public:
  H2MemPool() {
    mem_.mem_user_data = &pool_;
    mem_.malloc = &SmallBlockPool::MallocFn;
    mem_.free = &SmallBlockPool::FreeFn;
    mem_.calloc = &SmallBlockPool::CallocFn;
    mem_.realloc = &SmallBlockPool::ReallocFn;
  }
  H2MemPool(const H2MemPool&) = delete;
  H2MemPool& operator=(const H2MemPool&) = delete;

  // For nghttp2_session_server_new3; points at this pool, which must not move.
  nghttp2_mem* mem() { return &mem_; }

  uint64_t fresh() const { return pool_.fresh(); }
  size_t cached_bytes() const { return pool_.cached_bytes(); }

 private:
  SmallBlockPool pool_;
  nghttp2_mem mem_;
};

}  // namespace petrel::http

#endif  // PETREL_HTTP_H2_H2_MEM_POOL_H_
