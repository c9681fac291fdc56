#include "petrel/common/event_loop_thread.h"

#include <future>
#include <utility>

namespace petrel {

EventLoopThread::EventLoopThread(std::string name, std::optional<int> cpu)
    : thread_(std::move(name), cpu) {}

EventLoopThread::~EventLoopThread() { Stop(); }

absl::Status EventLoopThread::Start() {
  if (thread_.joinable()) {
    return absl::FailedPreconditionError("EventLoopThread started twice");
  }
  if (absl::Status status = thread_.Start([this] { loop_.Run(); }); !status.ok()) {
    return status;
  }
  // A posted task runs inside Run(), i.e. once the loop is bound to the new thread.
  std::promise<void> running;
  std::future<void> running_future = running.get_future();
  loop_.Post([running = std::move(running)]() mutable { running.set_value(); });
  running_future.wait();
  return absl::OkStatus();
}

void EventLoopThread::Stop() {
  if (!thread_.joinable()) {
    return;
  }
  loop_.Stop();
  thread_.Join();
}

}  // namespace petrel
