// Tests of petrel::EventLoop: fd registration and interest caching, posting from many threads,
// stopping, per-turn ordering.
#include "petrel/common/event_loop.h"

#include <fcntl.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "petrel/common/after_batch.h"
#include "petrel/common/clock.h"
#include "petrel/common/timer.h"

namespace petrel {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr auto kEventWait = seconds(10);  // bound on waits for things that should be instant

class FnHandler : public IoHandler {
 public:
  explicit FnHandler(std::function<void(uint32_t)> fn) : fn_(std::move(fn)) {}
  void OnIoEvent(uint32_t events) override { fn_(events); }

 private:
  std::function<void(uint32_t)> fn_;
};

// An eventfd the test signals to make it readable.
struct EventFd {
  EventFd() : fd(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {}
  ~EventFd() {
    if (fd >= 0) {
      close(fd);
    }
  }
  void Signal() const {
    const uint64_t one = 1;
    ASSERT_EQ(write(fd, &one, sizeof(one)), static_cast<ssize_t>(sizeof(one)));
  }
  void Drain() const {
    uint64_t value = 0;
    (void)!read(fd, &value, sizeof(value));
  }
  int fd;
};

// Runs `loop` on a std::thread; Start() returns once the loop runs there.
class LoopOnThread {
 public:
  explicit LoopOnThread(EventLoop* loop) : loop_(loop) {}
  ~LoopOnThread() { Stop(); }
  void Start() {
    std::promise<void> running;
    std::future<void> running_future = running.get_future();
    loop_->Post([p = std::move(running)]() mutable { p.set_value(); });
    thread_ = std::thread([this] { loop_->Run(); });
    ASSERT_EQ(running_future.wait_for(kEventWait), std::future_status::ready);
  }
  void Stop() {
    if (!thread_.joinable()) {
      return;
    }
    loop_->Stop();
    thread_.join();
  }

