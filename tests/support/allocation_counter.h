// Internal (tests): counts C++ heap allocations — every operator new of the test binary that
// links allocation_counter.cc, which replaces the global operator new/delete. Petrel's objects,
// containers and abseil allocate through it; C libraries (nghttp2/3, ngtcp2, BoringSSL) call
// malloc directly and are not counted.
#ifndef PETREL_TESTS_SUPPORT_ALLOCATION_COUNTER_H_
#define PETREL_TESTS_SUPPORT_ALLOCATION_COUNTER_H_

#include <cstdint>

namespace petrel::testing {

// Allocations counted so far (from any thread). Safe from any thread.
uint64_t Allocations();
// Count the allocations of every thread of the process (the default is none).
void CountAllocationsOfEveryThread(bool on);
// Count the allocations the calling thread makes (e.g. a server's loop thread, so that the
// client on the test thread stays out of the count).
void CountAllocationsOfThisThread(bool on);
// True if an operator new on this thread is counted (the replacement is linked in): a test that
// expects zero allocations asserts this first, so that it can fail.
bool AllocationCountingWorks();

}  // namespace petrel::testing

#endif  // PETREL_TESTS_SUPPORT_ALLOCATION_COUNTER_H_
