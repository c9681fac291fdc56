// Tests of petrel::Thread (naming, pinning, joining) and petrel::EventLoopThread.
#include "petrel/common/thread.h"

#include <pthread.h>
#include <sched.h>

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <thread>

#include "gtest/gtest.h"
#include "petrel/common/event_loop.h"
#include "petrel/common/event_loop_thread.h"

namespace petrel {
namespace {

constexpr auto kEventWait = std::chrono::seconds(10);

std::string CurrentThreadName() {
  char name[32] = {};
  pthread_getname_np(pthread_self(), name, sizeof(name));
  return name;
}

TEST(ThreadTest, NamesTheThreadBeforeTheBodyRuns) {
  Thread thread("petrel-test");
  std::string seen;
  bool was_current = false;
  ASSERT_TRUE(thread
                  .Start([&] {
                    seen = CurrentThreadName();
                    was_current = thread.IsCurrent();
                  })
                  .ok());
  EXPECT_TRUE(thread.joinable());
  EXPECT_FALSE(thread.IsCurrent());
  thread.Join();
  EXPECT_FALSE(thread.joinable());
  EXPECT_EQ(seen, "petrel-test");
  EXPECT_TRUE(was_current);
}

TEST(ThreadTest, LongNamesAreCutToFifteenCharacters) {
  Thread thread("petrel-worker-0123456789");
  EXPECT_EQ(thread.name(), "petrel-worker-0");
  std::string seen;
  ASSERT_TRUE(thread.Start([&] { seen = CurrentThreadName(); }).ok());
  thread.Join();
  EXPECT_EQ(seen, "petrel-worker-0");
}

TEST(ThreadTest, PinsToTheRequestedCpu) {
  cpu_set_t allowed;
  ASSERT_EQ(sched_getaffinity(0, sizeof(allowed), &allowed), 0);
  if (!CPU_ISSET(0, &allowed)) {
    GTEST_SKIP() << "cpu 0 is not available to this process";
  }
  Thread thread("petrel-pinned", 0);
  EXPECT_EQ(thread.cpu(), 0);
  int cpu_at_start = -1;
  int cpus_allowed = 0;
  bool cpu0_allowed = false;
  ASSERT_TRUE(thread
                  .Start([&] {
                    cpu_at_start = sched_getcpu();
                    cpu_set_t mine;
                    sched_getaffinity(0, sizeof(mine), &mine);
                    cpus_allowed = CPU_COUNT(&mine);
                    cpu0_allowed = CPU_ISSET(0, &mine);
                  })
                  .ok());
  thread.Join();
  EXPECT_EQ(cpu_at_start, 0);
  EXPECT_EQ(cpus_allowed, 1);
  EXPECT_TRUE(cpu0_allowed);
}

TEST(ThreadTest, RejectsUnusableCpusAndDoubleStart) {
  Thread negative("petrel-bad", -1);
  EXPECT_EQ(negative.Start([] {}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(negative.joinable());
  Thread huge("petrel-bad", CPU_SETSIZE + 1);
  EXPECT_EQ(huge.Start([] {}).code(), absl::StatusCode::kInvalidArgument);

  cpu_set_t allowed;
  ASSERT_EQ(sched_getaffinity(0, sizeof(allowed), &allowed), 0);
  int unavailable = CPU_SETSIZE - 1;
  while (unavailable >= 0 && CPU_ISSET(unavailable, &allowed)) {
    --unavailable;
  }
  Thread offline("petrel-bad", unavailable);
  EXPECT_EQ(offline.Start([] {}).code(), absl::StatusCode::kInvalidArgument);

  Thread twice("petrel-twice");
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  ASSERT_TRUE(twice.Start([released] { released.wait(); }).ok());
  EXPECT_EQ(twice.Start([] {}).code(), absl::StatusCode::kFailedPrecondition);
  release.set_value();
  twice.Join();
  twice.Join();  // no-op
}

TEST(ThreadTest, DestructorJoins) {
  std::atomic<bool> finished{false};
  {
    Thread thread("petrel-dtor");
    ASSERT_TRUE(thread
                    .Start([&] {
                      std::this_thread::yield();
                      finished.store(true);
                    })
                    .ok());
  }
  EXPECT_TRUE(finished.load());
}

TEST(EventLoopThreadTest, RunsTheLoopOnANamedThread) {
  EventLoopThread worker("petrel-loop");
  EXPECT_TRUE(worker.loop()->IsInLoopThread()) << "unbound before Start";
  ASSERT_TRUE(worker.Start().ok());
  EXPECT_FALSE(worker.loop()->IsInLoopThread()) << "Start returns once the loop is bound";
  EXPECT_EQ(worker.Start().code(), absl::StatusCode::kFailedPrecondition);

  std::promise<std::string> name;
  std::future<std::string> name_future = name.get_future();
  worker.loop()->RunInLoop([&] {
    EXPECT_TRUE(worker.loop()->IsInLoopThread());
    EXPECT_TRUE(worker.thread().IsCurrent());
    name.set_value(CurrentThreadName());
  });
  ASSERT_EQ(name_future.wait_for(kEventWait), std::future_status::ready);
  EXPECT_EQ(name_future.get(), "petrel-loop");

  worker.Stop();
  EXPECT_FALSE(worker.thread().joinable());
  worker.Stop();  // no-op
}

TEST(EventLoopThreadTest, DestructorDrainsPostedTasksAndJoins) {
  int ran = 0;  // written on the worker, read after the join
  {
    EventLoopThread worker("petrel-drain");
    ASSERT_TRUE(worker.Start().ok());
    for (int i = 0; i < 1000; ++i) {
      worker.loop()->Post([&ran] { ++ran; });
    }
  }
  EXPECT_EQ(ran, 1000);
}

TEST(EventLoopThreadTest, LoopStoppedFromItsOwnCallback) {
  auto worker = std::make_unique<EventLoopThread>("petrel-self");
  ASSERT_TRUE(worker->Start().ok());
  std::promise<void> stopped;
  std::future<void> stopped_future = stopped.get_future();
  EventLoop* loop = worker->loop();
  loop->Post([loop, &stopped] {
    loop->Stop();
    stopped.set_value();
  });
  ASSERT_EQ(stopped_future.wait_for(kEventWait), std::future_status::ready);
  worker.reset();  // joins the thread whose loop already stopped
}

}  // namespace
}  // namespace petrel
