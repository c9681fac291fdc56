#include "petrel/common/log.h"

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "petrel/common/clock.h"

namespace petrel {
namespace {

class CapturingSink : public LogSink {
 public:
  void Write(LogLevel level, absl::string_view line) override {
    std::lock_guard<std::mutex> lock(mu_);
    levels_.push_back(level);
    lines_.emplace_back(line);
  }
  std::vector<std::string> lines() {
    std::lock_guard<std::mutex> lock(mu_);
    return lines_;
  }
  std::vector<LogLevel> levels() {
    std::lock_guard<std::mutex> lock(mu_);
    return levels_;
  }

 private:
  std::mutex mu_;
  std::vector<std::string> lines_;
  std::vector<LogLevel> levels_;
};

// Installs a capturing sink at kTrace and restores the global state afterwards.
class LogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    saved_level_ = GetLogLevel();
    SetLogLevel(LogLevel::kTrace);
    saved_sink_ = SetLogSink(&sink_);
  }
  void TearDown() override {
    SetLogSink(saved_sink_);
    SetLogLevel(saved_level_);
  }

  CapturingSink sink_;
  LogLevel saved_level_ = LogLevel::kInfo;
  LogSink* saved_sink_ = nullptr;
};

// One parsed "L seconds.micros tid file:line] message\n" line.
struct ParsedLine {
  char level = 0;
  uint64_t micros = 0;  // the timestamp, in microseconds
  int tid = 0;
  std::string file;
  int line = 0;
  std::string message;
};

// Strict: returns false unless `text` has exactly the documented layout.
bool ParseLine(absl::string_view text, ParsedLine* out) {
  if (text.size() < 2 || text.back() != '\n') return false;
  text.remove_suffix(1);
  if (text.find('\n') != absl::string_view::npos) return false;
  if (absl::string_view("TDIWEF").find(text[0]) == absl::string_view::npos || text[1] != ' ') {
    return false;
  }
  out->level = text[0];
  text.remove_prefix(2);
  const size_t dot = text.find('.');
  const size_t space1 = text.find(' ');
  if (dot == absl::string_view::npos || space1 == absl::string_view::npos || space1 != dot + 7) {
    return false;  // exactly six digits of microseconds
  }
  uint64_t secs = 0, micros = 0;
  if (!absl::SimpleAtoi(text.substr(0, dot), &secs) ||
      !absl::SimpleAtoi(text.substr(dot + 1, 6), &micros)) {
    return false;
  }
  out->micros = secs * 1'000'000 + micros;
  text.remove_prefix(space1 + 1);
  const size_t space2 = text.find(' ');
  if (space2 == absl::string_view::npos || !absl::SimpleAtoi(text.substr(0, space2), &out->tid)) {
    return false;
  }
  text.remove_prefix(space2 + 1);
  const size_t colon = text.find(':');
  const size_t bracket = text.find("] ");
  if (colon == absl::string_view::npos || bracket == absl::string_view::npos || colon > bracket ||
      !absl::SimpleAtoi(text.substr(colon + 1, bracket - colon - 1), &out->line)) {
    return false;
  }
  out->file = std::string(text.substr(0, colon));
  out->message = std::string(text.substr(bracket + 2));
  return true;
}

// The checker used below must be able to fail.
TEST(LogLineParserTest, RejectsMalformedAndTornLines) {
  ParsedLine p;
  EXPECT_TRUE(ParseLine("I 12.000345 77 a.cc:9] hi\n", &p));
  EXPECT_EQ(p.micros, 12'000'345u);
  EXPECT_FALSE(ParseLine("I 12.000345 77 a.cc:9] hi", &p));  // no newline
  EXPECT_FALSE(ParseLine("I 12.000345 77 a.cc:9] hiI 13.000001 78 b.cc:1] x\n\n", &p));
  EXPECT_FALSE(ParseLine("I 12.000345 77 a.cc:9] h\nI 13.000001 78 b.cc:1] x\n", &p));
  EXPECT_FALSE(ParseLine("I 12.0345 77 a.cc:9] hi\n", &p));  // micros not 6 digits
  EXPECT_FALSE(ParseLine("X 12.000345 77 a.cc:9] hi\n", &p));
}

