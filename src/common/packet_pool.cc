#include "petrel/common/packet_pool.h"

#include <algorithm>
#include <cassert>
#include <new>

#include "petrel/common/cache_line.h"

namespace petrel {
namespace {

constexpr std::align_val_t kDataAlignment{kCacheLineSize};

size_t RoundUpToCacheLine(size_t n) {
  return (n + kCacheLineSize - 1) / kCacheLineSize * kCacheLineSize;
}

}  // namespace

void PacketPool::AlignedDelete::operator()(uint8_t* p) const {
  ::operator delete(p, kDataAlignment);
}

PacketPool::PacketPool(const Options& options)
    // Each buffer starts on its own cache line so two buffers never share one (they may be
    // filled and read by different threads in turn).
    : buffer_size_(RoundUpToCacheLine(std::max<size_t>(options.buffer_size, 1))),
      buffers_per_slab_(std::max<size_t>(options.buffers_per_slab, 1)),
      max_buffers_(options.max_buffers) {}

PacketPool::~PacketPool() {
  // Buffers still out would dangle; that is a shutdown-order bug in the caller.
  assert(in_use_ == 0 && "PacketPool destroyed with buffers still acquired");
}

PacketBuffer* PacketPool::Acquire() {
  if (free_head_ == nullptr && !AddSlab()) return nullptr;
  PacketBuffer* buffer = free_head_;
  free_head_ = buffer->next_free_;
  buffer->next_free_ = nullptr;
  buffer->free_ = false;
  buffer->length = 0;
  ++in_use_;
  return buffer;
}

void PacketPool::Release(PacketBuffer* buffer) {
  assert(buffer != nullptr);
  assert(buffer->owner_ == this && "buffer released to a pool that did not hand it out");
  assert(!buffer->free_ && "buffer released twice");
  buffer->free_ = true;
  buffer->next_free_ = free_head_;
  free_head_ = buffer;
  --in_use_;
}

bool PacketPool::Reserve(size_t count) {
  while (allocated_ < std::min(count, max_buffers_)) {
    if (!AddSlab()) return false;
  }
  return true;
}

bool PacketPool::AddSlab() {
  if (allocated_ >= max_buffers_) return false;
  // The last slab may be partial so that allocated() never exceeds max_buffers.
  const size_t count = std::min(buffers_per_slab_, max_buffers_ - allocated_);
  Slab slab;
  slab.headers.reset(new (std::nothrow) PacketBuffer[count]);
  if (slab.headers == nullptr) return false;
  slab.data.reset(
      static_cast<uint8_t*>(::operator new(count* buffer_size_, kDataAlignment, std::nothrow)));
  if (slab.data == nullptr) return false;

  // Thread the new buffers onto the free list so the first one is handed out first.
  for (size_t i = count; i-- > 0;) {
    PacketBuffer& b = slab.headers[i];
    b.data_ = slab.data.get() + i * buffer_size_;
    b.capacity_ = buffer_size_;
    b.owner_ = this;
    b.free_ = true;
    b.next_free_ = free_head_;
    free_head_ = &b;
  }
  slabs_.push_back(std::move(slab));
  allocated_ += count;
  return true;
}

}  // namespace petrel
