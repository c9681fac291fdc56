// Allocations per HTTP/3 request in Petrel's frames. Every C++ allocation of the process
// (operator new: Petrel's objects, containers and abseil) is counted while gtlsclient — another
// process — fetches a small buffer body N1 and then N2 times over one connection each; the
// difference divided by N2 - N1 is what one more request costs, handshakes and warm-up cancel.
// A second test counts malloc itself — the libraries' allocations included — while requests come
// in bursts of concurrent streams with idle moments in between.
#include <gtest/gtest.h>
#include <malloc.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <new>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "h3_test_server.h"
#include "support/allocation_counter.h"
#include "support/command.h"

// malloc, calloc and realloc of the whole process (the libraries' included), counted while
// `g_count_mallocs` is set; glibc's own entry points do the work.
extern "C" {
void* __libc_malloc(size_t size);
void* __libc_calloc(size_t nmemb, size_t size);
void* __libc_realloc(void* ptr, size_t size);
}
namespace {
std::atomic<bool> g_count_mallocs{false};
std::atomic<uint64_t> g_mallocs{0};
void CountMalloc() {
  if (g_count_mallocs.load(std::memory_order_relaxed)) {
    g_mallocs.fetch_add(1, std::memory_order_relaxed);
  }
}
}  // namespace
extern "C" {
void* malloc(size_t size) {
  CountMalloc();
  return __libc_malloc(size);
}
void* calloc(size_t nmemb, size_t size) {
  CountMalloc();
  return __libc_calloc(nmemb, size);
}
void* realloc(void* ptr, size_t size) {
  CountMalloc();
  return __libc_realloc(ptr, size);
}
}

