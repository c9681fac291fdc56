#include "tools/bench_stats.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_format.h"

namespace petrel::tools {

void LatencyHistogram::Merge(const LatencyHistogram& other) {
  for (size_t i = 0; i < kBucketCount; ++i) buckets_[i] += other.buckets_[i];
  count_ += other.count_;
  sum_ += other.sum_;
  min_ = std::min(min_, other.min_);
  max_ = std::max(max_, other.max_);
}

void LatencyHistogram::Clear() { *this = LatencyHistogram(); }

uint64_t LatencyHistogram::BucketLow(size_t index) {
  if (index < kSubBuckets) return index;
  const size_t shift = index / kSubBuckets - 1;
  const uint64_t sub = index % kSubBuckets + kSubBuckets;
  return sub << shift;
}

uint64_t LatencyHistogram::BucketHigh(size_t index) {
  if (index < kSubBuckets) return index;
  const size_t shift = index / kSubBuckets - 1;
  // Written so that the last bucket ends at UINT64_MAX without overflowing.
  return BucketLow(index) + ((uint64_t{1} << shift) - 1);
}

uint64_t LatencyHistogram::ValueAtPercentile(double p) const {
  if (count_ == 0) return 0;
  p = std::clamp(p, 0.0, 100.0);
  uint64_t rank = static_cast<uint64_t>(std::ceil(p / 100.0 * static_cast<double>(count_)));
  rank = std::clamp<uint64_t>(rank, 1, count_);
  uint64_t seen = 0;
  for (size_t i = 0; i < kBucketCount; ++i) {
    seen += buckets_[i];
    if (seen >= rank) {
      const uint64_t low = BucketLow(i);
      const uint64_t mid = low + (BucketHigh(i) - low) / 2;
      return std::clamp(mid, min_, max_);
    }
  }
  return max_;  // not reached: the buckets hold count_ values
}

std::string FormatNanos(double ns) {
  if (ns < 1e3) return absl::StrFormat("%.0fns", ns);
  if (ns < 1e6) return absl::StrFormat("%.2fus", ns / 1e3);
  if (ns < 1e9) return absl::StrFormat("%.2fms", ns / 1e6);
  return absl::StrFormat("%.2fs", ns / 1e9);
}

std::string FormatBytes(double bytes) {
  constexpr double kKi = 1024.0;
  if (bytes < kKi) return absl::StrFormat("%.0fB", bytes);
  if (bytes < kKi * kKi) return absl::StrFormat("%.2fKB", bytes / kKi);
  if (bytes < kKi * kKi * kKi) return absl::StrFormat("%.2fMB", bytes / (kKi * kKi));
  return absl::StrFormat("%.2fGB", bytes / (kKi * kKi * kKi));
}

}  // namespace petrel::tools
