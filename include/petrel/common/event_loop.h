// Public: EventLoop, the per-thread reactor (level-triggered epoll, timers, cross-thread tasks).
#ifndef PETREL_COMMON_EVENT_LOOP_H_
#define PETREL_COMMON_EVENT_LOOP_H_

#include <sys/epoll.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "petrel/common/after_batch.h"
#include "petrel/common/cache_line.h"
#include "petrel/common/clock.h"
#include "petrel/common/timer.h"

// Loop-thread assertions are on in debug builds and in sanitizer builds (PETREL_SANITIZED).
#if !defined(NDEBUG) || defined(PETREL_SANITIZED)
#define PETREL_LOOP_THREAD_CHECKS 1
#else
#define PETREL_LOOP_THREAD_CHECKS 0
#endif

namespace petrel {

namespace internal {
class TimerWheel;
template <typename T>
class MpscQueue;
}  // namespace internal

// Receives readiness of one registered fd. Runs on the loop thread.
class IoHandler {
 public:
  virtual ~IoHandler() = default;
  // `events` is a mask of EventLoop::kReadable / kWritable / kError. An error or hang-up arrives
  // as kError | kReadable whatever the interest (the kernel always reports them), so a reader
  // sees the EOF or error from read(); level-triggered, it repeats until the fd is handled.
  virtual void OnIoEvent(uint32_t events) = 0;
};

// One EventLoop per thread. A turn of Run():
//   1. epoll_wait (at most kMaxEventsPerTurn events) with a timeout from the nearest timer;
//   2. read the clock once: now() for the whole turn;
//   3. dispatch I/O events, then run the RunAfterBatch tasks;
//   4. fire due timers;
//   5. run the tasks Post()ed before this step began (later ones wait for the next turn);
//   6. run RunAfterBatch tasks queued by steps 4-5.
//
// Which thread is the loop thread: Run() and RunOnce() bind the loop to their calling thread
// while they run. When neither runs the loop is unbound and belongs to whichever thread has
// exclusive use of it (its creator before the loop thread starts, or whoever joined that thread),
// which may then call loop-thread-only methods, e.g. to register fds before starting a worker or
// to destroy timers after joining it. Methods say "Loop thread only" or "Safe from any thread".
class EventLoop {
 public:
  using Task = absl::AnyInvocable<void()>;

  // Event bits for Register / SetInterest / IoHandler::OnIoEvent.
  static constexpr uint32_t kReadable = 1u << 0;
  static constexpr uint32_t kWritable = 1u << 1;
  static constexpr uint32_t kError = 1u << 2;  // reported only, never an interest

  static constexpr int kMaxEventsPerTurn = 128;

  // Aborts if the kernel refuses the epoll or eventfd descriptor (descriptor exhaustion at
  // startup is not something a loop can recover from).
  EventLoop();
  // Loop thread only, and not while Run() is running. Tasks still queued are destroyed unrun;
  // timers still armed are disarmed (destroying them afterwards is safe). Registered fds are
  // not closed: they belong to their handlers.
  ~EventLoop();

  EventLoop(const EventLoop&) = delete;
  EventLoop& operator=(const EventLoop&) = delete;

  // Binds the loop to the calling thread and runs turns until Stop(); then, before returning,
  // runs every task whose Post() happened before the Stop() (and the RunAfterBatch tasks they
  // queue). Tasks posted later stay queued for a later Run() or are destroyed with the loop. A
  // Stop() that came before Run() makes it return right after that drain. Aborts if the loop is
  // already running (here or on another thread) or if this thread already runs another loop.
  void Run();
  // Binds like Run() for one turn, waiting at most `max_wait` (rounded up to whole ms) for I/O.
  // Ignores Stop(). For tests and for embedding the loop in another one.
  void RunOnce(Duration max_wait);
  // Makes Run() return once the current turn is done. Safe from any thread, including from
  // callbacks on the loop.
  void Stop();

  // The loop running on the calling thread (inside its Run() / RunOnce()), or nullptr. A
  // request handler uses it to arm timers or post work on its connection's loop.
  static EventLoop* Current();

  // True on the thread running the loop, or on any thread while the loop is unbound (see
  // above). Safe from any thread.
  bool IsInLoopThread() const;
  // Aborts with a message unless IsInLoopThread(); compiled only when PETREL_LOOP_THREAD_CHECKS.
  void AssertInLoopThread() const {
#if PETREL_LOOP_THREAD_CHECKS
    if (!IsInLoopThread()) AbortNotInLoopThread();
#endif
  }

