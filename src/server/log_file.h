// Internal (petrel-server): the log file. Petrel's log lines go to stderr (one write per line);
// --log-file points stderr at a file instead, appending, and opening it again moves later lines
// to a new file at the same path (log rotation: logrotate moves the old one away, then SIGUSR1).
#ifndef PETREL_SERVER_LOG_FILE_H_
#define PETREL_SERVER_LOG_FILE_H_

#include <string>

#include "absl/status/status.h"

namespace petrel::server {

// Opens `path` (created 0640 if missing, appended to) and makes it the process's stderr. A line
// being written while this runs lands whole in the old file or the new one. Any thread.
absl::Status OpenLogFile(const std::string& path);

}  // namespace petrel::server

#endif  // PETREL_SERVER_LOG_FILE_H_
