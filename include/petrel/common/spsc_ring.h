// Public: SpscRing<T>, a bounded lock-free single-producer single-consumer queue with a
// race-free "wake the consumer only on empty → non-empty" protocol.
#ifndef PETREL_COMMON_SPSC_RING_H_
#define PETREL_COMMON_SPSC_RING_H_

#include <algorithm>
#include <atomic>
#include <bit>
#include <cassert>
#include <cstddef>
#include <memory>
#include <type_traits>
#include <utility>

#include "petrel/common/cache_line.h"

namespace petrel {

// A fixed-capacity FIFO between exactly one producer thread and one consumer thread (the master →
// worker packet hand-off and the buffer return path). Storage is allocated once, in the
// constructor; pushing and popping never allocate, lock or make a system call.
//
// Thread contract: TryPush, PushBatch and the producer's cached index belong to ONE producer
// thread; TryPop, PopBatch, ConfirmEmpty and the consumer's cached index belong to ONE consumer
// thread. The roles may move to another thread only with a happens-before edge in between (e.g. a
// thread join). SizeApprox, EmptyApprox and capacity may be called from any thread.
//
// Capacity: the constructor rounds the requested capacity up to a power of two (minimum 1) so that
// an index maps to a slot with a mask. Indices are free-running 64-bit counters; they wrap only
// after 2^64 items, and even then the unsigned arithmetic stays correct because the capacity
// divides 2^64.
//
// Layout: the producer's index and its cached copy of the consumer's index share one cache line;
// the consumer's index and its cached copy of the producer's index share another; the read-only
// fields sit on a third. In the common case each side touches only its own line and reloads the
// other side's index only when its cached copy says the ring is full (producer) or empty
// (consumer).
//
// T must be move-constructible and move-assignable (typically a small packet descriptor, a pointer
// or a std::unique_ptr). Items still in the ring when it is destroyed are destroyed with it.
//
// ---------------------------------------------------------------------------------------------
// Wake-up protocol (no lost wake-ups)
//
// The consumer sleeps on some wake-up primitive (an eventfd in Petrel); the producer signals it
// only when the ring goes from empty to non-empty, so a busy consumer costs the producer no
// system calls. The two rules:
//
//   Producer:  PushBatch(items, n, &was_empty) (or TryPush(v, &was_empty));
//              if (was_empty) signal();
//   Consumer:  loop { drain with PopBatch/TryPop until it returns 0;
//                     if (ring.ConfirmEmpty()) wait_for_signal(); }
//
// Every push must ask for was_empty while the consumer may sleep (a push without it has no
// barrier and can be missed). The consumer must call ConfirmEmpty() immediately before every
// sleep; a pop that returned nothing is not enough. The signal must be "sticky" (an eventfd
// counter, a semaphore, a futex word, a flag under a mutex): a signal sent before the consumer
// starts waiting must still end the wait.
//
// Why no wake-up is lost. With was_empty requested, the producer publishes its new tail with a
// seq_cst store and then loads the consumer's head with a seq_cst load. ConfirmEmpty() performs a
// seq_cst read-modify-write of the consumer's own head (republishing its current value) and then
// loads the tail with a seq_cst load. This is Dekker's store → load pattern on both sides: all four
// operations are in the single total order of seq_cst operations, so either
//   (a) the producer's tail store comes first: the consumer's tail load sees the new items, so
//       ConfirmEmpty() returns false and the consumer does not sleep; or
//   (b) the consumer's head RMW comes first: the producer's head load sees the consumer's head
//       H as of that RMW (or a later value, which exists only if the consumer woke anyway). A
//       sleeping consumer saw tail == H, so the first batch it did not see starts at index H;
//       that batch's producer therefore saw head == its first index, reported was_empty == true,
//       and signalled. Because the signal is sticky the consumer wakes even if
//       the signal arrived before it began to wait.
// A signal from an earlier batch cannot be "used up" by an earlier wait: that signal happens
// after its batch was published, and the consumer returns from the wait before reloading the
// tail, so it sees that batch. Spurious wake-ups are possible and harmless.
//
// We use seq_cst operations on the indices rather than std::atomic_thread_fence: the C++ memory
// model argument is the same, ThreadSanitizer does not model stand-alone fences (GCC warns with
// -Wtsan), and on x86-64 the cost is identical (XCHG / LOCK XADD versus MOV + MFENCE).
// ---------------------------------------------------------------------------------------------
template <typename T>
class SpscRing {
  static_assert(std::is_move_constructible_v<T> && std::is_move_assignable_v<T>,
                "SpscRing<T> needs a movable T");

