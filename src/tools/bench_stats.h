// Internal (tools): what petrel-bench measures with — a latency histogram of fixed size with a
// bounded relative error, and the number formatting of its report.
#ifndef PETREL_TOOLS_BENCH_STATS_H_
#define PETREL_TOOLS_BENCH_STATS_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace petrel::tools {

// Log-linear buckets over uint64 values (nanoseconds in petrel-bench): values below 2^kSubBits
// are exact; above, every power of two is split into 2^kSubBits equal buckets, so a bucket is
// at most 1/64 of its values wide. Percentiles report the bucket's midpoint (clamped to the exact
// min and max), so they are within kMaxRelativeError of a recorded value of that rank.
//
// Recording is a few instructions and never allocates (the buckets are a member array, ~30 KiB),
// which is why a load generator can record every request. Not thread-safe: one histogram per
// thread, merged at the end.
class LatencyHistogram {
 public:
  static constexpr int kSubBits = 6;
  static constexpr uint64_t kSubBuckets = uint64_t{1} << kSubBits;
  // 64 exact values, then 64 buckets for each of the octaves 2^6 .. 2^63.
  static constexpr size_t kBucketCount = kSubBuckets + (64 - kSubBits) * kSubBuckets;
  // Half a bucket's width over its lowest value.
  static constexpr double kMaxRelativeError = 1.0 / (2 * kSubBuckets);

  void Record(uint64_t value) {
    ++buckets_[BucketIndex(value)];
    ++count_;
    sum_ += value;
    if (value < min_) min_ = value;
    if (value > max_) max_ = value;
  }
  // Adds `other`'s values to this one.
  void Merge(const LatencyHistogram& other);
  void Clear();

  uint64_t count() const { return count_; }
  // 0 when empty.
  uint64_t min() const { return count_ == 0 ? 0 : min_; }
  uint64_t max() const { return max_; }
  double mean() const { return count_ == 0 ? 0 : static_cast<double>(sum_) / count_; }
  // The value of rank ceil(p/100 * count) (p in [0, 100]; p = 0 gives min()); 0 when empty.
  uint64_t ValueAtPercentile(double p) const;

  // Bucket arithmetic, exposed for the tests.
  static size_t BucketIndex(uint64_t value) {
    if (value < kSubBuckets) return static_cast<size_t>(value);
    const int msb = 63 - __builtin_clzll(value);  // >= kSubBits
    const int shift = msb - kSubBits;
    // (value >> shift) is in [kSubBuckets, 2 * kSubBuckets).
    return static_cast<size_t>(kSubBuckets * (shift + 1) + ((value >> shift) - kSubBuckets));
  }
  static uint64_t BucketLow(size_t index);
  // The last value of the bucket (inclusive).
  static uint64_t BucketHigh(size_t index);

 private:
  std::array<uint64_t, kBucketCount> buckets_{};
  uint64_t count_ = 0;
  // Wraps only after ~584 years of summed nanoseconds.
  uint64_t sum_ = 0;
  uint64_t min_ = UINT64_MAX;
  uint64_t max_ = 0;
};

// "950ns", "12.34us", "4.56ms", "1.23s": two decimals in the largest unit below the value.
std::string FormatNanos(double ns);
// "999B", "12.34KB", "5.67MB", "1.23GB" (powers of 1024, as h2load prints them).
std::string FormatBytes(double bytes);

}  // namespace petrel::tools

#endif  // PETREL_TOOLS_BENCH_STATS_H_
