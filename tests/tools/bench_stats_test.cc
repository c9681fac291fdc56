#include "tools/bench_stats.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace petrel::tools {
namespace {

using H = LatencyHistogram;

TEST(LatencyHistogramTest, BucketsTileTheRangeWithoutGapsOrOverlap) {
  EXPECT_EQ(H::BucketLow(0), 0u);
  for (size_t i = 0; i + 1 < H::kBucketCount; ++i) {
    ASSERT_LE(H::BucketLow(i), H::BucketHigh(i)) << i;
    ASSERT_EQ(H::BucketHigh(i) + 1, H::BucketLow(i + 1)) << i;
  }
  EXPECT_EQ(H::BucketHigh(H::kBucketCount - 1), UINT64_MAX);
  EXPECT_EQ(H::BucketIndex(UINT64_MAX), H::kBucketCount - 1);
}

TEST(LatencyHistogramTest, EveryValueLandsInTheBucketThatContainsIt) {
  std::mt19937_64 rng(7);
  std::vector<uint64_t> values = {0, 1, 63, 64, 65, 127, 128, 129, 1000, 4095, 4096, UINT64_MAX};
  for (int shift = 0; shift < 64; ++shift) {
    const uint64_t p = uint64_t{1} << shift;
    values.push_back(p);
    values.push_back(p - 1);
    values.push_back(p + 1);
  }
  for (int i = 0; i < 100000; ++i) values.push_back(rng() >> (rng() % 64));
  for (uint64_t v : values) {
    const size_t i = H::BucketIndex(v);
    ASSERT_LT(i, H::kBucketCount) << v;
    ASSERT_LE(H::BucketLow(i), v) << v;
    ASSERT_GE(H::BucketHigh(i), v) << v;
    // Bounded relative width: half a bucket over its lowest value.
    const double half_width = static_cast<double>(H::BucketHigh(i) - H::BucketLow(i)) / 2;
    if (H::BucketLow(i) > 0) {
      ASSERT_LE(half_width / static_cast<double>(H::BucketLow(i)), H::kMaxRelativeError) << v;
    }
  }
}

TEST(LatencyHistogramTest, EmptyHistogramReportsZeros) {
  H h;
  EXPECT_EQ(h.count(), 0u);
  EXPECT_EQ(h.min(), 0u);
  EXPECT_EQ(h.max(), 0u);
  EXPECT_EQ(h.mean(), 0.0);
  EXPECT_EQ(h.ValueAtPercentile(50), 0u);
}

TEST(LatencyHistogramTest, SmallValuesAreExact) {
  H h;
  for (uint64_t v = 1; v <= 50; ++v) h.Record(v);
  EXPECT_EQ(h.count(), 50u);
  EXPECT_EQ(h.min(), 1u);
  EXPECT_EQ(h.max(), 50u);
  EXPECT_DOUBLE_EQ(h.mean(), 25.5);
  EXPECT_EQ(h.ValueAtPercentile(0), 1u);
  EXPECT_EQ(h.ValueAtPercentile(50), 25u);  // rank ceil(25) = 25
  EXPECT_EQ(h.ValueAtPercentile(90), 45u);
  EXPECT_EQ(h.ValueAtPercentile(99), 50u);  // rank ceil(49.5) = 50
  EXPECT_EQ(h.ValueAtPercentile(100), 50u);
}

// Percentiles of log-normal "latencies" (median ~1 ms, a long tail) against the exact order
// statistics of the same values.
TEST(LatencyHistogramTest, PercentilesAreWithinTheRelativeErrorOfTheExactRank) {
  std::mt19937_64 rng(42);
  std::lognormal_distribution<double> dist(std::log(1e6), 1.0);
  H h;
  std::vector<uint64_t> values;
  for (int i = 0; i < 200000; ++i) {
    const uint64_t v = static_cast<uint64_t>(dist(rng));
    values.push_back(v);
    h.Record(v);
  }
  std::sort(values.begin(), values.end());
  EXPECT_EQ(h.min(), values.front());
  EXPECT_EQ(h.max(), values.back());
  for (double p : {1.0, 10.0, 50.0, 90.0, 99.0, 99.9, 99.99}) {
    const size_t rank = static_cast<size_t>(std::ceil(p / 100 * values.size()));
    const double exact = static_cast<double>(values[rank - 1]);
    const double got = static_cast<double>(h.ValueAtPercentile(p));
    EXPECT_LE(std::abs(got - exact) / exact, H::kMaxRelativeError) << "p" << p;
  }
}

TEST(LatencyHistogramTest, MergeEqualsRecordingEverythingInOne) {
  H a, b, all;
  for (uint64_t v = 100; v < 100000; v += 37) {
    ((v / 37) % 3 == 0 ? a : b).Record(v);
    all.Record(v);
  }
  b.Record(5);
  all.Record(5);
  a.Merge(b);
  EXPECT_EQ(a.count(), all.count());
  EXPECT_EQ(a.min(), 5u);
  EXPECT_EQ(a.max(), all.max());
  EXPECT_DOUBLE_EQ(a.mean(), all.mean());
  for (double p : {0.0, 25.0, 50.0, 75.0, 99.0, 100.0}) {
    EXPECT_EQ(a.ValueAtPercentile(p), all.ValueAtPercentile(p)) << p;
  }
  a.Clear();
  EXPECT_EQ(a.count(), 0u);
  EXPECT_EQ(a.ValueAtPercentile(50), 0u);
}

TEST(LatencyHistogramTest, PercentileStaysBetweenMinAndMax) {
  H h;
  h.Record(1000001);  // one value: every percentile is it, not its bucket's midpoint
  EXPECT_EQ(h.ValueAtPercentile(50), 1000001u);
  EXPECT_EQ(h.ValueAtPercentile(99), 1000001u);
}

TEST(BenchFormatTest, NanosAndBytes) {
  EXPECT_EQ(FormatNanos(950), "950ns");
  EXPECT_EQ(FormatNanos(12346), "12.35us");
  EXPECT_EQ(FormatNanos(4.56e6), "4.56ms");
  EXPECT_EQ(FormatNanos(1.234e9), "1.23s");
  EXPECT_EQ(FormatBytes(999), "999B");
  EXPECT_EQ(FormatBytes(12.5 * 1024), "12.50KB");
  EXPECT_EQ(FormatBytes(100.0 * 1024 * 1024), "100.00MB");
  EXPECT_EQ(FormatBytes(3.0 * 1024 * 1024 * 1024), "3.00GB");
}

}  // namespace
}  // namespace petrel::tools
