#include "common/small_block_pool.h"

#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "gtest/gtest.h"

namespace petrel {
namespace {

bool Aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

TEST(SmallBlockPoolTest, FreedSmallBlocksAreHandedOutAgain) {
  SmallBlockPool pool;
  void* a = pool.Allocate(100);
  ASSERT_NE(a, nullptr);
  EXPECT_TRUE(Aligned16(a));
  EXPECT_EQ(pool.fresh(), 1u);
  pool.Release(a);
  EXPECT_EQ(pool.cached_bytes(), 128u);  // its class: 65..128 bytes
  void* b = pool.Allocate(70);           // same class
  EXPECT_EQ(b, a);
  EXPECT_EQ(pool.fresh(), 1u);  // taken from the free list, not from malloc
  EXPECT_EQ(pool.cached_bytes(), 0u);
  void* c = pool.Allocate(10);  // another class: fresh
  EXPECT_NE(c, a);
  EXPECT_EQ(pool.fresh(), 2u);
  pool.Release(b);
  pool.Release(c);
  pool.Release(nullptr);
}

TEST(SmallBlockPoolTest, LargeBlocksAreNeverCached) {
  SmallBlockPool pool;
  void* big = pool.Allocate(SmallBlockPool::kMaxPooledSize + 1);
  ASSERT_NE(big, nullptr);
  EXPECT_TRUE(Aligned16(big));
  std::memset(big, 0xab, SmallBlockPool::kMaxPooledSize + 1);
  pool.Release(big);
  EXPECT_EQ(pool.cached_bytes(), 0u);
}

TEST(SmallBlockPoolTest, CacheIsBoundedAndTrimmed) {
  SmallBlockPool pool(1024);
  std::vector<void*> blocks;
  for (int i = 0; i < 40; ++i) blocks.push_back(pool.Allocate(64));
  for (void* b : blocks) pool.Release(b);
  EXPECT_EQ(pool.cached_bytes(), 1024u);  // 16 blocks of 64 kept, the rest freed
  pool.Trim(256);
  EXPECT_EQ(pool.cached_bytes(), 256u);
  pool.Trim(0);
  EXPECT_EQ(pool.cached_bytes(), 0u);
  const uint64_t fresh_before = pool.fresh();
  void* again = pool.Allocate(64);
  EXPECT_EQ(pool.fresh(), fresh_before + 1);  // the free lists are empty
  pool.Release(again);
}

TEST(SmallBlockPoolTest, ReallocateKeepsTheBytes) {
  SmallBlockPool pool;
  auto* p = static_cast<char*>(pool.Allocate(10));
  std::memcpy(p, "0123456789", 10);
  // Within its block: the same pointer.
  EXPECT_EQ(pool.Reallocate(p, 60), p);
  // Into a bigger class, then past the pooled sizes, then back down.
  p = static_cast<char*>(pool.Reallocate(p, 500));
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(std::memcmp(p, "0123456789", 10), 0);
  p = static_cast<char*>(pool.Reallocate(p, 5000));
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(std::memcmp(p, "0123456789", 10), 0);
  p = static_cast<char*>(pool.Reallocate(p, 8000));
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(std::memcmp(p, "0123456789", 10), 0);
  p = static_cast<char*>(pool.Reallocate(p, 4));
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(std::memcmp(p, "0123", 4), 0);
  pool.Release(p);
  // realloc(nullptr, n) allocates.
  void* q = pool.Reallocate(nullptr, 32);
  ASSERT_NE(q, nullptr);
  pool.Release(q);
}

TEST(SmallBlockPoolTest, ZeroedAllocationAndOverflow) {
  SmallBlockPool pool;
  void* dirty = pool.Allocate(200);
  std::memset(dirty, 0xff, 200);
  pool.Release(dirty);
  auto* z = static_cast<unsigned char*>(pool.AllocateZeroed(25, 8));  // reuses the dirty block
  ASSERT_EQ(static_cast<void*>(z), dirty);
  for (int i = 0; i < 200; ++i) ASSERT_EQ(z[i], 0) << i;
  pool.Release(z);
  EXPECT_EQ(pool.AllocateZeroed(std::numeric_limits<size_t>::max() / 2, 3), nullptr);
  EXPECT_EQ(pool.Allocate(std::numeric_limits<size_t>::max() - 8), nullptr);
}

TEST(SmallBlockPoolTest, LibraryCallbacksReachThePool) {
  SmallBlockPool pool;
  void* a = SmallBlockPool::MallocFn(48, &pool);
  SmallBlockPool::FreeFn(a, &pool);
  void* b = SmallBlockPool::CallocFn(6, 8, &pool);
  EXPECT_EQ(b, a);
  b = SmallBlockPool::ReallocFn(b, 2000, &pool);
  ASSERT_NE(b, nullptr);
  SmallBlockPool::FreeFn(b, &pool);
  EXPECT_EQ(pool.fresh(), 1u);  // calloc's block was the freed one
}

}  // namespace
}  // namespace petrel
