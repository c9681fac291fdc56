// Public: leveled logging that costs one relaxed load and a branch when the level is off.
#ifndef PETREL_COMMON_LOG_H_
#define PETREL_COMMON_LOG_H_

#include <atomic>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"

namespace petrel {

enum class LogLevel : int {
  kTrace = 0,
  kDebug = 1,
  kInfo = 2,
  kWarning = 3,
  kError = 4,
  kFatal = 5,  // always logged, whatever the threshold; then aborts the process
  kOff = 6,    // a threshold only: SetLogLevel(kOff) silences every level but kFatal
};

// Receives every emitted line. `line` is complete and ends with '\n'; a sink that forwards it in
// one write keeps concurrent lines whole. Write may be called from any thread at the same time,
// so implementations must be thread-safe.
class LogSink {
 public:
  virtual ~LogSink() = default;
  virtual void Write(LogLevel level, absl::string_view line) = 0;
};

// The global threshold: lines below it are not formatted at all. Default kInfo. Safe to call from
// any thread at any time.
void SetLogLevel(LogLevel level);
LogLevel GetLogLevel();

// "trace", "debug", "info", "warning" (or "warn"), "error", "fatal", "off"; case-insensitive.
absl::StatusOr<LogLevel> ParseLogLevel(absl::string_view name);
absl::string_view LogLevelName(LogLevel level);

// Installs `sink` for all threads; nullptr restores the default sink, which writes each line to
// stderr with one write(2). Not owned: the caller keeps the sink alive until it has been replaced
// and no thread can still be inside a log statement (in practice: install at startup, or in a
// test while no other thread logs). Returns the previous sink (nullptr for the default).
LogSink* SetLogSink(LogSink* sink);

namespace internal {

extern std::atomic<int> g_min_log_level;

// Appends "L seconds.micros tid file:line] " to *out.
void AppendLogPrefix(LogLevel level, const char* file, int line, std::string* out);
// Appends '\n', hands the line to the sink, and aborts for kFatal.
void EmitLogLine(LogLevel level, std::string* line);
// std::abort(), declared [[noreturn]] here so that code after PETREL_LOG(kFatal, ...) is known to
// be unreachable (no "missing return" warnings in the caller).
[[noreturn]] void LogAbort();

template <typename... Args>
void LogFormatted(LogLevel level, const char* file, int line,
                  const absl::FormatSpec<Args...>& format, const Args&... args) {
  std::string out;
  out.reserve(160);
  AppendLogPrefix(level, file, line, &out);
  absl::StrAppendFormat(&out, format, args...);
  EmitLogLine(level, &out);
}

}  // namespace internal

inline bool LogEnabled(LogLevel level) {
  return static_cast<int>(level) >= internal::g_min_log_level.load(std::memory_order_relaxed);
}

}  // namespace petrel

// PETREL_LOG(kInfo, "accepted %d connections from %s", n, peer);
//
// `level` is a LogLevel enumerator name (kTrace ... kFatal). The format string is checked against
// the arguments as by absl::StrFormat (at compile time with Clang). The arguments are inside the
// `if`: when the level is off nothing is evaluated or formatted. kFatal always logs and aborts.
// Line layout: "I 12345.678901 4242 server.cc:87] message" — level letter, CLOCK_MONOTONIC
// seconds.microseconds (petrel::MonotonicNow(), comparable with loop and ngtcp2 timestamps),
// kernel thread id, source basename and line.
#define PETREL_LOG(level, ...)                                                        \
  do {                                                                                \
    if (::petrel::LogLevel::level == ::petrel::LogLevel::kFatal ||                    \
        ::petrel::LogEnabled(::petrel::LogLevel::level)) {                            \
      ::petrel::internal::LogFormatted(::petrel::LogLevel::level, __FILE__, __LINE__, \
                                       __VA_ARGS__);                                  \
      if (::petrel::LogLevel::level == ::petrel::LogLevel::kFatal) {                  \
        ::petrel::internal::LogAbort();                                               \
      }                                                                               \
    }                                                                                 \
  } while (false)

#endif  // PETREL_COMMON_LOG_H_
