// Public: AfterBatch, a callback scheduled for the end of the loop's current batch without
// allocating.
#ifndef PETREL_COMMON_AFTER_BATCH_H_
#define PETREL_COMMON_AFTER_BATCH_H_

#include "absl/functional/any_invocable.h"

namespace petrel {

class EventLoop;
class AfterBatch;

namespace internal {
// A doubly linked list of scheduled AfterBatch objects; the loop keeps two (waiting, running).
struct AfterBatchList {
  AfterBatch* head = nullptr;
  AfterBatch* tail = nullptr;
  bool empty() const { return head == nullptr; }
};
}  // namespace internal

// Runs its callback at the moment EventLoop::RunAfterBatch tasks run (after every I/O handler of
// the batch has returned; from a timer or posted task, at the end of the turn), once per
// Schedule(). For work an owner asks for many times per batch and wants done once after it, on
// every request of a hot path: the object is the queue entry, so scheduling allocates nothing.
//
// Schedule() on an already scheduled object does nothing. Cancel() and the destructor unschedule.
// Inside the callback it may schedule itself again (it runs at the next drain point of the loop,
// never in the same one) and may cancel or destroy any AfterBatch of the loop, including itself
// (as the callback's last act). Loop thread only, destructor included.
class AfterBatch {
 public:
  using Callback = absl::AnyInvocable<void()>;

  // `loop` is not owned and must outlive this object; `callback` must not be empty.
  AfterBatch(EventLoop* loop, Callback callback);
  ~AfterBatch();

  AfterBatch(const AfterBatch&) = delete;
  AfterBatch& operator=(const AfterBatch&) = delete;

  void Schedule();
  void Cancel();
  // True from Schedule() until the callback begins or Cancel().
  bool scheduled() const { return list_ != nullptr; }

 private:
  friend class EventLoop;

  EventLoop* const loop_;
  Callback callback_;
  AfterBatch* prev_ = nullptr;
  AfterBatch* next_ = nullptr;
  internal::AfterBatchList* list_ = nullptr;  // the loop's list holding this; nullptr = idle
};

}  // namespace petrel

#endif  // PETREL_COMMON_AFTER_BATCH_H_
