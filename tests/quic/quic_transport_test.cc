// Loopback tests of transport behaviour seen on the wire or in the server's counters: Retry
// tokens, the amplification limit, handshake probes sent twice, key update by the server, cipher
// suites, compatible version negotiation to v2, NAT rebinding, the preferred address, stream resets
// both ways and QuicClient::Stop — each with workers = 0 and workers = 2.
#include <ngtcp2/ngtcp2.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "petrel/quic/quic_client.h"
#include "quic/hq_test_util.h"
#include "quic/packet/invariant_header.h"
#include "quic/udp_relay.h"

namespace petrel::hq {
namespace {

using quic::HeaderParse;
using quic::InvariantHeader;
using quic::LongPacketType;
using quic::ParseInvariantHeader;
using testing::Docs;
using testing::RunningHqServer;
using Direction = testing::UdpRelay::Direction;

using QuicTransportTest = testing::HqLoopbackTest;

// Parses a long-header datagram; false for short headers and garbage.
bool ParseLong(absl::Span<const uint8_t> d, InvariantHeader* h) {
  return ParseInvariantHeader(d, 0, h) == HeaderParse::kOk && h->long_form;
}

TEST_P(QuicTransportTest, RetryTokenIsCarriedByTheSecondInitial) {
  QuicServerConfig c = ServerConfig();
  c.retry = QuicRetryPolicy::kAlways;
  RunningHqServer server(std::move(c), Docs::Get().root());
  ASSERT_TRUE(server.ok());
  std::mutex mu;
  std::string retry_token;               // from the server's Retry
  std::vector<std::string> init_tokens;  // of the client's Initials, in order
  std::vector<bool> after_retry;         // whether each Initial followed a Retry
  testing::UdpRelay relay(server.address(), [&](Direction dir, absl::Span<const uint8_t> d) {
    InvariantHeader h;
    if (!ParseLong(d, &h)) return true;
    std::lock_guard<std::mutex> lock(mu);
    if (dir == Direction::kToClient && h.type == LongPacketType::kRetry) {
      // Retry: header, token, 16-octet integrity tag (RFC 9000 §17.2.5).
      const size_t token_start = static_cast<size_t>(h.scid.data() + h.scid.size() - d.data());
      if (d.size() > token_start + 16) {
        retry_token.assign(reinterpret_cast<const char*>(d.data()) + token_start,
                           d.size() - token_start - 16);
      }
    } else if (dir == Direction::kToServer && h.type == LongPacketType::kInitial) {
      init_tokens.emplace_back(reinterpret_cast<const char*>(h.token.data()), h.token.size());
      after_retry.push_back(!retry_token.empty());
    }
    return true;
  });
  HqClientOptions o = ClientOptions(server);
  o.quic.server = relay.address();
  ASSERT_NO_FATAL_FAILURE(FetchOneAndCompare(o, "/1k.bin"));
  ASSERT_TRUE(server.Stop().ok());
  EXPECT_EQ(server.hq().server().stats().retries_sent, 1u);

  std::lock_guard<std::mutex> lock(mu);
  ASSERT_FALSE(retry_token.empty());
  ASSERT_GE(init_tokens.size(), 2u);
  EXPECT_TRUE(init_tokens[0].empty());
  EXPECT_FALSE(after_retry[0]);
  size_t with_token = 0;
  for (size_t i = 0; i < init_tokens.size(); ++i) {
    if (!after_retry[i]) {
      EXPECT_TRUE(init_tokens[i].empty()) << i;
      continue;
    }
    EXPECT_EQ(init_tokens[i], retry_token) << i;
    ++with_token;
  }
  EXPECT_GE(with_token, 1u);
}

// A client whose address is never validated (its datagrams after the first are lost) may get
// at most 3 times what the server received (RFC 9000 §8.1). The certificate carries many names
// so that the server's first flight is larger than that.
TEST_P(QuicTransportTest, AmplificationLimitBeforeAddressValidation) {
  QuicServerConfig c = ServerConfig();
  c.self_signed_names.clear();
  for (int i = 0; i < 200; ++i) {
    c.self_signed_names.push_back(absl::StrCat("name-", i, ".amplification.petrel.test"));
  }
  c.self_signed_names.push_back("localhost");
  RunningHqServer server(std::move(c), Docs::Get().root());
  ASSERT_TRUE(server.ok());
  std::atomic<int> to_server{0};
  testing::UdpRelay relay(server.address(), [&](Direction dir, absl::Span<const uint8_t>) {
    return dir == Direction::kToClient || to_server.fetch_add(1) == 0;
  });
  HqClientOptions o = ClientOptions(server);
  o.quic.server = relay.address();
  o.quic.limits.idle_timeout_ms = 1500;  // ends the attempt
  o.paths = {"/1k.bin"};
  absl::StatusOr<HqClientResult> r = RunHqClient(o);
  if (r.ok()) {
    EXPECT_FALSE(r->handshake_completed);
    EXPECT_EQ(r->completed, 0u);
  }
  const uint64_t received = relay.bytes(Direction::kToServer);
  const uint64_t sent = relay.bytes(Direction::kToClient);
  EXPECT_EQ(relay.datagrams(Direction::kToServer), 1u);
  EXPECT_GE(received, 1200u);
  EXPECT_LE(sent, 3 * received);
  EXPECT_GT(sent, 2 * received);  // the limit, not the flight's size, stopped the server
  ASSERT_TRUE(server.Stop(Duration::zero()).ok());
}

// Whether two datagrams in a row are the same bytes.
bool HasRepeat(const std::vector<std::vector<uint8_t>>& datagrams) {
  for (size_t i = 1; i < datagrams.size(); ++i) {
    if (datagrams[i] == datagrams[i - 1]) return true;
  }
  return false;
}

// A path that loses the server's datagrams until the server has sent one of them twice: the
// loss probes that timers send before the handshake completes leave twice (RFC 9002 §6.2.4),
// from the client and, within the anti-amplification limit, from the server. While the client
// has heard nothing (so it cannot have validated its address), the server never sends more
// than three times what it received (RFC 9000 §8.1). Then the handshake completes.
TEST_P(QuicTransportTest, HandshakeProbesLeaveTwice) {
  RunningHqServer server(ServerConfig(), Docs::Get().root());
  ASSERT_TRUE(server.ok());
  std::mutex mu;
  std::vector<std::vector<uint8_t>> to_server, to_client;  // in order, the lost ones included
  uint64_t received = 0, sent = 0, most_sent_over_received_x1000 = 0;
  bool lossy = true;
  testing::UdpRelay relay(server.address(), [&](Direction dir, absl::Span<const uint8_t> d) {
    std::lock_guard<std::mutex> lock(mu);
    if (dir == Direction::kToServer) {
      to_server.emplace_back(d.begin(), d.end());
      received += d.size();
      return true;
    }
    to_client.emplace_back(d.begin(), d.end());
    if (!lossy) return true;
    sent += d.size();
    most_sent_over_received_x1000 =
        std::max(most_sent_over_received_x1000, sent * 1000 / std::max<uint64_t>(received, 1));
    // Lost until the server repeated one, or at most 12 (the test then fails below).
    lossy = !HasRepeat(to_client) && to_client.size() < 12;
    return false;
  });
  HqClientOptions o = ClientOptions(server);
  o.quic.server = relay.address();
  ASSERT_NO_FATAL_FAILURE(FetchOneAndCompare(o, "/1k.bin"));
  ASSERT_TRUE(server.Stop().ok());
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_TRUE(HasRepeat(to_server)) << to_server.size() << " client datagrams, none repeated";
  EXPECT_TRUE(HasRepeat(to_client)) << to_client.size() << " server datagrams, none repeated";
  EXPECT_LE(most_sent_over_received_x1000, 3000u);
}

TEST_P(QuicTransportTest, KeyUpdateByServer) {
  RunningHqServer server(ServerConfig(), Docs::Get().root(),
                         [](HqServer& hq) { hq.set_initiate_key_update(true); });
  ASSERT_TRUE(server.ok());
  // Most of it under the new keys: the client followed the update.
  ASSERT_NO_FATAL_FAILURE(FetchOneAndCompare(ClientOptions(server), "/10m.bin"));
  ASSERT_TRUE(server.Stop().ok());
  EXPECT_EQ(server.hq().key_updates_initiated(), 1u);
}

TEST_P(QuicTransportTest, KeyUpdateByBothSides) {
  RunningHqServer server(ServerConfig(), Docs::Get().root(),
                         [](HqServer& hq) { hq.set_initiate_key_update(true); });
  ASSERT_TRUE(server.ok());
  HqClientOptions o = ClientOptions(server);
  o.key_update = true;
  // The server's update first, then the client's: each waits out the other's (ngtcp2 refuses a
  // new update within three PTOs of the last), and neither depends on how long the transfer
  // takes — the client keeps the connection until its own update is made.
  o.key_update_after = [&server] { return server.hq().key_updates_initiated() > 0; };
  HqClientResult r;
  ASSERT_NO_FATAL_FAILURE(FetchOneAndCompare(o, "/10m.bin", &r));
  EXPECT_TRUE(r.key_update_initiated);
  ASSERT_TRUE(server.Stop().ok());
  EXPECT_GE(server.hq().key_updates_initiated() + (r.key_update_initiated ? 1 : 0), 2u);
}

// The cipher suite both ends chose. ctest runs this binary a second time with AES-NI masked
// from BoringSSL (OPENSSL_ia32cap), where both ends prefer ChaCha20-Poly1305 and
// PETREL_EXPECT_CIPHER says so.
TEST_P(QuicTransportTest, NegotiatedCipherSuite) {
  const char* expected = std::getenv("PETREL_EXPECT_CIPHER");
  RunningHqServer server(ServerConfig(), Docs::Get().root());
  ASSERT_TRUE(server.ok());
  HqClientOptions o = ClientOptions(server);
  o.paths = {"/10m.bin", "/1k.bin"};
  absl::StatusOr<HqClientResult> r = RunHqClient(o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->cipher, expected != nullptr ? expected : "TLS_AES_128_GCM_SHA256");
  EXPECT_EQ(r->completed, 2u);
  ExpectSame("10m.bin");
  ExpectSame("1k.bin");
}

TEST_P(QuicTransportTest, CompatibleVersionNegotiationToV2) {
  QuicServerConfig c = ServerConfig();
  c.versions = {kQuicVersion2Draft, kQuicVersion1};
  RunningHqServer server(std::move(c), Docs::Get().root());
  ASSERT_TRUE(server.ok());
  std::atomic<int> v1_initials{0};
  std::atomic<int> v2_from_server{0};
  testing::UdpRelay relay(server.address(), [&](Direction dir, absl::Span<const uint8_t> d) {
    // The version field only: the server may clear the fixed bit of its long headers (RFC 9287).
    if (d.size() >= 5 && (d[0] & 0x80) != 0) {
      const uint32_t v =
          (uint32_t{d[1]} << 24) | (uint32_t{d[2]} << 16) | (uint32_t{d[3]} << 8) | d[4];
      if (dir == Direction::kToServer && v == kQuicVersion1) v1_initials.fetch_add(1);
      if (dir == Direction::kToClient && v == kQuicVersion2Draft) v2_from_server.fetch_add(1);
    }
    return true;
  });
  HqClientOptions o = ClientOptions(server);
  o.quic.server = relay.address();
  o.quic.version = kQuicVersion1;  // starts in v1, offers v2 too
  o.paths = {"/10m.bin", "/1k.bin"};
  absl::StatusOr<HqClientResult> r = RunHqClient(o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->version, kQuicVersion2Draft);
  EXPECT_EQ(r->completed, 2u);
  ExpectSame("10m.bin");
  EXPECT_GE(v1_initials.load(), 1);
  EXPECT_GE(v2_from_server.load(), 1);
}

TEST_P(QuicTransportTest, ServerPreferringV1StaysOnV1) {
  RunningHqServer server(ServerConfig(), Docs::Get().root());
  ASSERT_TRUE(server.ok());
  HqClientOptions o = ClientOptions(server);
  o.paths = {"/1k.bin"};
  absl::StatusOr<HqClientResult> r = RunHqClient(o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->version, kQuicVersion1);
  EXPECT_EQ(r->completed, 1u);
}

// A client starting in v2 that also offers v1 is moved to v1 by a server that prefers it.
TEST_P(QuicTransportTest, ClientStartingInV2MovedToServersPreferredV1) {
  RunningHqServer server(ServerConfig(), Docs::Get().root());
  ASSERT_TRUE(server.ok());
  HqClientOptions o = ClientOptions(server);
  o.quic.version = kQuicVersion2Draft;
  o.quic.other_versions = {kQuicVersion1};
  o.paths = {"/1k.bin"};
  absl::StatusOr<HqClientResult> r = RunHqClient(o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->version, kQuicVersion1);
  EXPECT_EQ(r->completed, 1u);
  ExpectSame("1k.bin");
}

TEST_P(QuicTransportTest, ClientOfferingOnlyV2) {
  RunningHqServer server(ServerConfig(), Docs::Get().root());
  ASSERT_TRUE(server.ok());
  HqClientOptions o = ClientOptions(server);
  o.quic.version = kQuicVersion2Draft;
  o.quic.other_versions = {kQuicVersion2Draft};
  o.paths = {"/10m.bin"};
  absl::StatusOr<HqClientResult> r = RunHqClient(o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->version, kQuicVersion2Draft);
  EXPECT_EQ(r->completed, 1u);
  ExpectSame("10m.bin");
}

// The client's port changes under it mid-transfer; the server validates the new path and the
// transfer goes on.
TEST_P(QuicTransportTest, NatRebindingMidTransfer) {
  RunningHqServer server(ServerConfig(), Docs::Get().root());
  ASSERT_TRUE(server.ok());
  testing::UdpRelay* relay_ptr = nullptr;
  std::atomic<uint64_t> to_client{0};
  std::atomic<bool> rebound{false};
  testing::UdpRelay relay(server.address(), [&](Direction dir, absl::Span<const uint8_t> d) {
    if (dir == Direction::kToClient && to_client.fetch_add(d.size()) > 2'000'000 &&
        !rebound.exchange(true)) {
      relay_ptr->Rebind();
    }
    return true;
  });
  relay_ptr = &relay;
  const SocketAddress first_port = relay.server_side_address();
  HqClientOptions o = ClientOptions(server);
  o.quic.server = relay.address();
  o.paths = {"/10m.bin"};
  absl::StatusOr<HqClientResult> r = RunHqClient(o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(rebound.load());
  EXPECT_NE(relay.server_side_address(), first_port);
  EXPECT_EQ(r->completed, 1u);
  ExpectSame("10m.bin");
  ASSERT_TRUE(server.Stop().ok());
  EXPECT_GE(server.hq().server().stats().paths_validated, 1u);
}

// The server goes silent mid-transfer (as when a NAT rebinding loses its packets to the old
// binding): a client with a keep-alive keeps sending PINGs, which show the server the path.
TEST_P(QuicTransportTest, KeepAlivePingsWhileTheServerIsSilent) {
  RunningHqServer server(ServerConfig(), Docs::Get().root());
  ASSERT_TRUE(server.ok());
  using Clock = std::chrono::steady_clock;
  constexpr auto kSilence = std::chrono::milliseconds(700);
  std::atomic<uint64_t> to_client{0};
  std::atomic<int> sent_in_silence{0};
  std::mutex mu;
  Clock::time_point silence_start{};  // guarded by mu
  testing::UdpRelay relay(server.address(), [&](Direction dir, absl::Span<const uint8_t> d) {
    std::lock_guard<std::mutex> lock(mu);
    const Clock::time_point now = Clock::now();
    const bool silent = silence_start != Clock::time_point{} && now < silence_start + kSilence;
    if (dir == Direction::kToServer) {
      if (silent) sent_in_silence.fetch_add(1);
      return true;
    }
    if (to_client.fetch_add(d.size()) > 1'000'000 && silence_start == Clock::time_point{}) {
      silence_start = now;
      return false;
    }
    return !silent;
  });
  HqClientOptions o = ClientOptions(server);
  o.quic.server = relay.address();
  o.quic.limits.keep_alive_ms = 100;
  o.paths = {"/10m.bin"};
  absl::StatusOr<HqClientResult> r = RunHqClient(o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->completed, 1u);
  ExpectSame("10m.bin");
  // Its last ACKs, then a PING every 100 ms; without the keep-alive only the ACKs.
  EXPECT_GE(sent_in_silence.load(), 5);
}

// Both ways of moving: validating the preferred address from the current socket, and moving
// at once from a new port (the server then validates the client's new address).
TEST_P(QuicTransportTest, ClientMovesToPreferredAddress) {
  for (const QuicMigration how : {QuicMigration::kProbeFirst, QuicMigration::kImmediate}) {
    SCOPED_TRACE(how == QuicMigration::kImmediate ? "immediate" : "probe first");
    QuicServerConfig c = ServerConfig();
    c.preferred_address = *SocketAddress::Parse("127.0.0.1", 0);
    RunningHqServer server(std::move(c), Docs::Get().root());
    ASSERT_TRUE(server.ok());
    const std::vector<SocketAddress> addrs = server.hq().server().local_addresses();
    ASSERT_EQ(addrs.size(), 2u);
    HqClientOptions o = ClientOptions(server);
    o.quic.preferred_address_move = how;
    o.paths = {"/10m.bin"};
    absl::StatusOr<HqClientResult> r = RunHqClient(o);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->completed, 1u);
    ExpectSame("10m.bin");
    EXPECT_EQ(r->remote, addrs[1]);
    ASSERT_TRUE(server.Stop().ok());
    EXPECT_GE(server.hq().server().stats().paths_validated, 1u);
  }
}

TEST_P(QuicTransportTest, ClientMayIgnoreThePreferredAddress) {
  QuicServerConfig c = ServerConfig();
  c.preferred_address = *SocketAddress::Parse("127.0.0.1", 0);
  RunningHqServer server(std::move(c), Docs::Get().root());
  ASSERT_TRUE(server.ok());
  HqClientOptions o = ClientOptions(server);
  o.quic.use_preferred_address = false;
  o.paths = {"/1k.bin"};
  absl::StatusOr<HqClientResult> r = RunHqClient(o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->completed, 1u);
  EXPECT_EQ(r->remote, server.address());
}

// QuicServer and QuicClient directly: a reset in each direction reaches the other side's
// on_stream_reset with its error code, and QuicClient::Stop() from another thread ends Run().
TEST_P(QuicTransportTest, StreamResetsBothWaysAndClientStop) {
  constexpr uint64_t kServerError = 42;
  constexpr uint64_t kClientError = 7;
  QuicServerConfig sc = ServerConfig();
  sc.listen = {*SocketAddress::Parse("127.0.0.1", 0)};
  std::atomic<uint64_t> server_saw_reset{0};
  QuicServerCallbacks scb;
  scb.on_stream_data = [](QuicConnection& c, int64_t s, absl::string_view d, bool) {
    c.Consume(s, d.size());
    if (absl::StartsWith(d, "reset me")) c.ResetStream(s, kServerError);
  };
  scb.on_stream_reset = [&](QuicConnection& c, int64_t, uint64_t err) {
    // The client answers our STOP_SENDING with a RESET_STREAM of the same code: not news.
    if (err == kServerError) return;
    server_saw_reset.store(err);
    const int64_t u = c.OpenUniStream();  // tell the client, which then stops
    if (u >= 0) c.Write(u, absl::StrCat("reset ", err), true);
  };
  absl::StatusOr<std::unique_ptr<QuicServer>> server = QuicServer::Create(sc, std::move(scb));
  ASSERT_TRUE(server.ok()) << server.status();
  std::thread server_thread([&] { EXPECT_TRUE((*server)->Run().ok()); });

  QuicClientConfig cc;
  cc.server = (*server)->local_addresses()[0];
  cc.verify_peer = false;
  cc.limits.idle_timeout_ms = 10'000;
  uint64_t client_saw_reset = 0;
  std::string note;
  std::promise<void> noted;
  QuicClientCallbacks ccb;
  ccb.on_connected = [](QuicConnection& c) {
    const int64_t a = c.OpenBidiStream();
    c.Write(a, "reset me", false);
  };
  ccb.on_stream_reset = [&](QuicConnection& c, int64_t, uint64_t err) {
    client_saw_reset = err;
    const int64_t b = c.OpenBidiStream();
    c.Write(b, "some data", false);
    c.ResetStream(b, kClientError);
  };
  ccb.on_stream_data = [&](QuicConnection& c, int64_t s, absl::string_view d, bool fin) {
    c.Consume(s, d.size());
    note.append(d.data(), d.size());
    if (fin) noted.set_value();
  };
  absl::StatusOr<std::unique_ptr<QuicClient>> client = QuicClient::Create(cc, std::move(ccb));
  ASSERT_TRUE(client.ok()) << client.status();
  ASSERT_TRUE((*client)->Connect().ok());
  std::future<void> got_note = noted.get_future();
  std::thread stopper([&] {
    got_note.wait_for(std::chrono::seconds(10));
    (*client)->Stop();  // from a thread other than the loop's
  });
  (*client)->Run();
  stopper.join();
  EXPECT_EQ(client_saw_reset, kServerError);
  EXPECT_EQ(note, absl::StrCat("reset ", kClientError));
  EXPECT_TRUE((*client)->closed());
  (*server)->Stop();
  server_thread.join();
  EXPECT_EQ(server_saw_reset.load(), kClientError);
}

// Datagrams that are garbage, truncated, of unknown versions, or carry the live connection's
// CID with a payload that cannot decrypt, sent from another socket in the middle of a 10 MB
// transfer: the transfer finishes byte-exact and the server still takes new connections.
TEST_P(QuicTransportTest, MalformedDatagramsDuringATransferHarmNothing) {
  RunningHqServer server(ServerConfig(), Docs::Get().root());
  ASSERT_TRUE(server.ok());
  std::mutex mu;
  std::string server_cid;  // the SCID of the server's first long header
  testing::UdpRelay relay(server.address(), [&](Direction dir, absl::Span<const uint8_t> d) {
    if (dir == Direction::kToClient && d.size() > 7 && (d[0] & 0x80) != 0) {
      const size_t dcid_len = d[5];
      if (d.size() > 7 + dcid_len) {
        const size_t scid_len = d[6 + dcid_len];
        std::lock_guard<std::mutex> lock(mu);
        if (server_cid.empty() && d.size() >= 7 + dcid_len + scid_len) {
          server_cid.assign(reinterpret_cast<const char*>(d.data()) + 7 + dcid_len, scid_len);
        }
      }
    }
    return true;
  });
  uint64_t sent = 0;
  auto blast = [&] {
    const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    const SocketAddress to = server.address();
    std::string cid;
    {
      std::lock_guard<std::mutex> lock(mu);
      cid = server_cid;
    }
    uint32_t seed = 12345;
    auto next = [&seed] {
      seed = seed * 1103515245 + 12345;
      return static_cast<uint8_t>(seed >> 16);
    };
    for (int i = 0; i < 3000; ++i) {
      std::string d;
      const size_t len = 1 + (static_cast<size_t>(next()) << 3) % 1400;
      switch (i % 6) {
        case 0:  // random bytes
          for (size_t k = 0; k < len; ++k) d.push_back(static_cast<char>(next()));
          break;
        case 1:  // a v1 long header truncated anywhere
          d = std::string("\xc0\x00\x00\x00\x01\x08", 6) + std::string(8, 'd') + '\x08' +
              std::string(8, 's') + std::string("\x44\xff", 2);
          d.resize(i % d.size());
          break;
        case 2:  // an Initial whose token and length fields run past the datagram
          d = std::string("\xc3\x00\x00\x00\x01\x08", 6) + std::string(8, 'd') + '\x00' +
              std::string("\xbf\xff\xff\xff", 4);
          d.resize(1200, 'x');
          break;
        case 3:  // the live connection's CID, garbage that cannot decrypt
          d = std::string(1, static_cast<char>(0x40 | (next() & 0x3f))) + cid;
          for (size_t k = 0; k < len; ++k) d.push_back(static_cast<char>(next()));
          break;
        case 4:  // an unknown version, and a version negotiation lookalike
          d = std::string(i % 12 == 4 ? "\xc0\x1a\x2a\x3a\x4a\x04" : "\x80\x00\x00\x00\x00\x04",
                          6) +
              "dddd\x04ssss";
          d.resize(std::max<size_t>(d.size(), len), 'p');
          break;
        default:  // a Handshake packet for the live connection, garbage inside
          d = std::string("\xe0\x00\x00\x00\x01", 5) + static_cast<char>(cid.size()) + cid +
              '\x00' + std::string("\x44\x00", 2);
          for (size_t k = 0; k < len; ++k) d.push_back(static_cast<char>(next()));
          break;
      }
      if (d.empty()) d = "x";
      if (::sendto(fd, d.data(), d.size(), 0, to.sockaddr_ptr(), to.length()) > 0) ++sent;
    }
    ::close(fd);
  };
  HqClientOptions o = ClientOptions(server);
  o.quic.server = relay.address();
  o.paths = {"/10m.bin"};
  o.on_first_data = blast;
  absl::StatusOr<HqClientResult> r = RunHqClient(o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_GT(sent, 2500u);
  {
    std::lock_guard<std::mutex> lock(mu);
    EXPECT_FALSE(server_cid.empty());
  }
  EXPECT_EQ(r->completed, 1u);
  ExpectSame("10m.bin");
  HqClientOptions again = ClientOptions(server);
  again.paths = {"/1k.bin"};
  absl::StatusOr<HqClientResult> r2 = RunHqClient(again);
  ASSERT_TRUE(r2.ok()) << r2.status();
  EXPECT_EQ(r2->completed, 1u);
  ASSERT_TRUE(server.Stop().ok());
  EXPECT_EQ(server.hq().server().stats().connections_accepted, 2u);
}

INSTANTIATE_TEST_SUITE_P(Modes, QuicTransportTest, ::testing::Values(0, 2),
                         [](const ::testing::TestParamInfo<size_t>& p) {
                           return absl::StrCat("workers", p.param);
                         });

}  // namespace
}  // namespace petrel::hq
