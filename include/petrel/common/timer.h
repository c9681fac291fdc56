// Public: Timer, a one-shot intrusive timer on an EventLoop's timing wheel (O(1) start/cancel).
#ifndef PETREL_COMMON_TIMER_H_
#define PETREL_COMMON_TIMER_H_

#include <cstdint>

#include "absl/functional/any_invocable.h"
#include "petrel/common/clock.h"

namespace petrel {

class EventLoop;
namespace internal {
class TimerWheel;
}  // namespace internal

// A timer fires its callback once per start, on the loop thread, at or after its deadline: the
// deadline is rounded up to the wheel's 1 ms tick and compared with the loop's now(), so a
// callback always sees loop->now() >= deadline(). Timers due in the same loop turn fire in
// deadline order, equal deadlines in start order.
//
// The Timer object is the wheel entry (it holds the list links), so starting, restarting and
// cancelling allocate nothing and cost O(1). The wheel owns no timer; whoever holds the Timer
// owns it, and destroying it cancels it.
//
// Inside a callback it is safe to start, restart, cancel or destroy any timer of the same loop,
// including this one (destroying this one must be the callback's last act, as with `delete this`).
// A timer restarted from a timer callback with a deadline already due fires in the next turn,
// never in the current one, so a zero-delay self-restart cannot starve I/O.
//
// Thread contract: construct anywhere; every other method, the destructor included, runs on the
// loop thread only.
class Timer {
 public:
  using Callback = absl::AnyInvocable<void()>;

  // `loop` is not owned and must outlive the Timer; `callback` must not be empty.
  Timer(EventLoop* loop, Callback callback);
  // Binds to a bare internal::TimerWheel (src/common/timer_wheel.h) instead of a loop: for tests
  // and tools that drive a wheel with their own clock. `wheel` must outlive the Timer.
  Timer(internal::TimerWheel* wheel, Callback callback);
  ~Timer();

  Timer(const Timer&) = delete;
  Timer& operator=(const Timer&) = delete;

  // Arms the timer for `deadline`, replacing any earlier deadline (restart). A deadline already
  // due fires at the loop's next timer step: later in this turn when started from an I/O
  // handler, in the next turn when started from a timer callback or a posted task. Loop thread
  // only.
  void StartAt(TimePoint deadline);
  // StartAt(loop->now() + delay); a delay too large to represent means "never" in practice.
  // Loop thread only.
  void StartAfter(Duration delay);
  // Disarms; a no-op when not armed. Loop thread only.
  void Cancel();

  // True from a start until the callback begins or Cancel(). Loop thread only.
  bool armed() const { return where_ != Where::kIdle; }
  // The deadline of the last start (unrounded). Loop thread only.
  TimePoint deadline() const { return deadline_; }

 private:
  friend class internal::TimerWheel;

  // Which wheel list holds the timer; kIdle = none.
  enum class Where : uint8_t { kIdle, kSlot, kOverflow, kReady, kDue };

  void AssertInLoopThread() const;

  EventLoop* const loop_;  // nullptr for a timer bound to a bare wheel
  internal::TimerWheel* const wheel_;
  Callback callback_;

  // Wheel bookkeeping, read and written only by internal::TimerWheel.
  Timer* prev_ = nullptr;
  Timer* next_ = nullptr;
  TimePoint deadline_{};
  uint64_t expiry_tick_ = 0;  // deadline rounded up to whole ticks
  uint64_t start_seq_ = 0;    // breaks deadline ties in start order
  Where where_ = Where::kIdle;
  uint8_t level_ = 0;  // when where_ == kSlot
  uint8_t slot_ = 0;
};

}  // namespace petrel

#endif  // PETREL_COMMON_TIMER_H_
