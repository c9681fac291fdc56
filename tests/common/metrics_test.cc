#include "petrel/common/metrics.h"

#include <atomic>
#include <cmath>
#include <latch>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace petrel {
namespace {

TEST(MetricsTest, RendersGoldenText) {
  MetricsRegistry registry;
  Counter& in0 =
      registry.AddCounter("petrel_packets_in_total", "Datagrams received.", {{"worker", "0"}});
  Gauge& conns = registry.AddGauge("petrel_connections", "Open connections.");
  Histogram& hs = registry.AddHistogram("petrel_handshake_seconds", "Handshake duration.",
                                        {0.25, 0.5, 1, 2.5}, {{"proto", "h3"}});
  // Registered after the gauge, rendered inside its own family's block.
  Counter& in1 =
      registry.AddCounter("petrel_packets_in_total", "ignored: first help wins", {{"worker", "1"}});
  in0.Inc(3);
  in1.Inc();
  in1.Inc(4);
  conns.Set(7);
  conns.Add(-2);
  for (double v : {0.125, 0.25, 0.5, 0.75, 3.0}) hs.Observe(v);

  EXPECT_EQ(registry.RenderPrometheus(),
            "# HELP petrel_packets_in_total Datagrams received.\n"
            "# TYPE petrel_packets_in_total counter\n"
            "petrel_packets_in_total{worker=\"0\"} 3\n"
            "petrel_packets_in_total{worker=\"1\"} 5\n"
            "# HELP petrel_connections Open connections.\n"
            "# TYPE petrel_connections gauge\n"
            "petrel_connections 5\n"
            "# HELP petrel_handshake_seconds Handshake duration.\n"
            "# TYPE petrel_handshake_seconds histogram\n"
            "petrel_handshake_seconds_bucket{proto=\"h3\",le=\"0.25\"} 2\n"
            "petrel_handshake_seconds_bucket{proto=\"h3\",le=\"0.5\"} 3\n"
            "petrel_handshake_seconds_bucket{proto=\"h3\",le=\"1\"} 4\n"
            "petrel_handshake_seconds_bucket{proto=\"h3\",le=\"2.5\"} 4\n"
            "petrel_handshake_seconds_bucket{proto=\"h3\",le=\"+Inf\"} 5\n"
            "petrel_handshake_seconds_sum{proto=\"h3\"} 4.625\n"
            "petrel_handshake_seconds_count{proto=\"h3\"} 5\n");
}

TEST(MetricsTest, UnlabelledHistogramAndEmptyRegistry) {
  MetricsRegistry registry;
  EXPECT_EQ(registry.RenderPrometheus(), "");
  Histogram& h = registry.AddHistogram("rtt_ms", "RTT.", {10});
  h.Observe(-1);
  EXPECT_EQ(registry.RenderPrometheus(),
            "# HELP rtt_ms RTT.\n"
            "# TYPE rtt_ms histogram\n"
            "rtt_ms_bucket{le=\"10\"} 1\n"
            "rtt_ms_bucket{le=\"+Inf\"} 1\n"
            "rtt_ms_sum -1\n"
            "rtt_ms_count 1\n");
}

TEST(MetricsTest, HistogramBucketsAreCumulativeWithLeSemantics) {
  MetricsRegistry registry;
  Histogram& h = registry.AddHistogram("h", "", {1, 2, 4});
  h.Observe(1);     // exactly on a bound: that bucket (le = less or equal)
  h.Observe(1.5);   // (1, 2]
  h.Observe(2);     // (1, 2]
  h.Observe(4.01);  // above every bound: +Inf only
  h.Observe(NAN);   // +Inf, like other clients
  h.Observe(-5);    // below everything: first bucket
  const Histogram::Snapshot s = h.Collect();
  EXPECT_EQ(s.cumulative, (std::vector<uint64_t>{2, 4, 4, 6}));
  EXPECT_EQ(s.count, 6u);
  EXPECT_TRUE(std::isnan(s.sum));  // NaN poisons the sum, as in Prometheus
}

TEST(MetricsTest, HistogramWithoutBoundsHasOnlyInf) {
  MetricsRegistry registry;
  Histogram& h = registry.AddHistogram("only_inf", "x", {});
  h.Observe(1);
  h.Observe(2);
  EXPECT_EQ(h.Collect().cumulative, (std::vector<uint64_t>{2}));
  EXPECT_NE(registry.RenderPrometheus().find("only_inf_bucket{le=\"+Inf\"} 2\n"),
            std::string::npos);
}

TEST(MetricsTest, TrailingInfBoundIsDropped) {
  MetricsRegistry registry;
  Histogram& h = registry.AddHistogram("h", "", {1, HUGE_VAL});
  EXPECT_EQ(h.bounds(), std::vector<double>{1});
}

TEST(MetricsTest, EscapesLabelValuesAndHelp) {
  MetricsRegistry registry;
  registry
      .AddCounter("c_total", "Help with \\ and \"quotes\"\nsecond line", {{"path", "a\\b\"c\nd"}})
      .Inc();
  EXPECT_EQ(registry.RenderPrometheus(),
            "# HELP c_total Help with \\\\ and \"quotes\"\\nsecond line\n"
            "# TYPE c_total counter\n"
            "c_total{path=\"a\\\\b\\\"c\\nd\"} 1\n");
}

TEST(MetricsTest, LabelsAreSortedAndIdentifyTheSeries) {
  MetricsRegistry registry;
  Counter& a = registry.AddCounter("drops_total", "Drops.", {{"worker", "1"}, {"reason", "full"}});
  Counter& b = registry.AddCounter("drops_total", "Drops.", {{"reason", "full"}, {"worker", "1"}});
  Counter& c = registry.AddCounter("drops_total", "Drops.", {{"reason", "bad"}, {"worker", "1"}});
  EXPECT_EQ(&a, &b);  // same label set, same metric
  EXPECT_NE(&a, &c);
  a.Inc(2);
  b.Inc(1);
  c.Inc(9);
  EXPECT_EQ(registry.RenderPrometheus(),
            "# HELP drops_total Drops.\n"
            "# TYPE drops_total counter\n"
            "drops_total{reason=\"full\",worker=\"1\"} 3\n"
            "drops_total{reason=\"bad\",worker=\"1\"} 9\n");
}

TEST(MetricsTest, ReregisteringReturnsTheSameMetric) {
  MetricsRegistry registry;
  EXPECT_EQ(&registry.AddGauge("g", "x"), &registry.AddGauge("g", "x"));
  EXPECT_EQ(&registry.AddHistogram("h", "x", {1, 2}), &registry.AddHistogram("h", "x", {1, 2}));
}

TEST(MetricsTest, ReferencesStayValidAsTheRegistryGrows) {
  MetricsRegistry registry;
  Counter& first = registry.AddCounter("first_total", "x");
  for (int i = 0; i < 1000; ++i) {
    registry.AddCounter("many_total", "x", {{"i", std::to_string(i)}});
    registry.AddGauge("g" + std::to_string(i), "x");
  }
  first.Inc(11);
  EXPECT_EQ(first.Value(), 11u);
  EXPECT_NE(registry.RenderPrometheus().find("first_total 11\n"), std::string::npos);
}

TEST(MetricsTest, GaugeSetAddSub) {
  MetricsRegistry registry;
  Gauge& g = registry.AddGauge("depth", "Ring depth.");
  g.Set(10);
  g.Add(5);
  g.Sub(20);
  EXPECT_EQ(g.Value(), -5);
  EXPECT_NE(registry.RenderPrometheus().find("depth -5\n"), std::string::npos);
}

TEST(MetricsDeathTest, MisuseIsFatal) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  MetricsRegistry registry;
  registry.AddCounter("taken", "x");
  EXPECT_DEATH(registry.AddGauge("taken", "x"), "another type");
  EXPECT_DEATH(registry.AddCounter("1bad", "x"), "invalid metric name");
  EXPECT_DEATH(registry.AddCounter("ok", "x", {{"bad-label", "v"}}), "invalid label name");
  EXPECT_DEATH(registry.AddCounter("ok", "x", {{"__reserved", "v"}}), "invalid label name");
  EXPECT_DEATH(registry.AddCounter("ok", "x", {{"a", "1"}, {"a", "2"}}), "given twice");
  EXPECT_DEATH(registry.AddHistogram("h", "x", {2, 1}), "strictly increasing");
  EXPECT_DEATH(registry.AddHistogram("h", "x", {1}, {{"le", "1"}}), "\"le\"");
  registry.AddHistogram("h2", "x", {1});
  EXPECT_DEATH(registry.AddHistogram("h2", "x", {1, 2}), "other bucket bounds");
}

