#include "http/static/file_cache.h"

#include <sys/resource.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <iterator>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

namespace petrel::http_internal {
namespace {

size_t DescriptorBound(size_t max_entries) {
  struct rlimit limit;
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) {
    return max_entries;
  }
  return std::min<size_t>(max_entries, std::max<size_t>(limit.rlim_cur / 4, 1));
}

// ---- Which handlers' caches exist where ----
//
// Each thread owns its caches (a thread-local registry), so the request path takes no lock. The
// global table below is touched only when a thread makes its first cache for a handler, when a
// handler is retired and when a thread drops a cache: it counts, per live or retired handler, how
// many threads still hold a cache, so a retired id is forgotten once no thread holds it.
struct HandlerRecord {
  int holders = 0;       // Threads whose registry has a cache for this handler.
  bool retired = false;  // The handler was destroyed; holders drop their cache when they see it.
};

std::mutex g_mutex;
absl::flat_hash_map<uint64_t, HandlerRecord>* g_handlers = nullptr;  // GUARDED_BY(g_mutex)
// Bumped on every retirement, so a thread notices one with a single relaxed load.
std::atomic<uint64_t> g_retire_epoch{0};
std::atomic<uint64_t> g_next_id{1};

absl::flat_hash_map<uint64_t, HandlerRecord>& Handlers() {
  if (g_handlers == nullptr) g_handlers = new absl::flat_hash_map<uint64_t, HandlerRecord>();
  return *g_handlers;  // Never freed: thread-local destructors may run after static ones.
}

// Called with g_mutex held: this thread no longer holds a cache for `id`.
void DropHolderLocked(uint64_t id) {
  auto it = Handlers().find(id);
  if (it == Handlers().end()) return;
  if (--it->second.holders == 0 && it->second.retired) Handlers().erase(it);
}

class Registry {
 public:
  ~Registry() {
    // Closes the descriptors before taking the lock: the caches are this thread's alone.
    std::vector<uint64_t> ids;
    ids.reserve(caches_.size());
    for (auto& [id, cache] : caches_) ids.push_back(id);
    caches_.clear();
    std::lock_guard<std::mutex> lock(g_mutex);
    for (uint64_t id : ids) DropHolderLocked(id);
  }

  FileCache* Get(uint64_t id, const FileCacheLimits& limits) {
    const uint64_t epoch = g_retire_epoch.load(std::memory_order_acquire);
    if (epoch != seen_epoch_) {
      seen_epoch_ = epoch;
      Sweep();
    }
    if (id == last_id_) return last_cache_;
    auto it = caches_.find(id);
    if (it == caches_.end()) {
      {
        std::lock_guard<std::mutex> lock(g_mutex);
        HandlerRecord& record = Handlers()[id];
        if (record.retired) return nullptr;  // Not reached by a live handler.
        ++record.holders;
      }
      it = caches_.emplace(id, std::make_unique<FileCache>(limits)).first;
    }
    last_id_ = id;
    last_cache_ = it->second.get();
    return last_cache_;
  }

  // Drops this thread's cache of `id` (if any), now.
  void Drop(uint64_t id) {
    auto it = caches_.find(id);
    if (it == caches_.end()) return;
    std::unique_ptr<FileCache> cache = std::move(it->second);
    caches_.erase(it);
    if (last_id_ == id) ForgetLast();
    cache.reset();
    std::lock_guard<std::mutex> lock(g_mutex);
    DropHolderLocked(id);
  }

  bool ReleaseDescriptor(FileCache* first) {
    if (first != nullptr && first->ReleaseDescriptor()) return true;
    for (auto& [id, cache] : caches_) {
      if (cache.get() != first && cache->ReleaseDescriptor()) return true;
    }
    return false;
  }

 private:
  // Drops the caches of retired handlers.
  void Sweep() {
    std::vector<uint64_t> retired;
    {
      std::lock_guard<std::mutex> lock(g_mutex);
      for (auto& [id, cache] : caches_) {
        auto it = Handlers().find(id);
        if (it != Handlers().end() && it->second.retired) retired.push_back(id);
      }
    }
    for (uint64_t id : retired) Drop(id);
  }

  void ForgetLast() {
    last_id_ = 0;
    last_cache_ = nullptr;
  }