 public:
  // Allocates storage for bit_ceil(max(requested_capacity, 1)) items.
  explicit SpscRing(size_t requested_capacity)
      : consts_{std::bit_ceil(std::max<size_t>(requested_capacity, 1))} {
    consts_.mask = consts_.capacity - 1;
    consts_.slots = std::allocator<T>().allocate(consts_.capacity);
  }

  SpscRing(const SpscRing&) = delete;
  SpscRing& operator=(const SpscRing&) = delete;

  ~SpscRing() {
    // The destructor runs after both threads are done with the ring (the owner's contract), so
    // plain relaxed loads see the final indices.
    const size_t tail = producer_.tail.load(std::memory_order_relaxed);
    for (size_t i = consumer_.head.load(std::memory_order_relaxed); i != tail; ++i) {
      std::destroy_at(Slot(i));
    }
    std::allocator<T>().deallocate(consts_.slots, consts_.capacity);
  }

  // ---- Producer thread ----------------------------------------------------------------------

  // Moves `v` into the ring; returns false (leaving `v` untouched) when the ring is full.
  // `was_empty`, when not null, is set as described for PushBatch.
  bool TryPush(T&& v, bool* was_empty = nullptr) {
    const size_t tail = producer_.tail.load(std::memory_order_relaxed);
    if (FreeSlots(tail, 1) == 0) {
      if (was_empty != nullptr) *was_empty = false;
      return false;
    }
    std::construct_at(Slot(tail), std::move(v));
    Publish(tail, tail + 1, was_empty);
    return true;
  }

  bool TryPush(const T& v, bool* was_empty = nullptr) {
    T copy(v);
    return TryPush(std::move(copy), was_empty);
  }

  // Moves up to `n` items from items[0..n) into the ring, in order, and publishes them with one
  // store. Returns how many were moved (0 when full); items past that count are untouched.
  //
  // `was_empty`, when not null, is set to true iff, after this batch became visible, the
  // consumer's index equalled the index of the batch's first item: the consumer had taken
  // everything published before and had not started on this batch — it may be asleep, so signal
  // it. False when nothing was pushed. Requesting it costs one full barrier (see the protocol
  // above); pass nullptr when the consumer never sleeps.
  size_t PushBatch(T* items, size_t n, bool* was_empty = nullptr) {
    const size_t tail = producer_.tail.load(std::memory_order_relaxed);
    const size_t count = std::min(n, FreeSlots(tail, n));
    if (count == 0) {
      if (was_empty != nullptr) *was_empty = false;
      return 0;
    }
    for (size_t i = 0; i < count; ++i) {
      std::construct_at(Slot(tail + i), std::move(items[i]));
    }
    Publish(tail, tail + count, was_empty);
    return count;
  }

  // ---- Consumer thread ----------------------------------------------------------------------

  // Moves the oldest item into *out; returns false when the ring is empty.
  bool TryPop(T* out) {
    const size_t head = consumer_.head.load(std::memory_order_relaxed);
    if (head == consumer_.cached_tail) {
      consumer_.cached_tail = producer_.tail.load(std::memory_order_acquire);
      if (head == consumer_.cached_tail) return false;
    }
    T* slot = Slot(head);
    *out = std::move(*slot);
    std::destroy_at(slot);
    // Release: our reads of the slot happen before the producer reuses it.
    consumer_.head.store(head + 1, std::memory_order_release);
    return true;
  }

