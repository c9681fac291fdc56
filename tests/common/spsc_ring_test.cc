#include "petrel/common/spsc_ring.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace petrel {
namespace {

// Items for the two-thread tests. Sanitizer builds (ThreadSanitizer especially) run the same code
// an order of magnitude slower; PETREL_SPSC_ITEMS overrides either default.
#ifdef PETREL_SANITIZED
constexpr uint64_t kDefaultThreadedItems = 2'000'000;
#else
constexpr uint64_t kDefaultThreadedItems = 10'000'000;
#endif

uint64_t ThreadedItems() {
  // Read before any test thread starts.
  if (const char* env = std::getenv("PETREL_SPSC_ITEMS")) {  // NOLINT(concurrency-mt-unsafe)
    return std::strtoull(env, nullptr, 10);
  }
  return kDefaultThreadedItems;
}

TEST(SpscRingTest, CapacityRoundsUpToPowerOfTwo) {
  EXPECT_EQ(SpscRing<int>(0).capacity(), 1u);
  EXPECT_EQ(SpscRing<int>(1).capacity(), 1u);
  EXPECT_EQ(SpscRing<int>(3).capacity(), 4u);
  EXPECT_EQ(SpscRing<int>(64).capacity(), 64u);
  EXPECT_EQ(SpscRing<int>(65).capacity(), 128u);
}

TEST(SpscRingTest, IndicesLiveOnSeparateCacheLines) {
  // The ring is over-aligned so each side's line is its own.
  EXPECT_EQ(alignof(SpscRing<int>), kCacheLineSize);
  EXPECT_GE(sizeof(SpscRing<int>), 3 * kCacheLineSize);
}

TEST(SpscRingTest, FullAndEmpty) {
  SpscRing<int> ring(4);
  int out = -1;
  EXPECT_TRUE(ring.EmptyApprox());
  EXPECT_FALSE(ring.TryPop(&out));
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(ring.TryPush(i));
  EXPECT_EQ(ring.SizeApprox(), 4u);
  EXPECT_FALSE(ring.TryPush(99));
  int item = 100;
  EXPECT_FALSE(ring.TryPush(std::move(item)));  // NOLINT(performance-move-const-arg): T&& path
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(ring.TryPop(&out));
    EXPECT_EQ(out, i);
  }
  EXPECT_FALSE(ring.TryPop(&out));
  EXPECT_TRUE(ring.EmptyApprox());
}

TEST(SpscRingTest, CapacityOneRing) {
  SpscRing<int> ring(1);
  int out = 0;
  EXPECT_TRUE(ring.TryPush(7));
  EXPECT_FALSE(ring.TryPush(8));
  EXPECT_TRUE(ring.TryPop(&out));
  EXPECT_EQ(out, 7);
  EXPECT_TRUE(ring.TryPush(9));
  EXPECT_TRUE(ring.TryPop(&out));
  EXPECT_EQ(out, 9);
}

TEST(SpscRingTest, WrapAroundKeepsOrder) {
  SpscRing<uint64_t> ring(8);
  uint64_t next_in = 0, next_out = 0;
  // 5 in, 5 out, repeatedly: the indices cross the end of the slot array at every offset.
  for (int round = 0; round < 1000; ++round) {
    for (int i = 0; i < 5; ++i) ASSERT_TRUE(ring.TryPush(next_in++));
    for (int i = 0; i < 5; ++i) {
      uint64_t out = 0;
      ASSERT_TRUE(ring.TryPop(&out));
      ASSERT_EQ(out, next_out++);
    }
  }
  EXPECT_TRUE(ring.EmptyApprox());
}

