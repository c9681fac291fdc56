#include "petrel/http/rate_limit.h"

#include <netinet/in.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "petrel/common/clock.h"

namespace petrel {
namespace {

// The address bytes of a client, without the port.
std::string ClientKey(const SocketAddress& peer) {
  if (peer.family() == AF_INET) {
    const auto* v4 = reinterpret_cast<const sockaddr_in*>(peer.sockaddr_ptr());
    return std::string(reinterpret_cast<const char*>(&v4->sin_addr), sizeof(v4->sin_addr));
  }
  if (peer.family() == AF_INET6) {
    const auto* v6 = reinterpret_cast<const sockaddr_in6*>(peer.sockaddr_ptr());
    return std::string(reinterpret_cast<const char*>(&v6->sin6_addr), sizeof(v6->sin6_addr));
  }
  return std::string();
}

class Buckets {
 public:
  explicit Buckets(RateLimitOptions options) : options_(options) {}

  // Takes a token for `key`; when there is none, the seconds until there is one.
  std::optional<double> Take(const std::string& key, TimePoint now) {
    std::lock_guard<std::mutex> lock(mu_);
    auto [it, added] = buckets_.try_emplace(key, Bucket{options_.burst, now});
    Bucket& b = it->second;
    if (!added) {
      const double elapsed = std::chrono::duration<double>(now - b.updated).count();
      b.tokens = std::min(options_.burst, b.tokens + elapsed * options_.requests_per_second);
      b.updated = now;
    }
    if (b.tokens >= 1) {
      b.tokens -= 1;
      if (added && buckets_.size() > options_.max_clients) Forget(now);
      return std::nullopt;
    }
    return (1 - b.tokens) / options_.requests_per_second;
  }

 private:
  struct Bucket {
    double tokens;
    TimePoint updated;
  };

  // Over max_clients: drop the buckets that are full again by now, or else the oldest half.
  void Forget(TimePoint now) {
    absl::erase_if(buckets_, [&](const auto& entry) {
      const Bucket& b = entry.second;
      const double elapsed = std::chrono::duration<double>(now - b.updated).count();
      return b.tokens + elapsed * options_.requests_per_second >= options_.burst;
    });
    if (buckets_.size() <= options_.max_clients) return;
    std::vector<TimePoint> times;
    times.reserve(buckets_.size());
    for (const auto& [key, b] : buckets_) times.push_back(b.updated);
    std::nth_element(times.begin(), times.begin() + times.size() / 2, times.end());
    const TimePoint median = times[times.size() / 2];
    absl::erase_if(buckets_, [&](const auto& entry) { return entry.second.updated < median; });
  }

  const RateLimitOptions options_;
  std::mutex mu_;
  absl::flat_hash_map<std::string, Bucket> buckets_;  // guarded by mu_
};

}  // namespace

Middleware RateLimitMiddleware(RateLimitOptions options) {
  if (!(options.requests_per_second > 0)) options.requests_per_second = 1e-9;
  options.burst = std::max(options.burst, 1.0);
  return [buckets = std::make_unique<Buckets>(options)](Request& req, Response& res, Next next) {
    const std::optional<double> wait = buckets->Take(ClientKey(req.peer_address()), MonotonicNow());
    if (!wait.has_value()) return next();
    req.body().Discard();
    res.SetHeader("retry-after", absl::StrCat(static_cast<int64_t>(std::ceil(*wait))));
    res.SendError(429, "rate limit exceeded");
  };
}

}  // namespace petrel
