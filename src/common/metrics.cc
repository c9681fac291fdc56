#include "petrel/common/metrics.h"

#include <algorithm>
#include <bit>
#include <charconv>
#include <cmath>
#include <new>

#include "absl/strings/str_cat.h"
#include "petrel/common/log.h"

namespace petrel {
namespace internal {

constinit thread_local MetricShard tls_metric_shard{};

namespace {

// Which exclusive shards are free. Leaked on purpose: threads may exit (and return their shard)
// while static destructors run.
struct ShardAllocator {
  std::mutex mu;
  uint16_t next_fresh = 1;         // guarded by mu; shard 0 is the shared one
  std::vector<uint16_t> recycled;  // guarded by mu; shards returned by exited threads
};

ShardAllocator& Shards() {
  static ShardAllocator* const allocator = new ShardAllocator;
  return *allocator;
}

// Returns the thread's exclusive shard when the thread exits. Updates made after this (from other
// thread_local destructors) go to the shared shard, never to a shard another thread now owns.
struct ShardReleaser {
  ~ShardReleaser() {
    const MetricShard mine = tls_metric_shard;
    tls_metric_shard = MetricShard{0, false, true};
    if (!mine.exclusive) return;
    ShardAllocator& shards = Shards();
    // The mutex orders this thread's last plain stores to the shard before the next owner's
    // first load of it.
    std::lock_guard<std::mutex> lock(shards.mu);
    shards.recycled.push_back(mine.index);
  }
};

}  // namespace

MetricShard AssignMetricShard() {
  MetricShard shard{0, false, true};
  {
    ShardAllocator& shards = Shards();
    std::lock_guard<std::mutex> lock(shards.mu);
    if (!shards.recycled.empty()) {
      shard = MetricShard{shards.recycled.back(), true, true};
      shards.recycled.pop_back();
    } else if (shards.next_fresh < kMetricShards) {
      shard = MetricShard{shards.next_fresh++, true, true};
    }
  }
  if (shard.exclusive) {
    // Constructed on first pass, destroyed at thread exit.
    thread_local ShardReleaser releaser;
    (void)releaser;
  }
  tls_metric_shard = shard;
  return shard;
}

}  // namespace internal

namespace {

constexpr std::align_val_t kWordAlignment{kCacheLineSize};
constexpr size_t kWordsPerLine = kCacheLineSize / sizeof(uint64_t);

bool IsMetricName(absl::string_view name) {
  if (name.empty()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool letter = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':';
    if (!letter && !(i > 0 && c >= '0' && c <= '9')) return false;
  }
  return true;
}

bool IsLabelName(absl::string_view name) {
  if (name.empty() || name.substr(0, 2) == "__") return false;
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool letter = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
    if (!letter && !(i > 0 && c >= '0' && c <= '9')) return false;
  }
  return true;
}

// HELP text escapes backslash and newline; label values also escape the double quote.
void AppendEscaped(absl::string_view s, bool escape_quote, std::string* out) {
  for (const char c : s) {
    if (c == '\\') {
      out->append("\\\\");
    } else if (c == '\n') {
      out->append("\\n");
    } else if (c == '"' && escape_quote) {
      out->append("\\\"");
    } else {
      out->push_back(c);
    }
  }
}

// Shortest text that reads back as the same double, in the forms Prometheus parses.
void AppendDouble(double v, std::string* out) {
  if (std::isnan(v)) {
    out->append("NaN");
  } else if (std::isinf(v)) {
    out->append(v > 0 ? "+Inf" : "-Inf");
  } else {
    char buf[64];
    const std::to_chars_result r = std::to_chars(buf, buf + sizeof(buf), v);
    out->append(buf, r.ptr);
  }
}

uint64_t DoubleBits(double v) { return std::bit_cast<uint64_t>(v); }
double BitsDouble(uint64_t v) { return std::bit_cast<double>(v); }

}  // namespace

// ---- Counter ----------------------------------------------------------------------------------

uint64_t Counter::Value() const {
  uint64_t total = 0;
  for (const Cell& cell : cells_) total += cell.value.load(std::memory_order_relaxed);
  return total;
}

// ---- Histogram --------------------------------------------------------------------------------