TEST(SpscRingTest, PushBatchIsPartialWhenNearlyFull) {
  SpscRing<int> ring(8);
  std::vector<int> items = {0, 1, 2, 3, 4, 5};
  EXPECT_EQ(ring.PushBatch(items.data(), items.size()), 6u);
  std::vector<int> more = {6, 7, 8, 9};
  EXPECT_EQ(ring.PushBatch(more.data(), more.size()), 2u);  // only 2 free
  EXPECT_EQ(more[2], 8);                                    // untouched
  EXPECT_EQ(ring.PushBatch(more.data() + 2, 2), 0u);
  EXPECT_EQ(ring.SizeApprox(), 8u);

  int out[16];
  EXPECT_EQ(ring.PopBatch(out, 3), 3u);
  EXPECT_EQ(out[0], 0);
  EXPECT_EQ(out[2], 2);
  EXPECT_EQ(ring.PopBatch(out, 16), 5u);  // asks for more than there is
  for (int i = 0; i < 5; ++i) EXPECT_EQ(out[i], 3 + i);
  EXPECT_EQ(ring.PopBatch(out, 16), 0u);
  EXPECT_EQ(ring.PopBatch(out, 0), 0u);
}

TEST(SpscRingTest, BatchesWrapAround) {
  SpscRing<uint64_t> ring(16);
  uint64_t next_in = 0, next_out = 0;
  for (int round = 0; round < 500; ++round) {
    uint64_t batch[11];
    const size_t n = 1 + round % 11;
    for (size_t i = 0; i < n; ++i) batch[i] = next_in + i;
    ASSERT_EQ(ring.PushBatch(batch, n), n);
    next_in += n;
    uint64_t out[11];
    ASSERT_EQ(ring.PopBatch(out, 11), n);
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(out[i], next_out++);
  }
}

TEST(SpscRingTest, MoveOnlyItems) {
  SpscRing<std::unique_ptr<int>> ring(4);
  EXPECT_TRUE(ring.TryPush(std::make_unique<int>(1)));
  std::unique_ptr<int> batch[3] = {std::make_unique<int>(2), std::make_unique<int>(3),
                                   std::make_unique<int>(4)};
  EXPECT_EQ(ring.PushBatch(batch, 3), 3u);
  EXPECT_EQ(batch[0], nullptr);  // moved from

  std::unique_ptr<int> rejected = std::make_unique<int>(5);
  EXPECT_FALSE(ring.TryPush(std::move(rejected)));
  // A failed push leaves the item with the caller.
  ASSERT_NE(rejected, nullptr);  // NOLINT(bugprone-use-after-move)
  EXPECT_EQ(*rejected, 5);

  std::unique_ptr<int> out;
  ASSERT_TRUE(ring.TryPop(&out));
  EXPECT_EQ(*out, 1);
  std::unique_ptr<int> outs[2];
  ASSERT_EQ(ring.PopBatch(outs, 2), 2u);
  EXPECT_EQ(*outs[0], 2);
  EXPECT_EQ(*outs[1], 3);
  // One item (4) stays in the ring; the ring's destructor frees it (ASan checks for the leak).
}

struct Tracked {
  static inline int live = 0;
  Tracked() { ++live; }
  Tracked(Tracked&&) noexcept { ++live; }
  Tracked& operator=(Tracked&&) noexcept = default;
  ~Tracked() { --live; }
};

TEST(SpscRingTest, DestroysExactlyTheItemsItHolds) {
  {
    SpscRing<Tracked> ring(8);
    EXPECT_EQ(Tracked::live, 0);  // slots are raw storage, not default-constructed items
    for (int i = 0; i < 5; ++i) ASSERT_TRUE(ring.TryPush(Tracked()));
    EXPECT_EQ(Tracked::live, 5);
    Tracked out;
    ASSERT_TRUE(ring.TryPop(&out));
    EXPECT_EQ(Tracked::live, 5);  // 4 in the ring + out
  }
  EXPECT_EQ(Tracked::live, 0);
}

