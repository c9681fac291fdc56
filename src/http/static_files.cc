#include "petrel/http/static_files.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "http/compression/content_coding.h"
#include "http/http_date.h"
#include "http/static/conditional.h"
#include "http/static/directory_listing.h"
#include "http/static/file_cache.h"
#include "http/static/mime_types.h"
#include "http/static/range.h"
#include "http/static/request_path.h"
#include "petrel/common/log.h"
#include "petrel/http/status.h"

namespace petrel {
namespace {

using http_internal::ContentCoding;
using http_internal::Precondition;
using http_internal::RangeDecision;

constexpr absl::string_view kTextPlain = "text/plain; charset=utf-8";
// A listing stops here: a directory of a million files must not become a 100 MB page.
constexpr size_t kMaxListingEntries = 10000;

// Owns an fd until released.
class ScopedFd {
 public:
  explicit ScopedFd(int fd) : fd_(fd) {}
  ScopedFd(ScopedFd&& other) noexcept : fd_(other.release()) {}
  ScopedFd& operator=(ScopedFd&& other) noexcept {
    if (this != &other) {
      if (fd_ >= 0) ::close(fd_);
      fd_ = other.release();
    }
    return *this;
  }
  ~ScopedFd() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }

 private:
  int fd_;
};

void SendError(Response& res, int status) { res.SendError(status); }

// Errno of a failed lookup -> the status to answer. Only a permission problem is worth saying;
// everything else (ENOENT, ENOTDIR, ELOOP, ENAMETOOLONG, ...) is "not found".
int StatusForErrno(int error) {
  return error == EACCES || error == EPERM ? HttpStatus::kForbidden : HttpStatus::kNotFound;
}

// openat2(2) (Linux 5.6+): -1 with errno ENOSYS on older kernels (EPERM under some seccomp
// filters), and the caller falls back to open(2).
int OpenAt2(int dir_fd, const char* path, uint64_t flags, uint64_t resolve) {
  struct open_how how {};
  how.flags = flags;
  how.resolve = resolve;
  return static_cast<int>(::syscall(SYS_openat2, dir_fd, path, &how, sizeof(how)));
}

int64_t NowSeconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// What a request path resolves to, found with the traversal and symlink rules of StaticFiles.
struct Lookup {
  enum class Kind : uint8_t { kFile, kStatus, kRedirect, kListing };

  static Lookup Status(int status) {
    Lookup r;
    r.status = status;
    return r;
  }

  Kind kind = Kind::kStatus;
  int status = HttpStatus::kNotFound;  // kStatus: the answer.
  ScopedFd fd{-1};                     // kFile: the open file; kListing: the directory.
  struct stat st {};                   // kFile: its metadata.
  std::string real;                    // kListing: the directory's resolved path.
  absl::string_view name;              // kFile: the name whose extension picks Content-Type.
};

// What ServeFile needs to know of a file, prepared or not.
struct FileFacts {
  uint64_t size = 0;
  int64_t mtime = 0;                // Unix seconds.
  absl::string_view etag;           // The field value, quotes included.
  absl::string_view last_modified;  // Formatted, or empty to format it from mtime and now.
  absl::string_view mime_type;
  absl::string_view content_encoding;  // A precompressed sibling's.
  const HeaderMap* fields = nullptr;   // A full 200's fields prepared, if they are (CachedFile).
};

// Which of the request's fields can change how a file is answered. Most requests carry none:
// one pass over the names instead of a lookup per field.
struct FileRequestFields {
  bool precondition = false;  // If-Match, If-None-Match, If-(Un)Modified-Since, If-Range
  bool range = false;

