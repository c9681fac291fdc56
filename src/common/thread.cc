#include "petrel/common/thread.h"

#include <sched.h>

#include <cstdio>
#include <cstdlib>
#include <utility>

#include "absl/strings/str_cat.h"

namespace petrel {

namespace {

// The Thread whose body runs on this OS thread, if any. Read only by its own thread, so it needs
// no synchronization, unlike pthread_t handles (which pthread_create may store after the new
// thread is already running).
thread_local const Thread* tls_current_thread = nullptr;

}  // namespace

Thread::Thread(std::string name, std::optional<int> cpu)
    : name_(name.size() > kMaxNameLength ? name.substr(0, kMaxNameLength) : std::move(name)),
      cpu_(cpu) {}

Thread::~Thread() { Join(); }

absl::Status Thread::Start(absl::AnyInvocable<void()> body) {
  if (started_) {
    return absl::FailedPreconditionError(absl::StrCat("thread ", name_, " started"));
  }
  if (cpu_.has_value() && (*cpu_ < 0 || *cpu_ >= CPU_SETSIZE)) {
    return absl::InvalidArgumentError(absl::StrCat("thread ", name_, ": bad cpu ", *cpu_));
  }
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  if (cpu_.has_value()) {
    // Set before creation so the body never runs on another CPU, not even its first lines.
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(*cpu_, &set);
    pthread_attr_setaffinity_np(&attr, sizeof(set), &set);
  }
  body_ = std::move(body);
  const int rc = pthread_create(&handle_, &attr, &Thread::Trampoline, this);
  pthread_attr_destroy(&attr);
  if (rc != 0) {
    body_ = nullptr;
    if (rc == EINVAL && cpu_.has_value()) {
      return absl::InvalidArgumentError(
          absl::StrCat("thread ", name_, ": cpu ", *cpu_, " is not available to this process"));
    }
    return absl::ErrnoToStatus(rc, absl::StrCat("pthread_create(", name_, ")"));
  }
  started_ = true;
  return absl::OkStatus();
}

void Thread::Join() {
  if (!started_) {
    return;
  }
  if (IsCurrent()) {
    std::fprintf(stderr, "petrel: Thread %s joining itself\n", name_.c_str());
    std::abort();
  }
  pthread_join(handle_, nullptr);
  started_ = false;
}

bool Thread::IsCurrent() const { return tls_current_thread == this; }

void* Thread::Trampoline(void* arg) {
  Thread* self = static_cast<Thread*>(arg);
  tls_current_thread = self;
  // Naming from inside means the name is in place before the body's first line.
  pthread_setname_np(pthread_self(), self->name_.c_str());
  self->body_();
  self->body_ = nullptr;  // destroy what the body captured here, before Join() returns
  tls_current_thread = nullptr;
  return nullptr;
}

}  // namespace petrel
