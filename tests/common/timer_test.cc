// Tests of petrel::Timer: the wheel driven by a fake clock, then timers on a real EventLoop.
#include "petrel/common/timer.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <numeric>
#include <optional>
#include <random>
#include <vector>

#include "common/timer_wheel.h"
#include "gtest/gtest.h"
#include "petrel/common/clock.h"
#include "petrel/common/event_loop.h"

namespace petrel {
namespace {

using internal::TimerWheel;
using std::chrono::hours;
using std::chrono::microseconds;
using std::chrono::milliseconds;
using std::chrono::nanoseconds;

// Deliberately not tick-aligned.
const TimePoint kBase = FromNanos(1'000'000'000'123'456);

// The earliest time at which a timer for `deadline` may fire: its deadline rounded up to a tick.
TimePoint CeilTick(TimePoint deadline) { return std::chrono::ceil<milliseconds>(deadline); }

// Drives `wheel` by jumping to each NextWakeup until nothing is armed; returns the number of
// RunDue calls, or -1 if that takes more than `max_calls`.
int RunUntilIdle(TimerWheel& wheel, int max_calls) {
  for (int calls = 0; calls <= max_calls; ++calls) {
    const std::optional<TimePoint> next = wheel.NextWakeup();
    if (!next) {
      return calls;
    }
    wheel.SetNow(*next);
    wheel.RunDue();
  }
  return -1;
}

// ---- The wheel with a fake clock ------------------------------------------------------------

TEST(TimerWheelTest, ShuffledDeadlinesOnAllLevelsFireInOrderAndOnTime) {
  TimerWheel wheel(kBase);
  std::mt19937_64 rng(12345);
  constexpr int kCount = 4000;
  // Log-uniform delays from 0 to ~20 days reach every level; every tenth timer shares the
  // previous one's deadline so that ties are exercised too.
  std::vector<TimePoint> deadlines(kCount);
  std::uniform_real_distribution<double> log_ns(0.0, 21.2);  // e^21.2 ns ~ 1.6e9 ms
  for (int i = 0; i < kCount; ++i) {
    deadlines[i] = (i % 10 == 9)
                       ? deadlines[i - 1]
                       : kBase + nanoseconds(static_cast<int64_t>(std::exp(log_ns(rng)) * 1e3));
  }
  std::vector<int> fired;
  TimePoint previous_run = kBase;  // now() at the RunDue call before the current one
  std::vector<std::unique_ptr<Timer>> timers;
  timers.reserve(kCount);
  for (int i = 0; i < kCount; ++i) {
    timers.push_back(std::make_unique<Timer>(&wheel, [&, i] {
      EXPECT_GE(wheel.now(), deadlines[i]) << "early: timer " << i;
      EXPECT_LT(previous_run, CeilTick(deadlines[i])) << "late: timer " << i;
      fired.push_back(i);
    }));
  }
  // Start in shuffled order; the start order decides ties, so remember it.
  std::vector<int> start_order(kCount);
  std::iota(start_order.begin(), start_order.end(), 0);
  std::shuffle(start_order.begin(), start_order.end(), rng);
  std::vector<int> start_rank(kCount);
  for (int rank = 0; rank < kCount; ++rank) {
    start_rank[start_order[rank]] = rank;
    timers[start_order[rank]]->StartAt(deadlines[start_order[rank]]);
  }
  EXPECT_EQ(wheel.armed_count(), static_cast<size_t>(kCount));

  std::vector<int> expected(kCount);
  std::iota(expected.begin(), expected.end(), 0);
  std::sort(expected.begin(), expected.end(), [&](int a, int b) {
    if (deadlines[a] != deadlines[b]) {
      return deadlines[a] < deadlines[b];
    }
    return start_rank[a] < start_rank[b];
  });

  // Alternate exact jumps to NextWakeup with random strides that skip over many deadlines.
  std::uniform_int_distribution<int64_t> stride_us(1, 5'000'000'000);
  for (int step = 0; step < 200'000 && wheel.armed_count() > 0; ++step) {
    const std::optional<TimePoint> next = wheel.NextWakeup();
    ASSERT_TRUE(next.has_value());
    const TimePoint earliest = CeilTick(deadlines[expected[fired.size()]]);
    ASSERT_LE(*next, earliest) << "NextWakeup overshoots the earliest deadline";
    const TimePoint target = (step % 3 == 2) ? wheel.now() + microseconds(stride_us(rng)) : *next;
    wheel.SetNow(target);
    wheel.RunDue();
    previous_run = wheel.now();
  }
  EXPECT_EQ(wheel.armed_count(), 0u);
  EXPECT_EQ(fired, expected);
  EXPECT_FALSE(wheel.NextWakeup().has_value());
}

TEST(TimerWheelTest, FarTimersCascadeLazily) {
  struct Case {
    Duration delay;
    int max_calls;
  };
  // At most one wake-up per level to cascade plus the expiry itself; beyond the wheel's span
  // (~795 days) one more per rollover of the whole wheel (2000 days: 2 or 3 of them).
  const Case cases[] = {
      {milliseconds(70), 2},
      {hours(2) + microseconds(123'400), TimerWheel::kLevels + 1},
      {hours(24 * 30), TimerWheel::kLevels + 1},
      {hours(24 * 2000), TimerWheel::kLevels + 4},
  };
  for (const Case& c : cases) {
    TimerWheel wheel(kBase);
    int fired = 0;
    Timer timer(&wheel, [&] { ++fired; });
    timer.StartAt(kBase + c.delay);
    const int calls = RunUntilIdle(wheel, 1000);
    EXPECT_GT(calls, 0) << "delay " << c.delay.count();
    EXPECT_LE(calls, c.max_calls) << "delay " << c.delay.count();
    EXPECT_EQ(fired, 1);
    EXPECT_EQ(wheel.now(), CeilTick(kBase + c.delay)) << "fired at the first possible tick";
  }
}

TEST(TimerWheelTest, EqualDeadlinesFireInStartOrder) {
  TimerWheel wheel(kBase);
  std::vector<int> fired;
  constexpr int kCount = 50;
  std::vector<std::unique_ptr<Timer>> timers;
  timers.reserve(kCount);
  const TimePoint deadline = kBase + milliseconds(300);
  for (int i = 0; i < kCount; ++i) {
    timers.push_back(std::make_unique<Timer>(&wheel, [&fired, i] { fired.push_back(i); }));
    timers.back()->StartAt(deadline);
  }
  timers[10]->StartAt(deadline);  // a restart counts as a new start: now last among equals
  timers[0]->StartAt(deadline - nanoseconds(1));  // same tick, earlier deadline: first
  EXPECT_GT(RunUntilIdle(wheel, 10), 0);
  std::vector<int> expected = {0};
  for (int i = 1; i < kCount; ++i) {
    if (i != 10) {
      expected.push_back(i);
    }
  }
  expected.push_back(10);
  EXPECT_EQ(fired, expected);
}

TEST(TimerWheelTest, RestartMovesTheTimer) {
  TimerWheel wheel(kBase);
  std::vector<char> fired;
  Timer a(&wheel, [&] { fired.push_back('a'); });
  Timer b(&wheel, [&] { fired.push_back('b'); });
  a.StartAt(kBase + milliseconds(100));
  b.StartAt(kBase + milliseconds(50));
  a.StartAt(kBase + milliseconds(10));    // earlier
  b.StartAt(kBase + milliseconds(5000));  // later
  EXPECT_EQ(a.deadline(), kBase + milliseconds(10));
  wheel.SetNow(kBase + milliseconds(60));
  EXPECT_EQ(wheel.RunDue(), 1u);
  EXPECT_EQ(fired, std::vector<char>{'a'});
  EXPECT_FALSE(a.armed());
  EXPECT_TRUE(b.armed());
  EXPECT_GT(RunUntilIdle(wheel, 10), 0);
  EXPECT_EQ(wheel.now(), CeilTick(kBase + milliseconds(5000)));
  EXPECT_EQ(fired, (std::vector<char>{'a', 'b'}));
}

TEST(TimerWheelTest, RestartsWithinOneTickKeepTheCountAndTheOrder) {
  TimerWheel wheel(kBase);
  std::vector<char> fired;
  Timer ready(&wheel, [&] { fired.push_back('r'); });
  Timer slot(&wheel, [&] { fired.push_back('s'); });
  Timer late(&wheel, [&] { fired.push_back('l'); });
  Timer far(&wheel, [&] { fired.push_back('f'); });
  ready.StartAt(kBase - milliseconds(1));
  ready.StartAt(kBase);  // still due now: the same (current) tick
  slot.StartAt(kBase + milliseconds(7));
  late.StartAt(kBase + milliseconds(7) - nanoseconds(2));
  slot.StartAt(kBase + milliseconds(7) - nanoseconds(3));  // same tick, now the earliest of it
  late.StartAt(kBase + milliseconds(7) - nanoseconds(2));  // same deadline, a new start
  far.StartAt(kBase + hours(24 * 800));                    // beyond the wheel's span
  far.StartAt(kBase + hours(24 * 800) + nanoseconds(1));
  EXPECT_EQ(wheel.armed_count(), 4u);
  EXPECT_EQ(slot.deadline(), kBase + milliseconds(7) - nanoseconds(3));
  wheel.SetNow(kBase + milliseconds(8));
  EXPECT_EQ(wheel.RunDue(), 3u);
  EXPECT_EQ(fired, (std::vector<char>{'r', 's', 'l'}));
  EXPECT_EQ(wheel.armed_count(), 1u);
  EXPECT_TRUE(far.armed());
  far.Cancel();
  EXPECT_EQ(wheel.armed_count(), 0u);
  EXPECT_EQ(wheel.NextWakeup(), std::nullopt);
}

TEST(TimerWheelTest, RestartFromOwnCallback) {
  TimerWheel wheel(kBase);
  int fired = 0;
  Timer* self = nullptr;
  Timer periodic(&wheel, [&] {
    ++fired;
    EXPECT_FALSE(self->armed()) << "not armed while its callback runs";
    if (fired < 5) {
      self->StartAfter(milliseconds(20));
    }
  });
  self = &periodic;
  periodic.StartAfter(milliseconds(20));
  EXPECT_GT(RunUntilIdle(wheel, 50), 0);
  EXPECT_EQ(fired, 5);
}

TEST(TimerWheelTest, DueRestartInCallbackWaitsForTheNextRun) {
  TimerWheel wheel(kBase);
  int fired = 0;
  Timer* self = nullptr;
  Timer timer(&wheel, [&] {
    ++fired;
    self->StartAt(wheel.now() - milliseconds(1));  // already due
  });
  self = &timer;
  timer.StartAt(kBase);
  wheel.SetNow(kBase + milliseconds(1));
  EXPECT_EQ(wheel.RunDue(), 1u);
  EXPECT_EQ(fired, 1);
  EXPECT_TRUE(timer.armed());
  EXPECT_EQ(wheel.NextWakeup(), wheel.now()) << "due: wake at once";
  EXPECT_EQ(wheel.RunDue(), 1u);
  EXPECT_EQ(fired, 2);
  timer.Cancel();
  EXPECT_FALSE(wheel.NextWakeup().has_value());
}

TEST(TimerWheelTest, DeadlineAtNowInsideATickFiresInTheNextRun) {
  TimerWheel wheel(kBase);  // kBase lies inside a tick, not on its start
  wheel.RunDue();
  int fired = 0;
  Timer timer(&wheel, [&] { ++fired; });
  timer.StartAt(wheel.now());
  EXPECT_EQ(wheel.NextWakeup(), wheel.now()) << "due: wake at once";
  EXPECT_EQ(wheel.RunDue(), 1u) << "held until the next tick";
  EXPECT_EQ(fired, 1);
  // Half a tick later, the same for a deadline between the wheel's tick and now().
  wheel.SetNow(wheel.now() + microseconds(400));
  timer.StartAt(wheel.now() - microseconds(100));
  EXPECT_EQ(wheel.RunDue(), 1u);
  EXPECT_EQ(fired, 2);
}

TEST(TimerWheelTest, CallbackCancelsATimerDueInTheSameRun) {
  TimerWheel wheel(kBase);
  bool b_fired = false;
  Timer b(&wheel, [&] { b_fired = true; });
  Timer a(&wheel, [&] { b.Cancel(); });
  const TimePoint deadline = kBase + milliseconds(7);
  a.StartAt(deadline);
  b.StartAt(deadline);  // after a among equals
  wheel.SetNow(kBase + milliseconds(100));
  EXPECT_EQ(wheel.RunDue(), 1u);
  EXPECT_FALSE(b_fired);
  EXPECT_FALSE(b.armed());
  EXPECT_EQ(wheel.armed_count(), 0u);
}

TEST(TimerWheelTest, CallbackDestroysOtherTimersAndItself) {
  TimerWheel wheel(kBase);
  int fired = 0;
  auto b = std::make_unique<Timer>(&wheel, [&] { ++fired; });
  auto c = std::make_unique<Timer>(&wheel, [&] { ++fired; });
  std::unique_ptr<Timer> a;
  a = std::make_unique<Timer>(&wheel, [&] {
    ++fired;
    b.reset();  // due in this run
    c.reset();  // due later
    a.reset();  // itself, as the last act
  });
  a->StartAt(kBase + milliseconds(3));
  b->StartAt(kBase + milliseconds(3));
  c->StartAt(kBase + milliseconds(900));
  wheel.SetNow(kBase + milliseconds(10));
  EXPECT_EQ(wheel.RunDue(), 1u);
  EXPECT_EQ(fired, 1);
  EXPECT_EQ(a, nullptr);
  EXPECT_EQ(wheel.armed_count(), 0u);
  EXPECT_FALSE(wheel.NextWakeup().has_value());
}

TEST(TimerWheelTest, TenThousandTimersRestartedManyTimes) {
  TimerWheel wheel(kBase);
  constexpr int kCount = 10'000;
  std::vector<int> fire_count(kCount, 0);
  std::vector<std::unique_ptr<Timer>> timers;
  timers.reserve(kCount);
  for (int i = 0; i < kCount; ++i) {
    timers.push_back(std::make_unique<Timer>(&wheel, [&fire_count, i] { ++fire_count[i]; }));
  }
  std::mt19937 rng(7);
  std::uniform_int_distribution<int64_t> delay_us(1'000, 120'000'000);  // 1 ms .. 2 min
  // Idle-timeout style: every timer is pushed back again and again while time creeps on, so
  // none ever fires.
  for (int round = 0; round < 50; ++round) {
    for (auto& timer : timers) {
      timer->StartAfter(microseconds(delay_us(rng)) + hours(1));
    }
    wheel.SetNow(wheel.now() + milliseconds(500));
    EXPECT_EQ(wheel.RunDue(), 0u);
    EXPECT_EQ(wheel.armed_count(), static_cast<size_t>(kCount));
  }
  for (auto& timer : timers) {
    timer->StartAfter(microseconds(delay_us(rng)));
  }
  EXPECT_GT(RunUntilIdle(wheel, 1'000'000), 0);
  for (int i = 0; i < kCount; ++i) {
    ASSERT_EQ(fire_count[i], 1) << "timer " << i;
  }
}

TEST(TimerWheelTest, PastDeadlineCancelAndSaturation) {
  TimerWheel wheel(kBase);
  int fired = 0;
  Timer past(&wheel, [&] { ++fired; });
  past.StartAt(kBase - hours(1));
  EXPECT_TRUE(past.armed());
  EXPECT_EQ(wheel.NextWakeup(), wheel.now());
  EXPECT_EQ(wheel.RunDue(), 1u);
  EXPECT_EQ(fired, 1);

  Timer never(&wheel, [&] { ++fired; });
  never.StartAfter(Duration::max());  // saturates instead of overflowing
  EXPECT_EQ(never.deadline(), TimePoint::max());
  wheel.SetNow(kBase + hours(24 * 365));
  EXPECT_EQ(wheel.RunDue(), 0u);
  never.Cancel();
  never.Cancel();  // idempotent
  EXPECT_FALSE(never.armed());
  EXPECT_FALSE(wheel.NextWakeup().has_value());
}

TEST(TimerWheelTest, TimerMayOutliveItsWheel) {
  auto wheel = std::make_unique<TimerWheel>(kBase);
  Timer timer(wheel.get(), [] {});
  timer.StartAfter(milliseconds(5));
  wheel.reset();  // disarms
  EXPECT_FALSE(timer.armed());
}  // ~Timer must not touch the freed wheel (ASan checks)

// ---- Timers on a real loop ------------------------------------------------------------------

TEST(LoopTimerTest, ShuffledDeadlinesFireInOrderNeverEarly) {
  EventLoop loop;
  constexpr int kCount = 200;
  std::mt19937 rng(99);
  std::uniform_int_distribution<int64_t> delay_us(0, 40'000);
  const TimePoint start = loop.now();
  std::vector<TimePoint> deadlines(kCount);
  for (int i = 0; i < kCount; ++i) {
    deadlines[i] = (i % 7 == 6) ? deadlines[i - 1] : start + microseconds(delay_us(rng));
  }
  std::vector<int> fired;
  std::vector<std::unique_ptr<Timer>> timers;
  timers.reserve(kCount);
  for (int i = 0; i < kCount; ++i) {
    timers.push_back(std::make_unique<Timer>(&loop, [&, i] {
      EXPECT_GE(loop.now(), deadlines[i]) << "timer " << i << " early";
      EXPECT_GE(MonotonicNow(), deadlines[i]);
      fired.push_back(i);
      if (fired.size() == kCount) {
        loop.Stop();
      }
    }));
    timers.back()->StartAt(deadlines[i]);  // start order = index order
  }
  Timer watchdog(&loop, [&] {
    ADD_FAILURE() << "timers did not all fire within 10 s";
    loop.Stop();
  });
  watchdog.StartAfter(std::chrono::seconds(10));
  loop.Run();

  std::vector<int> expected(kCount);
  std::iota(expected.begin(), expected.end(), 0);
  std::stable_sort(expected.begin(), expected.end(),
                   [&](int a, int b) { return deadlines[a] < deadlines[b]; });
  EXPECT_EQ(fired, expected);
}

TEST(LoopTimerTest, CallbackCancelsAndDestroysTimersDueInTheSameTurn) {
  EventLoop loop;
  bool b_fired = false;
  bool c_fired = false;
  Timer b(&loop, [&] { b_fired = true; });
  auto c = std::make_unique<Timer>(&loop, [&] { c_fired = true; });
  Timer a(&loop, [&] {
    b.Cancel();
    c.reset();
  });
  Timer stop(&loop, [&] { loop.Stop(); });
  const TimePoint deadline = loop.now() + milliseconds(5);
  a.StartAt(deadline);
  b.StartAt(deadline);
  c->StartAt(deadline);
  stop.StartAt(deadline + milliseconds(20));
  loop.Run();
  EXPECT_FALSE(b_fired);
  EXPECT_FALSE(c_fired);
  EXPECT_EQ(loop.armed_timers(), 0u);
}

TEST(LoopTimerTest, ZeroDelaySelfRestartFiresOncePerTurn) {
  EventLoop loop;
  std::vector<uint64_t> turns_at_fire;
  Timer* self = nullptr;
  Timer timer(&loop, [&] {
    turns_at_fire.push_back(loop.turns());
    if (turns_at_fire.size() < 100) {
      self->StartAfter(Duration::zero());
    } else {
      loop.Stop();
    }
  });
  self = &timer;
  timer.StartAfter(Duration::zero());
  loop.Run();
  ASSERT_EQ(turns_at_fire.size(), 100u);
  for (size_t i = 1; i < turns_at_fire.size(); ++i) {
    EXPECT_GT(turns_at_fire[i], turns_at_fire[i - 1]) << "two fires in one turn";
  }
}

// A timer started at now() from an I/O handler fires later in the same turn (QUIC's "write
// now" path relies on it: a millisecond tick between a response and its packet is latency).
TEST(LoopTimerTest, TimerStartedAtNowFromAnIoHandlerFiresInTheSameTurn) {
  EventLoop loop;
  int fds[2];
  ASSERT_EQ(::pipe2(fds, O_NONBLOCK | O_CLOEXEC), 0);
  std::optional<uint64_t> fired_turn;
  std::optional<uint64_t> io_turn;
  Timer timer(&loop, [&] {
    fired_turn = loop.turns();
    loop.Stop();
  });
  Timer guard(&loop, [&] { loop.Stop(); });
  guard.StartAfter(std::chrono::seconds(10));
  struct Reader : IoHandler {
    std::function<void()> on_readable;
    void OnIoEvent(uint32_t) override { on_readable(); }
  } reader;
  reader.on_readable = [&] {
    char c;
    (void)::read(fds[0], &c, 1);
    io_turn = loop.turns();
    timer.StartAt(loop.now());
  };
  ASSERT_TRUE(loop.Register(fds[0], EventLoop::kReadable, &reader).ok());
  ASSERT_EQ(::write(fds[1], "x", 1), 1);
  loop.Run();
  loop.Unregister(fds[0]);
  ::close(fds[0]);
  ::close(fds[1]);
  ASSERT_TRUE(fired_turn.has_value()) << "never fired";
  ASSERT_TRUE(io_turn.has_value());
  EXPECT_EQ(*fired_turn, *io_turn);
}

TEST(LoopTimerTest, FarTimerDoesNotWakeTheLoopEveryTick) {
  EventLoop loop;
  Timer far(&loop, [] { ADD_FAILURE() << "fired an hour early"; });
  far.StartAfter(hours(1));
  Timer stop(&loop, [&] { loop.Stop(); });
  stop.StartAfter(milliseconds(100));
  loop.Run();
  // 100 ticks passed. Waking for `stop` takes a turn or two (cascade from level 1) and the
  // hour-long timer may need one cascade wake-up at a coarse slot boundary; never one per tick.
  EXPECT_LE(loop.turns(), 6u);
  EXPECT_TRUE(far.armed());
}

}  // namespace
}  // namespace petrel
