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

void* SmallBlockPool::Allocate(size_t size) {
  // The common case first: a pooled class with a free block. Size 0 wraps around to a class
  // past the last and goes to AllocateOther with the large sizes.
  const size_t c = (size - 1) / kGranule;
  if (c >= kClasses) return AllocateOther(size);
  if (FreeBlock* b = free_[c]) {
    free_[c] = b->next;
    cached_bytes_ -= (c + 1) * kGranule;
    ++reused_;
    Header* h = reinterpret_cast<Header*>(b) - 1;
    h->size = static_cast<uint32_t>(size);
    return b;
  }
  auto* h = static_cast<Header*>(std::malloc(sizeof(Header) + (c + 1) * kGranule));
  if (h == nullptr) return nullptr;
  ++fresh_;
  h->size_class = static_cast<uint32_t>(c);
  h->size = static_cast<uint32_t>(size);
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

void SmallBlockPool::Release(void* ptr) {
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
    h->size = static_cast<uint32_t>(size);  // still fits its block
    return ptr;
  }
  void* moved = Allocate(size);
  if (moved == nullptr) return nullptr;
  std::memcpy(moved, ptr, std::min<size_t>(h->size, size));
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
