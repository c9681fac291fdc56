// A server QUIC connection against a peer that abuses frames after a real handshake: the
// client's own ngtcp2 connection is dropped and the test speaks for it, sealing 1-RTT packets
// with the client's keys (fuzz/quic_loopback.h, fuzz/quic_one_rtt.h; a virtual monotonic clock,
// so that waiting for a probe or a drain costs no real time — gtest's times are on that clock).
// Each abuse ends in the CONNECTION_CLOSE RFC 9000 names, counted, or the connection stays
// usable (a PING is acknowledged) and the server sends fewer octets than the abuse cost the
// peer; either way a new client then connects to the same server.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/types/span.h"
#include "petrel/quic/quic_server.h"
#include "quic_loopback.h"
#include "quic_one_rtt.h"

namespace petrel::fuzz {
namespace {

QuicServerCallbacks Consuming() {
  QuicServerCallbacks cb;
  cb.on_stream_data = [](QuicConnection& c, int64_t s, absl::string_view d, bool) {
    c.Consume(s, d.size());
  };
  return cb;
}

class QuicFrameAbuseTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(net_.Connect());
    net_.DropClient();
  }
  // After each abuse, a new client connects to the same server.
  void TearDown() override {
    if (!HasFatalFailure()) {
      EXPECT_TRUE(net_.Connect()) << "a new client could not connect";
    }
  }
  // Sends `frames` as one 1-RTT packet of the client's.
  void Send(const std::string& frames) {
    const std::vector<uint8_t> packet = SealShortPacket(
        net_.client_keys(0), net_.server_cid(), pn_++, 4, 0,
        absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(frames.data()), frames.size()));
    ASSERT_FALSE(packet.empty());
    net_.SendFromClient(packet);
  }
  // Turns the loop until the server's CONNECTION_CLOSE came; its transport error code, or -1.
  // A close is counted (petrel_quic_transport_errors_total).
  int64_t CloseCode() {
    net_.Pump([&] { return net_.server_close().has_value(); }, 3000, 3000,
              std::chrono::milliseconds(10));
    if (!net_.server_close().has_value()) return -1;
    EXPECT_FALSE(net_.server_close()->app_close);
    EXPECT_EQ(net_.worker().transport_errors(), 1u);
    return static_cast<int64_t>(net_.server_close()->close_code);
  }
  // Whether the connection is still usable: a PING is acknowledged, no CONNECTION_CLOSE.
  bool StillUsable() {
    const uint64_t ping = pn_;
    Send("\x01");
    net_.Pump([&] { return net_.server_close().has_value() || net_.Acked(ping); }, 3000, 3000,
              std::chrono::milliseconds(10));
    return !net_.server_close().has_value() && net_.Acked(ping);
  }

  QuicLoopback net_{Consuming()};
  uint64_t pn_ = 64;  // above the handshake's 1-RTT packet numbers (see quic_packet_fuzz.cc)
};

// More connection IDs than the server's active_connection_id_limit (4) allows. (Sequence
// numbers from 100: the client's connection already issued 1-3, and repeating one with another
// connection ID is a PROTOCOL_VIOLATION of its own.)
TEST_F(QuicFrameAbuseTest, NewConnectionIdsBeyondTheLimitClose) {
  for (uint64_t seq = 100; seq < 108; ++seq) {
    std::string cid(8, static_cast<char>(seq));
    const std::string token(16, static_cast<char>(seq));
    Send("\x18" + Varint(seq) + Varint(0) + "\x08" + cid + token);
  }
  EXPECT_EQ(CloseCode(), NGTCP2_CONNECTION_ID_LIMIT_ERROR);
}