TEST_F(LogTest, DisabledLevelEvaluatesNothing) {
  SetLogLevel(LogLevel::kWarning);
  int evaluated = 0;
  auto side_effect = [&evaluated] {
    ++evaluated;
    return 42;
  };
  PETREL_LOG(kDebug, "value %d", side_effect());
  PETREL_LOG(kInfo, "value %d", side_effect());
  PETREL_LOG(kTrace, "value %d", side_effect());
  EXPECT_EQ(evaluated, 0);
  EXPECT_TRUE(sink_.lines().empty());

  PETREL_LOG(kWarning, "value %d", side_effect());
  EXPECT_EQ(evaluated, 1);
  ASSERT_EQ(sink_.lines().size(), 1u);

  SetLogLevel(LogLevel::kOff);
  PETREL_LOG(kError, "value %d", side_effect());
  EXPECT_EQ(evaluated, 1);
}

TEST_F(LogTest, LineLayout) {
  const uint64_t before_us = ToNanos(MonotonicNow()) / 1000;
  const int line = __LINE__ + 1;
  PETREL_LOG(kInfo, "x=%d name=%s pi=%.2f", 5, "abc", 3.14159);
  const uint64_t after_us = ToNanos(MonotonicNow()) / 1000;

  const std::vector<std::string> lines = sink_.lines();
  ASSERT_EQ(lines.size(), 1u);
  ParsedLine parsed;
  ASSERT_TRUE(ParseLine(lines[0], &parsed)) << lines[0];
  EXPECT_EQ(parsed.level, 'I');
  const uint64_t stamp_us = parsed.micros;
  EXPECT_GE(stamp_us, before_us);
  EXPECT_LE(stamp_us, after_us);
  EXPECT_EQ(parsed.tid, static_cast<int>(::gettid()));
  EXPECT_EQ(parsed.file, "log_test.cc");  // basename only
  EXPECT_EQ(parsed.line, line);
  EXPECT_EQ(parsed.message, "x=5 name=abc pi=3.14");
  EXPECT_EQ(sink_.levels()[0], LogLevel::kInfo);
}

TEST_F(LogTest, EveryLevelHasItsLetter) {
  PETREL_LOG(kTrace, "t");
  PETREL_LOG(kDebug, "d");
  PETREL_LOG(kInfo, "i");
  PETREL_LOG(kWarning, "w");
  PETREL_LOG(kError, "e");
  const std::vector<std::string> lines = sink_.lines();
  ASSERT_EQ(lines.size(), 5u);
  const std::string letters = "TDIWE";
  for (size_t i = 0; i < lines.size(); ++i) {
    EXPECT_EQ(lines[i][0], letters[i]) << lines[i];
    EXPECT_EQ(lines[i].back(), '\n');
  }
}

TEST_F(LogTest, MessageWithoutArguments) {
  PETREL_LOG(kInfo, "plain 100%% text");
  ASSERT_EQ(sink_.lines().size(), 1u);
  EXPECT_NE(sink_.lines()[0].find("] plain 100% text\n"), std::string::npos);
}

TEST(LogLevelTest, Parse) {
  EXPECT_EQ(*ParseLogLevel("trace"), LogLevel::kTrace);
  EXPECT_EQ(*ParseLogLevel("debug"), LogLevel::kDebug);
  EXPECT_EQ(*ParseLogLevel("info"), LogLevel::kInfo);
  EXPECT_EQ(*ParseLogLevel("INFO"), LogLevel::kInfo);
  EXPECT_EQ(*ParseLogLevel("warning"), LogLevel::kWarning);
  EXPECT_EQ(*ParseLogLevel("Warn"), LogLevel::kWarning);
  EXPECT_EQ(*ParseLogLevel("error"), LogLevel::kError);
  EXPECT_EQ(*ParseLogLevel("fatal"), LogLevel::kFatal);
  EXPECT_EQ(*ParseLogLevel("off"), LogLevel::kOff);
  EXPECT_FALSE(ParseLogLevel("").ok());
  EXPECT_FALSE(ParseLogLevel("verbose").ok());
  EXPECT_EQ(ParseLogLevel("loud").status().code(), absl::StatusCode::kInvalidArgument);
  for (LogLevel l : {LogLevel::kTrace, LogLevel::kDebug, LogLevel::kInfo, LogLevel::kWarning,
                     LogLevel::kError, LogLevel::kFatal, LogLevel::kOff}) {
    EXPECT_EQ(*ParseLogLevel(LogLevelName(l)), l);
  }
}

TEST(LogLevelTest, SetAndGet) {
  const LogLevel saved = GetLogLevel();
  SetLogLevel(LogLevel::kError);
  EXPECT_EQ(GetLogLevel(), LogLevel::kError);
  EXPECT_FALSE(LogEnabled(LogLevel::kWarning));
  EXPECT_TRUE(LogEnabled(LogLevel::kError));
  EXPECT_TRUE(LogEnabled(LogLevel::kFatal));
  SetLogLevel(saved);
}

