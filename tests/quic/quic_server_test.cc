// Loopback tests of QuicServer + QuicClient through the hq-interop server and client, each in
// single-loop (workers = 0) and threaded (workers = 2) mode.
#include "petrel/quic/quic_server.h"

#include <netinet/in.h>
#include <ngtcp2/ngtcp2.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "petrel/common/metrics.h"
#include "petrel/quic/quic_client.h"
#include "petrel/quic/quic_connection.h"
#include "quic/hq/hq_client.h"
#include "quic/hq_test_util.h"
#include "quic/udp_relay.h"
#include "support/command.h"

namespace petrel::hq {
namespace {

using testing::Docs;
using testing::kSmallFiles;
using testing::RunningHqServer;
using testing::TempDir;

using QuicServerTest = testing::HqLoopbackTest;

TEST_P(QuicServerTest, HandshakeAndOneKilobyte) {
  RunningHqServer server(ServerConfig(), Docs::Get().root());
  ASSERT_TRUE(server.ok());
  HqClientOptions o = ClientOptions(server);
  o.paths = {"/1k.bin"};
  absl::StatusOr<HqClientResult> r = RunHqClient(o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->handshake_completed);
  EXPECT_EQ(r->completed, 1u);
  ExpectSame("1k.bin");
  ASSERT_TRUE(server.Stop().ok());
  EXPECT_EQ(server.hq().server().stats().connections_accepted, 1u);
}

TEST_P(QuicServerTest, TenMegabytes) {
  RunningHqServer server(ServerConfig(), Docs::Get().root());
  ASSERT_TRUE(server.ok());
  HqClientOptions o = ClientOptions(server);
  o.paths = {"/10m.bin", "/1k.bin"};
  absl::StatusOr<HqClientResult> r = RunHqClient(o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->completed, 2u);
  ExpectSame("10m.bin");
  ExpectSame("1k.bin");
}

// Path MTU Discovery (RFC 9000 §14.3) takes a bulk transfer from 1200-byte packets to ngtcp2's
// largest (1452 bytes) on loopback: its probes are larger than the path's current size, so they
// need a write buffer that is too. With room for 1200 bytes only, every packet stayed at 1200
// (20 % more packets per byte, and as many more encryptions and syscalls).
TEST_P(QuicServerTest, PathMtuDiscoveryRaisesThePacketSize) {
  MetricsRegistry metrics;
  QuicServerConfig config = ServerConfig();
  config.metrics = &metrics;
  RunningHqServer server(config, Docs::Get().root());
  ASSERT_TRUE(server.ok());
  ASSERT_NO_FATAL_FAILURE(FetchOneAndCompare(ClientOptions(server), "/10m.bin"));
  ASSERT_TRUE(server.Stop().ok());
  uint64_t datagrams = 0;
  uint64_t bytes = 0;
  for (size_t w = 0; w < std::max<size_t>(GetParam(), 1); ++w) {
    const MetricLabels worker = {{"worker", absl::StrCat(w)}};
    datagrams += metrics.AddCounter("petrel_quic_worker_datagrams_sent_total", "", worker).Value();
    bytes += metrics.AddCounter("petrel_quic_worker_bytes_sent_total", "", worker).Value();
  }
  ASSERT_GT(datagrams, 0u);
  // 10 MB in 1452-byte packets is ~7 000 datagrams; at 1200 bytes it took ~8 500.
  EXPECT_GT(static_cast<double>(bytes) / static_cast<double>(datagrams), 1400.0)
      << bytes << " bytes in " << datagrams << " datagrams";
}

TEST_P(QuicServerTest, RequestsOutsideRootGetNothing) {
  RunningHqServer server(ServerConfig(), Docs::Get().root() + "/..");
  ASSERT_TRUE(server.ok());
  HqClientOptions o = ClientOptions(server);
  o.paths = {"/../etc/passwd"};
  absl::StatusOr<HqClientResult> r = RunHqClient(o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->completed, 1u);  // an empty answer
  EXPECT_EQ(std::filesystem::file_size(download_.path() + "/passwd"), 0u);
}

TEST_P(QuicServerTest, ManySmallFilesOnOneConnection) {
  RunningHqServer server(ServerConfig(), Docs::Get().root());
  ASSERT_TRUE(server.ok());
  HqClientOptions o = ClientOptions(server);
  for (size_t i = 0; i < kSmallFiles; ++i) o.paths.push_back(absl::StrCat("/s", i));
  absl::StatusOr<HqClientResult> r = RunHqClient(o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->completed, kSmallFiles);
  for (size_t i = 0; i < kSmallFiles; i += 97) ExpectSame(absl::StrCat("s", i));
  ExpectSame(absl::StrCat("s", kSmallFiles - 1));
}

TEST_P(QuicServerTest, ConcurrentConnectionsWithoutUnknownDrops) {
  constexpr size_t kClients = 200;
  RunningHqServer server(ServerConfig(), Docs::Get().root());
  ASSERT_TRUE(server.ok());
  std::atomic<size_t> done{0};
  std::vector<std::unique_ptr<TempDir>> dirs;
  std::vector<std::thread> threads;
  for (size_t i = 0; i < kClients; ++i) dirs.push_back(std::make_unique<TempDir>());
  for (size_t i = 0; i < kClients; ++i) {
    threads.emplace_back([&, i] {
      HqClientOptions o = ClientOptions(server);
      o.download_dir = dirs[i]->path();
      o.paths = {"/1k.bin"};
      absl::StatusOr<HqClientResult> r = RunHqClient(o);
      if (r.ok() && r->completed == 1) done.fetch_add(1);
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(done.load(), kClients);
  ASSERT_TRUE(server.Stop().ok());
  const QuicServerStats st = server.hq().server().stats();
  EXPECT_EQ(st.connections_accepted, kClients);
  EXPECT_EQ(st.unknown_connection_drops, 0u);
  // What the connections wrote was staged and left in sendmmsg calls, several connections'
  // batches per call.
  EXPECT_GT(st.sendmmsg_calls, 0u);
  std::printf("send calls: %llu sendmsg, %llu sendmmsg\n",
              static_cast<unsigned long long>(st.sendmsg_calls),
              static_cast<unsigned long long>(st.sendmmsg_calls));
  // Every datagram of a known connection reached the worker its CID names, and the
  // connections are spread over all workers (200 random client DCIDs, hash mod N).
  EXPECT_EQ(st.misrouted_datagrams, 0u);
  ASSERT_EQ(st.connections_per_worker.size(), std::max<size_t>(GetParam(), 1));
  uint64_t sum = 0;
  for (uint64_t n : st.connections_per_worker) {
    EXPECT_GT(n, 0u);
    sum += n;
  }
  EXPECT_EQ(sum, kClients);
}

// After many connections close, a worker gives the memory they freed back to the system once
// (malloc_trim) — not while they stay open, and not for a handful.
TEST_P(QuicServerTest, MemoryIsGivenBackAfterManyConnectionsClose) {
  constexpr size_t kClients = 48;
  MetricsRegistry metrics;
  QuicServerConfig config = ServerConfig();
  config.workers = 0;  // one worker sees all the connections
  config.metrics = &metrics;
  config.memory_trim_delay = std::chrono::milliseconds(20);
  RunningHqServer server(config, Docs::Get().root());
  ASSERT_TRUE(server.ok());
  Counter& trims = metrics.AddCounter("petrel_quic_memory_trims_total", "", {{"worker", "0"}});
  Gauge& open = metrics.AddGauge("petrel_quic_connections_open", "", {{"worker", "0"}});
  // A few connections, one after the other: the peak stays under the threshold.
  for (int i = 0; i < 3; ++i) {
    HqClientOptions o = ClientOptions(server);
    o.paths = {"/1k.bin"};
    absl::StatusOr<HqClientResult> r = RunHqClient(o);
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_EQ(r->completed, 1u);
  }
  // Many at once, every one open before any closes: each client, on its first data, waits until
  // the server holds all of them.
  std::vector<std::unique_ptr<TempDir>> dirs;
  for (size_t i = 0; i < kClients; ++i) dirs.push_back(std::make_unique<TempDir>());
  std::atomic<size_t> done{0};
  std::vector<std::thread> threads;
  for (size_t i = 0; i < kClients; ++i) {
    threads.emplace_back([&, i] {
      HqClientOptions o = ClientOptions(server);
      o.download_dir = dirs[i]->path();
      o.paths = {"/1k.bin"};
      o.on_first_data = [&open] {
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
        while (open.Value() < static_cast<int64_t>(kClients) &&
               std::chrono::steady_clock::now() < deadline) {
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
      };
      absl::StatusOr<HqClientResult> r = RunHqClient(o);
      if (r.ok() && r->completed == 1) done.fetch_add(1);
    });
  }
  for (auto& t : threads) t.join();
  ASSERT_EQ(done.load(), kClients);
  // The trim follows the closes by memory_trim_delay: wait for it, bounded.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (trims.Value() == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(trims.Value(), 1u);
  ASSERT_TRUE(server.Stop().ok());
  EXPECT_EQ(server.hq().server().stats().memory_trims, 1u);
}

TEST_P(QuicServerTest, RetryAlways) {
  MetricsRegistry metrics;
  QuicServerConfig c = ServerConfig();
  c.retry = QuicRetryPolicy::kAlways;
  c.workers = 0;  // one worker: its counter is the server's
  c.metrics = &metrics;
  RunningHqServer server(std::move(c), Docs::Get().root());
  ASSERT_TRUE(server.ok());
  HqClientOptions o = ClientOptions(server);
  o.paths = {"/1k.bin"};
  absl::StatusOr<HqClientResult> r = RunHqClient(o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->completed, 1u);
  ExpectSame("1k.bin");
  ASSERT_TRUE(server.Stop().ok());
  EXPECT_GE(server.hq().server().stats().retries_sent, 1u);
  EXPECT_EQ(metrics.AddCounter("petrel_quic_retries_sent_total", "", {{"worker", "0"}}).Value(),
            server.hq().server().stats().retries_sent);
}

TEST_P(QuicServerTest, RetryAutoUnderLoad) {
  QuicServerConfig c = ServerConfig();
  c.retry = QuicRetryPolicy::kAuto;
  c.retry_threshold = 0;  // every handshake counts as "under load"
  RunningHqServer server(std::move(c), Docs::Get().root());
  ASSERT_TRUE(server.ok());
  HqClientOptions o = ClientOptions(server);
  o.paths = {"/1k.bin"};
  absl::StatusOr<HqClientResult> r = RunHqClient(o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->completed, 1u);
  ASSERT_TRUE(server.Stop().ok());
  EXPECT_GE(server.hq().server().stats().retries_sent, 1u);
}

TEST_P(QuicServerTest, ResumptionAndZeroRtt) {
  RunningHqServer server(ServerConfig(), Docs::Get().root());
  ASSERT_TRUE(server.ok());
  HqClientOptions o = ClientOptions(server);
  o.paths = {"/1k.bin"};
  absl::StatusOr<HqClientResult> first = RunHqClient(o);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_FALSE(first->session_reused);
  ASSERT_FALSE(first->session.empty());
  ASSERT_FALSE(first->transport_params.empty());

  std::filesystem::remove(download_.path() + "/1k.bin");
  o.quic.session = first->session;
  o.quic.transport_params = first->transport_params;
  absl::StatusOr<HqClientResult> second = RunHqClient(o);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_TRUE(second->session_reused);
  EXPECT_TRUE(second->early_data_accepted);
  EXPECT_EQ(second->completed, 1u);
  ExpectSame("1k.bin");
}

TEST_P(QuicServerTest, KeyUpdateByClient) {
  RunningHqServer server(ServerConfig(), Docs::Get().root());
  ASSERT_TRUE(server.ok());
  HqClientOptions o = ClientOptions(server);
  o.paths = {"/10m.bin"};
  o.key_update = true;
  absl::StatusOr<HqClientResult> r = RunHqClient(o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->key_update_initiated);
  EXPECT_EQ(r->completed, 1u);
  ExpectSame("10m.bin");
}

TEST_P(QuicServerTest, IdleTimeoutEndsConnection) {
  QuicServerConfig c = ServerConfig();
  c.limits.idle_timeout_ms = 300;
  RunningHqServer server(std::move(c), Docs::Get().root());
  ASSERT_TRUE(server.ok());
  HqClientOptions o = ClientOptions(server);
  o.quic.limits.idle_timeout_ms = 300;
  o.paths = {"/1k.bin"};
  o.close_when_done = false;  // stay open: only the idle timeout can end it
  absl::StatusOr<HqClientResult> r = RunHqClient(o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->completed, 1u);
  EXPECT_EQ(r->close_error, NGTCP2_ERR_IDLE_CLOSE);
}

TEST_P(QuicServerTest, GracefulStopFinishesAcceptedStreams) {
  RunningHqServer server(ServerConfig(), Docs::Get().root());
  ASSERT_TRUE(server.ok());
  HqClientOptions o = ClientOptions(server);
  o.paths = {"/10m.bin"};
  o.close_when_done = false;  // the server's shutdown closes the connection
  // Stop the server while the response is under way: the accepted stream must still finish.
  o.on_first_data = [&server] { server.hq().server().Stop(std::chrono::seconds(20)); };
  absl::StatusOr<HqClientResult> r = RunHqClient(o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->completed, 1u);
  ExpectSame("10m.bin");
  ASSERT_TRUE(server.Stop().ok());  // Run() has returned
  EXPECT_EQ(server.hq().files_served(), 1u);
}

// Graceful stop is event-driven: while a stream is held open the server does not keep asking
// whether its connection is idle. It asks when the stop begins (after a write pass) and on the
// connection's events — packets read, streams closed — and, once the stream closes and the
// peer has acknowledged everything, closes the connection at once (not at the deadline). With
// nothing happening on the connection the asks stop; a stop that polled would go on asking.
TEST_P(QuicServerTest, GracefulStopAsksWhetherIdleOnlyOnEvents) {
  struct Held {
    std::mutex mu;
    std::condition_variable changed;
    QuicConnection* conn = nullptr;  // these three under mu
    int64_t stream = -1;
    int idle_asks = 0;
  } held;
  QuicServerCallbacks cb;
  cb.on_stream_data = [&held](QuicConnection& c, int64_t s, absl::string_view data, bool fin) {
    c.Consume(s, data.size());
    if (!fin) return;
    std::lock_guard lock(held.mu);
    held.conn = &c;
    held.stream = s;
    held.changed.notify_all();
  };
  cb.is_idle = [&held](QuicConnection& c) {
    std::lock_guard lock(held.mu);
    ++held.idle_asks;
    held.changed.notify_all();
    return c.open_streams() == 0;
  };
  QuicServerConfig config = ServerConfig();
  config.listen = {*SocketAddress::Parse("127.0.0.1", 0)};
  absl::StatusOr<std::unique_ptr<QuicServer>> server = QuicServer::Create(config, cb);
  ASSERT_TRUE(server.ok()) << server.status();
  absl::Status run_status;
  std::thread run([&] { run_status = (*server)->Run(); });

  HqClientOptions o;
  o.quic.server = (*server)->local_addresses()[0];
  o.quic.verify_peer = false;
  o.quic.limits.idle_timeout_ms = 30'000;  // the server's stop must end it, not the idle timer
  o.download_dir = download_.path();
  o.paths = {"/held"};
  o.close_when_done = false;
  absl::StatusOr<HqClientResult> result;
  std::thread client([&] { result = RunHqClient(o); });

  QuicConnection* conn = nullptr;
  int64_t stream = -1;
  int asks_while_held = 0;
  {
    std::unique_lock lock(held.mu);
    const bool got =
        held.changed.wait_for(lock, std::chrono::seconds(30), [&held] { return held.stream >= 0; });
    EXPECT_TRUE(got) << "no request";
    lock.unlock();
    (*server)->Stop(std::chrono::seconds(60));
    lock.lock();
    EXPECT_TRUE(held.changed.wait_for(lock, std::chrono::seconds(30),
                                      [&held] { return held.idle_asks >= 1; }));
    // Two seconds with the stream held: the asks are the events of the stop's first moments
    // (the write pass, the peer's acknowledgements, a probe or two from a peer on a loaded
    // machine), a handful; a stop that polled every 10 ms would ask some 200 times.
    const int at_start = held.idle_asks;
    held.changed.wait_for(lock, std::chrono::seconds(2), [] { return false; });
    EXPECT_LT(held.idle_asks - at_start, 50) << "asks while the stream was held";
    asks_while_held = held.idle_asks;
    conn = held.conn;
    stream = held.stream;
  }
  // Answer on the connection's thread; the stream's close lets the stop close the connection.
  if (conn != nullptr) {
    conn->loop()->Post([conn, stream] { conn->Write(stream, "held response", /*fin=*/true); });
  }
  client.join();  // without a request, the stop's deadline ends both (bounded)
  run.join();
  ASSERT_NE(conn, nullptr);
  EXPECT_TRUE(run_status.ok()) << run_status;
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->completed, 1u);
  EXPECT_EQ(petrel::testing::ReadFile(download_.path() + "/held"), "held response");
  std::lock_guard lock(held.mu);
  // The response's packets and their acknowledgements: a handful of asks (more on a loaded
  // machine, where a slow peer's probes add events), not one per 10 ms.
  EXPECT_GT(held.idle_asks, asks_while_held);
  EXPECT_LT(held.idle_asks, asks_while_held + 50);
}

// `size` bytes of a position-dependent pattern: a misplaced or repeated chunk shows.
std::string PatternBody(size_t size) {
  std::string body(size, '\0');
  for (size_t i = 0; i < size; ++i) body[i] = static_cast<char>('a' + (i * 7 + i / 4093) % 26);
  return body;
}

// A client's on_connected that asks for `n` responses: `n` bidirectional streams, each with a
// one-line request and its FIN.
std::function<void(QuicConnection&)> OpenRequests(size_t n) {
  return [n](QuicConnection& c) {
    for (size_t i = 0; i < n; ++i) {
      const int64_t s = c.OpenBidiStream();
      ASSERT_GE(s, 0);
      c.Write(s, "GET /\r\n", /*fin=*/true);
    }
  };
}

// Connects a client with `callbacks` and stream windows of `max_stream_data` to `server`, runs
// it until one of its callbacks stops it (a 20 s idle timeout bounds the test), then stops the
// server and joins its thread `run`. `client` is where the callbacks find the client.
void RunClientThenStopServer(QuicServer& server, std::thread& run, QuicClientCallbacks callbacks,
                             uint64_t max_stream_data, std::unique_ptr<QuicClient>& client) {
  QuicClientConfig cc;
  cc.server = server.local_addresses()[0];
  cc.verify_peer = false;
  cc.limits.max_stream_data = max_stream_data;
  cc.limits.idle_timeout_ms = 20'000;
  absl::StatusOr<std::unique_ptr<QuicClient>> created =
      QuicClient::Create(cc, std::move(callbacks));
  ASSERT_TRUE(created.ok()) << created.status();
  client = *std::move(created);
  ASSERT_TRUE(client->Connect().ok());
  client->Run();
  server.Stop(std::chrono::seconds(0));
  run.join();
}

// An urgent stream's data goes out before the data other streams already have queued: the
// server queues 64 KiB on each of 50 response streams, then a few bytes on an urgent
// unidirectional stream, all in one callback. The client must see the urgent bytes before any
// response byte. (Taking turns with the 50 streams, they would come some 50 packets later.)
TEST_P(QuicServerTest, UrgentStreamGoesBeforeQueuedData) {
  constexpr size_t kStreams = 50;
  const std::string bulk(64 << 10, 'b');
  std::vector<int64_t> requests;  // server connection thread only
  QuicServerCallbacks scb;
  scb.on_stream_data = [&](QuicConnection& c, int64_t s, absl::string_view data, bool fin) {
    c.Consume(s, data.size());
    if (!fin) return;
    requests.push_back(s);
    if (requests.size() < kStreams) return;
    for (const int64_t r : requests) EXPECT_TRUE(c.Write(r, bulk, /*fin=*/true));
    const int64_t urgent = c.OpenUniStream();
    ASSERT_GE(urgent, 0);
    c.SetUrgent(urgent);
    EXPECT_TRUE(c.Write(urgent, "urgent", /*fin=*/true));
  };
  QuicServerConfig config = ServerConfig();
  config.listen = {*SocketAddress::Parse("127.0.0.1", 0)};
  absl::StatusOr<std::unique_ptr<QuicServer>> server = QuicServer::Create(config, scb);
  ASSERT_TRUE(server.ok()) << server.status();
  absl::Status run_status;
  std::thread run([&] { run_status = (*server)->Run(); });

  // The client side, on its loop thread.
  size_t bulk_before_urgent = 0;
  size_t bulk_received = 0;
  size_t bulk_finished = 0;
  std::string urgent_received;
  bool urgent_finished = false;
  std::unique_ptr<QuicClient> client;
  QuicClientCallbacks ccb;
  ccb.on_connected = OpenRequests(kStreams);
  ccb.on_stream_data = [&](QuicConnection& c, int64_t s, absl::string_view data, bool fin) {
    c.Consume(s, data.size());
    if ((s & 2) != 0) {  // the server's unidirectional stream
      urgent_received.append(data.data(), data.size());
      urgent_finished = urgent_finished || fin;
    } else {
      if (urgent_received.empty()) bulk_before_urgent += data.size();
      bulk_received += data.size();
      if (fin) ++bulk_finished;
    }
    if (urgent_finished && bulk_finished == kStreams) client->Stop();
  };
  QuicClientConfig cc;
  cc.server = (*server)->local_addresses()[0];
  cc.verify_peer = false;
  cc.limits.idle_timeout_ms = 10'000;  // bounds the test in time
  absl::StatusOr<std::unique_ptr<QuicClient>> created = QuicClient::Create(cc, ccb);
  ASSERT_TRUE(created.ok()) << created.status();
  client = *std::move(created);
  ASSERT_TRUE(client->Connect().ok());
  client->Run();
  (*server)->Stop(std::chrono::seconds(0));
  run.join();
  EXPECT_EQ(urgent_received, "urgent");
  EXPECT_EQ(bulk_finished, kStreams);
  EXPECT_EQ(bulk_received, kStreams * bulk.size());
  EXPECT_EQ(bulk_before_urgent, 0u);
}

// A connection's streams together queue at most connection_send_buffer (plus one write): 12
// response streams of 1 MiB each, written as far as Write allows while the client keeps every
// stream window at 64 KiB and returns no credit. Without the connection's limit each stream
// would queue its own 1 MiB (12 MiB held for a client that reads nothing). Once the client
// reads, streams refused for the connection's room are woken in turn and every response
// completes byte-exact.
TEST_P(QuicServerTest, StreamsTogetherQueueAtMostTheConnectionSendBuffer) {
  constexpr size_t kStreams = 12;
  constexpr size_t kBody = 1 << 20;
  constexpr size_t kChunk = 128 << 10;
  const std::string body = PatternBody(kBody);
  std::vector<int64_t> requests;      // server connection thread only
  std::map<int64_t, size_t> written;  // the same
  std::atomic<size_t> peak_buffered{0};
  std::atomic<size_t> refused{0};
  auto fill = [&](QuicConnection& c, int64_t s) {
    size_t& w = written[s];
    while (w < kBody) {
      const size_t n = std::min(kChunk, kBody - w);
      if (!c.Write(s, absl::string_view(body).substr(w, n), w + n == kBody)) {
        ++refused;
        return;
      }
      w += n;
      peak_buffered = std::max(peak_buffered.load(), c.send_buffered());
    }
  };
  QuicServerCallbacks scb;
  scb.on_stream_data = [&](QuicConnection& c, int64_t s, absl::string_view data, bool fin) {
    c.Consume(s, data.size());
    if (!fin) return;
    requests.push_back(s);
    if (requests.size() < kStreams) return;
    for (const int64_t r : requests) fill(c, r);
    const int64_t urgent = c.OpenUniStream();  // never refused for the connection's room
    ASSERT_GE(urgent, 0);
    c.SetUrgent(urgent);
    EXPECT_TRUE(c.Write(urgent, "filled", /*fin=*/true));
  };
  scb.on_stream_writable = [&](QuicConnection& c, int64_t s) { fill(c, s); };
  QuicServerConfig config = ServerConfig();
  config.listen = {*SocketAddress::Parse("127.0.0.1", 0)};
  const size_t cap = config.limits.connection_send_buffer;
  ASSERT_LT(cap, kStreams * kBody / 2);
  absl::StatusOr<std::unique_ptr<QuicServer>> server = QuicServer::Create(config, scb);
  ASSERT_TRUE(server.ok()) << server.status();
  absl::Status run_status;
  std::thread run([&] { run_status = (*server)->Run(); });

  // The client, on its loop thread: no credit returned until the server says it has filled.
  bool reading = false;
  std::map<int64_t, std::string> received;
  std::map<int64_t, size_t> unconsumed;
  size_t finished = 0;
  std::unique_ptr<QuicClient> client;
  QuicClientCallbacks ccb;
  ccb.on_connected = OpenRequests(kStreams);
  ccb.on_stream_data = [&](QuicConnection& c, int64_t s, absl::string_view data, bool fin) {
    if ((s & 2) != 0) {  // the server's urgent stream
      c.Consume(s, data.size());
      if (!fin) return;
      reading = true;
      for (const auto& [id, n] : unconsumed) c.Consume(id, n);
      unconsumed.clear();
      return;
    }
    received[s].append(data.data(), data.size());
    if (reading) {
      c.Consume(s, data.size());
    } else {
      unconsumed[s] += data.size();
    }
    if (fin && ++finished == kStreams) client->Stop();
  };
  RunClientThenStopServer(**server, run, std::move(ccb), 64 << 10, client);
  if (::testing::Test::HasFatalFailure()) return;
  EXPECT_TRUE(reading);
  EXPECT_EQ(finished, kStreams);
  ASSERT_EQ(received.size(), kStreams);
  for (const auto& [id, bytes] : received) EXPECT_TRUE(bytes == body) << "stream " << id;
  EXPECT_GE(peak_buffered.load(), cap);           // the limit was reached ...
  EXPECT_LE(peak_buffered.load(), cap + kChunk);  // ... and held
  EXPECT_GT(refused.load(), 0u);
}

// A stream source (QuicConnection::SetStreamSource) whose streams each send `body` whole, one
// stream until it is blocked or done, then the next; it counts what it was told. Server connection
// thread only.
class BodySource final : public QuicStreamSource {
 public:
  explicit BodySource(const std::string& body) : body_(body) {}
  void Serve(int64_t stream) { out_[stream]; }

  size_t peak_held() const { return peak_held_; }
  size_t blocked() const { return blocked_; }
  size_t unblocked() const { return unblocked_; }
  size_t finished() const { return finished_; }

 private:
  struct Out {
    size_t sent = 0;
    bool fin_sent = false;
    bool blocked = false;
  };
  Pulled PullStreamData(QuicStreamVec* vecs, size_t max) override {
    if (max == 0) return {};
    // The last stream served while it can send, then the next one that can.
    auto start = out_.lower_bound(last_);
    for (size_t k = 0; k < out_.size(); ++k, ++start) {
      if (start == out_.end()) start = out_.begin();
      Out& o = start->second;
      if (o.blocked || o.fin_sent) continue;
      last_ = start->first;
      const size_t n = std::min<size_t>(body_.size() - o.sent, 16 << 10);
      vecs[0].base = reinterpret_cast<uint8_t*>(const_cast<char*>(body_.data() + o.sent));
      vecs[0].len = n;
      return Pulled{start->first, 1, o.sent + n == body_.size()};
    }
    return {};
  }
  void OnStreamDataSent(int64_t stream, size_t bytes, bool, bool fin) override {
    Out& o = out_[stream];
    o.sent += bytes;
    held_ += bytes;
    peak_held_ = std::max(peak_held_, held_);
    if (fin) {
      o.fin_sent = true;
      ++finished_;
    }
  }
  void OnStreamDataAcked(int64_t, uint64_t bytes) override { held_ -= bytes; }
  void OnStreamBlocked(int64_t stream) override {
    out_[stream].blocked = true;
    ++blocked_;
  }
  void OnStreamUnblocked(int64_t stream) override {
    out_[stream].blocked = false;
    ++unblocked_;
  }

  const std::string& body_;
  std::map<int64_t, Out> out_;
  int64_t last_ = -1;
  size_t held_ = 0;  // sent and not yet acknowledged
  size_t peak_held_ = 0;
  size_t blocked_ = 0;
  size_t unblocked_ = 0;
  size_t finished_ = 0;
};

// Stream data pulled from a source as packets are written: 8 responses of 1 MiB, byte-exact,
// while the client's 16 KiB stream windows block and unblock the streams many times; what the
// source has sent and the peer not yet acknowledged stays within connection_send_buffer (set to
// 64 KiB) plus one packet. Without that bound, slow start on loopback soon has more in flight.
TEST_P(QuicServerTest, PulledStreamsKeepAtMostTheConnectionSendBufferUnacknowledged) {
  constexpr size_t kStreams = 8;
  constexpr size_t kBody = 1 << 20;
  const std::string body = PatternBody(kBody);
  BodySource source(body);
  QuicServerCallbacks scb;
  scb.on_connection = [&](QuicConnection& c) { c.SetStreamSource(&source); };
  scb.on_stream_data = [&](QuicConnection& c, int64_t s, absl::string_view data, bool fin) {
    c.Consume(s, data.size());
    if (!fin) return;
    source.Serve(s);
    c.WantWrite();
  };
  scb.on_connection_closed = [&](QuicConnection& c) { c.SetStreamSource(nullptr); };
  QuicServerConfig config = ServerConfig();
  config.listen = {*SocketAddress::Parse("127.0.0.1", 0)};
  config.limits.connection_send_buffer = 64 << 10;
  const size_t cap = config.limits.connection_send_buffer;
  absl::StatusOr<std::unique_ptr<QuicServer>> server = QuicServer::Create(config, scb);
  ASSERT_TRUE(server.ok()) << server.status();
  absl::Status run_status;
  std::thread run([&] { run_status = (*server)->Run(); });

  std::map<int64_t, std::string> received;
  size_t finished = 0;
  std::unique_ptr<QuicClient> client;
  QuicClientCallbacks ccb;
  ccb.on_connected = OpenRequests(kStreams);
  ccb.on_stream_data = [&](QuicConnection& c, int64_t s, absl::string_view data, bool fin) {
    c.Consume(s, data.size());
    received[s].append(data.data(), data.size());
    if (fin && ++finished == kStreams) client->Stop();
  };
  RunClientThenStopServer(**server, run, std::move(ccb), 16 << 10, client);
  if (::testing::Test::HasFatalFailure()) return;
  EXPECT_EQ(finished, kStreams);
  ASSERT_EQ(received.size(), kStreams);
  for (const auto& [id, bytes] : received) EXPECT_TRUE(bytes == body) << "stream " << id;
  EXPECT_EQ(source.finished(), kStreams);
  EXPECT_GT(source.peak_held(), cap / 2);
  EXPECT_LE(source.peak_held(), cap + 1500);
  EXPECT_GT(source.blocked(), 0u);
  EXPECT_GT(source.unblocked(), 0u);
}

// WriteRef queues the caller's bytes, not a copy: ngtcp2 sends them, and at 5 % loss resends
// them, from the caller's buffer, and on_stream_data_acked counts them off until the whole body
// is acknowledged. The server changes its buffer right after WriteRef returns, before any packet
// leaves (writes wait for the end of the turn): the client sees the changed bytes only if
// nothing was copied. A last request is answered once every body byte is acknowledged, so the
// client runs until then, whatever the order of acknowledgements and stream closes.
TEST_P(QuicServerTest, WriteRefSendsTheCallersBytesAndCountsThemOffAsAcknowledged) {
  constexpr size_t kStreams = 4;
  constexpr size_t kBody = 256 << 10;
  const std::string original = PatternBody(kBody);
  std::string changed = original;
  changed.front() = changed.back() = '#';

  // Server connection thread only.
  std::map<int64_t, std::string> requests;
  std::map<int64_t, std::string> held;  // what WriteRef refers to, kept until the stream closes
  std::map<int64_t, uint64_t> acked;
  uint64_t acked_total = 0;
  int64_t done_request = -1;
  bool done_answered = false;
  const auto answer_done = [&](QuicConnection& c) {
    if (done_request < 0 || done_answered || acked_total < kStreams * kBody) return;
    done_answered = true;
    EXPECT_TRUE(c.Write(done_request, "all acknowledged", /*fin=*/true));
  };
  QuicServerCallbacks scb;
  scb.on_stream_data = [&](QuicConnection& c, int64_t s, absl::string_view data, bool fin) {
    c.Consume(s, data.size());
    requests[s].append(data.data(), data.size());
    if (!fin) return;
    if (requests[s] == "DONE\r\n") {
      done_request = s;
      return answer_done(c);
    }
    std::string& bytes = held[s] = original;
    ASSERT_TRUE(c.WriteRef(s, bytes, /*fin=*/true));
    bytes.front() = bytes.back() = '#';
  };
  scb.on_stream_data_acked = [&](QuicConnection& c, int64_t s, uint64_t bytes) {
    if (s == done_request) return;
    acked[s] += bytes;
    acked_total += bytes;
    answer_done(c);
  };
  scb.on_stream_closed = [&](QuicConnection&, int64_t s) {
    if (held.erase(s) != 0) {
      EXPECT_EQ(acked[s], kBody) << "stream " << s << " closed before all was acknowledged";
    }
  };
  QuicServerConfig config = ServerConfig();
  config.listen = {*SocketAddress::Parse("127.0.0.1", 0)};
  config.test_loss = 0.05;
  absl::StatusOr<std::unique_ptr<QuicServer>> server = QuicServer::Create(config, scb);
  ASSERT_TRUE(server.ok()) << server.status();
  absl::Status run_status;
  std::thread run([&] { run_status = (*server)->Run(); });

  std::map<int64_t, std::string> received;
  size_t finished = 0;
  int64_t done_stream = -1;
  std::string done_reply;
  std::unique_ptr<QuicClient> client;
  QuicClientCallbacks ccb;
  ccb.on_connected = OpenRequests(kStreams);
  ccb.on_stream_data = [&](QuicConnection& c, int64_t s, absl::string_view data, bool fin) {
    c.Consume(s, data.size());
    if (s == done_stream) {
      done_reply.append(data.data(), data.size());
      if (fin) client->Stop();
      return;
    }
    received[s].append(data.data(), data.size());
    if (fin && ++finished == kStreams) {
      done_stream = c.OpenBidiStream();
      ASSERT_GE(done_stream, 0);
      c.Write(done_stream, "DONE\r\n", /*fin=*/true);
    }
  };
  RunClientThenStopServer(**server, run, std::move(ccb), 1 << 20, client);
  if (::testing::Test::HasFatalFailure()) return;
  EXPECT_EQ(done_reply, "all acknowledged");
  ASSERT_EQ(received.size(), kStreams);
  for (const auto& [id, bytes] : received) {
    EXPECT_EQ(bytes.size(), kBody) << "stream " << id;
    EXPECT_TRUE(bytes == changed) << "stream " << id << ": not the bytes WriteRef referred to";
  }
  ASSERT_EQ(acked.size(), kStreams);
  for (const auto& [id, bytes] : acked) EXPECT_EQ(bytes, kBody) << "stream " << id;
}

TEST_P(QuicServerTest, FivePercentLossBothWays) {
  QuicServerConfig c = ServerConfig();
  c.test_loss = 0.05;
  RunningHqServer server(std::move(c), Docs::Get().root());
  ASSERT_TRUE(server.ok());
  HqClientOptions o = ClientOptions(server);
  o.quic.test_loss = 0.05;
  o.paths = {"/10m.bin"};
  absl::StatusOr<HqClientResult> r = RunHqClient(o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->completed, 1u);
  ExpectSame("10m.bin");
}

TEST_P(QuicServerTest, StatelessResetForUnknownConnectionEndsClient) {
  const std::string secret(32, 'k');
  QuicServerConfig c = ServerConfig();
  c.stateless_reset_secret = secret;
  RunningHqServer first(c, Docs::Get().root());
  RunningHqServer second(c, Docs::Get().root());  // same key and CID layout, no connections
  ASSERT_TRUE(first.ok() && second.ok());
  testing::UdpRelay relay(first.address());
  HqClientOptions o = ClientOptions(first);
  o.quic.server = relay.address();
  o.paths = {"/1k.bin"};
  o.close_when_done = false;
  // From the first response on, the client talks to a server that never saw its connection.
  o.on_first_data = [&] { relay.SetTarget(second.address()); };
  absl::StatusOr<HqClientResult> r = RunHqClient(o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->close_error, NGTCP2_ERR_DRAINING);  // ended by the reset, not the idle timer
  ASSERT_TRUE(first.Stop(Duration::zero()).ok());  // its connection's peer is gone
  ASSERT_TRUE(second.Stop().ok());
  EXPECT_GE(second.hq().server().stats().stateless_resets_sent, 1u);
}

TEST_P(QuicServerTest, QlogPerConnection) {
  TempDir qlog;
  QuicServerConfig c = ServerConfig();
  c.qlog_dir = qlog.path();
  RunningHqServer server(std::move(c), Docs::Get().root());
  ASSERT_TRUE(server.ok());
  HqClientOptions o = ClientOptions(server);
  o.paths = {"/1k.bin"};
  absl::StatusOr<HqClientResult> r = RunHqClient(o);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(server.Stop().ok());
  size_t files = 0;
  for (const auto& e : std::filesystem::directory_iterator(qlog.path())) {
    ++files;
    EXPECT_TRUE(absl::EndsWith(e.path().string(), "-server.sqlog")) << e.path();
    EXPECT_GT(e.file_size(), 100u);
  }
  EXPECT_EQ(files, 1u);
}

TEST_P(QuicServerTest, EveryCongestionController) {
  for (CongestionControl cc :
       {CongestionControl::kReno, CongestionControl::kBbr, CongestionControl::kBbr2}) {
    QuicServerConfig c = ServerConfig();
    c.cc = cc;
    RunningHqServer server(std::move(c), Docs::Get().root());
    ASSERT_TRUE(server.ok());
    HqClientOptions o = ClientOptions(server);
    o.quic.cc = cc;
    o.paths = {"/10m.bin"};
    absl::StatusOr<HqClientResult> r = RunHqClient(o);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->completed, 1u) << static_cast<int>(cc);
    ExpectSame("10m.bin");
  }
}

// QuicClient directly: fetch 10 MB and move to a new local port after 1 MB, validating the
// new path first and moving at once.
TEST_P(QuicServerTest, ClientMigratesToNewLocalAddress) {
  for (const QuicMigration how : {QuicMigration::kProbeFirst, QuicMigration::kImmediate}) {
    SCOPED_TRACE(how == QuicMigration::kImmediate ? "immediate" : "probe first");
    RunningHqServer server(ServerConfig(), Docs::Get().root());
    ASSERT_TRUE(server.ok());
    QuicClientConfig qc;
    qc.server = server.address();
    qc.local = *SocketAddress::Parse("127.0.0.1", 0);
    qc.verify_peer = false;
    qc.limits.idle_timeout_ms = 10'000;
    std::string body;
    bool fin = false;
    bool migrated = false;
    QuicClient* client = nullptr;
    QuicClientCallbacks cb;
    cb.on_connected = [](QuicConnection& c) {
      const int64_t s = c.OpenBidiStream();
      ASSERT_GE(s, 0);
      c.Write(s, "GET /10m.bin\r\n", true);
    };
    cb.on_stream_data = [&](QuicConnection& c, int64_t s, absl::string_view d, bool f) {
      body.append(d.data(), d.size());
      c.Consume(s, d.size());
      if (!migrated && body.size() > 1'000'000) {
        migrated = client->MigrateTo(*SocketAddress::Parse("127.0.0.1", 0), how).ok();
      }
      if (f) {
        fin = true;
        c.Close(0);
      }
    };
    absl::StatusOr<std::unique_ptr<QuicClient>> made = QuicClient::Create(qc, std::move(cb));
    ASSERT_TRUE(made.ok()) << made.status();
    client = made->get();
    const SocketAddress before = client->local_address();
    ASSERT_TRUE(client->Connect().ok());
    client->Run();
    EXPECT_TRUE(migrated);
    EXPECT_NE(client->local_address(), before);
    EXPECT_TRUE(fin);
    EXPECT_EQ(body.size(), 10'000'000u);
  }
}

// --- Listen addresses and limits changed while the server runs ---

// Whether a UDP socket can be bound to `addr` now (closed again at once).
bool UdpBindable(const SocketAddress& addr) {
  const int fd = ::socket(addr.family(), SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  if (addr.is_v6()) {
    const int on = 1;
    ::setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &on, sizeof(on));
  }
  const bool ok = ::bind(fd, addr.sockaddr_ptr(), addr.length()) == 0;
  ::close(fd);
  return ok;
}

// Polls `done` until it holds or `limit` passed; for state another thread changes.
bool WaitFor(const std::function<bool()>& done,
             std::chrono::milliseconds limit = std::chrono::seconds(10)) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

SocketAddress Loopback4(uint16_t port) { return *SocketAddress::Parse("127.0.0.1", port); }
SocketAddress Loopback6(uint16_t port) { return *SocketAddress::Parse("::1", port); }

// A QuicClient (hq-interop requests) on its own thread, open until Close(): the test asks it,
// from its own thread, for a fetch on a new stream or for anything else on its loop.
class HeldClient {
 public:
  explicit HeldClient(const SocketAddress& server, uint64_t handshake_timeout_ms = 10'000) {
    QuicClientConfig qc;
    qc.server = server;
    qc.verify_peer = false;
    qc.limits.idle_timeout_ms = 30'000;  // only Close() (or the test's end) ends it
    qc.limits.handshake_timeout_ms = handshake_timeout_ms;
    QuicClientCallbacks cb;
    cb.on_connected = [this](QuicConnection&) {
      std::lock_guard lock(mu_);
      connected_ = true;
      changed_.notify_all();
    };
    cb.on_stream_data = [this](QuicConnection& c, int64_t s, absl::string_view d, bool fin) {
      c.Consume(s, d.size());
      std::lock_guard lock(mu_);
      bodies_[s].append(d.data(), d.size());
      if (fin) finished_[s] = true;
      changed_.notify_all();
    };
    cb.on_closed = [this] {
      std::lock_guard lock(mu_);
      closed_ = true;
      changed_.notify_all();
    };
    absl::StatusOr<std::unique_ptr<QuicClient>> made = QuicClient::Create(qc, std::move(cb));
    EXPECT_TRUE(made.ok()) << made.status();
    if (!made.ok()) return;
    client_ = *std::move(made);
    loop_ = client_->loop();  // before Run(): the loop is still ours here
    EXPECT_TRUE(client_->Connect().ok());
    thread_ = std::thread([this] { client_->Run(); });
  }
  ~HeldClient() { Close(); }

  // True once the handshake completed; false if the connection ended first (or 30 s passed).
  bool WaitConnected() {
    std::unique_lock lock(mu_);
    changed_.wait_for(lock, std::chrono::seconds(30), [this] { return connected_ || closed_; });
    return connected_;
  }
  // Waits until the connection is over (e.g. a handshake timeout).
  void WaitClosed() {
    if (thread_.joinable()) thread_.join();
  }
  bool handshake_completed() {
    std::lock_guard lock(mu_);
    return connected_;
  }

  // Runs `fn` with the connection on the client's loop and returns its result.
  int64_t RunOnLoop(std::function<int64_t(QuicConnection&)> fn) {
    std::optional<int64_t> result;
    loop_->Post([&] {
      const int64_t r = fn(*client_->connection());
      std::lock_guard lock(mu_);
      result = r;
      changed_.notify_all();
    });
    std::unique_lock lock(mu_);
    changed_.wait_for(lock, std::chrono::seconds(30), [&] { return result.has_value(); });
    return result.value_or(-2);
  }

  // Requests `path` on a new stream; the body once its FIN arrived, nullopt otherwise.
  std::optional<std::string> Fetch(const std::string& path) {
    const int64_t s = RunOnLoop([&path](QuicConnection& c) {
      const int64_t id = c.OpenBidiStream();
      if (id >= 0) c.Write(id, absl::StrCat("GET ", path, "\r\n"), /*fin=*/true);
      return id;
    });
    if (s < 0) return std::nullopt;
    std::unique_lock lock(mu_);
    changed_.wait_for(lock, std::chrono::seconds(30), [&] { return finished_[s] || closed_; });
    if (!finished_[s]) return std::nullopt;
    return bodies_[s];
  }

  // Closes the connection (CONNECTION_CLOSE) and joins the client's thread.
  void Close() {
    if (client_ != nullptr && thread_.joinable()) {
      client_->Stop();
      thread_.join();
    }
  }

 private:
  std::unique_ptr<QuicClient> client_;
  EventLoop* loop_ = nullptr;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable changed_;
  bool connected_ = false;  // these under mu_
  bool closed_ = false;
  std::map<int64_t, std::string> bodies_;
  std::map<int64_t, bool> finished_;
};

// A server on 127.0.0.1 also listens on [::1] (same port) once told: a client over IPv6 gets a
// connection and a file, byte for byte, and the IPv4 socket is the same one as before.
TEST_P(QuicServerTest, ListenAddressAddedWhileRunning) {
  if (!UdpBindable(Loopback6(0))) GTEST_SKIP() << "no IPv6 loopback here";
  RunningHqServer server(ServerConfig(), Docs::Get().root());
  ASSERT_TRUE(server.ok());
  QuicServer& quic = server.hq().server();
  const uint16_t port = server.address().port();
  HeldClient held(Loopback4(port));
  ASSERT_TRUE(held.WaitConnected());

  ASSERT_TRUE(quic.SetListenAddresses({Loopback4(port), Loopback6(port)}).ok());
  EXPECT_EQ(quic.local_addresses(), (std::vector<SocketAddress>{Loopback4(port), Loopback6(port)}));

  HqClientOptions o = ClientOptions(server);
  o.quic.server = Loopback6(port);
  ASSERT_NO_FATAL_FAILURE(FetchOneAndCompare(o, "/1k.bin"));
  // The kept IPv4 socket: its connection goes on, and it takes new ones.
  EXPECT_EQ(held.Fetch("/1k.bin"), petrel::testing::ReadFile(Docs::Get().root() + "/1k.bin"));
  std::filesystem::remove(download_.path() + "/1k.bin");
  ASSERT_NO_FATAL_FAILURE(FetchOneAndCompare(ClientOptions(server), "/1k.bin"));
  held.Close();
  ASSERT_TRUE(server.Stop().ok());
  EXPECT_EQ(quic.stats().connections_accepted, 3u);
  EXPECT_EQ(quic.stats().not_listening_drops, 0u);
}

// A dropped address takes no new connection but serves the one it has, byte for byte; its
// port is free again once that connection closed.
TEST_P(QuicServerTest, ListenAddressDroppedWhileItsConnectionGoesOn) {
  if (!UdpBindable(Loopback6(0))) GTEST_SKIP() << "no IPv6 loopback here";
  MetricsRegistry metrics;
  QuicServerConfig config = ServerConfig();
  config.metrics = &metrics;
  RunningHqServer server(config, Docs::Get().root());
  ASSERT_TRUE(server.ok());
  QuicServer& quic = server.hq().server();
  Counter& not_listening =
      metrics.AddCounter("petrel_quic_master_drops_total", "", {{"reason", "not_listening"}});
  const uint16_t port = server.address().port();
  const std::string file = petrel::testing::ReadFile(Docs::Get().root() + "/1k.bin");
  HeldClient held(Loopback4(port));
  ASSERT_TRUE(held.WaitConnected());
  EXPECT_EQ(held.Fetch("/1k.bin"), file);

  ASSERT_TRUE(quic.SetListenAddresses({Loopback6(port)}).ok());
  EXPECT_EQ(quic.local_addresses(), std::vector<SocketAddress>{Loopback6(port)});
  // The held connection: a new stream, a whole file.
  EXPECT_EQ(held.Fetch("/1k.bin"), file);
  EXPECT_FALSE(UdpBindable(Loopback4(port)));  // still open for it
  // A new client there: its Initials are dropped until it gives up.
  {
    HeldClient refused(Loopback4(port), /*handshake_timeout_ms=*/300);
    refused.WaitClosed();
    EXPECT_FALSE(refused.handshake_completed());
  }
  EXPECT_TRUE(WaitFor([&] { return not_listening.Value() > 0; }));
  // IPv6 takes new ones.
  HqClientOptions o = ClientOptions(server);
  o.quic.server = Loopback6(port);
  ASSERT_NO_FATAL_FAILURE(FetchOneAndCompare(o, "/1k.bin"));

  held.Close();
  EXPECT_TRUE(WaitFor([&] { return UdpBindable(Loopback4(port)); }))
      << "127.0.0.1:" << port << " still bound after its last connection closed";
  ASSERT_TRUE(server.Stop().ok());
  EXPECT_GE(quic.stats().not_listening_drops, 1u);
  EXPECT_EQ(quic.stats().connections_accepted, 2u);
}

// An address that cannot be bound fails the whole change: nothing changes, and what the call
// had bound already is closed again.
TEST_P(QuicServerTest, ListenAddressBindErrorChangesNothing) {
  RunningHqServer server(ServerConfig(), Docs::Get().root());
  ASSERT_TRUE(server.ok());
  QuicServer& quic = server.hq().server();
  const std::vector<SocketAddress> before = quic.local_addresses();
  const SocketAddress current = before[0];
  HeldClient held(current);
  ASSERT_TRUE(held.WaitConnected());

  // A port some other socket holds (no SO_REUSEPORT).
  const int other = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(other, 0);
  SocketAddress taken = Loopback4(0);
  ASSERT_EQ(::bind(other, taken.sockaddr_ptr(), taken.length()), 0);
  socklen_t len = SocketAddress::capacity();
  ASSERT_EQ(::getsockname(other, taken.mutable_sockaddr(), &len), 0);
  // A free port that the call binds before it fails on the taken one.
  uint16_t free_port = 0;
  for (int i = 0; i < 100 && free_port == 0; ++i) {
    const int probe = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    SocketAddress a = Loopback4(0);
    socklen_t alen = SocketAddress::capacity();
    if (::bind(probe, a.sockaddr_ptr(), a.length()) == 0 &&
        ::getsockname(probe, a.mutable_sockaddr(), &alen) == 0) {
      free_port = a.port();
    }
    ::close(probe);
  }
  ASSERT_NE(free_port, 0);

  absl::Status s = quic.SetListenAddresses({Loopback4(free_port), taken});
  EXPECT_FALSE(s.ok());
  EXPECT_TRUE(UdpBindable(Loopback4(free_port))) << "the call left a socket bound";
  s = quic.SetListenAddresses({current, *SocketAddress::Parse("192.0.2.1", 4433)});
  EXPECT_FALSE(s.ok()) << "bound an address this host does not have";
  ::close(other);
  EXPECT_EQ(quic.local_addresses(), before);

  // Old connections and new ones, as before.
  const std::string file = petrel::testing::ReadFile(Docs::Get().root() + "/1k.bin");
  EXPECT_EQ(held.Fetch("/1k.bin"), file);
  ASSERT_NO_FATAL_FAILURE(FetchOneAndCompare(ClientOptions(server), "/1k.bin"));
  held.Close();
  ASSERT_TRUE(server.Stop().ok());
  EXPECT_EQ(quic.stats().not_listening_drops, 0u);
  // After the stop began, nothing changes any more.
  EXPECT_EQ(quic.SetListenAddresses({current}).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(quic.SetTransportLimits(QuicTransportLimits{}).code(),
            absl::StatusCode::kFailedPrecondition);
}

// Before Run() too: the sockets then in place are the ones served, and the one dropped is
// closed once the server runs.
TEST_P(QuicServerTest, ListenAddressesSetBeforeRun) {
  SocketAddress dropped;
  absl::Status set_listen;
  absl::Status set_limits;
  RunningHqServer server(ServerConfig(), Docs::Get().root(), [&](HqServer& hq) {
    dropped = hq.server().local_addresses()[0];
    set_listen = hq.server().SetListenAddresses({Loopback4(0), Loopback4(0)});
    set_limits = hq.server().SetTransportLimits(QuicTransportLimits{});
  });
  ASSERT_TRUE(server.ok());
  ASSERT_TRUE(set_listen.ok()) << set_listen;
  ASSERT_TRUE(set_limits.ok()) << set_limits;
  const std::vector<SocketAddress> now = server.hq().server().local_addresses();
  ASSERT_EQ(now.size(), 2u);
  EXPECT_NE(now[0].port(), now[1].port());
  for (const SocketAddress& a : now) {
    std::filesystem::remove(download_.path() + "/1k.bin");
    HqClientOptions o = ClientOptions(server);
    o.quic.server = a;
    ASSERT_NO_FATAL_FAILURE(FetchOneAndCompare(o, "/1k.bin"));
  }
  EXPECT_TRUE(WaitFor([&] { return UdpBindable(dropped); })) << dropped.ToString();
}

// New limits apply to connections accepted afterwards, not to those already open: with
// max_streams_bidi lowered to 2, a new client can open 2 streams at once, an older one still 3
// (of its 100).
TEST_P(QuicServerTest, TransportLimitsForNewConnectionsOnly) {
  RunningHqServer server(ServerConfig(), Docs::Get().root());
  ASSERT_TRUE(server.ok());
  QuicServer& quic = server.hq().server();
  auto open_three = [](QuicConnection& c) {
    int64_t opened = 0;
    for (int i = 0; i < 3; ++i) opened += c.OpenBidiStream() >= 0 ? 1 : 0;
    return opened;
  };
  HeldClient before(server.address());
  ASSERT_TRUE(before.WaitConnected());

  QuicTransportLimits limits;
  limits.max_streams_bidi = 2;
  ASSERT_TRUE(quic.SetTransportLimits(limits).ok());
  HeldClient after(server.address());
  ASSERT_TRUE(after.WaitConnected());
  EXPECT_EQ(after.RunOnLoop(open_three), 2);
  EXPECT_EQ(before.RunOnLoop(open_three), 3);
  before.Close();
  after.Close();
}

INSTANTIATE_TEST_SUITE_P(Modes, QuicServerTest, ::testing::Values(0, 2),
                         [](const ::testing::TestParamInfo<size_t>& p) {
                           return absl::StrCat("workers", p.param);
                         });

}  // namespace
}  // namespace petrel::hq