namespace petrel::http {
namespace {

using ::petrel::testing::CommandResult;
using ::petrel::testing::RunCommand;

constexpr char kClient[] = "/usr/bin/gtlsclient";
// Less than one allocation per request in Petrel's frames (measured 0.1-0.2: now and then a QUIC
// send chunk or a pool growing; 13.1 before the request-path work).
constexpr double kMaxAllocationsPerRequest = 1.0;

// Allocations in this process while one gtlsclient connection makes `requests` requests.
uint64_t AllocationsFor(const H3TestServer& server, int requests,
                        absl::string_view path = "/hello") {
  const std::string url = absl::StrCat("https://127.0.0.1:", server.port(), path);
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

// StaticFiles keeps files up to 16 KiB in memory. Each response used to copy the cached bytes
// into its body: one allocation (and a copy) per request for any file past 15 bytes. The cache's
// bytes are now shared with the responses that send them.
TEST(H3AllocationTest, ACachedSmallFileIsSentWithoutACopyPerResponse) {
  testing::CountAllocationsOfEveryThread(true);
  if (access(kClient, X_OK) != 0) GTEST_SKIP() << "gtlsclient (ngtcp2-client) not installed";
  testing::TempDir files;
  std::ofstream(files.path() / "f4k", std::ios::binary) << std::string(4096, 'k');
  H3TestServer::Options options;
  options.workers = 0;
  options.static_dir = files.path().string();
  H3TestServer server(options);
  ASSERT_TRUE(server.ok());
  (void)AllocationsFor(server, 200, "/static/f4k");  // warm the pools and the file cache
  constexpr int kSmall = 200;
  constexpr int kLarge = 1000;
  const uint64_t small = AllocationsFor(server, kSmall, "/static/f4k");
  const uint64_t large = AllocationsFor(server, kLarge, "/static/f4k");
  const double per_request =
      (static_cast<double>(large) - static_cast<double>(small)) / (kLarge - kSmall);
  std::printf("h3, a cached 4 KiB file: %.2f operator new calls per request\n", per_request);
  EXPECT_LE(per_request, 0.5);
}

// gtlsclient opens as many streams at once as the server allows (100), so a connection's
// requests come in bursts with no stream open in between. nghttp3's per-stream objects come
// from the connection's SmallBlockPool; a pool trimmed whenever no stream is open gave them back
// between bursts and every burst went to malloc again (1.9 mallocs per request, all libraries
// counted). Now a burst reuses the blocks of the one before.
TEST(H3AllocationTest, BurstsOfStreamsReuseThePoolsBlocks) {
  if (access(kClient, X_OK) != 0) GTEST_SKIP() << "gtlsclient (ngtcp2-client) not installed";
  H3TestServer::Options options;
  options.workers = 0;
  // Longer than any pause of a loaded machine between two bursts: no trim during the test.
  options.h3.memory_trim_delay = std::chrono::seconds(60);
  H3TestServer server(options);
  ASSERT_TRUE(server.ok());
  const auto mallocs_for = [&](int requests) {
    g_mallocs.store(0);
    g_count_mallocs.store(true);
    (void)AllocationsFor(server, requests);
    g_count_mallocs.store(false);
    return g_mallocs.load();
  };
  (void)mallocs_for(200);
  // The test thread's own mallocs (running the client) are the same for both sizes.
  constexpr int kSmall = 400;
  constexpr int kLarge = 2000;
  const uint64_t small = mallocs_for(kSmall);
  const uint64_t large = mallocs_for(kLarge);
  const double per_request =
      (static_cast<double>(large) - static_cast<double>(small)) / (kLarge - kSmall);
  std::printf("h3: %.2f mallocs per request, all libraries (%llu for %d, %llu for %d)\n",
              per_request, static_cast<unsigned long long>(small), kSmall,
              static_cast<unsigned long long>(large), kLarge);
  EXPECT_LE(per_request, 0.5);
}

// A file body is read in 64 KiB chunks. Each chunk was a new std::string (zeroed by its resize
// before the pread) in a new list node, and each packet of the download rotated the sendable
// queue (a deque block every 64 packets): ~44 mallocs per MB. The chunks now come from blocks
// the thread reuses, and a stream alone in its queue is not rotated: under 2 per MB.
TEST(H3AllocationTest, FileDownloadsReuseTheirBlocks) {
  if (access(kClient, X_OK) != 0) GTEST_SKIP() << "gtlsclient (ngtcp2-client) not installed";
  testing::TempDir files;
  constexpr size_t kMb = 1000 * 1000;
  for (const size_t mb : {4, 16}) {
    std::ofstream(files.path() / absl::StrCat("f", mb), std::ios::binary)
        << std::string(mb * kMb, static_cast<char>('a' + mb));
  }
  H3TestServer::Options options;
  options.workers = 0;
  options.files_dir = files.path().string();
  options.h3.memory_trim_delay = std::chrono::seconds(60);
  H3TestServer server(options);
  ASSERT_TRUE(server.ok());
  const auto mallocs_for = [&](size_t mb) {
    const std::string url = absl::StrCat("https://127.0.0.1:", server.port(), "/files/f", mb);
    g_mallocs.store(0);
    g_count_mallocs.store(true);
    const CommandResult r = RunCommand(absl::StrCat(
        kClient, " -q --exit-on-all-streams-close 127.0.0.1 ", server.port(), " ", url));
    g_count_mallocs.store(false);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return g_mallocs.load();
  };
  (void)mallocs_for(4);  // warm the thread's blocks and pools
  const uint64_t small = mallocs_for(4);
  const uint64_t large = mallocs_for(16);
  const double per_mb = (static_cast<double>(large) - static_cast<double>(small)) / (16 - 4);
  std::printf(
      "h3: %.2f mallocs per MB of a file download, all libraries (%llu for 4 MB, %llu "
      "for 16 MB)\n",
      per_mb, static_cast<unsigned long long>(small), static_cast<unsigned long long>(large));
  EXPECT_LE(per_mb, 6.0);
}

}  // namespace
}  // namespace petrel::http
