// A steady stream of small h2 requests allocates (almost) nothing in Petrel's frames. Every C++
// allocation (operator new; Petrel's containers and abseil allocate through it) made on the
// server's loop thread is counted while h2load — another process — sends two loads of
// different sizes; the difference per request is the steady-state cost, connection setup
// and warm-up cancelling out (DESIGN §10). nghttp2 allocates through the connection's
// H2MemPool, whose fresh blocks are checked the same way.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <new>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "h2_test_server.h"
#include "support/allocation_counter.h"
#include "support/command.h"

namespace petrel::http {
namespace {

bool Have(const char* tool) {
  return system(absl::StrCat("command -v ", tool, " >/dev/null 2>&1").c_str()) == 0;
}

// Runs h2load with `n` requests on one connection; true if all succeeded.
bool Load(const H2TestServer& server, bool tls, int n, absl::string_view path = "/hello") {
  const std::string cmd =
      absl::StrCat("timeout 60 h2load -n ", n, " -c 1 -m 10 ", tls ? "https" : "http",
                   "://127.0.0.1:", server.port(), path, " 2>&1");
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return false;
  std::string out;
  char buf[512];
  while (fgets(buf, sizeof(buf), p) != nullptr) out += buf;
  const int status = pclose(p);
  const bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0 &&
                  out.find(absl::StrCat(n, " succeeded, 0 failed")) != std::string::npos;
  if (!ok) ADD_FAILURE() << out;
  return ok;
}

class H2AllocTest : public ::testing::TestWithParam<bool> {};

TEST_P(H2AllocTest, SteadyRequestsAllocateAlmostNothing) {
  if (!Have("h2load")) GTEST_SKIP() << "h2load not installed";
  const bool tls = GetParam();
  H2TestServer server({.tls = tls});
  ASSERT_TRUE(server.ok());
  server.RunOnLoop([] { testing::CountAllocationsOfThisThread(true); });

  // Each load is one connection; the counts include its setup, which the difference cancels.
  auto measure = [&](int n, uint64_t* allocations, uint64_t* pool_fresh) {
    const uint64_t before = testing::Allocations();
    const int closed = server.closed_connections();
    ASSERT_TRUE(Load(server, tls, n));
    ASSERT_TRUE(server.WaitForClosedConnections(closed + 1));
    *allocations = testing::Allocations() - before;
    *pool_fresh = server.last_connection_pool_fresh();
  };
  uint64_t small = 0;
  uint64_t large = 0;
  uint64_t small_fresh = 0;
  uint64_t large_fresh = 0;
  measure(200, &small, &small_fresh);
  measure(2200, &large, &large_fresh);
  const double per_request = (static_cast<double>(large) - static_cast<double>(small)) / 2000;
  RecordProperty("allocations_per_request", std::to_string(per_request));
  RecordProperty("allocations_small_load", std::to_string(small));
  // Before the free lists and in-place fields an h2 request took about a dozen (the stream,
  // its header maps, the field list, the body producer, ...); now the h2 engine takes none.
  // What remains on cleartext is the TcpStream's: its read that ends in EAGAIN reports an
  // absl::Status with a message, once per read (at most one per request with h2load's
  // pattern, about a third in practice); TLS reads end in SSL_ERROR_WANT_READ instead.
  EXPECT_LT(per_request, tls ? 0.1 : 1.0) << "small load " << small << ", large load " << large;
  // The counter works: connection setup allocates.
  EXPECT_GT(small, 0u);
  // nghttp2's per-stream objects come back from the pool: no more malloc for 2000 more
  // requests than for the warm-up of the first few.
  EXPECT_LE(large_fresh, small_fresh + 20)
      << "pool blocks from malloc: " << small_fresh << " / " << large_fresh;
}

// StaticFiles keeps files up to 16 KiB in memory; each response used to copy the cached bytes
// into its body (an allocation per request for any file past 15 bytes). They are shared now, so
// a cached 4 KiB file costs what /hello does.
TEST_P(H2AllocTest, ACachedSmallFileIsSentWithoutACopyPerResponse) {
  if (!Have("h2load")) GTEST_SKIP() << "h2load not installed";
  const bool tls = GetParam();
  testing::TempDir dir;
  std::ofstream(dir / "f4k") << std::string(4096, 'k');
  H2TestServer server({.tls = tls, .static_dir = dir.path().string()});
  ASSERT_TRUE(server.ok());
  server.RunOnLoop([] { testing::CountAllocationsOfThisThread(true); });
  auto measure = [&](int n) -> uint64_t {
    const uint64_t before = testing::Allocations();
    const int closed = server.closed_connections();
    if (!Load(server, tls, n, "/static/f4k") || !server.WaitForClosedConnections(closed + 1)) {
      return 0;
    }
    return testing::Allocations() - before;
  };
  const uint64_t small = measure(200);
  const uint64_t large = measure(2200);
  ASSERT_GT(small, 0u);
  const double per_request = (static_cast<double>(large) - static_cast<double>(small)) / 2000;
  std::printf("h2 %s, a cached 4 KiB file: %.3f allocations per request\n",
              tls ? "over TLS" : "cleartext", per_request);
  // Cleartext keeps the status of its reads' EAGAIN (see above), a third of a request or so.
  EXPECT_LT(per_request, tls ? 0.1 : 0.6) << "small load " << small << ", large load " << large;
}

INSTANTIATE_TEST_SUITE_P(TlsAndCleartext, H2AllocTest, ::testing::Values(true, false),
                         [](const auto& p) { return p.param ? "Tls" : "Cleartext"; });

}  // namespace
}  // namespace petrel::http
