// SpscRing cross-thread throughput, side by side with a mutex-guarded std::queue of the same
// bound, in one binary. The producer runs on a second thread; the benchmark thread consumes.
// Both threads spin (no sleeping), which is how the master and a busy worker use the ring.
#include <benchmark/benchmark.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <queue>
#include <thread>

#include "petrel/common/spsc_ring.h"

namespace {

constexpr uint64_t kItemsPerIteration = 1 << 20;
constexpr size_t kCapacity = 4096;

// The baseline: what a first implementation would write.
class MutexQueue {
 public:
  bool TryPush(uint64_t v) {
    std::lock_guard<std::mutex> lock(mu_);
    if (q_.size() >= kCapacity) return false;
    q_.push(v);
    return true;
  }
  bool TryPop(uint64_t* v) {
    std::lock_guard<std::mutex> lock(mu_);
    if (q_.empty()) return false;
    *v = q_.front();
    q_.pop();
    return true;
  }

 private:
  std::mutex mu_;
  std::queue<uint64_t> q_;
};

template <typename Queue>
void RunOneByOne(benchmark::State& state, Queue& q) {
  uint64_t checksum = 0;
  for (auto _ : state) {
    std::thread producer([&q] {
      for (uint64_t i = 0; i < kItemsPerIteration; ++i) {
        while (!q.TryPush(uint64_t{i})) {
        }
      }
    });
    for (uint64_t i = 0; i < kItemsPerIteration; ++i) {
      uint64_t v;
      while (!q.TryPop(&v)) {
      }
      checksum += v;
    }
    producer.join();
  }
  benchmark::DoNotOptimize(checksum);
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * kItemsPerIteration));
}

void BM_MutexQueue(benchmark::State& state) {
  MutexQueue q;
  RunOneByOne(state, q);
}
BENCHMARK(BM_MutexQueue)->UseRealTime()->Unit(benchmark::kMillisecond);

void BM_SpscRing(benchmark::State& state) {
  petrel::SpscRing<uint64_t> q(kCapacity);
  RunOneByOne(state, q);
}
BENCHMARK(BM_SpscRing)->UseRealTime()->Unit(benchmark::kMillisecond);

// Batches of 32, as the master pushes a recvmmsg batch and a worker drains 64 at a time.
void BM_SpscRingBatch32(benchmark::State& state) {
  petrel::SpscRing<uint64_t> q(kCapacity);
  constexpr size_t kBatch = 32;
  uint64_t checksum = 0;
  for (auto _ : state) {
    std::thread producer([&q] {
      uint64_t items[kBatch];
      for (uint64_t i = 0; i < kItemsPerIteration;) {
        size_t n = 0;
        for (; n < kBatch && i + n < kItemsPerIteration; ++n) items[n] = i + n;
        size_t pushed = 0;
        while (pushed < n) pushed += q.PushBatch(items + pushed, n - pushed);
        i += n;
      }
    });
    uint64_t out[kBatch];
    for (uint64_t got = 0; got < kItemsPerIteration;) {
      size_t n = q.PopBatch(out, kBatch);
      for (size_t j = 0; j < n; ++j) checksum += out[j];
      got += n;
    }
    producer.join();
  }
  benchmark::DoNotOptimize(checksum);
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * kItemsPerIteration));
}
BENCHMARK(BM_SpscRingBatch32)->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
