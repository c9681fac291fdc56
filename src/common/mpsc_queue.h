// Internal: a lock-free multi-producer single-consumer queue (Vyukov's linked design), the
// mailbox behind EventLoop::Post.
#ifndef PETREL_COMMON_MPSC_QUEUE_H_
#define PETREL_COMMON_MPSC_QUEUE_H_

#include <sched.h>

#include <atomic>
#include <cstddef>
#include <utility>

#include "petrel/common/cache_line.h"

namespace petrel::internal {

// Push is wait-free (one allocation, one atomic exchange, one store) and safe from any thread.
// Everything else is for the one consumer thread.
//
// The queue is a singly linked list. Producers swap themselves in at `head_` and then link the
// previous head to their node; the consumer walks from `tail_`, a node whose value was already
// taken (at first a dummy). Between a producer's exchange and its link the chain is briefly cut:
// the consumer then sees "nothing more" even though later nodes exist. Callers that pair the
// queue with a wake-up signal sent *after* Push (as EventLoop does) lose nothing by this: the
// producer in that window has not signalled yet, so a wake-up is still on its way.
//
// Each producer's elements come out in its push order; elements of different producers
// interleave in the order of their exchanges on `head_`.
template <typename T>
class MpscQueue {
 public:
  // What ConsumeSnapshot does when it reaches a cut in the chain (see above).
  enum class InFlight {
    kLeave,  // stop there; the rest waits for the next call (never blocks)
    kWait,   // spin (yielding) until the producer links it; used at shutdown only
  };

  MpscQueue() : head_(new Node), tail_(head_.load(std::memory_order_relaxed)) {}
  MpscQueue(const MpscQueue&) = delete;
  MpscQueue& operator=(const MpscQueue&) = delete;

  // Destroys unconsumed elements. No producer may be running.
  ~MpscQueue() {
    while (tail_ != nullptr) {
      Node* next = tail_->next.load(std::memory_order_relaxed);
      delete tail_;
      tail_ = next;
    }
  }

  // Safe from any thread.
  void Push(T value) {
    Node* node = new Node(std::move(value));
    Node* prev = head_.exchange(node, std::memory_order_acq_rel);
    prev->next.store(node, std::memory_order_release);
  }

  // Consumer only. Calls f(T&&) for the elements pushed before this call started, oldest first,
  // and returns how many. Elements pushed while it runs (by f itself or by other threads) are
  // left for the next call, so a consumer that re-posts work cannot keep this call busy forever.
  // With InFlight::kWait it also waits for pushes that were in flight when the call started, so
  // every Push that happened-before the call is consumed. f must not call ConsumeSnapshot.
  template <typename F>
  size_t ConsumeSnapshot(F&& f, InFlight in_flight = InFlight::kLeave) {
    Node* const last = head_.load(std::memory_order_acquire);
    size_t consumed = 0;
    while (tail_ != last) {
      Node* next = tail_->next.load(std::memory_order_acquire);
      if (next == nullptr) {
        if (in_flight == InFlight::kLeave) {
          break;
        }
        sched_yield();
        continue;
      }
      delete tail_;
      tail_ = next;  // `next` becomes the new dummy once its value is moved out
      T value = std::move(next->value);
      ++consumed;
      f(std::move(value));
    }
    return consumed;
  }

  // Consumer only. True when no element is queued or being pushed.
  bool empty() const { return head_.load(std::memory_order_acquire) == tail_; }

 private:
  struct Node {
    Node() = default;
    explicit Node(T v) : value(std::move(v)) {}
    std::atomic<Node*> next{nullptr};
    T value{};
  };

  // Producers hammer head_; the consumer owns tail_: keep them on separate cache lines.
  alignas(kCacheLineSize) std::atomic<Node*> head_;
  alignas(kCacheLineSize) Node* tail_;
};

}  // namespace petrel::internal

#endif  // PETREL_COMMON_MPSC_QUEUE_H_
