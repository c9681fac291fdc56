#include "http/date_cache.h"

#include <cstring>
#include <ctime>

namespace petrel::http_internal {
namespace {

void Put2(char* p, int v) {
  p[0] = static_cast<char>('0' + v / 10);
  p[1] = static_cast<char>('0' + v % 10);
}

}  // namespace

absl::string_view DateCache::Get(std::chrono::system_clock::time_point now) {
  const int64_t second = std::chrono::floor<std::chrono::seconds>(now.time_since_epoch()).count();
  if (second != second_) {
    static constexpr char kDays[] = "SunMonTueWedThuFriSat";
    static constexpr char kMonths[] = "JanFebMarAprMayJunJulAugSepOctNovDec";
    const std::time_t t = static_cast<std::time_t>(second);
    std::tm tm{};
    gmtime_r(&t, &tm);  // Reentrant and locale-free; runs at most once per second.
    char* p = text_;
    std::memcpy(p, kDays + 3 * tm.tm_wday, 3);
    p[3] = ',';
    p[4] = ' ';
    Put2(p + 5, tm.tm_mday);
    p[7] = ' ';
    std::memcpy(p + 8, kMonths + 3 * tm.tm_mon, 3);
    p[11] = ' ';
    const int year = tm.tm_year + 1900;  // Four digits until the year 9999.
    Put2(p + 12, year / 100 % 100);
    Put2(p + 14, year % 100);
    p[16] = ' ';
    Put2(p + 17, tm.tm_hour);
    p[19] = ':';
    Put2(p + 20, tm.tm_min);
    p[22] = ':';
    Put2(p + 23, tm.tm_sec);
    std::memcpy(p + 25, " GMT", 4);
    second_ = second;
    ++format_count_;
  }
  return absl::string_view(text_, kLength);
}

DateCache& ThreadDateCache() {
  thread_local DateCache cache;  // trivially destructible: safe at thread exit
  return cache;
}

}  // namespace petrel::http_internal
