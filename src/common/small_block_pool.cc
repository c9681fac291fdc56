#include "common/small_block_pool.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <limits>

namespace petrel {

SmallBlockPool::~SmallBlockPool() {
  for (FreeBlock* head : free_) {
    while (head != nullptr) {
      FreeBlock* next = head->next;
      std::free(reinterpret_cast<Header*>(head) - 1);
      head = next;
    }
  }
}

void* SmallBlockPool::AllocateFresh(size_t size_class) {
  auto* h = static_cast<Header*>(std::malloc(sizeof(Header) + (size_class + 1) * kGranule));
  if (h == nullptr) return nullptr;
  ++fresh_;
  h->size_class = static_cast<uint32_t>(size_class);
  return h + 1;
}

void* SmallBlockPool::AllocateOther(size_t size) {
  if (size == 0) return Allocate(1);
  if (size > std::numeric_limits<uint32_t>::max() - sizeof(Header)) return nullptr;
  auto* h = static_cast<Header*>(std::malloc(sizeof(Header) + size));
  if (h == nullptr) return nullptr;
  h->size_class = kLarge;
  h->size = static_cast<uint32_t>(size);
  return h + 1;
}

void* SmallBlockPool::Reallocate(void* ptr, size_t size) {
  if (ptr == nullptr) return Allocate(size);
  Header* h = static_cast<Header*>(ptr) - 1;
  if (h->size_class == kLarge && size > kMaxPooledSize) {
    if (size > std::numeric_limits<uint32_t>::max() - sizeof(Header)) return nullptr;
    auto* grown = static_cast<Header*>(std::realloc(h, sizeof(Header) + size));
    if (grown == nullptr) return nullptr;
    grown->size = static_cast<uint32_t>(size);
    return grown + 1;
  }
  if (h->size_class != kLarge && size != 0 && (size - 1) / kGranule == h->size_class) {
    return ptr;  // still fits its block
  }
  void* moved = Allocate(size);
  if (moved == nullptr) return nullptr;
  // A pooled block's whole capacity is copied (what the caller asked for is not kept): the
  // bytes past the requested size are garbage the caller never reads.
  const size_t held = h->size_class == kLarge ? h->size : (size_t{h->size_class} + 1) * kGranule;
  std::memcpy(moved, ptr, std::min(held, size));
  Release(ptr);
  return moved;
}

void SmallBlockPool::Trim(size_t keep_bytes) {
  // Largest classes first: the fewest frees for the bytes given back.
  for (uint32_t c = kClasses; c-- > 0 && cached_bytes_ > keep_bytes;) {
    const size_t block = (size_t{c} + 1) * kGranule;
    while (free_[c] != nullptr && cached_bytes_ > keep_bytes) {
      FreeBlock* b = free_[c];
      free_[c] = b->next;
      cached_bytes_ -= block;
      std::free(reinterpret_cast<Header*>(b) - 1);
    }
  }
}

void* SmallBlockPool::AllocateZeroed(size_t nmemb, size_t size) {
  if (size != 0 && nmemb > std::numeric_limits<size_t>::max() / size) return nullptr;
  void* p = Allocate(nmemb * size);
  if (p != nullptr) std::memset(p, 0, nmemb * size);
  return p;
}

void* SmallBlockPool::MallocFn(size_t size, void* self) {
  return static_cast<SmallBlockPool*>(self)->Allocate(size);
}

void SmallBlockPool::FreeFn(void* ptr, void* self) {
  static_cast<SmallBlockPool*>(self)->Release(ptr);
}

void* SmallBlockPool::CallocFn(size_t nmemb, size_t size, void* self) {
  return static_cast<SmallBlockPool*>(self)->AllocateZeroed(nmemb, size);
}

void* SmallBlockPool::ReallocFn(void* ptr, size_t size, void* self) {
  return static_cast<SmallBlockPool*>(self)->Reallocate(ptr, size);
}

}  // namespace petrel