// 2 000 NEW_CONNECTION_IDs that each retire all earlier ones (Retire Prior To = their own
// sequence number), so that each asks the server for a RETIRE_CONNECTION_ID: the server
// either ends it (RFC 9000 §5.1.2 allows CONNECTION_ID_LIMIT_ERROR for retirements it cannot
// keep up with) or answers in fewer octets than the flood took, the connection usable.
TEST_F(QuicFrameAbuseTest, RetirementFloodIsBounded) {
  const uint64_t sent_before = net_.client_sent_bytes();
  const uint64_t received_before = net_.client_received_bytes();
  for (uint64_t seq = 100; seq < 2100; ++seq) {
    std::string cid(8, '\0');
    for (int i = 0; i < 8; ++i) cid[i] = static_cast<char>(seq >> (8 * (i % 2)));
    std::string token(16, '\0');
    for (int i = 0; i < 16; ++i) token[i] = static_cast<char>(seq >> (8 * (i % 2)) ^ i);
    net_.AddClientCid(absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(cid.data()), 8));
    Send("\x18" + Varint(seq) + Varint(seq) + "\x08" + cid + token);
    if (seq % 50 == 49) net_.Settle(50, 2, Duration::zero());
    if (net_.server_close().has_value()) break;
  }
  net_.Settle(200, 5, std::chrono::milliseconds(10));
  const uint64_t in = net_.client_sent_bytes() - sent_before;
  const uint64_t out = net_.client_received_bytes() - received_before;
  std::printf("retirement flood: %llu octets in, %llu out, %s 0x%llx\n",
              static_cast<unsigned long long>(in), static_cast<unsigned long long>(out),
              net_.server_close().has_value() ? "closed" : "open",
              static_cast<unsigned long long>(
                  net_.server_close().has_value() ? net_.server_close()->close_code : 0));
  if (net_.server_close().has_value()) {
    const uint64_t code = net_.server_close()->close_code;
    EXPECT_TRUE(code == NGTCP2_CONNECTION_ID_LIMIT_ERROR || code == NGTCP2_PROTOCOL_VIOLATION)
        << code;
    EXPECT_EQ(net_.worker().transport_errors(), 1u);
    return;
  }
  EXPECT_TRUE(StillUsable());
  EXPECT_LT(out, in);
}

// A STREAM frame for a stream beyond the bidirectional streams the server allows (100):
// stream 1 600 is the 401st (RFC 9000 §4.6).
TEST_F(QuicFrameAbuseTest, StreamBeyondTheLimitCloses) {
  Send("\x08" + Varint(1600) + "GET /\r\n");
  EXPECT_EQ(CloseCode(), NGTCP2_STREAM_LIMIT_ERROR);
}

// Retiring a connection ID the server never issued (RFC 9000 §19.16).
TEST_F(QuicFrameAbuseTest, RetiringAnUnissuedConnectionIdCloses) {
  Send("\x19" + Varint(1000));
  EXPECT_EQ(CloseCode(), NGTCP2_PROTOCOL_VIOLATION);
}

// Acknowledging a packet the server never sent (RFC 9000 §13.1).
TEST_F(QuicFrameAbuseTest, AcknowledgingAnUnsentPacketCloses) {
  Send("\x02" + Varint(1'000'000) + Varint(0) + Varint(0) + Varint(0));
  EXPECT_EQ(CloseCode(), NGTCP2_PROTOCOL_VIOLATION);
}

// An ACK frame whose ranges run below packet number 0: 1 000 ranges claimed after a largest
// acknowledged of 0.
TEST_F(QuicFrameAbuseTest, AckRangesThatNeverEndClose) {
  std::string ack = "\x02" + Varint(0) + Varint(0) + Varint(1000) + Varint(0);
  for (int i = 0; i < 1000; ++i) ack += Varint(0) + Varint(0);
  Send(ack.substr(0, 1100));
  const int64_t code = CloseCode();
  EXPECT_TRUE(code == NGTCP2_FRAME_ENCODING_ERROR || code == NGTCP2_PROTOCOL_VIOLATION) << code;
}

// 2 000 packets of PINGs: acknowledged, in fewer octets than they took; the connection stays.
TEST_F(QuicFrameAbuseTest, PingFloodCostsTheServerLessThanThePeer) {
  const uint64_t sent_before = net_.client_sent_bytes();
  const uint64_t received_before = net_.client_received_bytes();
  for (int i = 0; i < 2000; ++i) {
    Send(std::string(10, '\x01'));
    if (i % 50 == 49) net_.Settle(50, 2, Duration::zero());
  }
  ASSERT_TRUE(StillUsable());
  EXPECT_EQ(net_.worker().transport_errors(), 0u);
  const uint64_t in = net_.client_sent_bytes() - sent_before;
  const uint64_t out = net_.client_received_bytes() - received_before;
  RecordProperty("octets_in", static_cast<int>(in));
  RecordProperty("octets_out", static_cast<int>(out));
  EXPECT_LT(out, in) << "in " << in << ", out " << out;
}

