// Public: Thread, a named OS thread that can be pinned to one CPU.
#ifndef PETREL_COMMON_THREAD_H_
#define PETREL_COMMON_THREAD_H_

#include <pthread.h>

#include <optional>
#include <string>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"

namespace petrel {

// A thread with a name that shows in top, gdb and perf (pthread_setname_np; Linux keeps 15
// characters, longer names are cut), optionally pinned to one CPU from its first instruction.
// The destructor joins a started thread, so the body must end on its own or be told to end (as
// EventLoopThread does) before the Thread goes away.
//
// Thread contract: one owner thread calls every method; the body runs on the new thread.
class Thread {
 public:
  static constexpr size_t kMaxNameLength = 15;

  explicit Thread(std::string name, std::optional<int> cpu = std::nullopt);
  ~Thread();  // Join()s if joinable

  Thread(const Thread&) = delete;
  Thread& operator=(const Thread&) = delete;

  // Starts the thread running `body`. Fails if already started, if the CPU cannot be used
  // (InvalidArgument), or if pthread_create fails.
  absl::Status Start(absl::AnyInvocable<void()> body);
  // Waits for the body to return. A no-op when not joinable. Must not be called from the thread
  // itself (aborts: that would deadlock).
  void Join();
  // True from a successful Start() until Join().
  bool joinable() const { return started_; }
  // True when called on this Thread's own thread (from inside the body). Safe from any thread.
  bool IsCurrent() const;

  const std::string& name() const { return name_; }  // as applied (at most 15 characters)
  std::optional<int> cpu() const { return cpu_; }

 private:
  static void* Trampoline(void* self);

  const std::string name_;
  const std::optional<int> cpu_;
  absl::AnyInvocable<void()> body_;  // moved to and destroyed on the new thread
  pthread_t handle_{};
  bool started_ = false;
};

}  // namespace petrel

#endif  // PETREL_COMMON_THREAD_H_
