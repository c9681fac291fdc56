#include "common/timer_wheel.h"

#include <algorithm>
#include <bit>
#include <cstdio>
#include <cstdlib>
#include <limits>

#include "petrel/common/event_loop.h"
#include "petrel/common/timer.h"

namespace petrel {

// ---- Timer ----------------------------------------------------------------------------------

Timer::Timer(EventLoop* loop, Callback callback)
    : loop_(loop), wheel_(&loop->timer_wheel()), callback_(std::move(callback)) {}

Timer::Timer(internal::TimerWheel* wheel, Callback callback)
    : loop_(nullptr), wheel_(wheel), callback_(std::move(callback)) {}

Timer::~Timer() {
  // An idle timer touches nothing, so it may outlive its wheel (the wheel disarms leftovers).
  if (armed()) {
    AssertInLoopThread();
    wheel_->Disarm(this);
  }
}

void Timer::StartAt(TimePoint deadline) {
  AssertInLoopThread();
  wheel_->Arm(this, deadline);
}

void Timer::StartAfter(Duration delay) {
  const TimePoint now = wheel_->now();
  // Saturate instead of overflowing: a delay past the end of time is simply "very late".
  if (delay > TimePoint::max() - now) {
    StartAt(TimePoint::max());
  } else {
    StartAt(now + delay);
  }
}

void Timer::Cancel() {
  AssertInLoopThread();
  wheel_->Disarm(this);
}

void Timer::AssertInLoopThread() const {
  if (loop_ != nullptr) {
    loop_->AssertInLoopThread();
  }
}

namespace internal {

namespace {

constexpr uint64_t kTickNanos = std::chrono::nanoseconds(TimerWheel::kTick).count();
constexpr uint64_t kSlotMask = TimerWheel::kSlots - 1;
constexpr int kWheelBits = TimerWheel::kLevels * TimerWheel::kSlotBits;

TimePoint TickToTime(uint64_t tick) {
  constexpr uint64_t kMaxTick =
      static_cast<uint64_t>(std::numeric_limits<Duration::rep>::max()) / kTickNanos;
  if (tick > kMaxTick) {
    return TimePoint::max();
  }
  return TimePoint(Duration(static_cast<Duration::rep>(tick * kTickNanos)));
}

}  // namespace

// ---- TimerWheel -----------------------------------------------------------------------------

TimerWheel::TimerWheel(TimePoint now) : now_(now), tick_(FloorTick(now)) {}

TimerWheel::~TimerWheel() {
  auto disarm_all = [](List& list) {
    for (Timer* t = list.head; t != nullptr;) {
      Timer* next = t->next_;
      t->prev_ = t->next_ = nullptr;
      t->where_ = Timer::Where::kIdle;
      t = next;
    }
    list = List{};
  };
  for (auto& level : slots_) {
    for (List& slot : level) {
      disarm_all(slot);
    }
  }
  disarm_all(overflow_);
  disarm_all(ready_);
  disarm_all(due_);
}

uint64_t TimerWheel::FloorTick(TimePoint t) {
  const auto ns = t.time_since_epoch().count();
  if (ns <= 0) {
    return 0;
  }
  return static_cast<uint64_t>(ns) / kTickNanos;
}

uint64_t TimerWheel::CeilTick(TimePoint t) {
  const auto ns = t.time_since_epoch().count();
  if (ns <= 0) {
    return 0;
  }
  const uint64_t u = static_cast<uint64_t>(ns);
  return u / kTickNanos + (u % kTickNanos != 0 ? 1 : 0);
}

void TimerWheel::SetNow(TimePoint now) {
  if (now > now_) {
    now_ = now;
  }
}

void TimerWheel::Arm(Timer* timer, TimePoint deadline) {
  // A deadline at or before now() is due now, even inside the current tick: rounding it up to
  // the next tick would hold "write as soon as you can" timers (QUIC's) for up to a millisecond.
  const uint64_t expiry = deadline <= now_ ? tick_ : CeilTick(deadline);
  // A restart within the same tick (QUIC re-arms its timer after every packet, mostly to a
  // deadline in the same millisecond) keeps the timer's place: where a timer sits depends only
  // on its expiry tick and which timers fire first is decided by sorting each due batch on
  // (deadline, start order), not by list position. A timer in the due batch is re-placed, since
  // the batch fires before anything restarted within it.
  if (expiry == timer->expiry_tick_ &&
      (timer->where_ == Timer::Where::kSlot || timer->where_ == Timer::Where::kOverflow ||
       (timer->where_ == Timer::Where::kReady && expiry <= tick_))) {
    timer->deadline_ = deadline;
    timer->start_seq_ = next_start_seq_++;
    return;
  }
  if (timer->where_ != Timer::Where::kIdle) {
    Unlink(timer);
  } else {
    ++armed_count_;
  }
  timer->deadline_ = deadline;
  timer->expiry_tick_ = expiry;
  timer->start_seq_ = next_start_seq_++;
  Place(timer);
}

void TimerWheel::Disarm(Timer* timer) {
  if (timer->where_ == Timer::Where::kIdle) {
    return;
  }
  Unlink(timer);
  --armed_count_;
}

void TimerWheel::Place(Timer* timer) {
  const uint64_t expiry = timer->expiry_tick_;
  if (expiry <= tick_) {
    Append(ready_, timer, Timer::Where::kReady);
    return;
  }
  // The highest base-64 digit in which expiry and tick_ differ picks the level.
  const int level = static_cast<int>(std::bit_width(expiry ^ tick_) - 1) / kSlotBits;
  if (level >= kLevels) {
    Append(overflow_, timer, Timer::Where::kOverflow);
    return;
  }
  const int slot = static_cast<int>((expiry >> (level * kSlotBits)) & kSlotMask);
  timer->level_ = static_cast<uint8_t>(level);
  timer->slot_ = static_cast<uint8_t>(slot);
  Append(slots_[level][slot], timer, Timer::Where::kSlot);
  occupied_[level] |= uint64_t{1} << slot;
}

void TimerWheel::Append(List& list, Timer* timer, Timer::Where where) {
  timer->where_ = where;
  timer->next_ = nullptr;
  timer->prev_ = list.tail;
  if (list.tail != nullptr) {
    list.tail->next_ = timer;
  } else {
    list.head = timer;
  }
  list.tail = timer;
}

TimerWheel::List& TimerWheel::ListOf(const Timer* timer) {
  switch (timer->where_) {
    case Timer::Where::kSlot:
      return slots_[timer->level_][timer->slot_];
    case Timer::Where::kOverflow:
      return overflow_;
    case Timer::Where::kReady:
      return ready_;
    case Timer::Where::kDue:
      return due_;
    case Timer::Where::kIdle:
      break;
  }
  std::fprintf(stderr, "petrel: TimerWheel::ListOf on an idle timer\n");
  std::abort();
}

void TimerWheel::Unlink(Timer* timer) {
  List& list = ListOf(timer);
  if (timer->prev_ != nullptr) {
    timer->prev_->next_ = timer->next_;
  } else {
    list.head = timer->next_;
  }
  if (timer->next_ != nullptr) {
    timer->next_->prev_ = timer->prev_;
  } else {
    list.tail = timer->prev_;
  }
  if (timer->where_ == Timer::Where::kSlot && list.empty()) {
    occupied_[timer->level_] &= ~(uint64_t{1} << timer->slot_);
  }
  timer->prev_ = timer->next_ = nullptr;
  timer->where_ = Timer::Where::kIdle;
}

void TimerWheel::Redistribute(List& list) {
  Timer* t = list.head;
  list = List{};
  while (t != nullptr) {
    Timer* next = t->next_;
    t->prev_ = t->next_ = nullptr;
    t->where_ = Timer::Where::kIdle;
    if (t->expiry_tick_ <= tick_) {
      due_scratch_.push_back(t);
    } else {
      Place(t);
    }
    t = next;
  }
}

void TimerWheel::AdvanceTo(uint64_t tick) {
  const uint64_t old = tick_;
  tick_ = tick;
  // Lowest level first: a timer re-placed from level L lands below L, on a level already done.
  for (int level = 0; level < kLevels; ++level) {
    const int shift = level * kSlotBits;
    const uint64_t old_pos = old >> shift;
    const uint64_t new_pos = tick >> shift;
    if (old_pos == new_pos) {
      break;  // this digit and all above it are unchanged
    }
    // The slots this step passed or entered: after the old digit up to and including the new
    // one within the same turn of the level, or all of them if the level wrapped.
    uint64_t passed = ~uint64_t{0};
    if ((old_pos >> kSlotBits) == (new_pos >> kSlotBits)) {
      const uint64_t old_digit = old_pos & kSlotMask;  // < new digit <= 63
      const uint64_t new_digit = new_pos & kSlotMask;
      const uint64_t through_new =
          new_digit == kSlotMask ? ~uint64_t{0} : (uint64_t{1} << (new_digit + 1)) - 1;
      passed = through_new & ~((uint64_t{1} << (old_digit + 1)) - 1);
    }
    uint64_t bits = occupied_[level] & passed;
    while (bits != 0) {
      const int slot = std::countr_zero(bits);
      bits &= bits - 1;
      occupied_[level] &= ~(uint64_t{1} << slot);
      Redistribute(slots_[level][slot]);
    }
  }
  if ((old >> kWheelBits) != (tick >> kWheelBits)) {
    Redistribute(overflow_);
  }
}

size_t TimerWheel::RunDue() {
  if (running_due_) {
    std::fprintf(stderr, "petrel: TimerWheel::RunDue called from a timer callback\n");
    std::abort();
  }
  // Most turns: no timer started already due, and the clock is still in the last tick.
  const uint64_t target = FloorTick(now_);
  if (ready_.empty() && target <= tick_) return 0;
  running_due_ = true;
  // ready_ holds timers that were already due when started.
  Redistribute(ready_);
  if (target > tick_) {
    AdvanceTo(target);
  }

  if (due_scratch_.size() > 1) {
    std::sort(due_scratch_.begin(), due_scratch_.end(), [](const Timer* a, const Timer* b) {
      if (a->deadline_ != b->deadline_) {
        return a->deadline_ < b->deadline_;
      }
      return a->start_seq_ < b->start_seq_;
    });
  }
  for (Timer* t : due_scratch_) {
    Append(due_, t, Timer::Where::kDue);
  }
  due_scratch_.clear();

  // Pop one at a time: a callback may cancel, restart or destroy any timer still in due_, or
  // destroy the one firing (which is already unlinked and is not touched after its callback).
  size_t fired = 0;
  while (Timer* t = due_.head) {
    Unlink(t);
    --armed_count_;
    ++fired;
    t->callback_();
  }
  running_due_ = false;
  return fired;
}

std::optional<TimePoint> TimerWheel::NextWakeup() const {
  if (!ready_.empty()) {
    return now_;
  }
  for (int level = 0; level < kLevels; ++level) {
    if (occupied_[level] == 0) {
      continue;
    }
    const int shift = level * kSlotBits;
    const uint64_t slot = static_cast<uint64_t>(std::countr_zero(occupied_[level]));
    // Same digits as tick_ above this level, this slot's digit, zeros below: the slot's start.
    const uint64_t above = (tick_ >> (shift + kSlotBits)) << (shift + kSlotBits);
    return TickToTime(above | (slot << shift));
  }
  if (!overflow_.empty()) {
    return TickToTime(((tick_ >> kWheelBits) + 1) << kWheelBits);
  }
  return std::nullopt;
}

}  // namespace internal
}  // namespace petrel
