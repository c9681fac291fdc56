#include "quic/tls/key_log.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace petrel::quic {

absl::StatusOr<std::unique_ptr<KeyLogFile>> KeyLogFile::Open(const std::string& path) {
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (fd < 0) return absl::ErrnoToStatus(errno, absl::StrCat("key log ", path));
  return std::unique_ptr<KeyLogFile>(new KeyLogFile(fd));
}

std::string KeyLogFile::PathFromEnvironment() {
  const char* path = std::getenv("SSLKEYLOGFILE");
  return path != nullptr ? path : "";
}

KeyLogFile::~KeyLogFile() { close(fd_); }

void KeyLogFile::Write(absl::string_view line) {
  // Key log lines are under 300 bytes; a stack buffer avoids an allocation per handshake secret.
  char buf[512];
  if (line.size() + 1 > sizeof(buf)) return;
  std::memcpy(buf, line.data(), line.size());
  buf[line.size()] = '\n';
  ssize_t n;
  do {
    n = write(fd_, buf, line.size() + 1);
  } while (n < 0 && errno == EINTR);
}

}  // namespace petrel::quic