TEST(SpscRingTest, WasEmptyAndConfirmEmptySingleThread) {
  SpscRing<int> ring(4);
  EXPECT_TRUE(ring.ConfirmEmpty());
  bool was_empty = false;
  EXPECT_TRUE(ring.TryPush(1, &was_empty));
  EXPECT_TRUE(was_empty);
  EXPECT_FALSE(ring.ConfirmEmpty());
  EXPECT_TRUE(ring.TryPush(2, &was_empty));
  EXPECT_FALSE(was_empty);  // the consumer has not taken item 1 yet

  int out = 0;
  ASSERT_TRUE(ring.TryPop(&out));
  int batch[3] = {3, 4, 5};
  EXPECT_EQ(ring.PushBatch(batch, 3, &was_empty), 3u);
  EXPECT_FALSE(was_empty);  // item 2 was still queued

  int outs[4];
  EXPECT_EQ(ring.PopBatch(outs, 4), 4u);
  EXPECT_TRUE(ring.ConfirmEmpty());
  EXPECT_EQ(ring.PushBatch(batch + 2, 1, &was_empty), 1u);
  EXPECT_TRUE(was_empty);  // the consumer had taken everything before this batch

  // A full ring reports was_empty == false for a rejected push.
  SpscRing<int> full(1);
  EXPECT_TRUE(full.TryPush(1, &was_empty));
  was_empty = true;
  EXPECT_FALSE(full.TryPush(2, &was_empty));
  EXPECT_FALSE(was_empty);
}

// One producer, one consumer, spinning; every item is its sequence number and must arrive once,
// in order.
TEST(SpscRingTest, TwoThreadsStrictOrderSingleItems) {
  const uint64_t items = ThreadedItems();
  SpscRing<uint64_t> ring(1024);
  const auto start = std::chrono::steady_clock::now();
  std::thread producer([&] {
    for (uint64_t seq = 0; seq < items;) {
      if (ring.TryPush(seq)) {
        ++seq;
      } else {
        std::this_thread::yield();
      }
    }
  });
  uint64_t expected = 0, checksum = 0, out_of_order = 0;
  while (expected < items) {
    uint64_t v = 0;
    if (!ring.TryPop(&v)) {
      std::this_thread::yield();
      continue;
    }
    if (v != expected) ++out_of_order;
    checksum += v;
    ++expected;
  }
  producer.join();
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("[ spsc ] %llu single items in %.3f s\n", static_cast<unsigned long long>(items),
              secs);
  EXPECT_EQ(out_of_order, 0u);
  EXPECT_EQ(checksum, items * (items - 1) / 2);
  EXPECT_TRUE(ring.EmptyApprox());
}

TEST(SpscRingTest, TwoThreadsStrictOrderBatches) {
  const uint64_t items = ThreadedItems();
  SpscRing<uint64_t> ring(1024);
  const auto start = std::chrono::steady_clock::now();
  std::thread producer([&] {
    uint64_t batch[64];
    uint64_t seq = 0;
    size_t want = 1;
    while (seq < items) {
      // Batch sizes cycle through 1..64 so batches straddle the wrap point in every way.
      const size_t n = static_cast<size_t>(std::min<uint64_t>(want, items - seq));
      for (size_t i = 0; i < n; ++i) batch[i] = seq + i;
      size_t pushed = 0;
      while (pushed < n) {
        const size_t k = ring.PushBatch(batch + pushed, n - pushed);
        if (k == 0) std::this_thread::yield();
        pushed += k;
      }
      seq += n;
      want = want % 64 + 1;
    }
  });
  uint64_t expected = 0, checksum = 0, out_of_order = 0;
  uint64_t out[48];
  while (expected < items) {
    const size_t n = ring.PopBatch(out, 48);
    if (n == 0) {
      std::this_thread::yield();
      continue;
    }
    for (size_t i = 0; i < n; ++i) {
      if (out[i] != expected) ++out_of_order;
      checksum += out[i];
      ++expected;
    }
  }
  producer.join();
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("[ spsc ] %llu batched items in %.3f s\n", static_cast<unsigned long long>(items),
              secs);
  EXPECT_EQ(out_of_order, 0u);
  EXPECT_EQ(checksum, items * (items - 1) / 2);
}

