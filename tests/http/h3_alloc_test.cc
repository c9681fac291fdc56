// Allocations per HTTP/3 request in Petrel's frames. Every C++ allocation of the process
// (operator new: Petrel's objects, containers and abseil) is counted while gtlsclient — another
// process — fetches a small buffer body N1 and then N2 times over one connection each; the
// difference divided by N2 - N1 is what one more request costs, handshakes and warm-up cancel.
// nghttp3's and ngtcp2's own mallocs are not counted: they are the libraries' floor.
#include <gtest/gtest.h>
#include <malloc.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <new>
#include <string>

#include "absl/strings/str_cat.h"
#include "h3_test_server.h"
#include "support/allocation_counter.h"
#include "support/command.h"

namespace petrel::http {
namespace {

using ::petrel::testing::CommandResult;
using ::petrel::testing::RunCommand;

constexpr char kClient[] = "/usr/bin/gtlsclient";
// Less than one allocation per request in Petrel's frames (measured 0.1-0.2: now and then a QUIC
// send chunk or a pool growing; 13.1 before the request-path work).
constexpr double kMaxAllocationsPerRequest = 1.0;

// Allocations in this process while one gtlsclient connection makes `requests` requests.
uint64_t AllocationsFor(const H3TestServer& server, int requests) {
  const std::string url = absl::StrCat("https://127.0.0.1:", server.port(), "/hello");
  const uint64_t before = testing::Allocations();
  const CommandResult r =
      RunCommand(absl::StrCat(kClient, " -q --exit-on-all-streams-close -n ", requests,
                              " 127.0.0.1 ", server.port(), " ", url));
  const uint64_t after = testing::Allocations();
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return after - before;
}

TEST(H3AllocationTest, ASteadyStreamOfRequestsAllocatesAtMostABoundedFewTimes) {
  testing::CountAllocationsOfEveryThread(true);
  if (access(kClient, X_OK) != 0) GTEST_SKIP() << "gtlsclient (ngtcp2-client) not installed";
  H3TestServer::Options options;
  options.workers = 0;
  H3TestServer server(options);
  ASSERT_TRUE(server.ok());
  (void)AllocationsFor(server, 200);  // warm the thread's pools
  constexpr int kSmall = 200;
  constexpr int kLarge = 1000;
  const uint64_t small = AllocationsFor(server, kSmall);
  const uint64_t large = AllocationsFor(server, kLarge);
  const double per_request =
      (static_cast<double>(large) - static_cast<double>(small)) / (kLarge - kSmall);
  std::printf("h3: %.2f operator new calls per request (%llu for %d, %llu for %d)\n", per_request,
              static_cast<unsigned long long>(small), kSmall,
              static_cast<unsigned long long>(large), kLarge);
  EXPECT_LE(per_request, kMaxAllocationsPerRequest);
}

}  // namespace
}  // namespace petrel::http
