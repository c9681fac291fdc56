// Public: PacketPool, fixed-size packet buffers recycled through an intrusive free list.
#ifndef PETREL_COMMON_PACKET_POOL_H_
#define PETREL_COMMON_PACKET_POOL_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace petrel {

class PacketPool;

// One buffer of a PacketPool: `capacity()` bytes at `data()` (64-byte aligned), of which the first
// `length` are meaningful. Owned by the pool; a user holds it between Acquire() and Release().
class PacketBuffer {
 public:
  PacketBuffer(const PacketBuffer&) = delete;
  PacketBuffer& operator=(const PacketBuffer&) = delete;

  uint8_t* data() { return data_; }
  const uint8_t* data() const { return data_; }
  size_t capacity() const { return capacity_; }

  // Bytes in use, set by whoever fills the buffer; Acquire() resets it to 0.
  size_t length = 0;

 private:
  friend class PacketPool;
  PacketBuffer() = default;

  uint8_t* data_ = nullptr;
  size_t capacity_ = 0;
  PacketBuffer* next_free_ = nullptr;  // intrusive free-list link, meaningful while free
  PacketPool* owner_ = nullptr;        // for the debug check that a buffer comes home
  bool free_ = false;                  // for the debug check against double release
};

// A single-threaded pool of equal-size buffers. Buffers are created in slabs (one allocation for
// the headers and one for the data of `buffers_per_slab` buffers) when the free list runs dry, up
// to `max_buffers` in total, and are never returned to the allocator before the pool dies. Once
// warm, Acquire/Release cost a few pointer moves and allocate nothing. The free list is LIFO so
// the buffer handed out next is the one most recently touched (likely still in cache).
//
// Thread contract: every method must be called on the pool's owner thread (the thread that uses
// it after construction). A buffer handed to another thread — e.g. a received datagram passed
// from the master to a worker through a SpscRing — must come back to the owner (through a return
// ring) before Release(); releasing from another thread is a data race.
//
// Lifetime: every acquired buffer must be released before the pool is destroyed (asserted in
// debug builds); buffer pointers dangle after that.
class PacketPool {
 public:
  struct Options {
    size_t buffer_size = 2048;  // bytes per buffer, rounded up to a multiple of 64
    size_t buffers_per_slab = 64;
    size_t max_buffers = 4096;  // Acquire() returns nullptr beyond this many in use
  };

  explicit PacketPool(const Options& options);
  PacketPool(const PacketPool&) = delete;
  PacketPool& operator=(const PacketPool&) = delete;
  ~PacketPool();

  // Returns a free buffer with length == 0, allocating a slab if none is free and the maximum
  // allows it. Returns nullptr when max_buffers are in use (the caller counts a drop) or when the
  // slab allocation fails.
  PacketBuffer* Acquire();

  // Allocates slabs until at least min(count, max_buffers) buffers exist, so that later Acquire()
  // calls never allocate. Returns false if an allocation failed.
  bool Reserve(size_t count);

  // Returns `buffer` (from this pool's Acquire) to the free list. Must not be null.
  void Release(PacketBuffer* buffer);

  size_t buffer_size() const { return buffer_size_; }
  size_t max_buffers() const { return max_buffers_; }
  // Buffers created so far (in use + free).
  size_t allocated() const { return allocated_; }
  size_t in_use() const { return in_use_; }
  size_t free_count() const { return allocated_ - in_use_; }
  // Slabs allocated so far; unchanged by Acquire/Release once the pool is warm.
  size_t slab_allocations() const { return slabs_.size(); }

 private:
  struct AlignedDelete {
    void operator()(uint8_t* p) const;
  };
  struct Slab {
    std::unique_ptr<PacketBuffer[]> headers;
    std::unique_ptr<uint8_t, AlignedDelete> data;
  };

  bool AddSlab();

  const size_t buffer_size_;
  const size_t buffers_per_slab_;
  const size_t max_buffers_;
  PacketBuffer* free_head_ = nullptr;
  size_t allocated_ = 0;
  size_t in_use_ = 0;
  std::vector<Slab> slabs_;
};

}  // namespace petrel

#endif  // PETREL_COMMON_PACKET_POOL_H_
