#include "petrel/common/log.h"

#include <errno.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "petrel/common/clock.h"

namespace petrel {
namespace internal {

std::atomic<int> g_min_log_level{static_cast<int>(LogLevel::kInfo)};

}  // namespace internal

namespace {

// The installed sink, nullptr meaning stderr. Loaded with acquire so a sink's construction
// happens before its first Write on any thread.
std::atomic<LogSink*> g_sink{nullptr};

void WriteToStderr(absl::string_view line) {
  // One write(2) per line: lines up to PIPE_BUF bytes reach a pipe atomically, and terminals and
  // files see whole lines in practice. Partial writes (signals, huge lines) are finished off.
  const char* p = line.data();
  size_t left = line.size();
  while (left > 0) {
    const ssize_t n = ::write(STDERR_FILENO, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      return;  // nowhere left to report a failing stderr
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
}

char LevelLetter(LogLevel level) {
  switch (level) {
    case LogLevel::kTrace:
      return 'T';
    case LogLevel::kDebug:
      return 'D';
    case LogLevel::kInfo:
      return 'I';
    case LogLevel::kWarning:
      return 'W';
    case LogLevel::kError:
      return 'E';
    case LogLevel::kFatal:
      return 'F';
    case LogLevel::kOff:
      break;
  }
  return '?';
}

int CurrentThreadId() {
  // gettid() is a system call; a thread's id never changes, so ask once.
  thread_local const int tid = static_cast<int>(::gettid());
  return tid;
}

}  // namespace

void SetLogLevel(LogLevel level) {
  internal::g_min_log_level.store(static_cast<int>(level), std::memory_order_relaxed);
}

LogLevel GetLogLevel() {
  return static_cast<LogLevel>(internal::g_min_log_level.load(std::memory_order_relaxed));
}

absl::StatusOr<LogLevel> ParseLogLevel(absl::string_view name) {
  const std::string lower = absl::AsciiStrToLower(name);
  if (lower == "trace") return LogLevel::kTrace;
  if (lower == "debug") return LogLevel::kDebug;
  if (lower == "info") return LogLevel::kInfo;
  if (lower == "warning" || lower == "warn") return LogLevel::kWarning;
  if (lower == "error") return LogLevel::kError;
  if (lower == "fatal") return LogLevel::kFatal;
  if (lower == "off") return LogLevel::kOff;
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown log level \"", name, "\" (want trace, debug, info, warning, error, fatal or off)"));
}

absl::string_view LogLevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kTrace:
      return "trace";
    case LogLevel::kDebug:
      return "debug";
    case LogLevel::kInfo:
      return "info";
    case LogLevel::kWarning:
      return "warning";
    case LogLevel::kError:
      return "error";
    case LogLevel::kFatal:
      return "fatal";
    case LogLevel::kOff:
      return "off";
  }
  return "unknown";
}

LogSink* SetLogSink(LogSink* sink) { return g_sink.exchange(sink, std::memory_order_acq_rel); }

namespace internal {

void AppendLogPrefix(LogLevel level, const char* file, int line, std::string* out) {
  const uint64_t ns = ToNanos(MonotonicNow());
  const char* slash = std::strrchr(file, '/');
  const char* base = slash != nullptr ? slash + 1 : file;
  absl::StrAppendFormat(out, "%c %d.%06d %d %s:%d] ", LevelLetter(level), ns / 1000000000,
                        ns / 1000 % 1000000, CurrentThreadId(), base, line);
}

void EmitLogLine(LogLevel level, std::string* line) {
  line->push_back('\n');
  LogSink* sink = g_sink.load(std::memory_order_acquire);
  if (sink != nullptr) {
    sink->Write(level, *line);
  } else {
    WriteToStderr(*line);
  }
  if (level == LogLevel::kFatal) LogAbort();
}

void LogAbort() { std::abort(); }

}  // namespace internal
}  // namespace petrel