// The wake-up protocol: the consumer sleeps on an eventfd whenever ConfirmEmpty() says so; the
// producer writes the eventfd only when was_empty. If a wake-up were lost the consumer would
// sleep with items queued: the poll timeout catches that (and fails the test) instead of hanging.
TEST(SpscRingTest, EventfdWakeupProtocolLosesNoWakeup) {
  const uint64_t items = ThreadedItems();
  SpscRing<uint64_t> ring(256);
  const int efd = ::eventfd(0, EFD_CLOEXEC);
  ASSERT_GE(efd, 0);

  uint64_t signals = 0;
  const auto start = std::chrono::steady_clock::now();
  std::thread producer([&] {
    uint64_t batch[32];
    uint64_t seq = 0;
    size_t want = 1;
    while (seq < items) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(want, items - seq));
      for (size_t i = 0; i < n; ++i) batch[i] = seq + i;
      size_t pushed = 0;
      while (pushed < n) {
        bool was_empty = false;
        const size_t k = ring.PushBatch(batch + pushed, n - pushed, &was_empty);
        if (was_empty) {
          const uint64_t one = 1;
          ASSERT_EQ(::write(efd, &one, sizeof(one)), static_cast<ssize_t>(sizeof(one)));
          ++signals;
        }
        if (k == 0) std::this_thread::yield();
        pushed += k;
      }
      seq += n;
      want = want % 32 + 1;
    }
  });

  // Generous: under a sanitizer on a loaded 2-core machine the producer can be descheduled for a
  // while; a lost wake-up is reported only if items sit in the ring for this long.
  constexpr int kStuckMillis = 10'000;
  uint64_t expected = 0, checksum = 0, out_of_order = 0, sleeps = 0;
  bool lost_wakeup = false;
  uint64_t out[64];
  while (expected < items && !lost_wakeup) {
    const size_t n = ring.PopBatch(out, 64);
    for (size_t i = 0; i < n; ++i) {
      if (out[i] != expected) ++out_of_order;
      checksum += out[i];
      ++expected;
    }
    if (n > 0 || !ring.ConfirmEmpty()) continue;
    ++sleeps;
    pollfd pfd{efd, POLLIN, 0};
    for (;;) {
      const int r = ::poll(&pfd, 1, kStuckMillis);
      if (r > 0) break;
      if (r < 0) continue;  // EINTR
      if (!ring.EmptyApprox()) {
        lost_wakeup = true;  // items are queued and nobody signalled us
        break;
      }
    }
    if (!lost_wakeup) {
      uint64_t count = 0;
      ASSERT_EQ(::read(efd, &count, sizeof(count)), static_cast<ssize_t>(sizeof(count)));
    }
  }
  if (lost_wakeup) {
    // Let the producer finish so the thread can be joined; the test has already failed.
    while (expected < items) {
      const size_t n = ring.PopBatch(out, 64);
      if (n == 0) std::this_thread::yield();
      expected += n;
    }
  }
  producer.join();
  ::close(efd);
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("[ spsc ] %llu items with eventfd wake-ups in %.3f s: %llu sleeps, %llu signals\n",
              static_cast<unsigned long long>(items), secs, static_cast<unsigned long long>(sleeps),
              static_cast<unsigned long long>(signals));
  ASSERT_FALSE(lost_wakeup) << "consumer slept with items in the ring";
  EXPECT_EQ(out_of_order, 0u);
  EXPECT_EQ(checksum, items * (items - 1) / 2);
  // Every sleep needs a signal to end it (spurious wake-ups only add signals).
  EXPECT_GE(signals, sleeps);
}

}  // namespace
}  // namespace petrel