// Sharding must not lose increments: 4 threads × 1M on one counter, while another thread renders.
TEST(MetricsConcurrencyTest, ShardedCounterSumsExactly) {
  constexpr int kThreads = 4;
  constexpr uint64_t kIncrements = 1'000'000;
  MetricsRegistry registry;
  Counter& counter = registry.AddCounter("ops_total", "Operations.");
  Histogram& hist = registry.AddHistogram("op_size", "Sizes.", {1, 10, 100});
  std::atomic<bool> done{false};
  std::thread renderer([&] {
    uint64_t last = 0;
    while (!done.load(std::memory_order_acquire)) {
      registry.RenderPrometheus();
      const uint64_t now = counter.Value();
      EXPECT_GE(now, last);  // monotonic even while being summed concurrently
      last = now;
      std::this_thread::yield();
    }
  });
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (uint64_t i = 0; i < kIncrements; ++i) {
        counter.Inc();
        if (i % 10 == 0) hist.Observe(static_cast<double>(t * 30));  // 0, 30, 60, 90
      }
    });
  }
  for (std::thread& th : threads) th.join();
  done.store(true, std::memory_order_release);
  renderer.join();
  EXPECT_EQ(counter.Value(), kThreads * kIncrements);
  const Histogram::Snapshot s = hist.Collect();
  const uint64_t per_thread = kIncrements / 10;
  EXPECT_EQ(s.cumulative,
            (std::vector<uint64_t>{per_thread, per_thread, 4 * per_thread, 4 * per_thread}));
  EXPECT_EQ(s.sum, static_cast<double>(per_thread) * (0 + 30 + 60 + 90));
}

// More live threads than shards: the extra ones share shard 0 with fetch_add, still exact.
TEST(MetricsConcurrencyTest, MoreThreadsThanShardsStillExact) {
  constexpr int kThreads = static_cast<int>(internal::kMetricShards) + 36;
  constexpr uint64_t kIncrements = 2000;
  MetricsRegistry registry;
  Counter& counter = registry.AddCounter("ops_total", "Operations.");
  std::latch all_alive(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      counter.Inc();  // take a shard while every other thread is alive too
      all_alive.arrive_and_wait();
      for (uint64_t i = 1; i < kIncrements; ++i) counter.Inc();
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(counter.Value(), kThreads * kIncrements);
}

// Shards of exited threads are reused by new threads without losing what the old ones counted.
TEST(MetricsConcurrencyTest, ShardsAreRecycledAcrossThreadLifetimes) {
  MetricsRegistry registry;
  Counter& counter = registry.AddCounter("ops_total", "Operations.");
  for (int round = 0; round < 300; ++round) {
    std::thread([&] {
      for (int i = 0; i < 100; ++i) counter.Inc();
    }).join();
  }
  EXPECT_EQ(counter.Value(), 30'000u);
}

}  // namespace
}  // namespace petrel
