#include "petrel/common/event_loop.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/mpsc_queue.h"
#include "common/timer_wheel.h"

namespace petrel {

namespace {

[[noreturn]] void DieErrno(const char* what) {
  char buf[128];
  const char* message = strerror_r(errno, buf, sizeof(buf));  // GNU: returns the text
  std::fprintf(stderr, "petrel: EventLoop: %s failed: %s\n", what, message);
  std::abort();
}

[[noreturn]] void Die(const char* what) {
  std::fprintf(stderr, "petrel: EventLoop: %s\n", what);
  std::abort();
}

int CreateEpollFd() {
  const int fd = epoll_create1(EPOLL_CLOEXEC);
  if (fd < 0) {
    DieErrno("epoll_create1");
  }
  return fd;
}

int CreateEventFd() {
  const int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (fd < 0) {
    DieErrno("eventfd");
  }
  return fd;
}

constexpr uint32_t kInterestMask = EventLoop::kReadable | EventLoop::kWritable;

uint32_t ToEpollEvents(uint32_t interest) {
  uint32_t events = 0;
  if (interest & EventLoop::kReadable) {
    events |= EPOLLIN;
  }
  if (interest & EventLoop::kWritable) {
    events |= EPOLLOUT;
  }
  return events;  // level-triggered; EPOLLERR and EPOLLHUP are always reported
}

uint64_t PackEventData(int fd, uint32_t generation) {
  return (uint64_t{generation} << 32) | static_cast<uint32_t>(fd);
}

// The loop bound to this thread, if any: one running loop per thread.
thread_local EventLoop* tls_bound_loop = nullptr;

std::string ThreadIdString(std::thread::id id) {
  std::ostringstream out;
  out << id;
  return out.str();
}

}  // namespace

void EventLoop::WakeHandler::OnIoEvent(uint32_t /*events*/) {
  uint64_t count = 0;
  // Non-blocking: EAGAIN just means a concurrent read already emptied it.
  while (read(fd_, &count, sizeof(count)) < 0 && errno == EINTR) {
  }
}

EventLoop::EventLoop()
    : epoll_fd_(CreateEpollFd()),
      wake_fd_(CreateEventFd()),
      wake_handler_(wake_fd_),
      wheel_(std::make_unique<internal::TimerWheel>(MonotonicNow())),
      posted_(std::make_unique<internal::MpscQueue<Task>>()) {
  const absl::Status status = Register(wake_fd_, kReadable, &wake_handler_);
  if (!status.ok()) {
    std::fprintf(stderr, "petrel: EventLoop: registering the eventfd: %s\n",
                 status.ToString().c_str());
    std::abort();
  }
}

EventLoop::~EventLoop() {
  if (loop_thread_.load(std::memory_order_acquire) != std::thread::id()) {
    Die("destroyed while running");
  }
  AssertInLoopThread();
  // Tasks first: their destructors may still cancel timers or unregister fds.
  posted_.reset();
  after_batch_.clear();
  after_batch_running_.clear();
  // AfterBatch objects still scheduled outlive the loop only to be destroyed: leave them idle.
  for (internal::AfterBatchList* list : {&after_batch_hooks_, &after_batch_hooks_running_}) {
    for (AfterBatch* h = list->head; h != nullptr;) {
      AfterBatch* next = h->next_;
      h->prev_ = h->next_ = nullptr;
      h->list_ = nullptr;
      h = next;
    }
    *list = {};
  }
  wheel_.reset();
  close(wake_fd_);
  close(epoll_fd_);
}

// ---- Threads --------------------------------------------------------------------------------

bool EventLoop::IsInLoopThread() const {
  const std::thread::id bound = loop_thread_.load(std::memory_order_acquire);
  return bound == std::thread::id() || bound == std::this_thread::get_id();
}

void EventLoop::AbortNotInLoopThread() const {
  std::fprintf(stderr,
               "petrel: EventLoop %p: loop-thread-only method called on thread %s, but the loop "
               "runs on thread %s\n",
               static_cast<const void*>(this), ThreadIdString(std::this_thread::get_id()).c_str(),
               ThreadIdString(loop_thread_.load(std::memory_order_acquire)).c_str());
  std::abort();
}

void EventLoop::Bind() {
  const std::thread::id me = std::this_thread::get_id();
  if (loop_thread_.load(std::memory_order_relaxed) == me) {
    Die("Run()/RunOnce() is not reentrant");
  }
  std::thread::id unbound;
  if (!loop_thread_.compare_exchange_strong(unbound, me, std::memory_order_acq_rel)) {
    Die("Run()/RunOnce() called while the loop runs on another thread");
  }
  if (tls_bound_loop != nullptr) {
    Die("this thread already runs another EventLoop");
  }
  tls_bound_loop = this;
}

EventLoop* EventLoop::Current() { return tls_bound_loop; }

void EventLoop::Unbind() {
  tls_bound_loop = nullptr;
  loop_thread_.store(std::thread::id(), std::memory_order_release);
}

// ---- Running --------------------------------------------------------------------------------

void EventLoop::Run() {
  Bind();
  while (!stop_requested_.load(std::memory_order_acquire)) {
    Turn(ComputeTimeoutMs(Duration::zero(), /*bounded=*/false));
  }
  DrainPostedForStop();
  stop_requested_.store(false, std::memory_order_relaxed);  // consumed
  Unbind();
}

void EventLoop::RunOnce(Duration max_wait) {
  Bind();
  Turn(ComputeTimeoutMs(max_wait, /*bounded=*/true));
  Unbind();
}

void EventLoop::Stop() {
  stop_requested_.store(true, std::memory_order_release);
  Wake();
}

void EventLoop::Turn(int timeout_ms) {
  int ready = epoll_wait(epoll_fd_, events_.data(), kMaxEventsPerTurn, timeout_ms);
  if (ready < 0) {
    if (errno != EINTR) {
      DieErrno("epoll_wait");
    }
    ready = 0;
  }
  wheel_->SetNow(MonotonicNow());  // the turn's one clock read: now()
  DispatchIo(ready);
  RunAfterBatchTasks();
  wheel_->RunDue();
  RunPostedTasks();
  RunAfterBatchTasks();
  ++turns_;
}

int EventLoop::ComputeTimeoutMs(Duration max_wait, bool bounded) const {
  if (stop_requested_.load(std::memory_order_relaxed) ||
      wake_pending_.load(std::memory_order_acquire) || !after_batch_.empty() ||
      !after_batch_hooks_.empty()) {
    return 0;
  }
  auto ceil_ms = [](Duration d) -> int64_t {
    if (d <= Duration::zero()) {
      return 0;
    }
    const int64_t ms = std::chrono::ceil<std::chrono::milliseconds>(d).count();
    return ms > INT_MAX ? INT_MAX : ms;
  };
  const int64_t limit = bounded ? ceil_ms(max_wait) : -1;
  const std::optional<TimePoint> wakeup = wheel_->NextWakeup();
  if (!wakeup) {
    return static_cast<int>(limit);
  }
  // Measure from a fresh reading rather than now(): the turn's callbacks may have taken a
  // while, and sleeping the full distance from the turn's start would make timers late.
  const TimePoint fresh = MonotonicNow();
  const int64_t ms = *wakeup <= fresh ? 0 : ceil_ms(*wakeup - fresh);
  return static_cast<int>(bounded && limit < ms ? limit : ms);
}

void EventLoop::DispatchIo(int ready) {
  for (int i = 0; i < ready; ++i) {
    const uint64_t data = events_[i].data.u64;
    const size_t fd = static_cast<uint32_t>(data);
    const uint32_t generation = static_cast<uint32_t>(data >> 32);
    if (fd >= fds_.size()) {
      continue;
    }
    const FdState& state = fds_[fd];
    // Unregistered (or re-registered) by a handler earlier in this batch: the event is stale.
    if (state.handler == nullptr || state.generation != generation) {
      continue;
    }
    const uint32_t raw = events_[i].events;
    uint32_t events = 0;
    if (raw & (EPOLLIN | EPOLLPRI | EPOLLRDHUP)) {
      events |= kReadable;
    }
    if (raw & EPOLLOUT) {
      events |= kWritable;
    }
    events &= state.interest;  // an earlier handler may have narrowed it
    if (raw & (EPOLLERR | EPOLLHUP)) {
      events |= kError | kReadable;
    }
    if (events == 0) {
      continue;
    }
    IoHandler* handler = state.handler;  // `state` dangles if the handler grows fds_
    handler->OnIoEvent(events);
  }
}

// ---- Registration ---------------------------------------------------------------------------

absl::Status EventLoop::Register(int fd, uint32_t interest, IoHandler* handler) {
  AssertInLoopThread();
  if (fd < 0) {
    return absl::InvalidArgumentError(absl::StrCat("Register: bad fd ", fd));
  }
  if (handler == nullptr) {
    return absl::InvalidArgumentError("Register: null handler");
  }
  if ((interest & ~kInterestMask) != 0) {
    return absl::InvalidArgumentError(absl::StrCat("Register: bad interest ", interest));
  }
  const size_t index = static_cast<size_t>(fd);
  if (index < fds_.size() && fds_[index].handler != nullptr) {
    return absl::AlreadyExistsError(absl::StrCat("Register: fd ", fd, " already registered"));
  }
  if (index >= fds_.size()) {
    fds_.resize(index + 1);
  }
  const uint32_t generation = next_generation_++;
  epoll_event ev{};
  ev.events = ToEpollEvents(interest);
  ev.data.u64 = PackEventData(fd, generation);
  ++epoll_ctl_calls_;
  if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("epoll_ctl(ADD, ", fd, ")"));
  }
  fds_[index] = FdState{handler, interest, generation};
  return absl::OkStatus();
}

