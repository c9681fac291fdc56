#include "petrel/common/packet_pool.h"

#include <cstdint>
#include <set>
#include <vector>

#include "gtest/gtest.h"

namespace petrel {
namespace {

PacketPool::Options SmallPool(size_t max_buffers) {
  PacketPool::Options options;
  options.buffer_size = 2048;
  options.buffers_per_slab = 8;
  options.max_buffers = max_buffers;
  return options;
}

TEST(PacketPoolTest, StartsWithNothingAllocated) {
  PacketPool pool(SmallPool(64));
  EXPECT_EQ(pool.allocated(), 0u);
  EXPECT_EQ(pool.in_use(), 0u);
  EXPECT_EQ(pool.slab_allocations(), 0u);
}

TEST(PacketPoolTest, BuffersAreAlignedSizedAndDistinct) {
  PacketPool::Options options = SmallPool(64);
  options.buffer_size = 1500;  // rounded up to a cache-line multiple
  PacketPool pool(options);
  std::vector<PacketBuffer*> held;
  std::set<const uint8_t*> starts;
  for (int i = 0; i < 20; ++i) {
    PacketBuffer* b = pool.Acquire();
    ASSERT_NE(b, nullptr);
    EXPECT_EQ(b->capacity(), 1536u);
    EXPECT_EQ(b->length, 0u);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(b->data()) % 64, 0u);
    // The whole buffer is writable (ASan catches an overlap or overrun).
    for (size_t j = 0; j < b->capacity(); ++j) b->data()[j] = static_cast<uint8_t>(i);
    starts.insert(b->data());
    held.push_back(b);
  }
  EXPECT_EQ(starts.size(), 20u);
  for (size_t i = 0; i < held.size(); ++i) {
    EXPECT_EQ(held[i]->data()[0], static_cast<uint8_t>(i));
    EXPECT_EQ(held[i]->data()[held[i]->capacity() - 1], static_cast<uint8_t>(i));
  }
  EXPECT_EQ(pool.slab_allocations(), 3u);  // 8 + 8 + 4 of the third
  EXPECT_EQ(pool.allocated(), 24u);
  EXPECT_EQ(pool.in_use(), 20u);
  for (PacketBuffer* b : held) pool.Release(b);
  EXPECT_EQ(pool.in_use(), 0u);
}

TEST(PacketPoolTest, ReleasedBufferIsReusedLifo) {
  PacketPool pool(SmallPool(64));
  PacketBuffer* a = pool.Acquire();
  PacketBuffer* b = pool.Acquire();
  a->length = 100;
  pool.Release(a);
  pool.Release(b);
  EXPECT_EQ(pool.Acquire(), b);  // most recently released first
  PacketBuffer* again = pool.Acquire();
  EXPECT_EQ(again, a);
  EXPECT_EQ(again->length, 0u);  // reset on Acquire
  pool.Release(a);
  pool.Release(b);
}

TEST(PacketPoolTest, WarmPoolAllocatesNothing) {
  PacketPool pool(SmallPool(256));
  std::vector<PacketBuffer*> held;
  // Warm up to a working set of 100 buffers.
  for (int i = 0; i < 100; ++i) held.push_back(pool.Acquire());
  for (PacketBuffer* b : held) pool.Release(b);
  const size_t slabs = pool.slab_allocations();
  const size_t allocated = pool.allocated();
  std::set<PacketBuffer*> warm_set(held.begin(), held.end());

  for (int cycle = 0; cycle < 100'000; ++cycle) {
    held.clear();
    const int burst = 1 + cycle % 100;
    for (int i = 0; i < burst; ++i) {
      PacketBuffer* b = pool.Acquire();
      ASSERT_NE(b, nullptr);
      ASSERT_TRUE(warm_set.count(b)) << "a buffer from outside the warm set";
      held.push_back(b);
    }
    for (PacketBuffer* b : held) pool.Release(b);
  }
  EXPECT_EQ(pool.slab_allocations(), slabs);
  EXPECT_EQ(pool.allocated(), allocated);
  EXPECT_EQ(pool.in_use(), 0u);
}

TEST(PacketPoolTest, ReturnsNullAtTheMaximum) {
  PacketPool pool(SmallPool(10));
  std::vector<PacketBuffer*> held;
  for (int i = 0; i < 10; ++i) {
    PacketBuffer* b = pool.Acquire();
    ASSERT_NE(b, nullptr);
    held.push_back(b);
  }
  EXPECT_EQ(pool.allocated(), 10u);  // the second slab was partial (8 + 2)
  EXPECT_EQ(pool.Acquire(), nullptr);
  EXPECT_EQ(pool.Acquire(), nullptr);
  pool.Release(held.back());
  held.pop_back();
  PacketBuffer* b = pool.Acquire();
  EXPECT_NE(b, nullptr);
  held.push_back(b);
  for (PacketBuffer* h : held) pool.Release(h);
}

TEST(PacketPoolTest, LargeGroBuffers) {
  PacketPool::Options options;
  options.buffer_size = 65536;
  options.buffers_per_slab = 4;
  options.max_buffers = 16;
  PacketPool pool(options);
  PacketBuffer* b = pool.Acquire();
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->capacity(), 65536u);
  b->data()[65535] = 1;
  b->length = 65536;
  pool.Release(b);
  EXPECT_EQ(pool.free_count(), 4u);
}

TEST(PacketPoolTest, ZeroMaximumHandsOutNothing) {
  PacketPool pool(SmallPool(0));
  EXPECT_EQ(pool.Acquire(), nullptr);
  EXPECT_EQ(pool.slab_allocations(), 0u);
}

}  // namespace
}  // namespace petrel

namespace petrel {
namespace {

TEST(PacketPoolReserveTest, ReserveAllocatesUpFrontAndAcquireThenNever) {
  PacketPool::Options options;
  options.buffers_per_slab = 8;
  options.max_buffers = 20;
  PacketPool pool(options);
  ASSERT_TRUE(pool.Reserve(100));  // capped at max_buffers
  EXPECT_EQ(pool.allocated(), 20u);
  const size_t slabs = pool.slab_allocations();
  std::vector<PacketBuffer*> held;
  for (int i = 0; i < 20; ++i) held.push_back(pool.Acquire());
  EXPECT_EQ(pool.Acquire(), nullptr);
  EXPECT_EQ(pool.slab_allocations(), slabs);
  for (PacketBuffer* b : held) pool.Release(b);
}

}  // namespace
}  // namespace petrel