 private:
  EventLoop* loop_;
  std::thread thread_;
};

// ---- Post -----------------------------------------------------------------------------------

TEST(EventLoopTest, PostFromFourThreadsDeliversEveryTaskOnceInProducerOrder) {
  constexpr int kProducers = 4;
  constexpr int kPerProducer = 100'000;
  EventLoop loop;
  std::vector<std::vector<uint8_t>> seen(kProducers, std::vector<uint8_t>(kPerProducer, 0));
  std::vector<int> next_seq(kProducers, 0);
  int delivered = 0;
  int out_of_order = 0;

  std::atomic<bool> go{false};
  std::vector<std::thread> producers;
  producers.reserve(kProducers);
  for (int p = 0; p < kProducers; ++p) {
    producers.emplace_back([&, p] {
      while (!go.load(std::memory_order_acquire)) {
        std::this_thread::yield();
      }
      for (int seq = 0; seq < kPerProducer; ++seq) {
        loop.Post([&, p, seq] {
          ++seen[p][seq];
          if (seq != next_seq[p]) {
            ++out_of_order;
          }
          next_seq[p] = seq + 1;
          if (++delivered == kProducers * kPerProducer) {
            loop.Stop();
          }
        });
      }
    });
  }
  Timer watchdog(&loop, [&] {
    ADD_FAILURE() << "only " << delivered << " tasks delivered in 45 s";
    loop.Stop();
  });
  watchdog.StartAfter(seconds(45));
  go.store(true, std::memory_order_release);
  loop.Run();
  for (auto& t : producers) {
    t.join();
  }

  EXPECT_EQ(delivered, kProducers * kPerProducer);
  EXPECT_EQ(out_of_order, 0);
  for (int p = 0; p < kProducers; ++p) {
    for (int seq = 0; seq < kPerProducer; ++seq) {
      ASSERT_EQ(seen[p][seq], 1) << "producer " << p << " task " << seq;
    }
  }
  // Coalescing: a wake-up already pending covers every later Post.
  EXPECT_GT(loop.wakeups(), 0u);
  EXPECT_LT(loop.wakeups(), static_cast<uint64_t>(kProducers * kPerProducer));
}

TEST(EventLoopTest, PostFromTheRunningLoopThreadWritesNoEventfd) {
  EventLoop loop;
  int ran = 0;
  loop.Post([&] {  // posted while unbound: one eventfd write
    for (int i = 0; i < 10; ++i) {
      loop.Post([&] {
        if (++ran == 10) {
          loop.Stop();
        }
      });
    }
  });
  EXPECT_EQ(loop.wakeups(), 1u);
  loop.Run();
  EXPECT_EQ(ran, 10);
  EXPECT_EQ(loop.wakeups(), 1u);
}

TEST(EventLoopTest, TasksPostedWhileDrainingRunInTheNextTurn) {
  EventLoop loop;
  std::vector<std::string> log;
  loop.Post([&] {
    log.push_back("a");
    loop.Post([&] { log.push_back("b"); });
  });
  loop.RunOnce(Duration::zero());
  EXPECT_EQ(log, std::vector<std::string>{"a"});
  loop.RunOnce(kEventWait);  // must not wait: the wake-up is pending
  EXPECT_EQ(log, (std::vector<std::string>{"a", "b"}));
}

TEST(EventLoopTest, RunInLoopRunsInlineOnTheLoopThreadAndPostsFromOthers) {
  EventLoop loop;
  LoopOnThread runner(&loop);
  runner.Start();
  EXPECT_FALSE(loop.IsInLoopThread());

  std::promise<std::thread::id> ran_on;
  std::future<std::thread::id> ran_on_future = ran_on.get_future();
  std::promise<bool> inline_run;
  std::future<bool> inline_run_future = inline_run.get_future();
  loop.RunInLoop([&] {
    ran_on.set_value(std::this_thread::get_id());
    EXPECT_TRUE(loop.IsInLoopThread());
    bool ran = false;
    loop.RunInLoop([&] { ran = true; });
    inline_run.set_value(ran);  // true only if it ran before RunInLoop returned
  });
  ASSERT_EQ(ran_on_future.wait_for(kEventWait), std::future_status::ready);
  EXPECT_NE(ran_on_future.get(), std::this_thread::get_id());
  ASSERT_EQ(inline_run_future.wait_for(kEventWait), std::future_status::ready);
  EXPECT_TRUE(inline_run_future.get());
  runner.Stop();

  // Unbound again: the thread holding the loop may use it directly.
  EXPECT_TRUE(loop.IsInLoopThread());
  bool ran = false;
  loop.RunInLoop([&] { ran = true; });
  EXPECT_TRUE(ran);
}

// ---- Stop -----------------------------------------------------------------------------------

TEST(EventLoopTest, StopFromAnotherThread) {
  EventLoop loop;
  std::promise<void> returned;
  std::future<void> returned_future = returned.get_future();
  std::promise<void> running;
  std::future<void> running_future = running.get_future();
  loop.Post([&] { running.set_value(); });
  std::thread thread([&] {
    loop.Run();
    returned.set_value();
  });
  ASSERT_EQ(running_future.wait_for(kEventWait), std::future_status::ready);
  loop.Stop();
  EXPECT_EQ(returned_future.wait_for(kEventWait), std::future_status::ready);
  thread.join();
}

TEST(EventLoopTest, StopFromCallbackAndBeforeRun) {
  EventLoop loop;
  int after_stop = 0;
  loop.Post([&] {
    loop.Stop();
    loop.RunAfterBatch([&] { ++after_stop; });  // the current turn still finishes
  });
  loop.Run();
  EXPECT_EQ(after_stop, 1);

  loop.Stop();  // before Run: Run returns after draining what was posted
  int ran = 0;
  loop.Post([&] { ++ran; });
  loop.Run();
  EXPECT_EQ(ran, 1);
}

TEST(EventLoopTest, TasksPostedBeforeStopRunBeforeRunReturns) {
  constexpr int kProducers = 3;
  constexpr int kPerProducer = 20'000;
  EventLoop loop;
  LoopOnThread runner(&loop);
  runner.Start();
  std::atomic<int> ran{0};
  std::vector<std::thread> producers;
  producers.reserve(kProducers);
  for (int p = 0; p < kProducers; ++p) {
    producers.emplace_back([&] {
      for (int i = 0; i < kPerProducer; ++i) {
        loop.Post([&] { ran.fetch_add(1, std::memory_order_relaxed); });
      }
    });
  }
  for (auto& t : producers) {
    t.join();
  }
  runner.Stop();  // Stop() happens after every Post above
  EXPECT_EQ(ran.load(), kProducers * kPerProducer);
}

// ---- File descriptors -----------------------------------------------------------------------

TEST(EventLoopTest, InterestChangesAndTheEpollCtlCache) {
  EventLoop loop;
  int fds[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fds), 0);
  std::vector<uint32_t> events;
  FnHandler handler([&](uint32_t e) {
    events.push_back(e);
    char buf[16];
    if (e & EventLoop::kReadable) {
      (void)!read(fds[0], buf, sizeof(buf));
    }
  });

