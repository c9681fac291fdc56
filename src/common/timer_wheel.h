// Internal: the hierarchical timing wheel behind petrel::Timer; one per EventLoop.
#ifndef PETREL_COMMON_TIMER_WHEEL_H_
#define PETREL_COMMON_TIMER_WHEEL_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "petrel/common/clock.h"
#include "petrel/common/timer.h"

namespace petrel::internal {

// Time is counted in 1 ms ticks since the clock's epoch. Level L has 64 slots of 64^L ticks
// each; a timer lives at the level of the highest base-64 digit in which its expiry tick differs
// from the wheel's current tick, in the slot given by that digit of the expiry. Consequences:
//   - every occupied slot of a level lies after the current position, and every timer on a lower
//     level expires before every timer on a higher one, so the next wake-up is the first set bit
//     (std::countr_zero) of the lowest non-empty level's occupancy bitmap;
//   - advancing time visits only the slots that the new time passed or entered; their timers
//     either expire or drop to a lower level (lazy cascading), so each timer is touched at most
//     once per level over its life and a timer hours away costs a handful of wake-ups, not one
//     per tick;
//   - six levels span 64^6 ms (about 795 days). Timers beyond that wait in an overflow list that
//     is re-sorted each time the whole wheel rolls over.
//
// Not thread-safe: one wheel belongs to one loop thread. Timers are intrusive (see Timer); the
// wheel owns none of them.
class TimerWheel {
 public:
  static constexpr Duration kTick = std::chrono::milliseconds(1);
  static constexpr int kSlotBits = 6;
  static constexpr int kSlots = 1 << kSlotBits;
  static constexpr int kLevels = 6;

  explicit TimerWheel(TimePoint now);
  // Timers still armed are disarmed (armed() turns false) so that destroying them later is safe;
  // starting them again is not.
  ~TimerWheel();

  TimerWheel(const TimerWheel&) = delete;
  TimerWheel& operator=(const TimerWheel&) = delete;

  // The time timers are compared with. SetNow ignores attempts to go backwards.
  TimePoint now() const { return now_; }
  void SetNow(TimePoint now);

  // Fires, in (deadline, start order) order, every timer that was due at now() when the call
  // began; timers that become due during the call (restarted by a callback) wait for the next
  // call. Returns how many fired. Must not be called from a timer callback.
  size_t RunDue();

  // A time at or before the earliest deadline at which RunDue has work: exact when the earliest
  // timer is within 64 ticks, otherwise the start of the coarse slot that must be cascaded.
  // now() or earlier when something is due; nullopt when no timer is armed.
  std::optional<TimePoint> NextWakeup() const;

  size_t armed_count() const { return armed_count_; }

  // Used by Timer.
  void Arm(Timer* timer, TimePoint deadline);
  void Disarm(Timer* timer);

 private:
  struct List {
    Timer* head = nullptr;
    Timer* tail = nullptr;
    bool empty() const { return head == nullptr; }
  };

  static uint64_t FloorTick(TimePoint t);
  static uint64_t CeilTick(TimePoint t);

  // Links `timer` (already unlinked) at the place its expiry_tick_ calls for relative to tick_.
  void Place(Timer* timer);
  void Append(List& list, Timer* timer, Timer::Where where);
  void Unlink(Timer* timer);
  List& ListOf(const Timer* timer);
  // Moves everything that expires by `tick` into due_scratch_ and re-places the rest of every
  // slot the wheel passes; sets tick_ = tick.
  void AdvanceTo(uint64_t tick);
  // Takes every timer out of `list`; due ones go to due_scratch_, the others are re-placed.
  void Redistribute(List& list);

  TimePoint now_;
  uint64_t tick_;  // every tick <= tick_ has been processed
  uint64_t next_start_seq_ = 0;
  size_t armed_count_ = 0;
  bool running_due_ = false;

  List slots_[kLevels][kSlots];
  uint64_t occupied_[kLevels] = {};  // bit s of level L set <=> slots_[L][s] is non-empty
  List overflow_;                    // beyond the wheel's span
  List ready_;                       // already due when started; fire at the next RunDue
  List due_;                         // the batch RunDue is firing, in firing order
  std::vector<Timer*> due_scratch_;  // sorted into due_; capacity reused across calls
};

}  // namespace petrel::internal

#endif  // PETREL_COMMON_TIMER_WHEEL_H_
