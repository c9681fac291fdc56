// The smallest case of the ngtcp2 0.12.1 leak that ConnectionMemory exists for
// (quic/connection/connection_memory.h): two ngtcp2 connections in memory (QuicPair: Petrel's
// crypto glue and nothing else of Petrel's), the client sending one stream in eight 100-octet
// vectors per ngtcp2_conn_writev_stream call, a fifth of its packets after the handshake lost
// (a fixed pattern). ngtcp2 takes a STREAM frame chain of more than three vectors from the
// allocator and a smaller one from the conn's object pool, and gives a chain back by its vector
// count at that time; retransmitting the unacknowledged part of a lost frame shrinks that count
// in place, so an allocator block goes into the pool, and ngtcp2_conn_del frees only the
// pool's own slabs (ngtcp2 issue #1244, fixed in 1.6.0).
//
// LeakSanitizer shows it with ngtcp2's own allocator:
//   build-asan/tests/quic/ngtcp2_frame_leak_test --gtest_also_run_disabled_tests
// reports blocks of 140-310 octets malloc'ed inside libngtcp2, under ngtcp2_conn_read_pkt and
// ngtcp2_conn_handle_expiry (loss detection putting lost frames back on the stream) or
// ngtcp2_conn_writev_stream, and none allocated by Petrel.
#include <ngtcp2/ngtcp2.h>
#include <openssl/ssl.h>

#include <cstddef>
#include <cstdint>
#include <random>
#include <string>

#include "gtest/gtest.h"
#include "quic/connection/connection_memory.h"
#include "quic/quic_pair_harness.h"

namespace petrel::quic {
namespace {

using crypto::testing::Endpoint;
using crypto::testing::MakeClientCtx;
using crypto::testing::MakeSelfSignedP256;
using crypto::testing::MakeServerCtx;
using crypto::testing::PairOptions;
using crypto::testing::QuicPair;
using crypto::testing::TestCertificate;

constexpr size_t kStreamSize = 256 * 1024;

class Ngtcp2FrameLeakTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    cert_ = new TestCertificate(MakeSelfSignedP256());
    server_ctx_ = MakeServerCtx(*cert_).release();
    client_ctx_ = MakeClientCtx(cert_->cert.get()).release();
  }
  static void TearDownTestSuite() {
    SSL_CTX_free(client_ctx_);
    SSL_CTX_free(server_ctx_);
    delete cert_;
  }

  // Sends kStreamSize octets from the client on one stream, eight 100-octet vectors per write,
  // losing a fifth of the client's packets after the handshake if `lossy`, until the server has
  // all of it; then deletes both connections (the allocators
  // outlive them, so that what they still hold can be counted).
  void Transfer(const ngtcp2_mem* client_mem, const ngtcp2_mem* server_mem, bool lossy) {
    bool handshake_done = false;
    PairOptions options;
    options.client_mem = client_mem;
    options.server_mem = server_mem;
    std::mt19937 rng(1);  // a fixed loss pattern: the run is the same every time
    options.drop = [&](const Endpoint& from, uint64_t /*index*/) {
      return lossy && handshake_done && !from.is_server && rng() % 100 < 20;
    };
    QuicPair pair(client_ctx_, server_ctx_, options);
    ASSERT_TRUE(pair.Start());
    Endpoint& client = pair.client();
    Endpoint& server = pair.server();
    ASSERT_TRUE(pair.Run([&] {
      return (client.handshake_completed && pair.server_created() && server.handshake_completed) ||
             client.failed();
    }));
    ASSERT_FALSE(client.failed());
    handshake_done = true;
    ASSERT_EQ(ngtcp2_conn_open_bidi_stream(client.conn, &client.stream_id, nullptr), 0);
    client.to_send = std::string(kStreamSize, 'x');
    client.max_vecs = 8;
    client.vec_size = 100;
    ASSERT_TRUE(
        pair.Run([&] { return server.received_fin || client.failed() || server.failed(); }));
    ASSERT_FALSE(client.failed()) << ngtcp2_strerror(client.read_error) << " / "
                                  << ngtcp2_strerror(client.write_error);
    ASSERT_FALSE(server.failed()) << ngtcp2_strerror(server.read_error) << " / "
                                  << ngtcp2_strerror(server.write_error);
    EXPECT_EQ(server.received.size(), kStreamSize);
    ngtcp2_conn_del(client.conn);
    client.conn = nullptr;
    ngtcp2_conn_del(server.conn);
    server.conn = nullptr;
  }

  static TestCertificate* cert_;
  static SSL_CTX* server_ctx_;
  static SSL_CTX* client_ctx_;
};

TestCertificate* Ngtcp2FrameLeakTest::cert_ = nullptr;
SSL_CTX* Ngtcp2FrameLeakTest::server_ctx_ = nullptr;
SSL_CTX* Ngtcp2FrameLeakTest::client_ctx_ = nullptr;

TEST_F(Ngtcp2FrameLeakTest, WithoutLossEveryBlockIsFreedByConnDel) {
  ConnectionMemory client_memory;
  ConnectionMemory server_memory;
  Transfer(client_memory.mem(), server_memory.mem(), /*lossy=*/false);
  EXPECT_EQ(client_memory.blocks(), 0u);
  EXPECT_EQ(server_memory.blocks(), 0u);
}

// What ngtcp2 0.12.1 does: blocks of the lossy sender are still allocated after
// ngtcp2_conn_del, and ConnectionMemory frees them when it goes (under ASan: no leak). If this
// fails after an ngtcp2 upgrade, the library frees its frame chains itself again and
// ConnectionMemory's sweep is only a safety net.
TEST_F(Ngtcp2FrameLeakTest, UnderLossConnDelLeavesFrameChainsBehind) {
  ConnectionMemory client_memory;
  ConnectionMemory server_memory;
  Transfer(client_memory.mem(), server_memory.mem(), /*lossy=*/true);
  EXPECT_GT(client_memory.blocks(), 0u) << "ngtcp2 freed all of its blocks at ngtcp2_conn_del";
  EXPECT_EQ(server_memory.blocks(), 0u);  // it lost nothing it had sent
}

// The same with ngtcp2's default allocator: under ASan, LeakSanitizer fails this run. Disabled:
// it exists to be run by hand (see the top of the file).
TEST_F(Ngtcp2FrameLeakTest, DISABLED_UnderLossWithNgtcp2sAllocatorLeaks) {
  Transfer(nullptr, nullptr, /*lossy=*/true);
}

}  // namespace
}  // namespace petrel::quic
