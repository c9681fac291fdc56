// ConnectionMemory, the allocator Connections hand ngtcp2: blocks are counted while held, keep
// malloc's alignment and contents across realloc, calloc zeroes, and whatever is still held when
// it goes is freed (the ASan build's leak check fails this test otherwise). The case it exists
// for, ngtcp2 0.12.1 losing frame chains under packet loss, is
// Http3ClientTest.ResponsesBlockedOnQpackInsertsComplete under ASan.
#include "quic/connection/connection_memory.h"

#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>

#include "gtest/gtest.h"

namespace petrel::quic {
namespace {

bool Aligned(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % alignof(std::max_align_t) == 0;
}

TEST(ConnectionMemoryTest, CountsBlocksAndKeepsWhatReallocMoves) {
  ConnectionMemory memory;
  const ngtcp2_mem* mem = memory.mem();
  void* a = mem->malloc(24, mem->user_data);
  ASSERT_NE(a, nullptr);
  EXPECT_TRUE(Aligned(a));
  std::memset(a, 0x5a, 24);
  auto* z = static_cast<unsigned char*>(mem->calloc(10, 7, mem->user_data));
  ASSERT_NE(z, nullptr);
  EXPECT_TRUE(Aligned(z));
  for (size_t i = 0; i < 70; ++i) ASSERT_EQ(z[i], 0) << i;
  EXPECT_EQ(memory.blocks(), 2u);
  auto* grown = static_cast<unsigned char*>(mem->realloc(a, 100000, mem->user_data));
  ASSERT_NE(grown, nullptr);
  EXPECT_TRUE(Aligned(grown));
  for (size_t i = 0; i < 24; ++i) ASSERT_EQ(grown[i], 0x5a) << i;
  EXPECT_EQ(memory.blocks(), 2u);
  void* fresh = mem->realloc(nullptr, 8, mem->user_data);  // realloc(NULL) is malloc
  ASSERT_NE(fresh, nullptr);
  EXPECT_EQ(memory.blocks(), 3u);
  mem->free(grown, mem->user_data);
  mem->free(nullptr, mem->user_data);
  EXPECT_EQ(memory.blocks(), 2u);
  mem->free(z, mem->user_data);
  mem->free(fresh, mem->user_data);
  EXPECT_EQ(memory.blocks(), 0u);
}

TEST(ConnectionMemoryTest, OversizeRequestsFailCleanly) {
  ConnectionMemory memory;
  const ngtcp2_mem* mem = memory.mem();
  const size_t huge = std::numeric_limits<size_t>::max() - 4;
  EXPECT_EQ(mem->malloc(huge, mem->user_data), nullptr);
  EXPECT_EQ(mem->calloc(huge / 2, 4, mem->user_data), nullptr);
  void* a = mem->malloc(16, mem->user_data);
  EXPECT_EQ(mem->realloc(a, huge, mem->user_data), nullptr);  // `a` is still held
  EXPECT_EQ(memory.blocks(), 1u);
  mem->free(a, mem->user_data);
  EXPECT_EQ(memory.blocks(), 0u);
}

TEST(ConnectionMemoryTest, BlocksStillHeldAreFreedWithIt) {
  auto memory = std::make_unique<ConnectionMemory>();
  const ngtcp2_mem* mem = memory->mem();
  for (int i = 0; i < 100; ++i) ASSERT_NE(mem->malloc(32 + i, mem->user_data), nullptr);
  ASSERT_NE(mem->calloc(3, 300, mem->user_data), nullptr);
  EXPECT_EQ(memory->blocks(), 101u);
  memory.reset();  // under ASan: no leak reported
}

}  // namespace
}  // namespace petrel::quic
