// Internal: the per-second cache of the HTTP Date header value (RFC 9110 §5.6.7, DESIGN §7).
#ifndef PETREL_HTTP_DATE_CACHE_H_
#define PETREL_HTTP_DATE_CACHE_H_

#include <chrono>
#include <cstdint>

#include "absl/strings/string_view.h"

namespace petrel::http_internal {

// Formats the IMF-fixdate ("Sun, 06 Nov 1994 08:49:37 GMT", always 29 bytes) at most once per
// second. One per loop thread (it is not thread-safe); responses written in the same second share
// the bytes. Wall-clock time, since the header is a calendar date; a clock stepping backwards just
// yields an earlier date.
class DateCache {
 public:
  static constexpr size_t kLength = 29;

  // The date of `now`, truncated to the second. The view is valid until the next Get with a
  // different second (or the cache's destruction).
  absl::string_view Get(std::chrono::system_clock::time_point now);
  absl::string_view Get() { return Get(std::chrono::system_clock::now()); }

  // How many times the string was formatted (for tests: once per distinct second).
  uint64_t format_count() const { return format_count_; }

 private:
  int64_t second_ = INT64_MIN;
  uint64_t format_count_ = 0;
  char text_[kLength] = {};
};

// The calling thread's cache, for engines that have no host to hold one (h2, h3): a loop
// thread formats the date once per second whatever number of connections it serves. The view
// Get returns stays readable for the thread's life; after a second passes it reads the new
// date (same length), which is what a field sent later should say anyway.
DateCache& ThreadDateCache();

}  // namespace petrel::http_internal

#endif  // PETREL_HTTP_DATE_CACHE_H_
