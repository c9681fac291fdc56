#include "http/http_date.h"

#include <time.h>

#include <algorithm>
#include <array>
#include <ctime>

namespace petrel::http_internal {
namespace {

constexpr std::array<absl::string_view, 7> kDays = {"Sun", "Mon", "Tue", "Wed",
                                                    "Thu", "Fri", "Sat"};
constexpr std::array<absl::string_view, 7> kLongDays = {
    "Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"};
constexpr std::array<absl::string_view, 12> kMonths = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                                       "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};

void Put2(std::string* out, int v) {
  out->push_back(static_cast<char>('0' + v / 10 % 10));
  out->push_back(static_cast<char>('0' + v % 10));
}

// Reads exactly `n` digits at the front of `*s` (n <= 4, so no overflow).
std::optional<int> TakeDigits(absl::string_view* s, size_t n) {
  if (s->size() < n) return std::nullopt;
  int v = 0;
  for (size_t i = 0; i < n; ++i) {
    const char c = (*s)[i];
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + (c - '0');
  }
  s->remove_prefix(n);
  return v;
}

bool TakeLiteral(absl::string_view* s, absl::string_view literal) {
  if (s->substr(0, literal.size()) != literal) return false;
  s->remove_prefix(literal.size());
  return true;
}

// Index of the name `*s` starts with, among `names` (all of one length), consumed.
template <size_t N>
std::optional<int> TakeName(absl::string_view* s, const std::array<absl::string_view, N>& names) {
  for (size_t i = 0; i < N; ++i) {
    if (TakeLiteral(s, names[i])) return static_cast<int>(i);
  }
  return std::nullopt;
}

bool IsLeapYear(int y) { return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0; }

int DaysInMonth(int year, int month) {  // month 0..11
  static constexpr int kDaysIn[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  return month == 1 && IsLeapYear(year) ? 29 : kDaysIn[month];
}

struct Fields {
  int year = 0;
  int month = 0;  // 0..11
  int day = 0;
  int hour = 0;
  int minute = 0;
  int second = 0;
};

// "HH:MM:SS"
bool TakeTime(absl::string_view* s, Fields* f) {
  std::optional<int> h = TakeDigits(s, 2);
  if (!h || !TakeLiteral(s, ":")) return false;
  std::optional<int> m = TakeDigits(s, 2);
  if (!m || !TakeLiteral(s, ":")) return false;
  std::optional<int> sec = TakeDigits(s, 2);
  if (!sec) return false;
  f->hour = *h;
  f->minute = *m;
  f->second = *sec;
  return true;
}

std::optional<int64_t> ToUnix(const Fields& f) {
  if (f.year < 1 || f.year > 9999 || f.month < 0 || f.month > 11) return std::nullopt;
  if (f.day < 1 || f.day > DaysInMonth(f.year, f.month)) return std::nullopt;
  if (f.hour > 23 || f.minute > 59 || f.second > 60) return std::nullopt;
  std::tm tm{};
  tm.tm_year = f.year - 1900;
  tm.tm_mon = f.month;
  tm.tm_mday = f.day;
  tm.tm_hour = f.hour;
  tm.tm_min = f.minute;
  tm.tm_sec = std::min(f.second, 59);
  return static_cast<int64_t>(timegm(&tm));
}

// "Sun, 06 Nov 1994 08:49:37 GMT"
std::optional<int64_t> ParseImfFixdate(absl::string_view s) {
  Fields f;
  if (!TakeName(&s, kDays) || !TakeLiteral(&s, ", ")) return std::nullopt;
  std::optional<int> day = TakeDigits(&s, 2);
  if (!day || !TakeLiteral(&s, " ")) return std::nullopt;
  std::optional<int> month = TakeName(&s, kMonths);
  if (!month || !TakeLiteral(&s, " ")) return std::nullopt;
  std::optional<int> year = TakeDigits(&s, 4);
  if (!year || !TakeLiteral(&s, " ") || !TakeTime(&s, &f)) return std::nullopt;
  if (!TakeLiteral(&s, " GMT") || !s.empty()) return std::nullopt;
  f.year = *year;
  f.month = *month;
  f.day = *day;
  return ToUnix(f);
}

// "Sunday, 06-Nov-94 08:49:37 GMT"
std::optional<int64_t> ParseRfc850(absl::string_view s, int64_t now) {
  Fields f;
  // The long names differ in length: match each against the text before the comma.
  const size_t comma = s.find(',');
  if (comma == absl::string_view::npos) return std::nullopt;
  absl::string_view name = s.substr(0, comma);
  if (std::find(kLongDays.begin(), kLongDays.end(), name) == kLongDays.end()) return std::nullopt;
  s.remove_prefix(comma);
  if (!TakeLiteral(&s, ", ")) return std::nullopt;
  std::optional<int> day = TakeDigits(&s, 2);
  if (!day || !TakeLiteral(&s, "-")) return std::nullopt;
  std::optional<int> month = TakeName(&s, kMonths);
  if (!month || !TakeLiteral(&s, "-")) return std::nullopt;
  std::optional<int> yy = TakeDigits(&s, 2);
  if (!yy || !TakeLiteral(&s, " ") || !TakeTime(&s, &f)) return std::nullopt;
  if (!TakeLiteral(&s, " GMT") || !s.empty()) return std::nullopt;
  // RFC 9110 §5.6.7: a two-digit year more than 50 years in the future is in the past century.
  const time_t now_t = static_cast<time_t>(std::clamp(now, kMinHttpDate, kMaxHttpDate));
  std::tm now_tm{};
  gmtime_r(&now_t, &now_tm);
  const int this_year = now_tm.tm_year + 1900;
  int year = this_year - this_year % 100 + *yy;
  if (year > this_year + 50) year -= 100;
  f.year = year;
  f.month = *month;
  f.day = *day;
  return ToUnix(f);
}

// "Sun Nov  6 08:49:37 1994"
std::optional<int64_t> ParseAsctime(absl::string_view s) {
  Fields f;
  if (!TakeName(&s, kDays) || !TakeLiteral(&s, " ")) return std::nullopt;
  std::optional<int> month = TakeName(&s, kMonths);
  if (!month || !TakeLiteral(&s, " ")) return std::nullopt;
  std::optional<int> day;
  if (TakeLiteral(&s, " ")) {
    day = TakeDigits(&s, 1);
  } else {
    day = TakeDigits(&s, 2);
  }
  if (!day || !TakeLiteral(&s, " ") || !TakeTime(&s, &f) || !TakeLiteral(&s, " ")) {
    return std::nullopt;
  }
  std::optional<int> year = TakeDigits(&s, 4);
  if (!year || !s.empty()) return std::nullopt;
  f.year = *year;
  f.month = *month;
  f.day = *day;
  return ToUnix(f);
}

}  // namespace

std::string FormatHttpDate(int64_t unix_seconds) {
  const time_t t = static_cast<time_t>(std::clamp(unix_seconds, kMinHttpDate, kMaxHttpDate));
  std::tm tm{};
  gmtime_r(&t, &tm);
  std::string out;
  out.reserve(29);
  out.append(kDays[tm.tm_wday].data(), 3);
  out.append(", ");
  Put2(&out, tm.tm_mday);
  out.push_back(' ');
  out.append(kMonths[tm.tm_mon].data(), 3);
  out.push_back(' ');
  const int year = tm.tm_year + 1900;
  Put2(&out, year / 100);
  Put2(&out, year % 100);
  out.push_back(' ');
  Put2(&out, tm.tm_hour);
  out.push_back(':');
  Put2(&out, tm.tm_min);
  out.push_back(':');
  Put2(&out, tm.tm_sec);
  out.append(" GMT");
  return out;
}

std::optional<int64_t> ParseHttpDate(absl::string_view text, int64_t now_unix_seconds) {
  if (text.size() > 64) return std::nullopt;  // Every valid form is shorter.
  const size_t comma = text.find(',');
  if (comma == 3) return ParseImfFixdate(text);
  if (comma != absl::string_view::npos) return ParseRfc850(text, now_unix_seconds);
  return ParseAsctime(text);
}

}  // namespace petrel::http_internal