absl::Status EventLoop::SetInterest(int fd, uint32_t interest) {
  AssertInLoopThread();
  if (fd < 0 || static_cast<size_t>(fd) >= fds_.size() || fds_[fd].handler == nullptr) {
    return absl::NotFoundError(absl::StrCat("SetInterest: fd ", fd, " not registered"));
  }
  if ((interest & ~kInterestMask) != 0) {
    return absl::InvalidArgumentError(absl::StrCat("SetInterest: bad interest ", interest));
  }
  FdState& state = fds_[fd];
  if (state.interest == interest) {
    return absl::OkStatus();  // the point of caching the mask
  }
  epoll_event ev{};
  ev.events = ToEpollEvents(interest);
  ev.data.u64 = PackEventData(fd, state.generation);
  ++epoll_ctl_calls_;
  if (epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, fd, &ev) != 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("epoll_ctl(MOD, ", fd, ")"));
  }
  state.interest = interest;
  return absl::OkStatus();
}

void EventLoop::Unregister(int fd) {
  AssertInLoopThread();
  if (fd < 0 || static_cast<size_t>(fd) >= fds_.size() || fds_[fd].handler == nullptr) {
    return;
  }
  ++epoll_ctl_calls_;
  // Failure means the fd was already closed, which removed it from the epoll set anyway.
  epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
  fds_[fd] = FdState{};
}

