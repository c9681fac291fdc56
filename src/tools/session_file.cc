#include "tools/session_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace petrel::tools {
namespace {

constexpr absl::string_view kMagic = "petrel-session 1\n";
// Far above any real ticket or transport parameters; bounds what a corrupt file can make us
// allocate.
constexpr size_t kMaxBlob = 64 * 1024;

absl::Status NotASessionFile(absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("not a session file: ", why));
}

// Reads "<label> <len>\n<len bytes>\n" from the front of `*in`.
absl::Status ReadBlob(absl::string_view label, absl::string_view* in, std::string* out) {
  const size_t eol = in->find('\n');
  if (eol == absl::string_view::npos) return NotASessionFile("truncated");
  const absl::string_view line = in->substr(0, eol);
  if (line.size() <= label.size() + 1 || line.substr(0, label.size()) != label ||
      line[label.size()] != ' ') {
    return NotASessionFile(absl::StrCat("expected '", label, " <length>'"));
  }
  size_t len = 0;
  if (!absl::SimpleAtoi(line.substr(label.size() + 1), &len) || len == 0 || len > kMaxBlob) {
    return NotASessionFile(absl::StrCat("bad ", label, " length"));
  }
  in->remove_prefix(eol + 1);
  if (in->size() < len + 1 || (*in)[len] != '\n') return NotASessionFile("truncated");
  out->assign(in->data(), len);
  in->remove_prefix(len + 1);
  return absl::OkStatus();
}

absl::Status ErrnoStatus(absl::string_view what, const std::string& path) {
  const int e = errno;
  return absl::InternalError(absl::StrCat(what, " ", path, ": ", std::strerror(e)));
}

bool WriteAll(int fd, absl::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

}  // namespace

std::string EncodeSession(const SavedSession& saved) {
  return absl::StrCat(kMagic, "session ", saved.session.size(), "\n", saved.session, "\n",
                      "transport-params ", saved.transport_params.size(), "\n",
                      saved.transport_params, "\n");
}

absl::StatusOr<SavedSession> DecodeSession(absl::string_view bytes) {
  if (bytes.substr(0, kMagic.size()) != kMagic) return NotASessionFile("no 'petrel-session 1'");
  bytes.remove_prefix(kMagic.size());
  SavedSession saved;
  if (absl::Status s = ReadBlob("session", &bytes, &saved.session); !s.ok()) return s;
  if (absl::Status s = ReadBlob("transport-params", &bytes, &saved.transport_params); !s.ok()) {
    return s;
  }
  if (!bytes.empty()) return NotASessionFile("trailing bytes");
  return saved;
}

absl::StatusOr<SavedSession> LoadSessionFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return absl::NotFoundError(absl::StrCat(path, " does not exist"));
    return ErrnoStatus("cannot open", path);
  }
  std::string bytes;
  char buf[16 * 1024];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      absl::Status s = ErrnoStatus("cannot read", path);
      ::close(fd);
      return s;
    }
    if (n == 0) break;
    bytes.append(buf, static_cast<size_t>(n));
    if (bytes.size() > 4 * kMaxBlob) {
      ::close(fd);
      return NotASessionFile("too large");
    }
  }
  ::close(fd);
  return DecodeSession(bytes);
}

absl::Status SaveSessionFile(const std::string& path, const SavedSession& saved) {
  // The pid keeps two runs sharing a session file from writing the same temporary file.
  const std::string tmp = absl::StrCat(path, ".tmp.", ::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return ErrnoStatus("cannot create", tmp);
  const bool written = WriteAll(fd, EncodeSession(saved));
  const int close_result = ::close(fd);
  if (!written || close_result != 0) {
    absl::Status s = ErrnoStatus("cannot write", tmp);
    ::unlink(tmp.c_str());
    return s;
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    absl::Status s = ErrnoStatus("cannot rename to", path);
    ::unlink(tmp.c_str());
    return s;
  }
  return absl::OkStatus();
}

}  // namespace petrel::tools
