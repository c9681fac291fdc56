#include "petrel/http/request_context.h"

#include <atomic>

namespace petrel {

uint32_t RequestContext::NewTypeId() {
  static std::atomic<uint32_t> next{0};
  return next.fetch_add(1, std::memory_order_relaxed);
}

void RequestContext::Put(uint32_t type, void* value, void (*destroy)(void*)) {
  for (Slot& slot : slots_) {
    if (slot.type == type) {
      // The old value goes after the new one is in place: its destructor may look at the
      // context.
      Slot old = std::exchange(slot, Slot{type, value, destroy});
      old.destroy(old.value);
      return;
    }
  }
  slots_.push_back(Slot{type, value, destroy});
}

void* RequestContext::InlinePlace(size_t size, size_t align) {
  const size_t offset = (inline_used_ + align - 1) & ~(align - 1);
  if (offset > kInlineBytes || size > kInlineBytes - offset) return nullptr;
  inline_used_ = offset + size;
  return inline_ + offset;
}

bool RequestContext::Remove(uint32_t type) {
  for (size_t i = 0; i < slots_.size(); ++i) {
    if (slots_[i].type == type) {
      const Slot old = slots_[i];
      slots_.erase(slots_.begin() + i);
      old.destroy(old.value);
      return true;
    }
  }
  return false;
}

void RequestContext::DestroyAll() {
  // Latest first, as a stack of scopes would; each value's destructor may still use the ones
  // made before it.
  while (!slots_.empty()) {
    const Slot last = slots_.back();
    slots_.pop_back();
    last.destroy(last.value);
  }
  inline_used_ = 0;
}

}  // namespace petrel
