// Public: counters, gauges and histograms sharded per thread, rendered in Prometheus text format.
#ifndef PETREL_COMMON_METRICS_H_
#define PETREL_COMMON_METRICS_H_

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "petrel/common/cache_line.h"

namespace petrel {

// Label pairs (name, value). Registration sorts them by name, so the order given does not matter;
// names must match [a-zA-Z_][a-zA-Z0-9_]* and not start with "__"; values are any bytes (escaped
// on output).
using MetricLabels = std::vector<std::pair<std::string, std::string>>;

namespace internal {

// Hot-path updates go to the calling thread's shard, so no two threads write the same cache line
// and no update needs a contended atomic read-modify-write. Shards 1..kMetricShards-1 are each
// owned by one live thread at a time (assigned on the thread's first update, returned to a free
// list when it exits) and updated with a relaxed load + store — only the owner writes, so no
// increment is lost and no LOCK-prefixed instruction is needed. Shard 0 is shared by threads that
// found every shard taken (and by a thread's updates made during its own exit); it is updated with
// relaxed fetch_add, so sharing costs speed, never correctness.
inline constexpr size_t kMetricShards = 64;

struct MetricShard {
  uint16_t index = 0;
  bool exclusive = false;
  bool assigned = false;
};

// constinit: trivially initialized, so reading it compiles to a plain TLS load (no init guard).
extern constinit thread_local MetricShard tls_metric_shard;

MetricShard AssignMetricShard();  // the first update on a thread

inline MetricShard CurrentMetricShard() {
  const MetricShard shard = tls_metric_shard;
  if (!shard.assigned) [[unlikely]] {
    return AssignMetricShard();
  }
  return shard;
}

inline void ShardAdd(std::atomic<uint64_t>& cell, uint64_t n, bool exclusive) {
  if (exclusive) {
    cell.store(cell.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  } else {
    cell.fetch_add(n, std::memory_order_relaxed);
  }
}

}  // namespace internal

// A monotonically increasing count. Inc may be called from any thread; it never locks.
class Counter {
 public:
  Counter(const Counter&) = delete;
  Counter& operator=(const Counter&) = delete;

  void Inc(uint64_t n = 1) {
    const internal::MetricShard shard = internal::CurrentMetricShard();
    internal::ShardAdd(cells_[shard.index].value, n, shard.exclusive);
  }

  // The sum over shards: every increment that happened before the call is included; concurrent
  // ones may or may not be.
  uint64_t Value() const;

 private:
  friend class MetricsRegistry;
  Counter() = default;

  struct alignas(kCacheLineSize) Cell {
    std::atomic<uint64_t> value{0};
  };
  std::array<Cell, internal::kMetricShards> cells_;
};

// A value that goes up and down (connections open, ring depth). One atomic, not sharded: Set must
// be a single value, and a gauge is typically written by one thread (per-worker gauges carry a
// worker label), so its cache line is not contended.
class alignas(kCacheLineSize) Gauge {
 public:
  Gauge(const Gauge&) = delete;
  Gauge& operator=(const Gauge&) = delete;

  void Set(int64_t v) { value_.store(v, std::memory_order_relaxed); }
  void Add(int64_t delta) { value_.fetch_add(delta, std::memory_order_relaxed); }
  void Sub(int64_t delta) { value_.fetch_sub(delta, std::memory_order_relaxed); }
  int64_t Value() const { return value_.load(std::memory_order_relaxed); }

 private:
  friend class MetricsRegistry;
  Gauge() = default;

  std::atomic<int64_t> value_{0};
};

// Counts observations into buckets with fixed upper bounds (Prometheus "le" semantics: an
// observation v lands in the first bucket with v <= bound; NaN and values above every bound land
// in the implicit +Inf bucket). Observe may be called from any thread; it never locks.
class Histogram {
 public:
  struct Snapshot {
    std::vector<uint64_t> cumulative;  // per bound, then +Inf; non-decreasing
    uint64_t count = 0;                // == cumulative.back()
    double sum = 0;
  };

  Histogram(const Histogram&) = delete;
  Histogram& operator=(const Histogram&) = delete;
  ~Histogram();

  void Observe(double v);

  // Finite, strictly increasing; the +Inf bucket is implicit.
  const std::vector<double>& bounds() const { return bounds_; }
  // Bucket counts summed over shards. The count is derived from the buckets, so it always equals
  // the +Inf bucket; the sum is read separately and may lag concurrent observations.
  Snapshot Collect() const;

 private:
  friend class MetricsRegistry;
  explicit Histogram(std::vector<double> bounds);

  struct FreeAligned {
    void operator()(std::atomic<uint64_t>* p) const;
  };

  std::atomic<uint64_t>* ShardWords(size_t shard) const { return words_.get() + shard * stride_; }

  const std::vector<double> bounds_;
  // Per shard: bounds_.size() + 1 bucket counts, then the sum as the bits of a double; padded to
  // a whole number of cache lines.
  const size_t stride_;
  std::unique_ptr<std::atomic<uint64_t>, FreeAligned> words_;
};

// Owns metrics and renders them. Metric references returned by Add* stay valid for the registry's
// life. Registration and rendering lock a mutex and may be called from any thread; updates never
// touch the registry.
//
// Series with the same name form one family (one HELP/TYPE block), rendered in registration order.
// Adding a series whose name, labels and type match an existing one returns the existing metric,
// so per-thread setup code can register idempotently. Misuse is a programming error caught at
// startup and aborts with a kFatal log line: an invalid metric or label name, a repeated label
// name, a name reused with another type, a histogram re-registered with other bounds, histogram
// bounds that are not finite and strictly increasing, or a histogram label named "le".
class MetricsRegistry {
 public:
  MetricsRegistry();
  MetricsRegistry(const MetricsRegistry&) = delete;
  MetricsRegistry& operator=(const MetricsRegistry&) = delete;
  ~MetricsRegistry();

  // `name` must match [a-zA-Z_:][a-zA-Z0-9_:]*; the first registration's `help` wins.
  Counter& AddCounter(absl::string_view name, absl::string_view help, MetricLabels labels = {});
  Gauge& AddGauge(absl::string_view name, absl::string_view help, MetricLabels labels = {});
  // A trailing +Inf bound is accepted and dropped (the +Inf bucket is always there).
  Histogram& AddHistogram(absl::string_view name, absl::string_view help,
                          std::vector<double> bucket_upper_bounds, MetricLabels labels = {});

  // Prometheus text exposition format 0.0.4 (Content-Type "text/plain; version=0.0.4").
  std::string RenderPrometheus() const;

 private:
  enum class Type { kCounter, kGauge, kHistogram };
  struct Series;
  struct Family;

  Series& FindOrAddSeries(absl::string_view name, absl::string_view help, Type type,
                          MetricLabels labels, bool* added);

  mutable std::mutex mu_;
  std::vector<std::unique_ptr<Family>> families_;               // guarded by mu_
  absl::flat_hash_map<std::string, Family*> families_by_name_;  // guarded by mu_
};

}  // namespace petrel

#endif  // PETREL_COMMON_METRICS_H_
