// Once warm, a keep-alive connection serves a steady stream of small requests without heap
// allocations in Petrel's frames: the exchange, its Request/Response and their buffers are
// reused, and the response head is written without building strings. Every C++ allocation
// (operator new; Petrel's containers and abseil allocate through it) made on the server's loop
// thread is counted while one client connection sends requests 100..1100 one after another.
// The client runs on the test thread, so its allocations are not counted.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <new>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "h1_test_server.h"
#include "support/allocation_counter.h"
#include "support/command.h"

namespace petrel::http {
namespace {

using ::petrel::testing::TempDir;

// A blocking client: sends one request, reads until its whole response arrived.
class Client {
 public:
  explicit Client(uint16_t port) {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
  }
  ~Client() { close(fd_); }
  bool connected() const { return connected_; }

  // Sends `request` and reads until `received` holds `size` bytes (a fixed-size response), or
  // until the end of a head and `body` when `size` is 0. Bounded by a 10 s deadline per request.
  bool Exchange(const std::string& request, size_t size, absl::string_view body) {
    received_.clear();
    if (send(fd_, request.data(), request.size(), MSG_NOSIGNAL) !=
        static_cast<ssize_t>(request.size())) {
      return false;
    }
    while (size != 0 ? received_.size() < size
                     : !absl::EndsWith(received_, absl::StrCat("\r\n\r\n", body))) {
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, 10000) <= 0) return false;
      char buf[4096];
      const ssize_t n = recv(fd_, buf, sizeof(buf), 0);
      if (n <= 0) return false;
      received_.append(buf, static_cast<size_t>(n));
    }
    return true;
  }
  const std::string& received() const { return received_; }

 private:
  int fd_ = -1;
  bool connected_ = false;
  std::string received_;
};

uint64_t CountSteadyState(H1TestServer& server, const std::string& request,
                          absl::string_view body) {
  Client c(server.port());
  EXPECT_TRUE(c.connected());
  EXPECT_TRUE(c.Exchange(request, 0, body)) << c.received();
  const size_t size = c.received().size();
  for (int i = 1; i < 100; ++i) {
    if (!c.Exchange(request, size, body)) {
      ADD_FAILURE() << "warm-up request " << i;
      return ~uint64_t{0};
    }
  }
  server.RunOnLoop([] { testing::CountAllocationsOfThisThread(true); });
  const uint64_t start = testing::Allocations();
  for (int i = 100; i < 1100; ++i) {
    if (!c.Exchange(request, size, body)) {
      ADD_FAILURE() << "request " << i;
      break;
    }
  }
  server.RunOnLoop([] { testing::CountAllocationsOfThisThread(false); });
  EXPECT_TRUE(absl::EndsWith(c.received(), body));
  return testing::Allocations() - start;
}

TEST(H1AllocTest, SteadyKeepAliveRequestsAllocateAtMostOncePerRequest) {
  ASSERT_TRUE(testing::AllocationCountingWorks());
  TempDir dir;
  std::ofstream(dir / "small") << "twelve bytes";
  H1TestServer::Options o;
  o.file_path = (dir / "small").string();
  H1TestServer server(o);
  ASSERT_TRUE(server.ok());
  // A buffer body with a handler-set Content-Type; a small file read into the write.
  const uint64_t hello =
      CountSteadyState(server, "GET /hello HTTP/1.1\r\nHost: a\r\n\r\n", "hello");
  const uint64_t file = CountSteadyState(
      server, "GET /file HTTP/1.1\r\nHost: a\r\nUser-Agent: alloc-test\r\n\r\n", "twelve bytes");
  EXPECT_LE(hello, 1000u);
  EXPECT_LE(file, 1000u);
  // What it costs today (0 expected): printed so a regression shows before the bound trips.
  printf("allocations per 1000 requests on the loop thread: /hello %llu, /file %llu\n",
         static_cast<unsigned long long>(hello), static_cast<unsigned long long>(file));
}

// StaticFiles keeps files up to 16 KiB in memory; each response used to copy the cached bytes
// into its body (an allocation per request for any file past 15 bytes). They are shared now.
TEST(H1AllocTest, ACachedSmallFileIsSentWithoutACopyPerResponse) {
  ASSERT_TRUE(testing::AllocationCountingWorks());
  TempDir dir;
  const std::string content(4096, 'k');
  std::ofstream(dir / "f4k") << content;
  H1TestServer::Options o;
  o.static_dir = dir.path().string();
  H1TestServer server(o);
  ASSERT_TRUE(server.ok());
  const uint64_t file =
      CountSteadyState(server, "GET /static/f4k HTTP/1.1\r\nHost: a\r\n\r\n", content);
  printf("allocations per 1000 requests of a cached 4 KiB file: %llu\n",
         static_cast<unsigned long long>(file));
  EXPECT_LE(file, 100u);
}

}  // namespace
}  // namespace petrel::http