// 2 000 packets of PATH_CHALLENGEs on the current path: answered without amplification beyond
// what the peer spent; the connection stays.
TEST_F(QuicFrameAbuseTest, PathChallengeFloodIsBounded) {
  const uint64_t sent_before = net_.client_sent_bytes();
  const uint64_t received_before = net_.client_received_bytes();
  for (int i = 0; i < 2000; ++i) {
    Send("\x1a" + std::string(8, static_cast<char>(i)));
    if (i % 50 == 49) net_.Settle(50, 2, Duration::zero());
  }
  ASSERT_TRUE(StillUsable());
  EXPECT_EQ(net_.worker().transport_errors(), 0u);
  const uint64_t in = net_.client_sent_bytes() - sent_before;
  const uint64_t out = net_.client_received_bytes() - received_before;
  std::printf("PATH_CHALLENGE flood: %llu octets in, %llu out\n",
              static_cast<unsigned long long>(in), static_cast<unsigned long long>(out));
  EXPECT_LE(out, 3 * in) << "in " << in << ", out " << out;
}

// An Initial flood from 200 source ports (1 000 new connections that never go past their
// ClientHello) against Retry `auto`: once `retry_threshold` handshakes are unfinished, every
// further Initial gets a Retry and no state; what the server sends to the flood's addresses
// stays within 3× what they sent (RFC 9000 §8.1), probes of the unfinished handshakes
// included; and a client that answers the Retry connects.
TEST(QuicInitialFloodTest, RetryAutoHoldsTheFloodAndALegitimateClientConnects) {
  constexpr size_t kThreshold = 16;
  constexpr int kSockets = 200;
  constexpr int kPerSocket = 5;
  QuicLoopback net(Consuming(), quic::RetryPolicy::kAuto, kThreshold);
  std::vector<int> fds;
  for (int i = 0; i < kSockets; ++i) {
    const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    ASSERT_GE(fd, 0);
    const SocketAddress any = *SocketAddress::Parse("127.0.0.1", 0);
    ASSERT_EQ(::bind(fd, any.sockaddr_ptr(), any.length()), 0);
    fds.push_back(fd);
  }
  uint64_t in = 0;
  uint64_t out = 0;
  auto drain = [&] {
    uint8_t buf[2048];
    for (const int fd : fds) {
      for (ssize_t n; (n = ::recv(fd, buf, sizeof(buf), 0)) > 0;) out += static_cast<uint64_t>(n);
    }
  };
  for (int round = 0; round < kPerSocket; ++round) {
    for (const int fd : fds) {
      const std::vector<uint8_t> initial = net.FreshInitial();
      ASSERT_GE(initial.size(), 1200u);
      const SocketAddress& server = net.server_address();
      ASSERT_GT(
          ::sendto(fd, initial.data(), initial.size(), 0, server.sockaddr_ptr(), server.length()),
          0);
      in += initial.size();
    }
    net.Settle(100, 2, Duration::zero());
    drain();
  }
  // 20 s of the virtual clock: the unfinished handshakes probe until their amplification limit
  // and their handshake timeout end them.
  for (int i = 0; i < 20; ++i) {
    net.Pump([] { return false; }, 100, 100, std::chrono::milliseconds(10));
    drain();
  }
  for (const int fd : fds) ::close(fd);
  EXPECT_EQ(net.worker().accepted(), kThreshold);
  EXPECT_GE(net.worker().retries_sent(), uint64_t{kSockets * kPerSocket} - kThreshold);
  EXPECT_LE(out, 3 * in) << "in " << in << ", out " << out;
  std::printf("Initial flood: %llu octets in, %llu out, %llu connections, %llu Retry\n",
              static_cast<unsigned long long>(in), static_cast<unsigned long long>(out),
              static_cast<unsigned long long>(net.worker().accepted()),
              static_cast<unsigned long long>(net.worker().retries_sent()));
  ASSERT_TRUE(net.Connect()) << "a client that answers the Retry could not connect";
  EXPECT_EQ(net.worker().accepted(), kThreshold + 1);
}

}  // namespace
}  // namespace petrel::fuzz
