#include "quic/connection/connection_memory.h"

#include <cstdlib>
#include <cstring>
#include <limits>

#include "petrel/common/log.h"

namespace petrel::quic {

ConnectionMemory::ConnectionMemory()
    : mem_{this, &ConnectionMemory::Malloc, &ConnectionMemory::Free, &ConnectionMemory::Calloc,
           &ConnectionMemory::Realloc} {}

ConnectionMemory::~ConnectionMemory() {
  if (blocks_ > 0) PETREL_LOG(kDebug, "quic: freeing %zu blocks ngtcp2 left behind", blocks_);
  while (head_.next != &head_) {
    Header* h = head_.next;
    head_.next = h->next;
    std::free(h);
  }
}

void* ConnectionMemory::Link(Header* h) {
  h->prev = &head_;
  h->next = head_.next;
  head_.next->prev = h;
  head_.next = h;
  ++blocks_;
  return h + 1;
}

ConnectionMemory::Header* ConnectionMemory::Unlink(void* ptr) {
  Header* h = static_cast<Header*>(ptr) - 1;
  h->prev->next = h->next;
  h->next->prev = h->prev;
  --blocks_;
  return h;
}

void* ConnectionMemory::Malloc(size_t size, void* user_data) {
  if (size > std::numeric_limits<size_t>::max() - sizeof(Header)) return nullptr;
  auto* h = static_cast<Header*>(std::malloc(sizeof(Header) + size));
  if (h == nullptr) return nullptr;
  return static_cast<ConnectionMemory*>(user_data)->Link(h);
}

void ConnectionMemory::Free(void* ptr, void* user_data) {
  if (ptr == nullptr) return;
  std::free(static_cast<ConnectionMemory*>(user_data)->Unlink(ptr));
}

void* ConnectionMemory::Calloc(size_t nmemb, size_t size, void* user_data) {
  if (size != 0 && nmemb > (std::numeric_limits<size_t>::max() - sizeof(Header)) / size) {
    return nullptr;
  }
  auto* h = static_cast<Header*>(std::calloc(1, sizeof(Header) + nmemb * size));
  if (h == nullptr) return nullptr;
  return static_cast<ConnectionMemory*>(user_data)->Link(h);
}

void* ConnectionMemory::Realloc(void* ptr, size_t size, void* user_data) {
  auto* self = static_cast<ConnectionMemory*>(user_data);
  if (ptr == nullptr) return Malloc(size, user_data);
  if (size > std::numeric_limits<size_t>::max() - sizeof(Header)) return nullptr;
  Header* old = self->Unlink(ptr);
  auto* h = static_cast<Header*>(std::realloc(old, sizeof(Header) + size));
  if (h == nullptr) return self->Link(old);  // realloc failed: the old block stays held
  return self->Link(h);
}

}  // namespace petrel::quic