  // Moves up to `max` of the oldest items into out[0..max) and frees their slots with one store.
  // Returns how many were moved.
  size_t PopBatch(T* out, size_t max) {
    const size_t head = consumer_.head.load(std::memory_order_relaxed);
    size_t available = consumer_.cached_tail - head;
    if (available < max) {
      consumer_.cached_tail = producer_.tail.load(std::memory_order_acquire);
      available = consumer_.cached_tail - head;
    }
    const size_t count = std::min(max, available);
    for (size_t i = 0; i < count; ++i) {
      T* slot = Slot(head + i);
      out[i] = std::move(*slot);
      std::destroy_at(slot);
    }
    if (count != 0) consumer_.head.store(head + count, std::memory_order_release);
    return count;
  }

  // Returns true iff the ring is empty in a way that makes sleeping safe: any item published
  // after this check was (or will be) pushed with was_empty == true, so its producer signals.
  // Call it right before sleeping, after a pop came back empty; if it returns false, pop again.
  // Costs one full barrier.
  bool ConfirmEmpty() {
    // RMW on our own index: places the current head in the seq_cst total order (see the header
    // comment); fetch_add(0) does not change it.
    const size_t head = consumer_.head.fetch_add(0, std::memory_order_seq_cst);
    consumer_.cached_tail = producer_.tail.load(std::memory_order_seq_cst);
    return consumer_.cached_tail == head;
  }

  // ---- Any thread -----------------------------------------------------------------------------

  // A snapshot of the number of items; exact only when neither side is running. Never exceeds
  // capacity().
  size_t SizeApprox() const {
    // Head first: the tail loaded afterwards is at least the tail at the time of the head load, so
    // the difference cannot underflow.
    const size_t head = consumer_.head.load(std::memory_order_acquire);
    const size_t tail = producer_.tail.load(std::memory_order_acquire);
    return std::min(tail - head, consts_.capacity);
  }

  bool EmptyApprox() const { return SizeApprox() == 0; }

  size_t capacity() const { return consts_.capacity; }

 private:
  // Producer side: the number of free slots from `tail`. Reloads the consumer's index only when
  // the cached copy shows fewer than `wanted`; acquire pairs with the consumer's release so its
  // reads of a slot happen before we construct into it again.
  size_t FreeSlots(size_t tail, size_t wanted) {
    size_t free = consts_.capacity - (tail - producer_.cached_head);
    if (free < wanted) {
      producer_.cached_head = consumer_.head.load(std::memory_order_acquire);
      free = consts_.capacity - (tail - producer_.cached_head);
    }
    return free;
  }

  // Makes [old_tail, new_tail) visible to the consumer and computes was_empty if asked.
  void Publish(size_t old_tail, size_t new_tail, bool* was_empty) {
    if (was_empty == nullptr) {
      producer_.tail.store(new_tail, std::memory_order_release);
      return;
    }
    // seq_cst store then seq_cst load: the producer half of the Dekker pattern. seq_cst also
    // implies release (publishes the slots) and acquire (the head doubles as a fresh cached copy).
    producer_.tail.store(new_tail, std::memory_order_seq_cst);
    const size_t head = consumer_.head.load(std::memory_order_seq_cst);
    producer_.cached_head = head;
    *was_empty = (head == old_tail);
  }

  T* Slot(size_t index) const { return consts_.slots + (index & consts_.mask); }

  struct alignas(kCacheLineSize) ProducerSide {
    std::atomic<size_t> tail{0};  // next index to write; written by the producer only
    size_t cached_head = 0;       // the producer's last view of consumer_.head
  };
  struct alignas(kCacheLineSize) ConsumerSide {
    std::atomic<size_t> head{0};  // next index to read; written by the consumer only
    size_t cached_tail = 0;       // the consumer's last view of producer_.tail
  };
  struct alignas(kCacheLineSize) Constants {
    size_t capacity = 0;
    size_t mask = 0;
    T* slots = nullptr;  // owned; `capacity` uninitialized slots from std::allocator<T>
  };

  Constants consts_;
  ProducerSide producer_;
  ConsumerSide consumer_;
};

}  // namespace petrel

#endif  // PETREL_COMMON_SPSC_RING_H_