  static FileRequestFields Of(const HeaderMap& headers) {
    FileRequestFields r;
    for (const HeaderField f : headers) {
      const absl::string_view n = f.name;
      if (http_internal::IsConditionalFieldName(n)) {
        r.precondition = true;
      } else if (n.size() == 5 && absl::EqualsIgnoreCase(n, "range")) {
        r.range = true;
      }
    }
    return r;
  }
};

// A 64-bit finalizer (MurmurHash3's): every input bit moves about half the output bits. Fixed,
// unlike absl::Hash's per-process seed, so every worker and every restart tags a file the same.
uint64_t MixBits(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  x ^= x >> 33;
  return x;
}

// Strong: size, mtime to the nanosecond, inode and device change whenever the bytes are replaced
// (barring a same-size rewrite within one timestamp tick), and a 64-bit digest of them differs
// but for a 2^-64 chance. Eleven base64url digits, not the fields in hex (26 octets): HPACK and
// QPACK never index an ETag, so every response Huffman-codes it, byte by byte.
std::string FormatEtag(const struct stat& st) {
  uint64_t digest = MixBits(static_cast<uint64_t>(st.st_dev));
  for (const uint64_t field :
       {static_cast<uint64_t>(st.st_ino), static_cast<uint64_t>(st.st_mtim.tv_sec),
        static_cast<uint64_t>(st.st_mtim.tv_nsec), static_cast<uint64_t>(st.st_size)}) {
    digest = MixBits(digest ^ field);
  }
  static constexpr char kDigits[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  std::string tag(13, '"');
  for (size_t i = 1; i <= 11; ++i, digest >>= 6) tag[i] = kDigits[digest & 63];
  return tag;
}

// Runs `open` (an open(2)-like call) again after closing a cached descriptor of this thread
// while it fails for want of descriptors, so a full descriptor table costs cache entries, not
// requests.
template <typename Open>
int OpenRetrying(http_internal::FileCache* cache, Open open) {
  for (;;) {
    const int fd = open();
    if (fd >= 0 || (errno != EMFILE && errno != ENFILE)) return fd;
    const int error = errno;
    if (!http_internal::ReleaseThreadDescriptor(cache)) {
      errno = error;
      return -1;
    }
  }
}

// Reads exactly `size` bytes from the start of `fd` into `*out`; false if the file turned out
// shorter or a read failed.
bool ReadWhole(int fd, uint64_t size, std::string* out) {
  out->resize(size);
  uint64_t done = 0;
  while (done < size) {
    const ssize_t n = ::pread(fd, out->data() + done, size - done, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<uint64_t>(n);
  }
  return true;
}

// The handler's state. It lives behind a unique_ptr in StaticFilesHandle, so its address (which
// cache entries' Content-Type views point into) survives the moves of the handler.
class StaticFileHandler {
 public:
  StaticFileHandler(std::string root, StaticFilesOptions options) : options_(std::move(options)) {
    // Extensions compare case-insensitively: store them lowercase.
    // Field values are checked here, once: ServeFile sets them without the per-response check
    // of Response::SetHeader (a value with CR or LF must never reach an engine).
    absl::flat_hash_map<std::string, std::string> types;
    for (auto& [ext, type] : options_.mime_types) {
      if (!IsValidFieldValue(type)) {
        PETREL_LOG(kWarning, "static files: ignoring the invalid Content-Type for .%s", ext);
        continue;
      }
      types[absl::AsciiStrToLower(ext)] = type;
    }
    options_.mime_types = std::move(types);
    if (!IsValidFieldValue(options_.default_mime_type)) {
      PETREL_LOG(kWarning, "static files: invalid default Content-Type; using %s",
                 "application/octet-stream");
      options_.default_mime_type = "application/octet-stream";
    }
    if (!IsValidFieldValue(options_.cache_control)) {
      PETREL_LOG(kWarning, "static files: ignoring the invalid Cache-Control value");
      options_.cache_control.clear();
    }
    limits_.max_entries = options_.file_cache_entries;
    limits_.max_memory_bytes = options_.file_cache_memory_bytes;
    limits_.max_memory_file = options_.file_cache_memory_file_size;
    limits_.revalidate_nanos =
        std::max<int64_t>(absl::ToInt64Nanoseconds(options_.file_cache_revalidate), 0);
    if (limits_.max_entries > 0) cache_id_ = http_internal::NewFileCacheId();
    char* real = ::realpath(root.c_str(), nullptr);
    if (real == nullptr) {
      PETREL_LOG(kWarning, "static files: cannot resolve root %s: %s; every request gets 404", root,
                 std::strerror(errno));
      return;
    }
    root_ = real;
    ::free(real);
    root_prefix_ = root_ == "/" ? root_ : root_ + "/";
    root_fd_ = ScopedFd(::open(root_.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  }

  // The id of this handler's per-thread caches; 0 without a cache.
  uint64_t cache_id() const { return cache_id_; }

  void Handle(Request& req, Response& res) const {
    const MethodKind method = req.method().kind();
    if (method != MethodKind::kGet && method != MethodKind::kHead) {
      res.SetHeader("allow", "GET, HEAD");
      SendError(res, HttpStatus::kMethodNotAllowed);
      return;
    }
    if (root_.empty()) return SendError(res, HttpStatus::kNotFound);

    // Under a wildcard route the file is what "*" matched (the router puts it last); under any
    // other route, the whole path.
    absl::string_view raw;
    const RouteParams& params = req.params();
    if (!params.empty() && params.back().name == "*") {
      raw = params.back().value;
    } else if (params.Contains("*")) {
      raw = params.Get("*");
    } else {
      raw = req.path();
      if (raw.empty() || raw.front() != '/') return SendError(res, HttpStatus::kNotFound);
      raw.remove_prefix(1);
    }
    std::string decoded;  // used only by a path with escapes
    absl::StatusOr<http_internal::StaticPath> path = http_internal::DecodeStaticPath(raw, &decoded);
    if (!path.ok()) {
      return SendError(res, absl::IsInvalidArgument(path.status()) ? HttpStatus::kBadRequest
                                                                   : HttpStatus::kNotFound);
    }

    // The coding the client prefers; if that file's sibling is missing, the next it accepts.
    uint8_t offered = options_.precompressed ? http_internal::kOfferAll : 0;
    ContentCoding coding = offered != 0 ? http_internal::ChooseContentCoding(req.headers(), offered)
                                        : ContentCoding::kIdentity;
    http_internal::FileCache* cache =
        cache_id_ != 0 ? http_internal::ThreadFileCache(cache_id_, limits_) : nullptr;
    if (cache == nullptr) {
      Lookup found = Resolve(*path, nullptr);
      while (coding != ContentCoding::kIdentity && found.kind == Lookup::Kind::kFile) {
        Lookup encoded = Resolve(SiblingOf(*path, coding), nullptr);
        if (encoded.kind == Lookup::Kind::kFile) {
          encoded.name = found.name;  // the original's Content-Type
          return Respond(req, res, std::move(encoded), coding);
        }
        offered &= ~http_internal::OfferBit(coding);
        coding = http_internal::ChooseContentCoding(req.headers(), offered);
      }
      return Respond(req, res, std::move(found));
    }

    const absl::string_view key = path->cache_key();
    const int64_t now = limits_.revalidate_nanos > 0 ? http_internal::CoarseMonotonicNanos() : 0;
    const http_internal::CachedFile* entry = FindFile(req, res, *path, key, cache, now);
    if (entry == nullptr) return;  // answered: not a regular file
    if (coding != ContentCoding::kIdentity) {
      const absl::string_view mime_type = entry->mime_type;
      do {
        const http_internal::CachedFile* encoded =
            FindSibling(*path, key, coding, mime_type, cache, now);
        if (encoded != nullptr) return ServeCached(req, res, *encoded);
        offered &= ~http_internal::OfferBit(coding);
        coding = http_internal::ChooseContentCoding(req.headers(), offered);
      } while (coding != ContentCoding::kIdentity);
      // Making the siblings' entries may have evicted the original's.
      entry = cache->Find(key);
      if (entry == nullptr) return Respond(req, res, Resolve(*path, cache));
    }
    ServeCached(req, res, *entry);
  }

 private:
  bool Fresh(const http_internal::CachedFile& entry, int64_t now) const {
    return limits_.revalidate_nanos > 0 && !entry.fd.suspect() &&
           now - entry.checked_at < limits_.revalidate_nanos;
  }

  // The cache entry of the regular file `path` names, validated; null when it names no regular
  // file, which is then answered (404, a redirect, a listing, ...).
  const http_internal::CachedFile* FindFile(Request& req, Response& res,
                                            const http_internal::StaticPath& path,
                                            absl::string_view key, http_internal::FileCache* cache,
                                            int64_t now) const {
    if (http_internal::CachedFile* entry = cache->Find(key);
        entry != nullptr && Fresh(*entry, now)) {
      return entry;
    }
    // Missing, stale or suspect: look the name up again, with every check.
    Lookup found = Resolve(path, cache);
    if (found.kind != Lookup::Kind::kFile) {
      cache->Erase(key);
      Respond(req, res, std::move(found));
      return nullptr;
    }
    // Found again (Resolve may have evicted entries to free descriptors).
    http_internal::CachedFile* entry = cache->Find(key);
    if (entry != nullptr && entry->identity == http_internal::FileIdentity::Of(found.st) &&
        !entry->fd.suspect()) {
      entry->checked_at = now;
      return entry;  // The fresh descriptor closes.
    }
    return cache->Insert(key, MakeEntry(std::move(found), now));
  }

  // The name of the precompressed sibling of the file `path` names (which was found to be a
  // regular file: for the directory form, the index file).
  http_internal::StaticPath SiblingOf(const http_internal::StaticPath& path,
                                      ContentCoding coding) const {
    thread_local std::string name;
    const absl::string_view suffix = http_internal::ContentCodingSuffix(coding);
    if (!path.directory_form) {
      name = absl::StrCat(path.relative, suffix);
    } else if (path.relative.empty()) {
      name = absl::StrCat(options_.index_file, suffix);
    } else {
      name = absl::StrCat(path.relative, "/", options_.index_file, suffix);
    }
    return http_internal::StaticPath{name, false};
  }

  // The cache entry of the precompressed sibling of the file `path` names, validated and served
  // as `mime_type`; null if there is none (remembered as missing, so that is cached too).
  const http_internal::CachedFile* FindSibling(const http_internal::StaticPath& path,
                                               absl::string_view key, ContentCoding coding,
                                               absl::string_view mime_type,
                                               http_internal::FileCache* cache, int64_t now) const {
    // NUL cannot occur in a decoded name, so no request can name this key.
    thread_local std::string sibling_key;
    sibling_key.assign(key.data(), key.size());
    sibling_key.push_back('\0');
    const absl::string_view name = http_internal::ContentCodingName(coding);
    sibling_key.append(name.data(), name.size());
    if (http_internal::CachedFile* entry = cache->Find(sibling_key);
        entry != nullptr && Fresh(*entry, now)) {
      return entry->missing ? nullptr : entry;
    }
    Lookup found = Resolve(SiblingOf(path, coding), cache);
    if (found.kind != Lookup::Kind::kFile) {
      http_internal::CachedFile missing;
      missing.missing = true;
      missing.checked_at = now;
      cache->Insert(sibling_key, std::move(missing));
      return nullptr;
    }
    http_internal::CachedFile* entry = cache->Find(sibling_key);
    if (entry != nullptr && !entry->missing &&
        entry->identity == http_internal::FileIdentity::Of(found.st) && !entry->fd.suspect()) {
      entry->checked_at = now;
      return entry;
    }
    return cache->Insert(sibling_key, MakeEntry(std::move(found), now, mime_type, coding));
  }

  bool InsideRoot(absl::string_view real) const {
    return real == root_ || absl::string_view(real).substr(0, root_prefix_.size()) == root_prefix_;
  }

  static constexpr int kUseResolvedPath = -1;

  // Applies the traversal and symlink rules to `path` (see StaticFiles). `cache`, if any, gives up
  // descriptors when the process runs out.
  Lookup Resolve(const http_internal::StaticPath& path, http_internal::FileCache* cache) const {
    Lookup r;
    int fd = -1;
    // Regular files, the common case, take one openat2 + fstat; directories (and kernels
    // without openat2) go the long way, which also yields the resolved path they need.
    if (int status = OpenBeneathRoot(path.relative, &fd, &r.st, cache); status == 0) {
      ScopedFd owned(fd);
      if (!S_ISDIR(r.st.st_mode)) {
        if (!S_ISREG(r.st.st_mode) || path.directory_form) return r;  // 404
        return File(std::move(owned), r.st, path.relative);
      }
    } else if (status != kUseResolvedPath) {
      return Lookup::Status(status);
    }
    const std::string candidate =
        path.relative.empty() ? root_ : absl::StrCat(root_, "/", path.relative);
    if (int status = OpenInsideRoot(candidate, &r.real, &fd, &r.st, cache); status != 0) {
      return Lookup::Status(status);
    }
    ScopedFd owned(fd);
    if (S_ISDIR(r.st.st_mode)) {
      if (!path.directory_form) {
        r.kind = Lookup::Kind::kRedirect;
        return r;
      }
      if (!options_.index_file.empty()) {
        std::string index_real;
        struct stat st;
        const int status = OpenInsideRoot(absl::StrCat(r.real, "/", options_.index_file),
                                          &index_real, &fd, &st, cache);
        if (status == 0) {
          ScopedFd index(fd);
          if (S_ISREG(st.st_mode)) return File(std::move(index), st, options_.index_file);
        } else if (status == HttpStatus::kForbidden) {
          return Lookup::Status(status);
        }
      }
      if (!options_.list_directories) return Lookup::Status(HttpStatus::kNotFound);
      r.kind = Lookup::Kind::kListing;
      r.fd = std::move(owned);
      return r;
    }
    if (!S_ISREG(r.st.st_mode) || path.directory_form) return Lookup::Status(HttpStatus::kNotFound);
    return File(std::move(owned), r.st, path.relative);
  }

  static Lookup File(ScopedFd fd, const struct stat& st, absl::string_view name) {
    Lookup r;
    r.kind = Lookup::Kind::kFile;
    r.fd = std::move(fd);
    r.st = st;
    r.name = name;
    return r;
  }

  // Opens `relative` below the root's descriptor in one openat2: symlinks are followed only
  // while they stay beneath the root (RESOLVE_BENEATH refuses the rest with EXDEV), so no path
  // resolution of our own is needed. Returns 0 with `*fd` and `*st` set, the status to answer,
  // or kUseResolvedPath when openat2 is unavailable.
  int OpenBeneathRoot(absl::string_view relative, int* fd, struct stat* st,
                      http_internal::FileCache* cache) const {
    if (root_fd_.get() < 0) return kUseResolvedPath;
    constexpr int kFlags = O_RDONLY | O_CLOEXEC | O_NONBLOCK;
    const std::string name = relative.empty() ? std::string(".") : std::string(relative);
    const int opened = OpenRetrying(cache, [&] {
      return OpenAt2(root_fd_.get(), name.c_str(), kFlags, RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS);
    });
    if (opened < 0) {
      if (errno == ENOSYS || errno == EPERM) return kUseResolvedPath;
      if (errno == EXDEV || errno == ELOOP) return HttpStatus::kNotFound;  // leaves the root
      return StatusForErrno(errno);
    }
    if (::fstat(opened, st) != 0) {
      const int error = errno;
      ::close(opened);
      return StatusForErrno(error);
    }
    *fd = opened;
    return 0;
  }

  // Resolves `candidate` (symlinks included), checks that it lies inside the root and opens it.
  // Returns 0 with `*real`, `*fd` and `*st` set, or the status to answer.
  int OpenInsideRoot(const std::string& candidate, std::string* real, int* fd, struct stat* st,
                     http_internal::FileCache* cache) const {
    char* resolved = ::realpath(candidate.c_str(), nullptr);
    if (resolved == nullptr) return StatusForErrno(errno);
    *real = resolved;
    ::free(resolved);
    if (!InsideRoot(*real)) return HttpStatus::kNotFound;
    // O_NONBLOCK: opening a FIFO must not block the loop (it is then rejected as non-regular).
    constexpr int kFlags = O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW;
    // The resolved path has no symlinks. Someone who can write inside the root could still swap
    // a directory on it for a symlink before the open: openat2 below the root's fd with no
    // symlinks allowed closes that race; without openat2, O_NOFOLLOW covers the last component.
    int opened = -1;
    if (root_fd_.get() >= 0) {
      const std::string relative =
          *real == root_ ? std::string(".") : real->substr(root_prefix_.size());
      opened = OpenRetrying(cache, [&] {
        return OpenAt2(root_fd_.get(), relative.c_str(), kFlags,
                       RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS);
      });
    }
    if (opened < 0 && (root_fd_.get() < 0 || errno == ENOSYS || errno == EPERM)) {
      opened = OpenRetrying(cache, [&] { return ::open(real->c_str(), kFlags); });
    }
    if (opened < 0) return StatusForErrno(errno);
    if (::fstat(opened, st) != 0) {
      const int error = errno;
      ::close(opened);
      return StatusForErrno(error);
    }
    *fd = opened;
    return 0;
  }

  // Answers from a lookup, without the cache.
  void Respond(Request& req, Response& res, Lookup found,
               ContentCoding coding = ContentCoding::kIdentity) const {
    switch (found.kind) {
      case Lookup::Kind::kStatus:
        return SendError(res, found.status);
      case Lookup::Kind::kRedirect:
        return RedirectToDirectory(req, res);
      case Lookup::Kind::kListing:
        return ListDirectory(req, res, found.real, std::move(found.fd));
      case Lookup::Kind::kFile:
        break;
    }
    const std::string etag = FormatEtag(found.st);
    const FileFacts facts{static_cast<uint64_t>(found.st.st_size),
                          static_cast<int64_t>(found.st.st_mtim.tv_sec),
                          etag,
                          {},
                          MimeTypeFor(found.name),
                          http_internal::ContentCodingName(coding)};
    ServeFile(req, res, facts, [&](uint64_t first, uint64_t length) {
      return ResponseBody(FileBody(found.fd.release(), first, length));
    });
  }

  // A cache entry for the file `found` names, validated at `now`. Small files are read into
  // memory (and their descriptor closed); others keep the descriptor. A precompressed sibling
  // has its `coding` and the original's `mime_type`.
  http_internal::CachedFile MakeEntry(Lookup found, int64_t now, absl::string_view mime_type = {},
                                      ContentCoding coding = ContentCoding::kIdentity) const {
    http_internal::CachedFile file;
    file.identity = http_internal::FileIdentity::Of(found.st);
    file.etag = FormatEtag(found.st);
    // A future mtime is sent as the time of each response: nothing to prepare then.
    if (found.st.st_mtim.tv_sec <= NowSeconds()) {
      file.last_modified = http_internal::FormatHttpDate(found.st.st_mtim.tv_sec);
    }
    file.mime_type = coding == ContentCoding::kIdentity ? MimeTypeFor(found.name) : mime_type;
    file.content_encoding = http_internal::ContentCodingName(coding);
    file.checked_at = now;
    if (!file.last_modified.empty()) file.fields = FullResponseFields(FactsOf(file));
    const uint64_t size = file.identity.size;
    std::string content;
    if (limits_.max_memory_file > 0 && size <= limits_.max_memory_file &&
        size <= limits_.max_memory_bytes && ReadWhole(found.fd.get(), size, &content)) {
      file.in_memory = true;
      file.content = SharedBytes::Adopt(std::move(content));
    } else {
      file.fd = SharedFd::Adopt(found.fd.release());
    }
    return file;
  }

  static FileFacts FactsOf(const http_internal::CachedFile& file) {
    return FileFacts{file.identity.size,
                     file.identity.mtime_sec,
                     file.etag,
                     file.last_modified,
                     file.mime_type,
                     file.content_encoding,
                     file.fields.empty() ? nullptr : &file.fields};
  }

  void ServeCached(Request& req, Response& res, const http_internal::CachedFile& file) const {
    ServeFile(req, res, FactsOf(file), [&](uint64_t first, uint64_t length) {
      if (!file.in_memory) return ResponseBody(FileBody(file.fd, first, length));
      if (first == 0 && length == file.content.size()) return ResponseBody(file.content);
      return ResponseBody(file.content.bytes().substr(first, length));
    });
  }

  // RFC 9110 §15.4.2: 301 to the same path with a trailing '/', keeping the query.
  void RedirectToDirectory(const Request& req, Response& res) const {
    std::string location = absl::StrCat(req.path(), "/");
    // "//host" or "/\host" would read as another origin to browsers; the decoder rejects empty
    // segments so this only matters for a route without a wildcard, but stay safe.
    if (location.size() >= 2 && location[0] == '/' && (location[1] == '/' || location[1] == '\\')) {
      return SendError(res, HttpStatus::kNotFound);
    }
    if (!req.query().empty()) absl::StrAppend(&location, "?", req.query());
    if (!res.SetHeader("location", location)) return SendError(res, HttpStatus::kNotFound);
    res.Send(HttpStatus::kMovedPermanently, "301 Moved Permanently\n", kTextPlain);
  }

  void ListDirectory(const Request& req, Response& res, const std::string& real,
                     ScopedFd dir) const {
    DIR* d = ::fdopendir(dir.get());
    if (d == nullptr) return SendError(res, StatusForErrno(errno));
    dir.release();  // closedir closes it now.
    std::vector<http_internal::ListingEntry> entries;
    while (struct dirent* e = ::readdir(d)) {
      const absl::string_view name = e->d_name;
      if (name == "." || name == "..") continue;
      if (entries.size() == kMaxListingEntries) break;
      std::string entry_real;
      int fd = -1;
      struct stat st;
      // Entries that resolve outside the root (or cannot be opened) stay unlisted.
      if (OpenInsideRoot(absl::StrCat(real, "/", name), &entry_real, &fd, &st, nullptr) != 0) {
        continue;
      }
      ::close(fd);
      if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode)) continue;
      entries.push_back(
          {std::string(name), S_ISDIR(st.st_mode), static_cast<uint64_t>(st.st_size)});
    }
    ::closedir(d);
    res.Send(HttpStatus::kOk,
             http_internal::RenderDirectoryListing(req.path(), std::move(entries), real == root_),
             "text/html; charset=utf-8");
  }

  absl::string_view MimeTypeFor(absl::string_view name) const {
    const absl::string_view ext = http_internal::FileExtension(name);
    if (!ext.empty()) {
      if (!options_.mime_types.empty()) {
        auto it = options_.mime_types.find(absl::AsciiStrToLower(ext));
        if (it != options_.mime_types.end()) return it->second;
      }
      const absl::string_view builtin = http_internal::BuiltinMimeType(ext);
      if (!builtin.empty()) return builtin;
    }
    return options_.default_mime_type;
  }

  // Validators, conditionals and ranges for a regular file; `make_body(first, length)` gives the
  // body for that byte range of it.
  template <typename MakeBody>
  void ServeFile(Request& req, Response& res, const FileFacts& file, MakeBody make_body) const {
    // The fields below go into the map directly: never into a response already on its way.
    if (res.committed() || res.cancelled()) return;
    const FileRequestFields asks = FileRequestFields::Of(req.headers());
    HeaderMap& fields = res.headers();
    // The usual request (no precondition, no range, no field set before): the prepared fields
    // in one piece.
    if (file.fields != nullptr && !asks.precondition && !asks.range && fields.empty()) {
      fields.AddAll(*file.fields);
      return res.SendBody(HttpStatus::kOk, make_body(0, file.size));
    }

    const uint64_t size = file.size;
    const int64_t now = NowSeconds();
    // RFC 9110 §8.8.2.1: a modification time in the future is sent (and compared) as now.
    const http_internal::Validators validators{{false, file.etag}, std::min(file.mtime, now)};

    // Every value here was checked once (the constructor) or is Petrel's own (ETag, dates):
    // straight into the map, without Response::SetHeader's per-call validation.
    // On a map the handler chain left empty (the usual case) the fields are appended: Set would
    // search the map for each name first.
    const bool fresh = fields.empty();
    const auto put = [&fields, fresh](absl::string_view name, absl::string_view value) {
      if (fresh) {
        fields.Add(name, value);
      } else {
        fields.Set(name, value);
      }
    };
    std::string last_modified;
    if (file.last_modified.empty()) {
      last_modified = http_internal::FormatHttpDate(validators.last_modified);
    }
    PutValidatorFields(file, file.last_modified.empty() ? last_modified : file.last_modified, put);

    if (asks.precondition) {
      switch (http_internal::EvaluatePreconditions(req.headers(), validators, now)) {
        case Precondition::kPreconditionFailed:
          res.headers().Remove("Cache-Control");
          return SendError(res, HttpStatus::kPreconditionFailed);
        case Precondition::kNotModified:
          return res.Send(HttpStatus::kNotModified, std::string());
        case Precondition::kProceed:
          break;
      }
    }

    put("accept-ranges", "bytes");
    RangeDecision range;
    // Range applies to GET only (RFC 9110 §14.2); a repeated Range field is ignored.
    if (asks.range && req.method().kind() == MethodKind::kGet) {
      auto values = req.headers().GetAll("Range");
      if (values.size() == 1) {
        auto if_range = req.headers().GetAll("If-Range");
        const bool apply =
            if_range.empty() ||
            (if_range.size() == 1 && http_internal::IfRangeMatches(if_range[0], validators, now));
        if (apply) range = http_internal::EvaluateRange(values[0], size);
      }
    }

    int status = HttpStatus::kOk;
    uint64_t first = 0;
    uint64_t length = size;
    switch (range.kind) {
      case RangeDecision::Kind::kUnsatisfiable:
        res.headers().Remove("Cache-Control");
        res.SetHeader("content-range", absl::StrCat("bytes */", size));
        return SendError(res, HttpStatus::kRangeNotSatisfiable);
      case RangeDecision::Kind::kPartial:
        res.SetHeader("content-range", absl::StrCat("bytes ", range.first, "-",
                                                    range.first + range.length - 1, "/", size));
        status = HttpStatus::kPartialContent;
        first = range.first;
        length = range.length;
        break;
      case RangeDecision::Kind::kFull:
        break;
    }
    // As Response::SendFile does: Content-Type last, then the body.
    if (!file.content_encoding.empty()) put("content-encoding", file.content_encoding);
    if (!file.mime_type.empty()) put("content-type", file.mime_type);
    res.SendBody(status, make_body(first, length));
  }

  // The fields every answer about the file carries, 304 included (RFC 9110 §15.4.5).
  template <typename Put>
  void PutValidatorFields(const FileFacts& file, absl::string_view last_modified, Put put) const {
    put("etag", file.etag);
    put("last-modified", last_modified);
    if (!options_.cache_control.empty()) put("cache-control", options_.cache_control);
    // The representation depends on Accept-Encoding; a 304 says so too (RFC 9110 §15.4.5).
    if (options_.precompressed) put("vary", "Accept-Encoding");
  }

  // What ServeFile sends with a full 200 for a request without precondition or range, in the
  // same order: the validators, Accept-Ranges, Content-Type.
  HeaderMap FullResponseFields(const FileFacts& file) const {
    HeaderMap fields;
    const auto add = [&fields](absl::string_view name, absl::string_view value) {
      fields.Add(name, value);
    };
    PutValidatorFields(file, file.last_modified, add);
    add("accept-ranges", "bytes");
    if (!file.content_encoding.empty()) add("content-encoding", file.content_encoding);
    if (!file.mime_type.empty()) add("content-type", file.mime_type);
    return fields;
  }

  std::string root_;         // realpath of the root; empty if it could not be resolved.
  std::string root_prefix_;  // root_ with a trailing '/': what every path inside starts with.
  ScopedFd root_fd_{-1};     // O_PATH descriptor of the root, for openat2; -1 if unavailable.
  StaticFilesOptions options_;
  http_internal::FileCacheLimits limits_;
  uint64_t cache_id_ = 0;  // Names this handler's per-thread caches; 0: no cache.
};

// The Handler itself: moved into the router, run concurrently (const) on loop threads. It owns
// the state and, when destroyed, retires the state's per-thread caches.
class StaticFilesHandle {
 public:
  explicit StaticFilesHandle(std::unique_ptr<const StaticFileHandler> handler)
      : handler_(std::move(handler)) {}
  StaticFilesHandle(StaticFilesHandle&&) noexcept = default;
  StaticFilesHandle& operator=(StaticFilesHandle&&) = delete;
  ~StaticFilesHandle() {
    if (handler_ != nullptr && handler_->cache_id() != 0) {
      http_internal::RetireFileCaches(handler_->cache_id());
    }
  }

  void operator()(Request& req, Response& res) const { handler_->Handle(req, res); }

 private:
  std::unique_ptr<const StaticFileHandler> handler_;
};

}  // namespace

Handler StaticFiles(std::string root, StaticFilesOptions options) {
  return StaticFilesHandle(
      std::make_unique<const StaticFileHandler>(std::move(root), std::move(options)));
}

}  // namespace petrel
