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
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "http/http_date.h"
#include "http/static/conditional.h"
#include "http/static/directory_listing.h"
#include "http/static/mime_types.h"
#include "http/static/range.h"
#include "http/static/request_path.h"
#include "petrel/common/log.h"
#include "petrel/http/status.h"

namespace petrel {
namespace {

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

void SendError(Response& res, int status) {
  res.Send(status, absl::StrCat(status, " ", ReasonPhrase(status), "\n"), kTextPlain);
}

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

class StaticFileHandler {
 public:
  StaticFileHandler(std::string root, StaticFilesOptions options) : options_(std::move(options)) {
    // Extensions compare case-insensitively: store them lowercase.
    absl::flat_hash_map<std::string, std::string> types;
    for (auto& [ext, type] : options_.mime_types) types[absl::AsciiStrToLower(ext)] = type;
    options_.mime_types = std::move(types);
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

  void operator()(Request& req, Response& res) const {
    const MethodKind method = req.method().kind();
    if (method != MethodKind::kGet && method != MethodKind::kHead) {
      res.SetHeader("Allow", "GET, HEAD");
      SendError(res, HttpStatus::kMethodNotAllowed);
      return;
    }
    if (root_.empty()) return SendError(res, HttpStatus::kNotFound);

    absl::string_view raw;
    if (req.params().Contains("*")) {
      raw = req.Param("*");
    } else {
      raw = req.path();
      if (raw.empty() || raw.front() != '/') return SendError(res, HttpStatus::kNotFound);
      raw.remove_prefix(1);
    }
    absl::StatusOr<http_internal::StaticPath> path = http_internal::DecodeStaticPath(raw);
    if (!path.ok()) {
      return SendError(res, absl::IsInvalidArgument(path.status()) ? HttpStatus::kBadRequest
                                                                   : HttpStatus::kNotFound);
    }

    int fd = -1;
    struct stat st;
    // Regular files, the common case, take one openat2 + fstat; directories (and kernels
    // without openat2) go the long way, which also yields the resolved path they need.
    if (int status = OpenBeneathRoot(path->relative, &fd, &st); status == 0) {
      ScopedFd owned(fd);
      if (!S_ISDIR(st.st_mode)) {
        if (!S_ISREG(st.st_mode) || path->directory_form) {
          return SendError(res, HttpStatus::kNotFound);
        }
        return ServeFile(req, res, std::move(owned), st, path->relative);
      }
    } else if (status != kUseResolvedPath) {
      return SendError(res, status);
    }
    const std::string candidate =
        path->relative.empty() ? root_ : absl::StrCat(root_, "/", path->relative);
    std::string real;
    if (int status = OpenInsideRoot(candidate, &real, &fd, &st); status != 0) {
      return SendError(res, status);
    }
    ScopedFd owned(fd);

    if (S_ISDIR(st.st_mode)) {
      if (!path->directory_form) return RedirectToDirectory(req, res);
      return ServeDirectory(req, res, real, std::move(owned));
    }
    if (!S_ISREG(st.st_mode) || path->directory_form) return SendError(res, HttpStatus::kNotFound);
    ServeFile(req, res, std::move(owned), st, path->relative);
  }

 private:
  bool InsideRoot(absl::string_view real) const {
    return real == root_ || absl::string_view(real).substr(0, root_prefix_.size()) == root_prefix_;
  }

  static constexpr int kUseResolvedPath = -1;

  // Opens `relative` below the root's descriptor in one openat2: symlinks are followed only
  // while they stay beneath the root (RESOLVE_BENEATH refuses the rest with EXDEV), so no path
  // resolution of our own is needed. Returns 0 with `*fd` and `*st` set, the status to answer,
  // or kUseResolvedPath when openat2 is unavailable.
  int OpenBeneathRoot(const std::string& relative, int* fd, struct stat* st) const {
    if (root_fd_.get() < 0) return kUseResolvedPath;
    constexpr int kFlags = O_RDONLY | O_CLOEXEC | O_NONBLOCK;
    const int opened = OpenAt2(root_fd_.get(), relative.empty() ? "." : relative.c_str(), kFlags,
                               RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS);
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
  int OpenInsideRoot(const std::string& candidate, std::string* real, int* fd,
                     struct stat* st) const {
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
      opened = OpenAt2(root_fd_.get(), relative.c_str(), kFlags,
                       RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS);
    }
    if (opened < 0 && (root_fd_.get() < 0 || errno == ENOSYS || errno == EPERM)) {
      opened = ::open(real->c_str(), kFlags);
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

  // RFC 9110 §15.4.2: 301 to the same path with a trailing '/', keeping the query.
  void RedirectToDirectory(const Request& req, Response& res) const {
    std::string location = absl::StrCat(req.path(), "/");
    // "//host" or "/\host" would read as another origin to browsers; the decoder rejects empty
    // segments so this only matters for a route without a wildcard, but stay safe.
    if (location.size() >= 2 && location[0] == '/' && (location[1] == '/' || location[1] == '\\')) {
      return SendError(res, HttpStatus::kNotFound);
    }
    if (!req.query().empty()) absl::StrAppend(&location, "?", req.query());
    if (!res.SetHeader("Location", location)) return SendError(res, HttpStatus::kNotFound);
    SendError(res, HttpStatus::kMovedPermanently);
  }

  void ServeDirectory(Request& req, Response& res, const std::string& real, ScopedFd dir) const {
    if (!options_.index_file.empty()) {
      std::string index_real;
      int fd = -1;
      struct stat st;
      const int status =
          OpenInsideRoot(absl::StrCat(real, "/", options_.index_file), &index_real, &fd, &st);
      if (status == 0) {
        ScopedFd index(fd);
        if (S_ISREG(st.st_mode)) {
          return ServeFile(req, res, std::move(index), st, options_.index_file);
        }
      } else if (status == HttpStatus::kForbidden) {
        return SendError(res, status);
      }
    }
    if (!options_.list_directories) return SendError(res, HttpStatus::kNotFound);
    ListDirectory(req, res, real, std::move(dir));
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
      if (OpenInsideRoot(absl::StrCat(real, "/", name), &entry_real, &fd, &st) != 0) continue;
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

  void ServeFile(Request& req, Response& res, ScopedFd fd, const struct stat& st,
                 absl::string_view name) const {
    const auto size = static_cast<uint64_t>(st.st_size);
    // Strong: size, mtime to the nanosecond and inode change whenever the bytes are replaced
    // (barring a same-size rewrite within one timestamp tick).
    const std::string etag = absl::StrFormat(
        "\"%x-%x.%x-%x\"", size, static_cast<uint64_t>(st.st_mtim.tv_sec),
        static_cast<uint64_t>(st.st_mtim.tv_nsec), static_cast<uint64_t>(st.st_ino));
    const int64_t now = NowSeconds();
    // RFC 9110 §8.8.2.1: a modification time in the future is sent (and compared) as now.
    const http_internal::Validators validators{
        {false, etag}, std::min(static_cast<int64_t>(st.st_mtim.tv_sec), now)};

    res.SetHeader("ETag", etag);
    res.SetHeader("Last-Modified", http_internal::FormatHttpDate(validators.last_modified));
    if (!options_.cache_control.empty()) res.SetHeader("Cache-Control", options_.cache_control);

    switch (http_internal::EvaluatePreconditions(req.headers(), validators, now)) {
      case Precondition::kPreconditionFailed:
        res.headers().Remove("Cache-Control");
        return SendError(res, HttpStatus::kPreconditionFailed);
      case Precondition::kNotModified:
        return res.Send(HttpStatus::kNotModified, std::string());
      case Precondition::kProceed:
        break;
    }

    res.SetHeader("Accept-Ranges", "bytes");
    RangeDecision range;
    // Range applies to GET only (RFC 9110 §14.2); a repeated Range field is ignored.
    if (req.method().kind() == MethodKind::kGet) {
      auto values = req.headers().GetAll("Range");
      if (values.size() == 1) {
        auto if_range = req.headers().GetAll("If-Range");
        const bool apply =
            if_range.empty() ||
            (if_range.size() == 1 && http_internal::IfRangeMatches(if_range[0], validators, now));
        if (apply) range = http_internal::EvaluateRange(values[0], size);
      }
    }

    switch (range.kind) {
      case RangeDecision::Kind::kUnsatisfiable:
        res.headers().Remove("Cache-Control");
        res.SetHeader("Content-Range", absl::StrCat("bytes */", size));
        return SendError(res, HttpStatus::kRangeNotSatisfiable);
      case RangeDecision::Kind::kPartial:
        res.SetHeader("Content-Range", absl::StrCat("bytes ", range.first, "-",
                                                    range.first + range.length - 1, "/", size));
        return res.SendFile(HttpStatus::kPartialContent,
                            FileBody(fd.release(), range.first, range.length), MimeTypeFor(name));
      case RangeDecision::Kind::kFull:
        return res.SendFile(HttpStatus::kOk, FileBody(fd.release(), 0, size), MimeTypeFor(name));
    }
  }

  std::string root_;         // realpath of the root; empty if it could not be resolved.
  std::string root_prefix_;  // root_ with a trailing '/': what every path inside starts with.
  ScopedFd root_fd_{-1};     // O_PATH descriptor of the root, for openat2; -1 if unavailable.
  StaticFilesOptions options_;
};

}  // namespace

Handler StaticFiles(std::string root, StaticFilesOptions options) {
  return StaticFileHandler(std::move(root), std::move(options));
}

}  // namespace petrel
