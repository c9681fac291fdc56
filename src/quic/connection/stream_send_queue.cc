#include "quic/connection/stream_send_queue.h"

#include <algorithm>
#include <cstring>
#include <utility>

namespace petrel::quic {

void StreamSendQueue::Reset() {
  for (size_t i = 0; i < count_; ++i) At(i) = Range();
  head_ = 0;
  count_ = 0;
  front_offset_ = 0;
  next_index_ = 0;
  next_pos_ = 0;
  acked_ = 0;
  sent_ = 0;
  end_ = 0;
  fin_queued_ = false;
  fin_sent_ = false;
}

void StreamSendQueue::Grow() {
  // Moving a Range moves only pointers: the bytes ngtcp2 points at stay where they are.
  std::vector<Range> bigger(ring_.empty() ? 4 : ring_.size() * 2);
  for (size_t i = 0; i < count_; ++i) bigger[i] = std::move(At(i));
  ring_ = std::move(bigger);
  head_ = 0;
}

bool StreamSendQueue::Push(absl::string_view data, bool fin, bool copy) {
  if (fin_queued_ || (full() && !data.empty())) return false;
  if (!data.empty()) {
    if (count_ == ring_.size()) Grow();
    Range& r = At(count_);
    if (copy) {
      r.owned = std::make_unique_for_overwrite<uint8_t[]>(data.size());
      std::memcpy(r.owned.get(), data.data(), data.size());
      r.data = r.owned.get();
    } else {
      r.data = reinterpret_cast<const uint8_t*>(data.data());
    }
    r.len = data.size();
    ++count_;
    end_ += data.size();
  }
  fin_queued_ = fin;
  return true;
}

size_t StreamSendQueue::Unsent(ngtcp2_vec* vecs, size_t max, size_t enough, bool* all) const {
  size_t n = 0;
  size_t bytes = 0;
  size_t pos = next_pos_;
  size_t i = next_index_;
  for (; i < count_ && n < max && bytes < enough; ++i) {
    const Range& r = At(i);
    if (pos < r.len) {
      vecs[n].base = const_cast<uint8_t*>(r.data) + pos;
      vecs[n].len = r.len - pos;
      bytes += vecs[n].len;
      ++n;
    }
    pos = 0;
  }
  *all = i == count_;
  return n;
}

void StreamSendQueue::MarkSent(size_t n, bool fin) {
  sent_ += n;
  while (n > 0 && next_index_ < count_) {
    const size_t len = At(next_index_).len;
    const size_t take = std::min(len - next_pos_, n);
    next_pos_ += take;
    n -= take;
    if (next_pos_ == len) {
      ++next_index_;
      next_pos_ = 0;
    }
  }
  if (fin) fin_sent_ = true;
}

void StreamSendQueue::Ack(uint64_t offset, uint64_t len) {
  acked_ = std::max(acked_, offset + len);
  while (count_ > 0 && next_index_ > 0 && front_offset_ + At(0).len <= acked_) {
    Range& r = At(0);
    front_offset_ += r.len;
    r = Range();
    head_ = (head_ + 1) & (ring_.size() - 1);
    --count_;
    --next_index_;
  }
}

}  // namespace petrel::quic
