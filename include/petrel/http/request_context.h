// Public: per-request values that the code handling one request shares — middleware, the
// handler, the error handler — one value per C++ type.
//
//   struct CurrentUser { std::string name; };
//   req.context().Emplace<CurrentUser>("ana");                 // an auth check
//   if (const CurrentUser* u = req.context().Get<CurrentUser>()) ...   // the handler
//
// A type is its own key: no strings, no hashing. Each type gets a small integer once per
// process, and a lookup scans the few values the request holds. Values of up to a few hundred
// bytes together are kept inside the context: no allocation. A value lives until the request
// ends (engines reset the Request before reusing it; the values are destroyed then). Loop thread
// only, like the Request.
#ifndef PETREL_HTTP_REQUEST_CONTEXT_H_
#define PETREL_HTTP_REQUEST_CONTEXT_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>

#include "absl/container/inlined_vector.h"

namespace petrel {

class RequestContext {
 public:
  RequestContext() = default;
  RequestContext(const RequestContext&) = delete;
  RequestContext& operator=(const RequestContext&) = delete;
  ~RequestContext() { Clear(); }

  // The request's T, made from `args` (replacing, and destroying, one it had).
  template <typename T, typename... Args>
  T& Emplace(Args&&... args) {
    if constexpr (sizeof(T) <= kInlineBytes && alignof(T) <= alignof(std::max_align_t)) {
      if (void* place = InlinePlace(sizeof(T), alignof(T))) {
        T* value = Construct<T>(place, std::forward<Args>(args)...);
        Put(TypeId<T>(), value, [](void* p) { static_cast<T*>(p)->~T(); });
        return *value;
      }
    }
    std::unique_ptr<T> value(Construct<T>(nullptr, std::forward<Args>(args)...));
    T& ref = *value;
    Put(TypeId<T>(), value.release(), [](void* p) { delete static_cast<T*>(p); });
    return ref;
  }
  // The request's T, or null.
  template <typename T>
  T* Get() {
    return static_cast<T*>(Find(TypeId<T>()));
  }
  template <typename T>
  const T* Get() const {
    return static_cast<const T*>(Find(TypeId<T>()));
  }
  // The request's T, made by default first if it has none.
  template <typename T>
  T& GetOrEmplace() {
    if (T* value = Get<T>()) return *value;
    return Emplace<T>();
  }
  // Destroys the request's T; false if it had none.
  template <typename T>
  bool Erase() {
    return Remove(TypeId<T>());
  }

  size_t size() const { return slots_.size(); }
  bool empty() const { return slots_.empty(); }
  // Destroys every value, latest first.
  void Clear() {
    if (!slots_.empty() || inline_used_ != 0) DestroyAll();
  }

 private:
  struct Slot {
    uint32_t type;
    void* value;
    void (*destroy)(void*);
  };

  // Small values live in the context itself, so that a request's values cost no allocation
  // (the space is given back when the context is cleared); larger ones, or ones that no longer
  // fit, go to the heap.
  static constexpr size_t kInlineBytes = 192;

  // A T made at `place`, or on the heap when `place` is null.
  template <typename T, typename... Args>
  static T* Construct(void* place, Args&&... args) {
    // Braces for aggregates (a struct of a string, say): clang before 16 has no parenthesized
    // aggregate initialization (P0960).
    if constexpr (std::is_aggregate_v<T>) {
      return place != nullptr ? new (place) T{std::forward<Args>(args)...}
                              : new T{std::forward<Args>(args)...};
    } else {
      return place != nullptr ? new (place) T(std::forward<Args>(args)...)
                              : new T(std::forward<Args>(args)...);
    }
  }

  // Room for `size` bytes aligned to `align` (at most max_align_t's) in the inline space, or
  // null.
  void* InlinePlace(size_t size, size_t align);

  static uint32_t NewTypeId();
  // One id per type (Get<const T> finds T), made on first use; thread-safe.
  template <typename T>
  static uint32_t TypeId() {
    if constexpr (!std::is_same_v<T, std::remove_cv_t<T>>) {
      return TypeId<std::remove_cv_t<T>>();
    } else {
      static const uint32_t id = NewTypeId();
      return id;
    }
  }

  void* Find(uint32_t type) const {
    for (const Slot& slot : slots_) {
      if (slot.type == type) return slot.value;
    }
    return nullptr;
  }
  void Put(uint32_t type, void* value, void (*destroy)(void*));
  void DestroyAll();
  bool Remove(uint32_t type);

  absl::InlinedVector<Slot, 4> slots_;
  size_t inline_used_ = 0;
  alignas(std::max_align_t) unsigned char inline_[kInlineBytes];
};

}  // namespace petrel

#endif  // PETREL_HTTP_REQUEST_CONTEXT_H_
