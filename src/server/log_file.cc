#include "server/log_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

#include "absl/strings/str_cat.h"

namespace petrel::server {

absl::Status OpenLogFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
  if (fd < 0) return absl::ErrnoToStatus(errno, absl::StrCat("log file ", path));
  // dup2 swaps the descriptor atomically: a concurrent write(2) of a log line goes whole to one
  // of the two files. (dup2, not dup3: stderr must survive exec, e.g. of a helper process.)
  const int rc = ::dup2(fd, STDERR_FILENO);
  const int saved = errno;
  ::close(fd);
  if (rc < 0) return absl::ErrnoToStatus(saved, absl::StrCat("log file ", path));
  return absl::OkStatus();
}

}  // namespace petrel::server
