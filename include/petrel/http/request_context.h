// Public: per-request values that the code handling one request shares — middleware, the
// handler, the error handler — one value per C++ type.
//
//   struct CurrentUser { std::string name; };
//   req.context().Emplace<CurrentUser>("ana");                 // an auth check
//   if (const CurrentUser* u = req.context().Get<CurrentUser>()) ...   // the handler
//
// A type is its own key: no strings, no hashing. Each type gets a small integer once per
// process, and a lookup scans the few values the request holds. A value lives until the request
// ends (engines reset the Request before reusing it; the values are destroyed then). Loop thread
// only, like the Request.
#ifndef PETREL_HTTP_REQUEST_CONTEXT_H_
#define PETREL_HTTP_REQUEST_CONTEXT_H_

#include <cstdint>
#include <memory>
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
    // Braces for aggregates (a struct of a string, say): clang before 16 has no parenthesized
    // aggregate initialization (P0960).
    std::unique_ptr<T> value;
    if constexpr (std::is_aggregate_v<T>) {
      value.reset(new T{std::forward<Args>(args)...});
    } else {
      value = std::make_unique<T>(std::forward<Args>(args)...);
    }
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
  void Clear();

 private:
  struct Slot {
    uint32_t type;
    void* value;
    void (*destroy)(void*);
  };

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
  bool Remove(uint32_t type);

  absl::InlinedVector<Slot, 2> slots_;
};

}  // namespace petrel

#endif  // PETREL_HTTP_REQUEST_CONTEXT_H_
