// A full UDP send buffer loses nothing. On loopback the kernel hands a datagram to the receiver
// at once, so a send never blocks; behind a qdisc it waits in the queue, charged to the sending
// socket. The test therefore runs itself again inside a user + network namespace of its own
// (`unshare -rn`) whose loopback has a rate-limiting tbf qdisc, with a server socket buffer of
// a few KiB: nearly every batch the server sends is refused with EAGAIN at first. The 10 MB
// download must arrive byte for byte with no packet lost (ngtcp2's qlog declares none), and
// the server must wait for the socket rather than spin (a refused send or two per time the
// socket drained, no more). Without the waiting, the refused packets are lost (~40 per run).
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "quic/hq/hq_client.h"
#include "quic/hq_test_util.h"
#include "support/rate_limited_netns.h"

namespace petrel::hq {
namespace {

using testing::Docs;
using testing::FileSha256;
using testing::RunningHqServer;
using testing::TempDir;

constexpr char kInNamespace[] = "PETREL_SEND_BLOCKED_NETNS";

// Occurrences of `needle` in every file of `dir`.
size_t CountInFiles(const std::string& dir, const std::string& needle) {
  size_t n = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    std::ifstream in(entry.path(), std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    const std::string s = text.str();
    for (size_t at = s.find(needle); at != std::string::npos; at = s.find(needle, at + 1)) ++n;
  }
  return n;
}

// The scenario proper; meaningful only inside the namespace (see the file comment). With
// several clients at once, the server's worker stages the batches of several connections in
// one loop turn, and a refused sendmmsg gives packets back to each of them.
void DownloadThroughFullSocket(size_t workers, size_t clients) {
  SCOPED_TRACE(absl::StrCat("workers = ", workers, ", clients = ", clients));
  TempDir qlog;
  std::vector<std::unique_ptr<TempDir>> downloads;
  for (size_t i = 0; i < clients; ++i) downloads.push_back(std::make_unique<TempDir>());
  QuicServerConfig config;
  config.workers = workers;
  config.socket_send_buffer_bytes = 4096;  // the kernel doubles it: ~6 full-size packets
  config.qlog_dir = qlog.path();
  QuicServerStats stats;
  {
    RunningHqServer server(config, Docs::Get().root());
    ASSERT_TRUE(server.ok());
    std::vector<std::thread> threads;
    std::vector<absl::StatusOr<HqClientResult>> results(clients, absl::UnknownError("not run"));
    for (size_t i = 0; i < clients; ++i) {
      threads.emplace_back([&, i] {
        HqClientOptions o;
        o.quic.server = server.address();
        o.quic.verify_peer = false;
        o.quic.limits.idle_timeout_ms = 30'000;
        o.download_dir = downloads[i]->path();
        o.paths = {"/10m.bin"};
        results[i] = RunHqClient(o);
      });
    }
    for (std::thread& t : threads) t.join();
    for (const absl::StatusOr<HqClientResult>& r : results) {
      ASSERT_TRUE(r.ok()) << r.status();
      EXPECT_EQ(r->completed, 1u);
    }
    ASSERT_TRUE(server.Stop().ok());
    stats = server.hq().server().stats();
  }
  for (size_t i = 0; i < clients; ++i) {
    EXPECT_EQ(FileSha256(downloads[i]->path() + "/10m.bin"),
              FileSha256(Docs::Get().root() + "/10m.bin"));
  }
  EXPECT_GT(stats.sendmmsg_calls, 0u);  // the data went through the worker's stage
  // The socket did refuse sends (else this test proves nothing) ...
  EXPECT_GT(stats.sends_blocked, 10u);
  // ... yet no packet was lost: every refused one was sent later, in order.
  EXPECT_EQ(CountInFiles(qlog.path(), "packet_lost"), 0u);
  // And a refused send was followed by a wait for the socket, not by another try: at most a
  // refusal or two per time the socket was seen writable again (a spin has none in between).
  EXPECT_LE(stats.sends_blocked, 2 * stats.send_wakeups + 2)
      << stats.sends_blocked << " refused sends, " << stats.send_wakeups << " wake-ups";
}

TEST(QuicSendBlockedTest, FullSocketBufferLosesNothing) {
  if (petrel::testing::InRateLimitedNetns(kInNamespace)) {
    for (size_t workers : {0, 2}) DownloadThroughFullSocket(workers, 1);
    DownloadThroughFullSocket(0, 4);
    return;
  }
  // 200 Mbit/s: the 10 MB take about half a second, queued 50 ms deep at most. On one CPU:
  // the qdisc's timer hands queued packets to loopback on whichever CPU it fires, and packets
  // handed over on two CPUs can overtake each other, which ngtcp2 (rightly) reads as loss.
  petrel::testing::RunInRateLimitedNetns(kInNamespace, "rate 200mbit burst 64kb latency 50ms",
                                         /*pin_cpu0=*/true, 240);
}

}  // namespace
}  // namespace petrel::hq
