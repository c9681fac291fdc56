// Public: EventLoopThread, an EventLoop running on its own named (optionally pinned) Thread.
#ifndef PETREL_COMMON_EVENT_LOOP_THREAD_H_
#define PETREL_COMMON_EVENT_LOOP_THREAD_H_

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "petrel/common/event_loop.h"
#include "petrel/common/thread.h"

namespace petrel {

// Owns a loop and the thread that runs it: the shape of every worker. The loop is built by the
// constructor, on the owner's thread, so the owner may register fds and create timers on it
// before Start(); after Start() it talks to the loop only through loop()->Post / RunInLoop (or
// loop-thread-safe calls such as Stop and wakeups).
//
// Thread contract: one owner thread calls Start, Stop and the destructor.
class EventLoopThread {
 public:
  explicit EventLoopThread(std::string name, std::optional<int> cpu = std::nullopt);
  // Stop()s: asks the loop to stop (it drains posted tasks first, see EventLoop::Run) and joins.
  ~EventLoopThread();

  EventLoopThread(const EventLoopThread&) = delete;
  EventLoopThread& operator=(const EventLoopThread&) = delete;

  // Starts the thread and returns once the loop runs on it, so that from then on
  // loop()->IsInLoopThread() is false for the owner and RunInLoop posts. Fails like
  // Thread::Start, or FailedPrecondition if already started.
  absl::Status Start();
  // Stops the loop and joins the thread; a no-op when not running. Not from the loop's own
  // thread (a callback wanting to stop calls loop()->Stop(); the destructor then joins).
  void Stop();

  // Not owned by the caller; lives as long as this object. Safe from any thread.
  EventLoop* loop() { return &loop_; }
  const Thread& thread() const { return thread_; }

 private:
  EventLoop loop_;  // declared first: destroyed after the thread is joined
  Thread thread_;
};

}  // namespace petrel

#endif  // PETREL_COMMON_EVENT_LOOP_THREAD_H_
