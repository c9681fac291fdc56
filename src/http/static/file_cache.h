// Internal: StaticFiles' open-file cache. Per handler and per loop thread, it keeps what serving
// a regular file needs — an open descriptor (or, for small files, the bytes), the identity that
// tells a changed file apart, and the prepared ETag, Last-Modified and Content-Type — so a
// steady stream of requests for the same files costs no open/fstat/close and no formatting.
//
// Threading: a FileCache belongs to one thread and is used without locks. ThreadFileCache finds
// (or creates) the calling thread's cache of a handler; RetireFileCaches drops a destroyed
// handler's caches on every thread (see there). Descriptors are SharedFds, so an entry evicted
// or replaced while a response still streams from its descriptor leaves the descriptor open
// until that response's FileBody is gone.
#ifndef PETREL_HTTP_STATIC_FILE_CACHE_H_
#define PETREL_HTTP_STATIC_FILE_CACHE_H_

#include <sys/stat.h>

#include <cstddef>
#include <cstdint>
#include <list>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "petrel/http/body.h"
#include "petrel/http/header_map.h"

namespace petrel::http_internal {

struct FileCacheLimits {
  size_t max_entries = 0;         // 0: no cache at all.
  uint64_t max_memory_bytes = 0;  // Bytes of file content held in memory, all entries.
  uint64_t max_memory_file = 0;   // Files up to this size are held in memory (0: none).
  int64_t revalidate_nanos = 0;   // How long an entry is trusted without a look at the path.
};

// What tells one version of a file from another: a rename puts a new inode there, a write or
// truncation changes size, mtime and ctime, a utimensat changes mtime (and ctime).
struct FileIdentity {
  uint64_t device = 0;
  uint64_t inode = 0;
  uint64_t size = 0;
  int64_t mtime_sec = 0;
  int64_t mtime_nsec = 0;
  int64_t ctime_sec = 0;
  int64_t ctime_nsec = 0;

  static FileIdentity Of(const struct stat& st);
  bool operator==(const FileIdentity&) const = default;
};

// One cached regular file. Exactly one of `fd` and `in_memory` holds the bytes.
struct CachedFile {
  FileIdentity identity;
  SharedFd fd;  // Empty for in-memory entries.
  bool in_memory = false;
  SharedBytes content;          // The whole file when in_memory, shared with its responses.
  std::string etag;             // The ETag field value, quotes included.
  std::string last_modified;    // Formatted; empty if mtime was in the future (format later).
  absl::string_view mime_type;  // Static storage or the handler's options (which outlive it).
  absl::string_view content_encoding;  // A precompressed sibling's ("br", "gzip"); static.
  // A precompressed sibling known not to exist (as of checked_at): nothing else is set.
  bool missing = false;
  int64_t checked_at = 0;  // CoarseMonotonicNanos() of the last validation.
  // The fields of a full 200 response (validators, Accept-Ranges, Content-Type), built from the
  // above when the entry is made so a plain GET adds them in one piece; empty (the fields are
  // then added one by one) when Last-Modified must be formatted per response.
  HeaderMap fields;
};

// CLOCK_MONOTONIC_COARSE (a vDSO read, no syscall), in nanoseconds.
int64_t CoarseMonotonicNanos();

// An LRU map from the decoded relative path to CachedFile, bounded by entries, by in-memory
// bytes and by descriptors. Must be used on one thread only.
class FileCache {
 public:
  explicit FileCache(const FileCacheLimits& limits);
  FileCache(const FileCache&) = delete;
  FileCache& operator=(const FileCache&) = delete;
  // Drops every entry: descriptors no response holds are closed now.
  ~FileCache();

  const FileCacheLimits& limits() const { return limits_; }

  // The entry for `key`, made most recently used; nullptr if there is none.
  CachedFile* Find(absl::string_view key);
  // Adds (or replaces) the entry for `key` (which must not point into this cache) and evicts
  // least recently used entries beyond the bounds — never the new one. The returned pointer is
  // valid until the next non-const call.
  CachedFile* Insert(absl::string_view key, CachedFile file);
  void Erase(absl::string_view key);

  // Drops least recently used entries that hold a descriptor until one descriptor is actually
  // closed (entries whose descriptor a response still holds are dropped too, as they will close
  // when that response ends). False if no entry holds a descriptor any more.
  bool ReleaseDescriptor();

  size_t size() const { return index_.size(); }
  size_t descriptors() const { return descriptors_; }
  uint64_t memory_bytes() const { return memory_bytes_; }

 private:
  struct Node {
    std::string key;
    CachedFile file;
  };
  using List = std::list<Node>;

  void EraseNode(List::iterator it);
  void EvictBeyondLimits(const Node* keep);

  const FileCacheLimits limits_;
  // Descriptor bound: the entry bound, but at most a quarter of RLIMIT_NOFILE (read when the
  // cache is made), so the cache alone cannot starve accept() of descriptors.
  const size_t max_descriptors_;
  List lru_;                                                      // Most recently used first.
  absl::flat_hash_map<absl::string_view, List::iterator> index_;  // Keys point into lru_ nodes.
  size_t descriptors_ = 0;
  uint64_t memory_bytes_ = 0;
};

// A fresh id for a handler's caches; never reused in the process.
uint64_t NewFileCacheId();

// The calling thread's cache for handler `id`, made with `limits` on first use; nullptr once the
// thread's caches were destroyed (the thread is ending). No locks: one thread-local lookup and
// one atomic load (to notice retired handlers); the global lock is taken only when a thread makes
// its first cache for a handler.
FileCache* ThreadFileCache(uint64_t id, const FileCacheLimits& limits);

// On EMFILE/ENFILE: closes a descriptor held by one of the calling thread's caches, `first`
// before the others. False if none holds one.
bool ReleaseThreadDescriptor(FileCache* first);

// The handler `id` is being destroyed: its cache on the calling thread is destroyed now; the
// caches on other threads at their next ThreadFileCache call or when their thread ends. Must not
// be called while the handler still runs on any thread.
void RetireFileCaches(uint64_t id);

}  // namespace petrel::http_internal

#endif  // PETREL_HTTP_STATIC_FILE_CACHE_H_