// ---- Tasks ----------------------------------------------------------------------------------

void EventLoop::Post(Task task) {
  posted_->Push(std::move(task));
  Wake();
}

void EventLoop::RunInLoop(Task task) {
  if (IsInLoopThread()) {
    task();
  } else {
    Post(std::move(task));
  }
}

void EventLoop::RunAfterBatch(Task task) {
  AssertInLoopThread();
  after_batch_.push_back(std::move(task));
}

void EventLoop::Wake() {
  // Someone else's wake-up is already on its way (or the loop has yet to look at the flag).
  if (wake_pending_.exchange(true, std::memory_order_acq_rel)) {
    return;
  }
  // On the running loop's own thread: ComputeTimeoutMs sees the flag before sleeping.
  if (loop_thread_.load(std::memory_order_relaxed) == std::this_thread::get_id()) {
    return;
  }
  const uint64_t one = 1;
  while (write(wake_fd_, &one, sizeof(one)) < 0) {
    if (errno == EINTR) {
      continue;
    }
    if (errno == EAGAIN) {
      break;  // the counter is saturated: the loop is awake anyway
    }
    DieErrno("write(eventfd)");
  }
  wakeups_.fetch_add(1, std::memory_order_relaxed);
}

void EventLoop::RunPostedTasks() {
  // Clear the flag before taking the snapshot: a Post that lands after this exchange flips the
  // flag back and wakes the loop, so nothing slips between the two.
  if (!wake_pending_.load(std::memory_order_acquire)) {
    return;
  }
  wake_pending_.exchange(false, std::memory_order_acq_rel);
  posted_->ConsumeSnapshot([](Task&& task) { task(); });
}