TEST(LogSinkTest, SetLogSinkReturnsThePreviousSink) {
  CapturingSink a, b;
  LogSink* original = SetLogSink(&a);
  EXPECT_EQ(SetLogSink(&b), &a);
  EXPECT_EQ(SetLogSink(original), &b);
}

constexpr int kThreads = 4;
constexpr int kLinesPerThread = 5000;

// Checks that `lines` holds exactly kThreads * kLinesPerThread whole lines, each thread's in order.
void ExpectWholeLines(const std::vector<std::string>& lines) {
  ASSERT_EQ(lines.size(), static_cast<size_t>(kThreads * kLinesPerThread));
  std::vector<int> next(kThreads, 0);
  for (const std::string& line : lines) {
    ParsedLine parsed;
    ASSERT_TRUE(ParseLine(line, &parsed)) << "torn line: " << line;
    int worker = -1;
    ASSERT_TRUE(absl::StartsWith(parsed.message, "worker ")) << parsed.message;
    ASSERT_TRUE(absl::SimpleAtoi(parsed.message.substr(7, 1), &worker)) << parsed.message;
    ASSERT_TRUE(worker >= 0 && worker < kThreads) << parsed.message;
    ASSERT_EQ(parsed.message, absl::StrFormat("worker %d line %d padding=%s", worker,
                                              next[worker]++, std::string(80, 'x')))
        << "lost, reordered or torn line of worker " << worker;
  }
}

void LogFromThreads() {
  std::vector<std::thread> threads;
  const std::string padding(80, 'x');
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([t, &padding] {
      for (int i = 0; i < kLinesPerThread; ++i) {
        PETREL_LOG(kInfo, "worker %d line %d padding=%s", t, i, padding);
      }
    });
  }
  for (std::thread& th : threads) th.join();
}

TEST_F(LogTest, ConcurrentThreadsProduceWholeLines) {
  LogFromThreads();
  ExpectWholeLines(sink_.lines());
}

// The default sink: one write(2) per line, so lines from 4 threads appended to one file never
// interleave.
TEST(LogStderrTest, DefaultSinkWritesWholeLines) {
  char path[] = "/tmp/petrel_log_test_XXXXXX";
  const int file = ::mkstemp(path);
  ASSERT_GE(file, 0);
  ::close(file);
  const int appender = ::open(path, O_WRONLY | O_APPEND | O_CLOEXEC);
  ASSERT_GE(appender, 0);

  const LogLevel saved_level = GetLogLevel();
  SetLogLevel(LogLevel::kInfo);
  std::fflush(stderr);
  const int saved_stderr = ::dup(STDERR_FILENO);
  ASSERT_GE(saved_stderr, 0);
  ASSERT_EQ(::dup2(appender, STDERR_FILENO), STDERR_FILENO);
  LogFromThreads();
  ::dup2(saved_stderr, STDERR_FILENO);
  ::close(saved_stderr);
  ::close(appender);
  SetLogLevel(saved_level);

  std::string contents;
  FILE* f = std::fopen(path, "r");
  ASSERT_NE(f, nullptr);
  char buf[65536];
  size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) contents.append(buf, n);
  std::fclose(f);
  ::unlink(path);

  std::vector<std::string> lines;
  for (absl::string_view piece : absl::StrSplit(contents, absl::ByChar('\n'), absl::SkipEmpty())) {
    lines.push_back(absl::StrCat(piece, "\n"));
  }
  ExpectWholeLines(lines);
}

TEST(LogDeathTest, FatalLogsAndAborts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(PETREL_LOG(kFatal, "boom %d", 7), "boom 7");
}

TEST(LogDeathTest, FatalIgnoresTheThreshold) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        SetLogLevel(LogLevel::kOff);
        PETREL_LOG(kFatal, "still reported");
      },
      "still reported");
}

// Compiles without -Wreturn-type: the compiler knows PETREL_LOG(kFatal, ...) does not return.
int CheckedPositive(int v) {
  if (v > 0) return v;
  PETREL_LOG(kFatal, "not positive: %d", v);
}

TEST(LogDeathTest, FatalDoesNotReturn) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EQ(CheckedPositive(3), 3);
  EXPECT_DEATH(CheckedPositive(-1), "not positive: -1");
}

}  // namespace
}  // namespace petrel