void Histogram::FreeAligned::operator()(std::atomic<uint64_t>* p) const {
  ::operator delete(p, kWordAlignment);
}

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)),
      stride_((bounds_.size() + 2 + kWordsPerLine - 1) / kWordsPerLine * kWordsPerLine) {
  const size_t words = stride_ * internal::kMetricShards;
  auto* raw = static_cast<std::atomic<uint64_t>*>(
      ::operator new(words * sizeof(std::atomic<uint64_t>), kWordAlignment));
  for (size_t i = 0; i < words; ++i) new (raw + i) std::atomic<uint64_t>(0);
  words_.reset(raw);
  // A zero-bits word is the double +0.0, so the sums start right too.
  static_assert(sizeof(double) == sizeof(uint64_t));
}

Histogram::~Histogram() = default;

void Histogram::Observe(double v) {
  // lower_bound: the first bound >= v, i.e. the "le" bucket. NaN compares false with everything,
  // which would put it in the first bucket; it goes to +Inf instead.
  const size_t bucket =
      std::isnan(v) ? bounds_.size()
                    : static_cast<size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), v) -
                                          bounds_.begin());
  const internal::MetricShard shard = internal::CurrentMetricShard();
  std::atomic<uint64_t>* words = ShardWords(shard.index);
  internal::ShardAdd(words[bucket], 1, shard.exclusive);
  std::atomic<uint64_t>& sum = words[bounds_.size() + 1];
  if (shard.exclusive) {
    sum.store(DoubleBits(BitsDouble(sum.load(std::memory_order_relaxed)) + v),
              std::memory_order_relaxed);
  } else {
    uint64_t old_bits = sum.load(std::memory_order_relaxed);
    while (!sum.compare_exchange_weak(old_bits, DoubleBits(BitsDouble(old_bits) + v),
                                      std::memory_order_relaxed)) {
    }
  }
}

Histogram::Snapshot Histogram::Collect() const {
  Snapshot snap;
  snap.cumulative.assign(bounds_.size() + 1, 0);
  for (size_t s = 0; s < internal::kMetricShards; ++s) {
    const std::atomic<uint64_t>* words = ShardWords(s);
    for (size_t b = 0; b <= bounds_.size(); ++b) {
      snap.cumulative[b] += words[b].load(std::memory_order_relaxed);
    }
    snap.sum += BitsDouble(words[bounds_.size() + 1].load(std::memory_order_relaxed));
  }
  for (size_t b = 1; b < snap.cumulative.size(); ++b) snap.cumulative[b] += snap.cumulative[b - 1];
  snap.count = snap.cumulative.back();
  return snap;
}

// ---- MetricsRegistry --------------------------------------------------------------------------

struct MetricsRegistry::Series {
  MetricLabels labels;          // sorted by name
  std::string rendered_labels;  // `k="v",k2="v2"` without braces; empty when unlabelled
  std::unique_ptr<Counter> counter;
  std::unique_ptr<Gauge> gauge;
  std::unique_ptr<Histogram> histogram;
};

struct MetricsRegistry::Family {
  std::string name;
  std::string help;
  Type type = Type::kCounter;
  std::vector<Series> series;  // registration order; Series own their metric through unique_ptr
};

MetricsRegistry::MetricsRegistry() = default;
MetricsRegistry::~MetricsRegistry() = default;