void EventLoop::DrainPostedForStop() {
  wake_pending_.exchange(false, std::memory_order_acq_rel);
  posted_->ConsumeSnapshot([](Task&& task) { task(); }, internal::MpscQueue<Task>::InFlight::kWait);
  RunAfterBatchTasks();
}

void EventLoop::RunAfterBatchTasks() {
  if (!after_batch_.empty()) {
    after_batch_running_.swap(after_batch_);
    // Tasks queued from here land in after_batch_ and run at the next drain point.
    for (Task& task : after_batch_running_) {
      task();
    }
    after_batch_running_.clear();
  }
  if (after_batch_hooks_.empty()) {
    return;
  }
  // The same for AfterBatch objects: the scheduled ones move to the running list, one at a time
  // leaves it and runs; a callback may unschedule (or destroy) any still waiting there.
  after_batch_hooks_running_ = std::exchange(after_batch_hooks_, {});
  for (AfterBatch* h = after_batch_hooks_running_.head; h != nullptr; h = h->next_) {
    h->list_ = &after_batch_hooks_running_;
  }
  while (AfterBatch* h = after_batch_hooks_running_.head) {
    h->Cancel();
    h->callback_();
  }
}

// ---- AfterBatch -----------------------------------------------------------------------------

AfterBatch::AfterBatch(EventLoop* loop, Callback callback)
    : loop_(loop), callback_(std::move(callback)) {}

AfterBatch::~AfterBatch() { Cancel(); }

void AfterBatch::Schedule() {
  loop_->AssertInLoopThread();
  if (list_ != nullptr) return;
  internal::AfterBatchList& list = loop_->after_batch_hooks_;
  list_ = &list;
  prev_ = list.tail;
  next_ = nullptr;
  if (list.tail != nullptr) {
    list.tail->next_ = this;
  } else {
    list.head = this;
  }
  list.tail = this;
}

void AfterBatch::Cancel() {
  if (list_ == nullptr) return;
  loop_->AssertInLoopThread();
  if (prev_ != nullptr) {
    prev_->next_ = next_;
  } else {
    list_->head = next_;
  }
  if (next_ != nullptr) {
    next_->prev_ = prev_;
  } else {
    list_->tail = prev_;
  }
  prev_ = next_ = nullptr;
  list_ = nullptr;
}

// ---- Timers ---------------------------------------------------------------------------------

TimePoint EventLoop::now() const {
  AssertInLoopThread();
  return wheel_->now();
}

size_t EventLoop::armed_timers() const {
  AssertInLoopThread();
  return wheel_->armed_count();
}

}  // namespace petrel
