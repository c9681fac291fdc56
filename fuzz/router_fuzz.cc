// The router: arbitrary patterns registered, arbitrary paths matched. Properties besides "no
// crash": a found route's parameters are views of the path (parameters non-empty, the wildcard
// possibly empty); 405 comes with an Allow value; a path not starting with '/' is 404.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
#include "fuzz_check.h"
#include "petrel/http/method.h"
#include "petrel/http/router.h"

namespace {

constexpr absl::string_view kFixedPatterns[] = {
    "/",       "/a",      "/a/",      "/users/:id",      "/users/me", "/users/*",
    "/a/b/:x", "/a/:y/c", "/files/*", "/:p/:q/:r/:s/:t", "/x%2Fy/:z"};

petrel::Method MethodFrom(uint8_t b) {
  switch (b % 5) {
    case 0:
      return petrel::Method::kGet;
    case 1:
      return petrel::Method::kPost;
    case 2:
      return petrel::Method::kHead;
    case 3:
      return petrel::Method::kDelete;
    default:
      return petrel::Method::kPut;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 4096) return 0;
  FuzzedDataProvider in(data, size);
  petrel::Router router;
  const auto handler = [](petrel::Request&, petrel::Response&) {};
  for (absl::string_view p : kFixedPatterns) (void)router.Get(p, handler);
  (void)router.Any("/any/*", handler);
  const size_t patterns = in.ConsumeIntegralInRange<size_t>(0, 6);
  for (size_t i = 0; i < patterns; ++i) {
    const std::string pattern = in.ConsumeRandomLengthString(48);
    const uint8_t m = in.ConsumeIntegral<uint8_t>();
    (void)(m & 0x80 ? router.Any(pattern, handler) : router.Add(MethodFrom(m), pattern, handler));
  }
  while (in.remaining_bytes() > 0) {
    const petrel::Method method = MethodFrom(in.ConsumeIntegral<uint8_t>());
    const std::string path = in.ConsumeRandomLengthString(256);
    const petrel::RouteMatch match = router.Match(method, path);
    PETREL_FUZZ_CHECK(match.status == 200 || match.status == 404 || match.status == 405);
    PETREL_FUZZ_CHECK(match.found() == (match.status == 200));
    if (path.empty() || path[0] != '/') PETREL_FUZZ_CHECK(match.status == 404);
    if (match.status == 405) PETREL_FUZZ_CHECK(!match.allow.empty());
    for (const petrel::RouteParams::Param& p : match.params) {
      PETREL_FUZZ_CHECK(p.value.empty() ||
                        (p.value.data() >= path.data() &&
                         p.value.data() + p.value.size() <= path.data() + path.size()));
      if (p.name != "*") PETREL_FUZZ_CHECK(!p.value.empty());
      PETREL_FUZZ_CHECK(p.value.find('/') == absl::string_view::npos || p.name == "*");
    }
  }
  return 0;
}
