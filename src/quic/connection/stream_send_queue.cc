#include "quic/connection/stream_send_queue.h"

#include <algorithm>

namespace petrel::quic {

void StreamSendQueue::Reset() {
  chunks_.clear();  // keeps the deque's index and first block
  front_offset_ = 0;
  next_index_ = 0;
  next_pos_ = 0;
  acked_ = 0;
  sent_ = 0;
  end_ = 0;
  fin_queued_ = false;
  fin_sent_ = false;
}

bool StreamSendQueue::Append(absl::string_view data, bool fin) {
  if (fin_queued_ || (full() && !data.empty())) return false;
  if (!data.empty()) {
    chunks_.emplace_back(data);
    end_ += data.size();
  }
  fin_queued_ = fin;
  return true;
}

size_t StreamSendQueue::Unsent(ngtcp2_vec* vecs, size_t max, bool* all) const {
  size_t n = 0;
  size_t pos = next_pos_;
  size_t i = next_index_;
  for (; i < chunks_.size() && n < max; ++i) {
    const std::string& c = chunks_[i];
    if (pos < c.size()) {
      vecs[n].base = reinterpret_cast<uint8_t*>(const_cast<char*>(c.data())) + pos;
      vecs[n].len = c.size() - pos;
      ++n;
    }
    pos = 0;
  }
  *all = i == chunks_.size();
  return n;
}

void StreamSendQueue::MarkSent(size_t n, bool fin) {
  sent_ += n;
  while (n > 0 && next_index_ < chunks_.size()) {
    const size_t left = chunks_[next_index_].size() - next_pos_;
    const size_t take = std::min(left, n);
    next_pos_ += take;
    n -= take;
    if (next_pos_ == chunks_[next_index_].size()) {
      ++next_index_;
      next_pos_ = 0;
    }
  }
  if (fin) fin_sent_ = true;
}

void StreamSendQueue::Ack(uint64_t offset, uint64_t len) {
  acked_ = std::max(acked_, offset + len);
  while (!chunks_.empty() && front_offset_ + chunks_.front().size() <= acked_ && next_index_ > 0) {
    front_offset_ += chunks_.front().size();
    chunks_.pop_front();
    --next_index_;
  }
}

}  // namespace petrel::quic