  const uint64_t base = loop.epoll_ctl_calls();
  ASSERT_TRUE(loop.Register(fds[0], EventLoop::kReadable, &handler).ok());
  EXPECT_EQ(loop.epoll_ctl_calls(), base + 1);
  EXPECT_EQ(loop.interest(fds[0]), EventLoop::kReadable);

  loop.RunOnce(Duration::zero());
  EXPECT_TRUE(events.empty()) << "nothing to read yet";
  ASSERT_EQ(write(fds[1], "x", 1), 1);
  loop.RunOnce(kEventWait);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0], EventLoop::kReadable);

  ASSERT_TRUE(loop.SetInterest(fds[0], EventLoop::kReadable).ok());
  EXPECT_EQ(loop.epoll_ctl_calls(), base + 1) << "unchanged mask must skip epoll_ctl";

  ASSERT_TRUE(loop.SetInterest(fds[0], EventLoop::kWritable).ok());
  EXPECT_EQ(loop.epoll_ctl_calls(), base + 2);
  loop.RunOnce(kEventWait);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[1], EventLoop::kWritable);
  ASSERT_TRUE(loop.SetInterest(fds[0], EventLoop::kWritable).ok());
  EXPECT_EQ(loop.epoll_ctl_calls(), base + 2);

  ASSERT_TRUE(loop.SetInterest(fds[0], 0).ok());
  EXPECT_EQ(loop.epoll_ctl_calls(), base + 3);
  ASSERT_EQ(write(fds[1], "y", 1), 1);
  loop.RunOnce(Duration::zero());
  EXPECT_EQ(events.size(), 2u) << "no interest, no event";

  loop.Unregister(fds[0]);
  EXPECT_EQ(loop.epoll_ctl_calls(), base + 4);
  EXPECT_EQ(loop.interest(fds[0]), 0u);
  loop.Unregister(fds[0]);  // no-op
  EXPECT_EQ(loop.epoll_ctl_calls(), base + 4);
  close(fds[0]);
  close(fds[1]);
}

