// The replacement operator new/delete behind allocation_counter.h.
#include "support/allocation_counter.h"

#include <atomic>
#include <cstdlib>
#include <new>

namespace {
std::atomic<uint64_t> g_allocations{0};
std::atomic<bool> g_every_thread{false};
thread_local bool t_this_thread = false;

void Count() {
  if (t_this_thread || g_every_thread.load(std::memory_order_relaxed)) {
    g_allocations.fetch_add(1, std::memory_order_relaxed);
  }
}

__attribute__((noinline)) void* CountedAlloc(size_t size) {
  Count();
  return malloc(size == 0 ? 1 : size);
}
__attribute__((noinline)) void* CountedAlignedAlloc(size_t size, std::align_val_t align) {
  Count();
  void* p = nullptr;
  return posix_memalign(&p, static_cast<size_t>(align), size == 0 ? 1 : size) == 0 ? p : nullptr;
}
// Out of line so that GCC does not pair an inlined free() with operator new and warn.
__attribute__((noinline)) void ReleaseMemory(void* p) { free(p); }
}  // namespace

namespace petrel::testing {
uint64_t Allocations() { return g_allocations.load(std::memory_order_relaxed); }
void CountAllocationsOfEveryThread(bool on) { g_every_thread.store(on); }
void CountAllocationsOfThisThread(bool on) { t_this_thread = on; }
bool AllocationCountingWorks() {
  const bool was = t_this_thread;
  t_this_thread = true;
  const uint64_t before = Allocations();
  // A direct call, which unlike a new-expression the compiler may not leave out.
  ::operator delete(::operator new(16));
  const bool counted = Allocations() > before;
  t_this_thread = was;
  return counted;
}
}  // namespace petrel::testing

void* operator new(size_t size) {
  if (void* p = CountedAlloc(size)) return p;
  throw std::bad_alloc();
}
void* operator new[](size_t size) {
  if (void* p = CountedAlloc(size)) return p;
  throw std::bad_alloc();
}
void* operator new(size_t size, const std::nothrow_t&) noexcept { return CountedAlloc(size); }
void* operator new[](size_t size, const std::nothrow_t&) noexcept { return CountedAlloc(size); }
void* operator new(size_t size, std::align_val_t align) {
  if (void* p = CountedAlignedAlloc(size, align)) return p;
  throw std::bad_alloc();
}
void* operator new(size_t size, std::align_val_t align, const std::nothrow_t&) noexcept {
  return CountedAlignedAlloc(size, align);
}
void operator delete(void* p) noexcept { ReleaseMemory(p); }
void operator delete[](void* p) noexcept { ReleaseMemory(p); }
void operator delete(void* p, size_t) noexcept { ReleaseMemory(p); }
void operator delete[](void* p, size_t) noexcept { ReleaseMemory(p); }
void operator delete(void* p, std::align_val_t) noexcept { ReleaseMemory(p); }
void operator delete(void* p, size_t, std::align_val_t) noexcept { ReleaseMemory(p); }
