#include "quic/dispatch/worker_inbox.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>

namespace petrel::quic {
namespace {

void WriteEventFd(int fd) {
  const uint64_t one = 1;
  ssize_t n;
  do {
    n = write(fd, &one, sizeof(one));
  } while (n < 0 && errno == EINTR);
}

void ClearEventFd(int fd) {
  uint64_t value;
  ssize_t n;
  do {
    n = read(fd, &value, sizeof(value));
  } while (n < 0 && errno == EINTR);
}

int MakeEventFd() {
  int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (fd < 0) std::abort();  // descriptor exhaustion at start-up: nothing to recover
  return fd;
}

}  // namespace

WorkerInbox::WorkerInbox(size_t ring_capacity, size_t drain_budget, PacketSink* sink)
    : to_worker_(ring_capacity),
      // Every buffer in flight fits in the return ring: at most the forward ring's contents plus
      // one drained batch are outstanding.
      to_master_(ring_capacity * 2 + drain_budget),
      drain_budget_(drain_budget),
      sink_(sink),
      event_fd_(MakeEventFd()) {
  batch_.resize(drain_budget_);
  packets_.resize(drain_budget_);
  pending_return_.reserve(drain_budget_ * 2);
}

WorkerInbox::~WorkerInbox() {
  Unregister();
  close(event_fd_);
}

absl::Status WorkerInbox::Register(EventLoop* worker_loop) {
  loop_ = worker_loop;
  return loop_->Register(event_fd_, EventLoop::kReadable, this);
}

void WorkerInbox::Unregister() {
  if (loop_ != nullptr) loop_->Unregister(event_fd_);
  loop_ = nullptr;
}

size_t WorkerInbox::Push(PacketBuffer** buffers, size_t count) {
  bool was_empty = false;
  const size_t pushed = to_worker_.PushBatch(buffers, count, &was_empty);
  if (pushed > 0 && was_empty) {
    WriteEventFd(event_fd_);
    ++wakeups_sent_;
  }
  return pushed;
}

size_t WorkerInbox::ReclaimReturned(PacketBuffer** out, size_t max) {
  return to_master_.PopBatch(out, max);
}

size_t WorkerInbox::ReclaimUndelivered(PacketBuffer** out, size_t max) {
  size_t n = 0;
  while (n < max && !pending_return_.empty()) {
    out[n++] = pending_return_.back();
    pending_return_.pop_back();
  }
  return n + to_worker_.PopBatch(out + n, max - n);
}

void WorkerInbox::ReturnBuffers(PacketBuffer** buffers, size_t count) {
  // Older leftovers first, so buffers come back in order.
  if (!pending_return_.empty()) {
    const size_t n = to_master_.PushBatch(pending_return_.data(), pending_return_.size());
    pending_return_.erase(pending_return_.begin(), pending_return_.begin() + n);
  }
  size_t n = pending_return_.empty() ? to_master_.PushBatch(buffers, count) : 0;
  pending_return_.insert(pending_return_.end(), buffers + n, buffers + count);
}

void WorkerInbox::OnIoEvent(uint32_t /*events*/) {
  const size_t n = to_worker_.PopBatch(batch_.data(), drain_budget_);
  for (size_t i = 0; i < n; ++i) packets_[i] = *Header(batch_[i]);
  if (n > 0) {
    sink_->OnPackets(absl::MakeConstSpan(packets_.data(), n));
    packets_handled_ += n;
    ReturnBuffers(batch_.data(), n);
    if (depth_gauge_ != nullptr) depth_gauge_->Set(static_cast<int64_t>(to_worker_.SizeApprox()));
  }
  if (n == drain_budget_) {
    // More may be waiting. The eventfd stays readable (level-triggered), so the loop calls us
    // again next turn, after its timers and writes: no syscall, no starvation.
    return;
  }
  // The ring looked empty. Clear the eventfd first, then confirm: a push that raced with the
  // drain either shows up in ConfirmEmpty (we re-arm ourselves) or signalled after the clear.
  ClearEventFd(event_fd_);
  if (!to_worker_.ConfirmEmpty()) WriteEventFd(event_fd_);
}

}  // namespace petrel::quic