MetricsRegistry::Series& MetricsRegistry::FindOrAddSeries(absl::string_view name,
                                                          absl::string_view help, Type type,
                                                          MetricLabels labels, bool* added) {
  if (!IsMetricName(name)) PETREL_LOG(kFatal, "metrics: invalid metric name \"%s\"", name);
  std::sort(labels.begin(), labels.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  for (size_t i = 0; i < labels.size(); ++i) {
    if (!IsLabelName(labels[i].first)) {
      PETREL_LOG(kFatal, "metrics: %s: invalid label name \"%s\"", name, labels[i].first);
    }
    if (i > 0 && labels[i].first == labels[i - 1].first) {
      PETREL_LOG(kFatal, "metrics: %s: label \"%s\" given twice", name, labels[i].first);
    }
    if (type == Type::kHistogram && labels[i].first == "le") {
      PETREL_LOG(kFatal, "metrics: %s: a histogram may not have a label named \"le\"", name);
    }
  }

  // Caller holds mu_.
  Family* family = nullptr;
  auto it = families_by_name_.find(name);
  if (it == families_by_name_.end()) {
    auto owned = std::make_unique<Family>();
    owned->name.assign(name.data(), name.size());
    owned->help.assign(help.data(), help.size());
    owned->type = type;
    family = owned.get();
    families_.push_back(std::move(owned));
    families_by_name_.emplace(family->name, family);
  } else {
    family = it->second;
    if (family->type != type) {
      PETREL_LOG(kFatal, "metrics: %s registered again with another type", name);
    }
  }

  for (Series& s : family->series) {
    if (s.labels == labels) {
      *added = false;
      return s;
    }
  }
  Series& s = family->series.emplace_back();
  for (const auto& [key, value] : labels) {
    if (!s.rendered_labels.empty()) s.rendered_labels.push_back(',');
    absl::StrAppend(&s.rendered_labels, key, "=\"");
    AppendEscaped(value, /*escape_quote=*/true, &s.rendered_labels);
    s.rendered_labels.push_back('"');
  }
  s.labels = std::move(labels);
  *added = true;
  return s;
}

Counter& MetricsRegistry::AddCounter(absl::string_view name, absl::string_view help,
                                     MetricLabels labels) {
  std::lock_guard<std::mutex> lock(mu_);
  bool added = false;
  Series& s = FindOrAddSeries(name, help, Type::kCounter, std::move(labels), &added);
  if (added) s.counter.reset(new Counter());
  return *s.counter;
}

Gauge& MetricsRegistry::AddGauge(absl::string_view name, absl::string_view help,
                                 MetricLabels labels) {
  std::lock_guard<std::mutex> lock(mu_);
  bool added = false;
  Series& s = FindOrAddSeries(name, help, Type::kGauge, std::move(labels), &added);
  if (added) s.gauge.reset(new Gauge());
  return *s.gauge;
}

Histogram& MetricsRegistry::AddHistogram(absl::string_view name, absl::string_view help,
                                         std::vector<double> bucket_upper_bounds,
                                         MetricLabels labels) {
  if (!bucket_upper_bounds.empty() && bucket_upper_bounds.back() == HUGE_VAL) {
    bucket_upper_bounds.pop_back();
  }
  for (size_t i = 0; i < bucket_upper_bounds.size(); ++i) {
    const double b = bucket_upper_bounds[i];
    if (!std::isfinite(b) || (i > 0 && !(bucket_upper_bounds[i - 1] < b))) {
      PETREL_LOG(kFatal, "metrics: %s: bucket bounds must be finite and strictly increasing", name);
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  bool added = false;
  Series& s = FindOrAddSeries(name, help, Type::kHistogram, std::move(labels), &added);
  if (added) {
    s.histogram.reset(new Histogram(std::move(bucket_upper_bounds)));
  } else if (s.histogram->bounds() != bucket_upper_bounds) {
    PETREL_LOG(kFatal, "metrics: %s registered again with other bucket bounds", name);
  }
  return *s.histogram;
}

std::string MetricsRegistry::RenderPrometheus() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::string out;
  for (const std::unique_ptr<Family>& family : families_) {
    absl::StrAppend(&out, "# HELP ", family->name, " ");
    AppendEscaped(family->help, /*escape_quote=*/false, &out);
    const char* type_name = family->type == Type::kCounter ? "counter"
                            : family->type == Type::kGauge ? "gauge"
                                                           : "histogram";
    absl::StrAppend(&out, "\n# TYPE ", family->name, " ", type_name, "\n");

    for (const Series& s : family->series) {
      // `{labels}` or nothing.
      const std::string braced = s.rendered_labels.empty() ? "" : "{" + s.rendered_labels + "}";
      switch (family->type) {
        case Type::kCounter:
          absl::StrAppend(&out, family->name, braced, " ", s.counter->Value(), "\n");
          break;
        case Type::kGauge:
          absl::StrAppend(&out, family->name, braced, " ", s.gauge->Value(), "\n");
          break;
        case Type::kHistogram: {
          const Histogram::Snapshot snap = s.histogram->Collect();
          const std::vector<double>& bounds = s.histogram->bounds();
          const std::string sep = s.rendered_labels.empty() ? "" : ",";
          for (size_t b = 0; b < snap.cumulative.size(); ++b) {
            absl::StrAppend(&out, family->name, "_bucket{", s.rendered_labels, sep, "le=\"");
            AppendDouble(b < bounds.size() ? bounds[b] : HUGE_VAL, &out);
            absl::StrAppend(&out, "\"} ", snap.cumulative[b], "\n");
          }
          absl::StrAppend(&out, family->name, "_sum", braced, " ");
          AppendDouble(snap.sum, &out);
          absl::StrAppend(&out, "\n", family->name, "_count", braced, " ", snap.count, "\n");
          break;
        }
      }
    }
  }
  return out;
}

}  // namespace petrel
