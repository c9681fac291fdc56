// Timer restart cost on Petrel's timing wheel, beside an ordered-set timer queue (what a
// std::set / heap design pays: O(log n) erase + insert) in the same binary. Every QUIC
// connection restarts its timer after nearly every packet, so this is on the hot path.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <memory>
#include <random>
#include <set>
#include <utility>
#include <vector>

#include "petrel/common/event_loop.h"
#include "petrel/common/timer.h"

namespace {

std::vector<uint32_t> RandomDelaysMs(size_t n) {
  std::mt19937 rng(7);
  std::vector<uint32_t> v(n);
  for (auto& d : v) d = 1 + rng() % 30000;  // 1 ms .. 30 s: QUIC loss/idle timer range
  return v;
}

void BM_TimerWheelRestart(benchmark::State& state) {
  const size_t n = static_cast<size_t>(state.range(0));
  petrel::EventLoop loop;  // unbound: this thread may use it
  std::vector<std::unique_ptr<petrel::Timer>> timers;
  for (size_t i = 0; i < n; ++i) {
    timers.push_back(std::make_unique<petrel::Timer>(&loop, [] {}));
  }
  const auto delays = RandomDelaysMs(1 << 16);
  const petrel::TimePoint base = loop.now();
  for (size_t i = 0; i < n; ++i)
    timers[i]->StartAt(base + std::chrono::milliseconds(delays[i & 0xffff]));
  size_t i = 0;
  for (auto _ : state) {
    timers[i % n]->StartAt(base + std::chrono::milliseconds(delays[i & 0xffff]));
    ++i;
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_TimerWheelRestart)->Arg(1000)->Arg(100000);

void BM_OrderedSetRestart(benchmark::State& state) {
  const size_t n = static_cast<size_t>(state.range(0));
  using Entry = std::pair<petrel::TimePoint, size_t>;
  std::set<Entry> queue;
  std::vector<petrel::TimePoint> deadline(n);
  const auto delays = RandomDelaysMs(1 << 16);
  const petrel::TimePoint base = petrel::MonotonicNow();
  for (size_t i = 0; i < n; ++i) {
    deadline[i] = base + std::chrono::milliseconds(delays[i & 0xffff]);
    queue.emplace(deadline[i], i);
  }
  size_t i = 0;
  for (auto _ : state) {
    const size_t t = i % n;
    queue.erase({deadline[t], t});
    deadline[t] = base + std::chrono::milliseconds(delays[i & 0xffff]);
    queue.emplace(deadline[t], t);
    ++i;
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_OrderedSetRestart)->Arg(1000)->Arg(100000);

}  // namespace

BENCHMARK_MAIN();