  // Starts watching `fd` for `interest` (kReadable | kWritable, possibly 0) and reports to
  // `handler`, which is not owned and must stay alive until Unregister(fd). Fails if fd is
  // negative or already registered, or if epoll_ctl fails. Loop thread only.
  absl::Status Register(int fd, uint32_t interest, IoHandler* handler);
  // Changes the interest of a registered fd. Calls epoll_ctl only when the mask changes.
  // Loop thread only.
  absl::Status SetInterest(int fd, uint32_t interest);
  // The cached interest of `fd`, 0 if not registered. Loop thread only.
  uint32_t interest(int fd) const {  // inline: stream writers ask before every SetInterest
    AssertInLoopThread();
    return fd >= 0 && static_cast<size_t>(fd) < fds_.size() ? fds_[fd].interest : 0;
  }
  // Stops watching `fd`; a no-op if it is not registered. Call it before close(fd). Safe from
  // inside any handler: events of the current batch for an unregistered fd are dropped, also
  // when the same fd number is registered again within the batch. Loop thread only.
  void Unregister(int fd);

  // Queues `task` to run on the loop thread in a later turn (see Run() for the order). Wakes the
  // loop with one eventfd write only when no wake-up is already pending. Safe from any thread.
  void Post(Task task);
  // Runs `task` now when called on the loop thread, else Post()s it. Safe from any thread.
  void RunInLoop(Task task);
  // Queues `task` to run later in this turn, after every I/O handler of the batch has returned
  // (queued from a timer or posted task: at the end of the turn). For work that must not run
  // under a handler, e.g. releasing connections other than the caller's. Loop thread only.
  // Work scheduled again and again on a hot path: AfterBatch, which allocates nothing.
  void RunAfterBatch(Task task);

  // The time read once per turn, right after epoll_wait returned; timers compare against it.
  // Loop thread only.
  TimePoint now() const;

  // Counters for tests and metrics.
  // epoll_ctl calls made (register, changed interest, unregister, the loop's own eventfd).
  // Loop thread only.
  uint64_t epoll_ctl_calls() const { return epoll_ctl_calls_; }
  // eventfd writes made to wake the loop. Safe from any thread.
  uint64_t wakeups() const { return wakeups_.load(std::memory_order_relaxed); }
  // Turns completed. Loop thread only.
  uint64_t turns() const { return turns_; }
  // Timers currently armed. Loop thread only.
  size_t armed_timers() const;

 private:
  friend class Timer;       // reaches the wheel
  friend class AfterBatch;  // links itself into after_batch_hooks_

  struct FdState {
    IoHandler* handler = nullptr;  // nullptr = not registered
    uint32_t interest = 0;
    uint32_t generation = 0;  // stamped into epoll_event data; tells stale batch events apart
  };

  // Drains the loop's eventfd.
  class WakeHandler final : public IoHandler {
   public:
    explicit WakeHandler(int fd) : fd_(fd) {}
    void OnIoEvent(uint32_t events) override;

   private:
    int fd_;
  };

  internal::TimerWheel& timer_wheel() { return *wheel_; }
  void Turn(int timeout_ms);
  int ComputeTimeoutMs(Duration max_wait, bool bounded) const;
  void DispatchIo(int ready);
  void RunAfterBatchTasks();
  void RunPostedTasks();
  // Run()'s exit drain: every task pushed before this call, waiting for in-flight pushes.
  void DrainPostedForStop();
  void Wake();
  void Bind();
  void Unbind();
  [[noreturn]] void AbortNotInLoopThread() const;

  const int epoll_fd_;
  const int wake_fd_;
  WakeHandler wake_handler_;

  std::vector<FdState> fds_;  // indexed by fd; grows at Register, never per event
  uint32_t next_generation_ = 1;
  std::array<epoll_event, kMaxEventsPerTurn> events_{};

  std::unique_ptr<internal::TimerWheel> wheel_;
  std::vector<Task> after_batch_;
  std::vector<Task> after_batch_running_;       // swapped with after_batch_; keeps both capacities
  internal::AfterBatchList after_batch_hooks_;  // scheduled AfterBatch objects
  internal::AfterBatchList after_batch_hooks_running_;  // the ones the current drain runs

  uint64_t epoll_ctl_calls_ = 0;
  uint64_t turns_ = 0;

  // Shared with other threads.
  std::unique_ptr<internal::MpscQueue<Task>> posted_;
  // The bound thread; a default id when unbound.
  std::atomic<std::thread::id> loop_thread_{};
  std::atomic<bool> stop_requested_{false};
  // Set by the first Post (or Stop) after the loop last looked; whoever flips it false->true
  // writes the eventfd, unless it is the loop thread itself, which will look before sleeping.
  alignas(kCacheLineSize) std::atomic<bool> wake_pending_{false};
  std::atomic<uint64_t> wakeups_{0};
};

}  // namespace petrel

#endif  // PETREL_COMMON_EVENT_LOOP_H_
