#include "quic/connection/path_order.h"

namespace petrel::quic {

void PathOrder::ExpectChallengeFirst(uint64_t deadline) {
  if (holding_) release_ = true;
  mode_ = Mode::kChallengeFirst;
  deadline_ = deadline;
}

void PathOrder::ExpectNonProbingFirst(uint64_t deadline) {
  if (holding_) release_ = true;  // an earlier migration's challenge goes before the new one's
  mode_ = Mode::kNonProbingFirst;
  deadline_ = deadline;
}

void PathOrder::End() {
  mode_ = Mode::kOff;
  if (holding_) release_ = true;
}

PathOrder::Action PathOrder::OnPacket(bool challenge, bool ack_eliciting, uint64_t now) {
  if (mode_ == Mode::kOff) return Action::kSend;
  if (now >= deadline_) {
    End();
    return Action::kSend;
  }
  if (mode_ == Mode::kChallengeFirst) {
    if (!challenge && !ack_eliciting) return Action::kDrop;
    // The challenge, or data that must not be withheld (ngtcp2 would count it lost).
    End();
    return Action::kSend;
  }
  if (challenge && !holding_ && !release_) {
    holding_ = true;
    return Action::kHold;
  }
  End();
  return Action::kSend;
}

bool PathOrder::TakeRelease(uint64_t now) {
  if (holding_ && !release_ && now >= deadline_) End();
  if (!release_) return false;
  release_ = false;
  holding_ = false;
  return true;
}

}  // namespace petrel::quic
