// Internal: AccessLog, one line per finished request (RequestRecord) in Common Log Format
// extended with the protocol and the duration, or as one JSON object per line.
//
//   common: 127.0.0.1 - - [02/Dec/2026:01:50:00 +0000] "GET /a?b HTTP/2" 200 5 0.000123
//   json:   {"time":"2026-12-02T01:50:00.123Z","client":"127.0.0.1","method":"GET",
//            "path":"/a","query":"b","protocol":"HTTP/2","status":200,"bytes":5,
//            "duration":0.000123,"completed":true}
//
// With the request-id middleware (petrel/http/request_id.h) the id follows: at the end of a
// common line, as "request_id" in JSON.
//
// Threads: Write may be called from any thread. Each line is formatted into a buffer owned by
// the calling thread (reused: no allocation once it has grown) and goes out with one write(2)
// under a mutex, so lines never interleave. There is no user-space buffering: a line is in the
// file when Write returns, at the cost of one system call per request; a stalled stdout pipe
// would block the calling loop (log to a file for that reason).
#ifndef PETREL_SERVER_ACCESS_LOG_H_
#define PETREL_SERVER_ACCESS_LOG_H_

#include <chrono>
#include <memory>
#include <mutex>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "petrel/common/clock.h"
#include "petrel/http/http_server.h"
#include "petrel/http/request_observer.h"

namespace petrel::server {

// Appends the line for `record` (ending in '\n') to `out`. `now` is the wall-clock time the
// request finished, `duration` how long it took. kOff appends nothing.
void FormatAccessLogLine(AccessLogFormat format, const RequestRecord& record,
                         std::chrono::system_clock::time_point now, Duration duration,
                         std::string* out);

// Appends `bytes` to `out` as the inside of a JSON string: quote, backslash and control bytes
// escaped, invalid UTF-8 bytes as \u00XX (so the line always parses).
void AppendJsonEscaped(absl::string_view bytes, std::string* out);

class AccessLog {
 public:
  // Appends to `path` (created if missing); empty: standard output.
  static absl::StatusOr<std::unique_ptr<AccessLog>> Open(AccessLogFormat format,
                                                         const std::string& path);
  ~AccessLog();
  AccessLog(const AccessLog&) = delete;
  AccessLog& operator=(const AccessLog&) = delete;

  // Formats and writes one line. Any thread.
  void Write(const RequestRecord& record, Duration duration);

  // Opens the file's path again (after logrotate moved it away): lines from now on go to the
  // new file. No line is lost or split: the new file takes the old descriptor's number in one
  // dup2. Nothing to do for standard output. Any thread.
  absl::Status Reopen();

 private:
  AccessLog(AccessLogFormat format, int fd, bool owns_fd, std::string path)
      : format_(format), fd_(fd), owns_fd_(owns_fd), path_(std::move(path)) {}

  const AccessLogFormat format_;
  const int fd_;
  const bool owns_fd_;
  const std::string path_;
  std::mutex mu_;  // one write(2) at a time: whole lines
};

}  // namespace petrel::server

#endif  // PETREL_SERVER_ACCESS_LOG_H_