TEST(EventLoopTest, RegistrationErrors) {
  EventLoop loop;
  EventFd efd;
  FnHandler handler([](uint32_t) {});
  EXPECT_EQ(loop.Register(-1, EventLoop::kReadable, &handler).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(loop.Register(efd.fd, EventLoop::kReadable, nullptr).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(loop.Register(efd.fd, EventLoop::kError, &handler).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(loop.SetInterest(efd.fd, EventLoop::kReadable).code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(loop.Register(efd.fd, EventLoop::kReadable, &handler).ok());
  EXPECT_EQ(loop.Register(efd.fd, EventLoop::kReadable, &handler).code(),
            absl::StatusCode::kAlreadyExists);
  loop.Unregister(efd.fd);

  const int closed = dup(efd.fd);
  close(closed);
  EXPECT_FALSE(loop.Register(closed, EventLoop::kReadable, &handler).ok());  // EBADF
  EXPECT_EQ(loop.interest(closed), 0u);
}

TEST(EventLoopTest, UnregisterInsideHandlerDropsStaleEventsEvenForAReusedFd) {
  EventLoop loop;
  auto a = std::make_unique<EventFd>();
  auto b = std::make_unique<EventFd>();
  std::unique_ptr<EventFd> replacement;
  int original_fires = 0;
  bool replacement_fired = false;
  FnHandler replacement_handler([&](uint32_t) {
    replacement_fired = true;
    replacement->Drain();
  });
  std::unique_ptr<FnHandler> handler_a, handler_b;
  // Whichever of a and b is dispatched first kills the other, closes its fd and registers a
  // fresh, already readable eventfd (very likely under the same number) in its place.
  auto kill_other = [&](std::unique_ptr<EventFd>& self, std::unique_ptr<EventFd>& other,
                        std::unique_ptr<FnHandler>& other_handler) {
    ++original_fires;
    self->Drain();
    loop.Unregister(other->fd);
    other.reset();
    other_handler.reset();
    replacement = std::make_unique<EventFd>();
    replacement->Signal();
    ASSERT_TRUE(loop.Register(replacement->fd, EventLoop::kReadable, &replacement_handler).ok());
  };
  handler_a = std::make_unique<FnHandler>([&](uint32_t) { kill_other(a, b, handler_b); });
  handler_b = std::make_unique<FnHandler>([&](uint32_t) { kill_other(b, a, handler_a); });
  ASSERT_TRUE(loop.Register(a->fd, EventLoop::kReadable, handler_a.get()).ok());
  ASSERT_TRUE(loop.Register(b->fd, EventLoop::kReadable, handler_b.get()).ok());
  a->Signal();
  b->Signal();

  loop.RunOnce(kEventWait);  // both events arrive in this one batch
  EXPECT_EQ(original_fires, 1);
  EXPECT_FALSE(replacement_fired) << "a stale event reached the new registration";
  loop.RunOnce(kEventWait);
  EXPECT_TRUE(replacement_fired);
  EXPECT_EQ(original_fires, 1);
  if (a) {
    loop.Unregister(a->fd);
  }
  if (b) {
    loop.Unregister(b->fd);
  }
  loop.Unregister(replacement->fd);
}

TEST(EventLoopTest, HandlerMayUnregisterAndDestroyItself) {
  EventLoop loop;
  EventFd efd;
  int fires = 0;
  std::unique_ptr<FnHandler> handler = std::make_unique<FnHandler>([&](uint32_t) {
    ++fires;
    loop.Unregister(efd.fd);
    handler.reset();  // last act
  });
  ASSERT_TRUE(loop.Register(efd.fd, EventLoop::kReadable, handler.get()).ok());
  efd.Signal();
  loop.RunOnce(kEventWait);
  loop.RunOnce(Duration::zero());  // still readable, but no longer watched
  EXPECT_EQ(fires, 1);
  EXPECT_EQ(handler, nullptr);
}

TEST(EventLoopTest, HangupIsReportedAsReadableAndError) {
  EventLoop loop;
  int pipe_fds[2];
  ASSERT_EQ(pipe2(pipe_fds, O_NONBLOCK | O_CLOEXEC), 0);
  uint32_t got = 0;
  FnHandler handler([&](uint32_t e) {
    got = e;
    loop.Unregister(pipe_fds[0]);
  });
  ASSERT_TRUE(loop.Register(pipe_fds[0], /*interest=*/0, &handler).ok());
  close(pipe_fds[1]);
  loop.RunOnce(kEventWait);
  EXPECT_EQ(got, EventLoop::kReadable | EventLoop::kError);
  close(pipe_fds[0]);
}

TEST(EventLoopTest, MoreReadyFdsThanOneBatchAreServedOverSeveralTurns) {
  constexpr int kFds = 2 * EventLoop::kMaxEventsPerTurn + 10;
  EventLoop loop;
  std::vector<std::unique_ptr<EventFd>> efds;
  std::vector<std::unique_ptr<FnHandler>> handlers;
  std::vector<int> fires(kFds, 0);
  for (int i = 0; i < kFds; ++i) {
    efds.push_back(std::make_unique<EventFd>());
    handlers.push_back(std::make_unique<FnHandler>([&, i](uint32_t) {
      ++fires[i];
      efds[i]->Drain();
    }));
    ASSERT_TRUE(loop.Register(efds[i]->fd, EventLoop::kReadable, handlers[i].get()).ok());
    efds[i]->Signal();
  }
  for (int turn = 0; turn < 3; ++turn) {
    loop.RunOnce(kEventWait);
  }
  for (int i = 0; i < kFds; ++i) {
    EXPECT_EQ(fires[i], 1) << "fd #" << i;
  }
  for (auto& efd : efds) {
    loop.Unregister(efd->fd);
  }
}

TEST(EventLoopTest, RegisteredBeforeRunningOnAnotherThread) {
  EventLoop loop;  // built here, run on `thread`: the shape of a worker
  EventFd efd;
  std::promise<std::thread::id> handled_on;
  std::future<std::thread::id> handled_future = handled_on.get_future();
  FnHandler handler([&](uint32_t) {
    efd.Drain();
    loop.Unregister(efd.fd);
    handled_on.set_value(std::this_thread::get_id());
  });
  ASSERT_TRUE(loop.Register(efd.fd, EventLoop::kReadable, &handler).ok());
  LoopOnThread runner(&loop);
  runner.Start();
  efd.Signal();
  ASSERT_EQ(handled_future.wait_for(kEventWait), std::future_status::ready);
  EXPECT_NE(handled_future.get(), std::this_thread::get_id());
}

// ---- Turn structure -------------------------------------------------------------------------

TEST(EventLoopTest, NowIsReadOncePerTurn) {
  EventLoop loop;
  TimePoint first{};
  loop.Post([&] {
    first = loop.now();
    const TimePoint spin_until = MonotonicNow() + milliseconds(2);
    while (MonotonicNow() < spin_until) {
    }
    EXPECT_EQ(loop.now(), first) << "now() must not move within a turn";
  });
  loop.RunOnce(kEventWait);
  loop.RunOnce(Duration::zero());
  EXPECT_GE(loop.now(), first + milliseconds(2));
}

TEST(EventLoopTest, AfterBatchTasksRunAfterEveryHandlerOfTheBatch) {
  EventLoop loop;
  EventFd x, y;
  std::vector<std::string> log;
  bool queued = false;
  auto on_event = [&](const EventFd& self) {
    self.Drain();
    log.push_back("io");
    if (!queued) {
      queued = true;
      loop.RunAfterBatch([&] { log.push_back("after"); });
    }
  };
  FnHandler hx([&](uint32_t) { on_event(x); });
  FnHandler hy([&](uint32_t) { on_event(y); });
  ASSERT_TRUE(loop.Register(x.fd, EventLoop::kReadable, &hx).ok());
  ASSERT_TRUE(loop.Register(y.fd, EventLoop::kReadable, &hy).ok());
  x.Signal();
  y.Signal();
  loop.RunOnce(kEventWait);
  EXPECT_EQ(log, (std::vector<std::string>{"io", "io", "after"}));

  // Queued from a posted task: still within that turn, at its end.
  log.clear();
  loop.Post([&] { loop.RunAfterBatch([&] { log.push_back("after-post"); }); });
  loop.RunOnce(kEventWait);
  EXPECT_EQ(log, std::vector<std::string>{"after-post"});
  loop.Unregister(x.fd);
  loop.Unregister(y.fd);
}

TEST(AfterBatchTest, RunsOncePerScheduleAfterEveryHandlerOfTheBatch) {
  EventLoop loop;
  EventFd x, y;
  std::vector<std::string> log;
  AfterBatch flush(&loop, [&] { log.push_back("flush"); });
  auto on_event = [&](const EventFd& self) {
    self.Drain();
    log.push_back("io");
    flush.Schedule();  // asked by both handlers, runs once
  };
  FnHandler hx([&](uint32_t) { on_event(x); });
  FnHandler hy([&](uint32_t) { on_event(y); });
  ASSERT_TRUE(loop.Register(x.fd, EventLoop::kReadable, &hx).ok());
  ASSERT_TRUE(loop.Register(y.fd, EventLoop::kReadable, &hy).ok());
  x.Signal();
  y.Signal();
  loop.RunOnce(kEventWait);
  EXPECT_EQ(log, (std::vector<std::string>{"io", "io", "flush"}));
  EXPECT_FALSE(flush.scheduled());

  // Scheduled from a posted task: within that turn, at its end; then idle again.
  log.clear();
  loop.Post([&] { flush.Schedule(); });
  loop.RunOnce(kEventWait);
  loop.RunOnce(Duration::zero());
  EXPECT_EQ(log, std::vector<std::string>{"flush"});
  loop.Unregister(x.fd);
  loop.Unregister(y.fd);
}

TEST(AfterBatchTest, CancelAndDestroyUnscheduleEvenFromAnotherCallback) {
  EventLoop loop;
  std::vector<std::string> log;
  auto second = std::make_unique<AfterBatch>(&loop, [&] { log.push_back("second"); });
  AfterBatch third(&loop, [&] { log.push_back("third"); });
  AfterBatch first(&loop, [&] {
    log.push_back("first");
    second.reset();  // waiting in the same drain: must not run, must not be touched
    third.Cancel();
  });
  AfterBatch cancelled(&loop, [&] { log.push_back("cancelled"); });
  loop.Post([&] {
    first.Schedule();
    second->Schedule();
    third.Schedule();
    cancelled.Schedule();
    cancelled.Cancel();
  });
  loop.RunOnce(kEventWait);
  EXPECT_EQ(log, std::vector<std::string>{"first"});
  EXPECT_FALSE(third.scheduled());
}

TEST(AfterBatchTest, RescheduledFromItsCallbackRunsAtTheNextDrainNotTheSame) {
  EventLoop loop;
  int runs = 0;
  AfterBatch again(&loop, [&] {
    if (++runs < 3) again.Schedule();
  });
  loop.Post([&] { again.Schedule(); });
  loop.RunOnce(kEventWait);  // posted task -> drain after it
  EXPECT_EQ(runs, 1);
  EXPECT_TRUE(again.scheduled());
  for (int turn = 0; turn < 10 && again.scheduled(); ++turn) loop.RunOnce(Duration::zero());
  EXPECT_EQ(runs, 3);
  EXPECT_FALSE(again.scheduled());
}

TEST(AfterBatchTest, DestroyingItselfAsTheLastActIsSafe) {
  EventLoop loop;
  bool ran = false;
  std::unique_ptr<AfterBatch> self;
  self = std::make_unique<AfterBatch>(&loop, [&] {
    ran = true;
    self.reset();
  });
  AfterBatch after(&loop, [&] { EXPECT_TRUE(ran); });
  loop.Post([&] {
    self->Schedule();
    after.Schedule();
  });
  loop.RunOnce(kEventWait);
  EXPECT_TRUE(ran);
  EXPECT_EQ(self, nullptr);
}

TEST(AfterBatchTest, OutlivingItsLoopIsSafe) {
  auto loop = std::make_unique<EventLoop>();
  AfterBatch orphan(loop.get(), [] { FAIL() << "ran after its loop was destroyed"; });
  orphan.Schedule();
  loop.reset();
  EXPECT_FALSE(orphan.scheduled());
}

TEST(EventLoopTest, IdleRunOnceSleepsForItsWholeBudget) {
  EventLoop loop;
  Timer far(&loop, [] {});
  far.StartAfter(std::chrono::hours(1));
  const TimePoint before = MonotonicNow();
  loop.RunOnce(milliseconds(30));
  // epoll_wait never returns early without an event, so no 1 ms tick wake-up happened.
  EXPECT_GE(MonotonicNow() - before, milliseconds(29));
  EXPECT_EQ(loop.turns(), 1u);
}

TEST(EventLoopDeathTest, OneRunningLoopPerThread) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        EventLoop outer;
        EventLoop inner;
        outer.Post([&] { inner.RunOnce(Duration::zero()); });
        outer.RunOnce(kEventWait);
      },
      "already runs another EventLoop");
}

#if PETREL_LOOP_THREAD_CHECKS && !defined(__SANITIZE_THREAD__)
TEST(EventLoopDeathTest, LoopThreadOnlyMethodAbortsOnAnotherThread) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        EventLoop loop;
        LoopOnThread runner(&loop);
        runner.Start();
        loop.RunAfterBatch([] {});
      },
      "loop-thread-only method called");
}
#endif

}  // namespace
}  // namespace petrel

namespace petrel {
namespace {

TEST(EventLoopCurrentTest, IsTheLoopRunningOnThisThread) {
  EventLoop loop;
  EXPECT_EQ(EventLoop::Current(), nullptr);
  EventLoop* seen = nullptr;
  loop.Post([&] {
    seen = EventLoop::Current();
    loop.Stop();
  });
  loop.Run();
  EXPECT_EQ(seen, &loop);
  EXPECT_EQ(EventLoop::Current(), nullptr);
}

}  // namespace
}  // namespace petrel
