#include "link.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

namespace petrel::netsim {

const char* VerdictName(Verdict v) {
  switch (v) {
    case Verdict::kForward:
      return "forward";
    case Verdict::kDropList:
      return "drop-list";
    case Verdict::kDropBlackhole:
      return "drop-blackhole";
    case Verdict::kDropLoss:
      return "drop-loss";
    case Verdict::kDropQueue:
      return "drop-queue";
  }
  return "?";
}

bool IsVersionNegotiation(const std::vector<uint8_t>& data) {
  return data.size() >= 5 && (data[0] & 0x80) != 0 && data[1] == 0 && data[2] == 0 &&
         data[3] == 0 && data[4] == 0;
}

Direction::Direction(std::string name, const LinkConfig& config, uint64_t seed)
    : name_(std::move(name)),
      config_(config),
      drop_list_(config.impair.drop_packets.begin(), config.impair.drop_packets.end()),
      rng_(seed) {}

bool Direction::InBlackhole(Nanos since_epoch) const {
  if (config_.blackhole_on <= 0 || config_.blackhole_off <= 0 || since_epoch < 0) return false;
  return since_epoch % (config_.blackhole_on + config_.blackhole_off) >= config_.blackhole_on;
}

Verdict Direction::Admit(std::unique_ptr<Datagram>& d, Nanos now, Nanos since_epoch,
                         bool* corrupted) {
  if (corrupted != nullptr) *corrupted = false;
  const uint64_t index = ++stats_.received;  // 1-based, as the drop lists count
  if (drop_list_.contains(index)) {
    ++stats_.dropped_list;
    ++stats_.dropped_loss;
    return Verdict::kDropList;
  }
  if (InBlackhole(since_epoch)) {
    ++stats_.dropped_blackhole;
    return Verdict::kDropBlackhole;
  }
  const int64_t max_burst = config_.impair.max_burst;
  if (config_.impair.loss_percent > 0) {
    if (max_burst > 0 && loss_run_ >= max_burst) {
      loss_run_ = 0;  // the burst is over: this one passes
    } else if (std::uniform_real_distribution<double>(0, 100)(rng_) < config_.impair.loss_percent) {
      ++loss_run_;
      ++stats_.dropped_loss;
      return Verdict::kDropLoss;
    } else {
      loss_run_ = 0;
    }
  }

  Nanos sent_at = now;  // the end of serialization
  if (config_.bandwidth_mbps > 0) {
    while (!waiting_starts_.empty() && waiting_starts_.front() <= now) waiting_starts_.pop_front();
    if (waiting_starts_.size() >= config_.queue) {
      ++stats_.dropped_queue;
      return Verdict::kDropQueue;
    }
    const Nanos start = std::max(now, link_free_at_);
    const double bits = 8.0 * static_cast<double>(d->data.size() + config_.header_bytes);
    // Mbit/s = bits per microsecond, so bits / mbps is microseconds.
    const Nanos tx = static_cast<Nanos>(std::llround(bits * 1000.0 / config_.bandwidth_mbps));
    link_free_at_ = start + tx;
    if (start > now) waiting_starts_.push_back(start);
    sent_at = link_free_at_;
  }

  if (config_.impair.corrupt_percent > 0 && !d->data.empty()) {
    if (IsVersionNegotiation(d->data) || (max_burst > 0 && corrupt_run_ >= max_burst)) {
      corrupt_run_ = 0;
    } else if (std::uniform_real_distribution<double>(0, 100)(rng_) <
               config_.impair.corrupt_percent) {
      ++corrupt_run_;
      const size_t last = std::min(d->data.size(), kCorruptSpan) - 1;
      const size_t pos = std::uniform_int_distribution<size_t>(0, last)(rng_);
      // XOR with a nonzero value: the byte always changes.
      d->data[pos] ^= static_cast<uint8_t>(std::uniform_int_distribution<int>(1, 255)(rng_));
      ++stats_.corrupted;
      if (corrupted != nullptr) *corrupted = true;
    } else {
      corrupt_run_ = 0;
    }
  }
  d->deliver_at = sent_at + config_.delay;
  line_.push_back(std::move(d));
  return Verdict::kForward;
}

Nanos Direction::NextDeliveryAt() const {
  return line_.empty() ? std::numeric_limits<Nanos>::max() : line_.front()->deliver_at;
}

std::unique_ptr<Datagram> Direction::PopDue(Nanos now) {
  if (line_.empty() || line_.front()->deliver_at > now) return nullptr;
  std::unique_ptr<Datagram> d = std::move(line_.front());
  line_.pop_front();
  return d;
}

}  // namespace petrel::netsim