  absl::flat_hash_map<uint64_t, std::unique_ptr<FileCache>> caches_;
  uint64_t seen_epoch_ = 0;
  // One-entry memo: most servers have one StaticFiles handler.
  uint64_t last_id_ = 0;  // Ids start at 1.
  FileCache* last_cache_ = nullptr;
};

// The registry lives in a thread_local owner; the raw pointer (trivially destructible) says
// whether it still exists, so a handler destroyed during thread exit never touches a destroyed
// registry.
constinit thread_local Registry* tls_registry = nullptr;
constinit thread_local bool tls_registry_gone = false;

struct RegistryOwner {
  ~RegistryOwner() {
    delete tls_registry;
    tls_registry = nullptr;
    tls_registry_gone = true;
  }
};

Registry* ThreadRegistry(bool create) {
  if (tls_registry == nullptr && create && !tls_registry_gone) {
    thread_local RegistryOwner owner;
    tls_registry = new Registry();
  }
  return tls_registry;
}

}  // namespace

FileIdentity FileIdentity::Of(const struct stat& st) {
  FileIdentity id;
  id.device = static_cast<uint64_t>(st.st_dev);
  id.inode = static_cast<uint64_t>(st.st_ino);
  id.size = static_cast<uint64_t>(st.st_size);
  id.mtime_sec = st.st_mtim.tv_sec;
  id.mtime_nsec = st.st_mtim.tv_nsec;
  id.ctime_sec = st.st_ctim.tv_sec;
  id.ctime_nsec = st.st_ctim.tv_nsec;
  return id;
}

int64_t CoarseMonotonicNanos() {
  struct timespec ts;
  ::clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

// ---- FileCache ----

FileCache::FileCache(const FileCacheLimits& limits)
    : limits_(limits), max_descriptors_(DescriptorBound(limits.max_entries)) {
  index_.reserve(std::min<size_t>(limits.max_entries, 1024));
}

FileCache::~FileCache() = default;

CachedFile* FileCache::Find(absl::string_view key) {
  auto it = index_.find(key);
  if (it == index_.end()) return nullptr;
  if (it->second != lru_.begin()) lru_.splice(lru_.begin(), lru_, it->second);
  return &it->second->file;
}

CachedFile* FileCache::Insert(absl::string_view key, CachedFile file) {
  Erase(key);
  lru_.push_front(Node{std::string(key), std::move(file)});
  Node& node = lru_.front();
  index_.emplace(node.key, lru_.begin());
  if (node.file.fd) ++descriptors_;
  memory_bytes_ += node.file.content.size();
  EvictBeyondLimits(&node);
  return &node.file;
}

void FileCache::Erase(absl::string_view key) {
  auto it = index_.find(key);
  if (it != index_.end()) EraseNode(it->second);
}

void FileCache::EraseNode(List::iterator it) {
  if (it->file.fd) --descriptors_;
  memory_bytes_ -= it->file.content.size();
  index_.erase(it->key);
  lru_.erase(it);
}

void FileCache::EvictBeyondLimits(const Node* keep) {
  while (index_.size() > limits_.max_entries || memory_bytes_ > limits_.max_memory_bytes) {
    auto victim = std::prev(lru_.end());
    if (&*victim == keep) break;
    EraseNode(victim);
  }
  // Over the descriptor bound: drop the least recently used entries that hold one.
  for (auto it = lru_.end(); descriptors_ > max_descriptors_ && it != lru_.begin();) {
    --it;
    if (!it->file.fd || &*it == keep) continue;
    auto victim = it;
    ++it;  // Stays valid: list erasure invalidates only the erased node.
    EraseNode(victim);
  }
}

bool FileCache::ReleaseDescriptor() {
  for (auto it = lru_.end(); it != lru_.begin();) {
    --it;
    if (!it->file.fd) continue;
    const bool closes = it->file.fd.use_count() == 1;
    auto victim = it;
    ++it;
    EraseNode(victim);
    if (closes) return true;
  }
  return false;
}

// ---- Per-thread caches ----

uint64_t NewFileCacheId() { return g_next_id.fetch_add(1, std::memory_order_relaxed); }

FileCache* ThreadFileCache(uint64_t id, const FileCacheLimits& limits) {
  Registry* registry = ThreadRegistry(/*create=*/true);
  return registry != nullptr ? registry->Get(id, limits) : nullptr;
}

bool ReleaseThreadDescriptor(FileCache* first) {
  Registry* registry = ThreadRegistry(/*create=*/false);
  return registry != nullptr && registry->ReleaseDescriptor(first);
}

void RetireFileCaches(uint64_t id) {
  if (Registry* registry = ThreadRegistry(/*create=*/false)) registry->Drop(id);
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    auto it = Handlers().find(id);
    if (it == Handlers().end()) return;  // No thread ever made a cache for it.
    if (it->second.holders == 0) {
      Handlers().erase(it);
      return;
    }
    it->second.retired = true;
  }
  g_retire_epoch.fetch_add(1, std::memory_order_release);
}

}  // namespace petrel::http_internal
