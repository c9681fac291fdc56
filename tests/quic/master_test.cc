#include "quic/dispatch/master.h"

#include <gtest/gtest.h>
#include <poll.h>

#include <condition_variable>
#include <future>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "petrel/common/event_loop_thread.h"
#include "quic/packet/invariant_header.h"

namespace petrel::quic {
namespace {

using std::chrono::seconds;

// Records what reaches one worker; checks that it runs on that worker's loop.
class RecordingSink : public PacketSink {
 public:
  explicit RecordingSink(EventLoop* loop) : loop_(loop) {}
  void OnPackets(absl::Span<const ReceivedPacket> packets) override {
    EXPECT_TRUE(loop_->IsInLoopThread());
    std::lock_guard<std::mutex> lock(mu_);
    for (const ReceivedPacket& p : packets) {
      received_.emplace_back(reinterpret_cast<const char*>(p.data), p.length);
      peers_.push_back(p.peer);
    }
    calls_.push_back({packets.size(), loop_->turns()});
    cv_.notify_all();
  }
  // Each OnPackets call: how many packets, and in which of the loop's turns.
  struct Call {
    size_t packets;
    uint64_t turn;
  };
  std::vector<Call> calls() {
    std::lock_guard<std::mutex> lock(mu_);
    return calls_;
  }
  bool WaitFor(size_t count, std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return received_.size() >= count; });
  }
  std::vector<std::string> received() {
    std::lock_guard<std::mutex> lock(mu_);
    return received_;
  }

 private:
  EventLoop* loop_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::string> received_;
  std::vector<SocketAddress> peers_;
  std::vector<Call> calls_;
};

std::string ShortHeader(const uint8_t* cid, size_t cid_len, size_t total, uint8_t fill) {
  std::string p(total, static_cast<char>(fill));
  p[0] = 0x41;
  std::memcpy(&p[1], cid, cid_len);
  return p;
}

std::string Initial(const std::string& dcid, uint32_t version = kVersion1, size_t total = 1200) {
  std::string p;
  p.push_back(static_cast<char>(0xc0));
  for (int shift = 24; shift >= 0; shift -= 8) p.push_back(static_cast<char>(version >> shift));
  p.push_back(static_cast<char>(dcid.size()));
  p += dcid;
  p.push_back(0);  // SCID length
  p.push_back(0);  // token length
  const size_t length = total - p.size() - 2;
  p.push_back(static_cast<char>(0x40 | (length >> 8)));
  p.push_back(static_cast<char>(length & 0xff));
  p.resize(total, 'x');
  return p;
}

class MasterTest : public ::testing::Test {
 protected:
  // Starts a master on its own loop thread with `workers` worker loops (0: direct mode).
  void StartServer(size_t workers, size_t ring_capacity = 4096, bool run_workers = true,
                   size_t max_buffers = 0, bool gro = true) {
    master_thread_ = std::make_unique<EventLoopThread>("test-master");
    ASSERT_TRUE(master_thread_->Start().ok());
    std::vector<WorkerPort> ports;
    if (workers == 0) {
      sinks_.push_back(std::make_unique<RecordingSink>(master_thread_->loop()));
      ports.push_back({master_thread_->loop(), sinks_.back().get()});
    }
    for (size_t i = 0; i < workers; ++i) {
      worker_threads_.push_back(std::make_unique<EventLoopThread>("test-worker"));
      if (run_workers) {
        ASSERT_TRUE(worker_threads_.back()->Start().ok());
      }
      sinks_.push_back(std::make_unique<RecordingSink>(worker_threads_.back()->loop()));
      ports.push_back({worker_threads_.back()->loop(), sinks_.back().get()});
    }
    MasterConfig config;
    config.listen = {*SocketAddress::Parse("127.0.0.1", 0)};
    config.ring_capacity = ring_capacity;
    config.max_datagram_buffers = max_buffers;
    config.socket_options.enable_gro = gro;
    config.reset_key[0] = 0x42;
    auto m = Master::Create(config, master_thread_->loop(), std::move(ports));
    ASSERT_TRUE(m.ok()) << m.status();
    master_ = *std::move(m);
    RunOnMaster([this] { ASSERT_TRUE(master_->Start().ok()); });
    server_ = master_->sockets()[0]->local_address();
    auto c = UdpSocket::Bind(*SocketAddress::Parse("127.0.0.1", 0), {});
    ASSERT_TRUE(c.ok());
    client_ = *std::move(c);
    sender_ = std::make_unique<UdpSender>(*client_);
  }

  void TearDown() override {
    if (master_thread_ != nullptr) {
      RunOnMaster([this] { master_->StopReceiving(); });
      master_thread_->Stop();
    }
    for (auto& w : worker_threads_) w->Stop();
    master_.reset();
  }

  template <typename F>
  void RunOnMaster(F f) {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    master_thread_->loop()->Post([&] {
      f();
      std::lock_guard<std::mutex> lock(mu);
      done = true;
      cv.notify_all();
    });
    std::unique_lock<std::mutex> lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, seconds(10), [&] { return done; }));
  }

  // Master counters are read on the master's thread.
  uint64_t OnMaster(std::function<uint64_t()> read) {
    uint64_t v = 0;
    RunOnMaster([&] { v = read(); });
    return v;
  }

  void Send(const std::string& d) {
    SendBatch b{reinterpret_cast<const uint8_t*>(d.data()), d.size(), 0, &server_, nullptr, 0};
    ASSERT_EQ(sender_->Send(b).bytes_sent, d.size());
  }

  // Waits for one datagram to the client.
  std::string ReceiveReply(int timeout_ms = 5000) {
    pollfd p{client_->fd(), POLLIN, 0};
    if (poll(&p, 1, timeout_ms) != 1) return "";
    std::vector<uint8_t> buf(65536);
    RecvSlot slot;
    slot.data = buf.data();
    slot.capacity = buf.size();
    auto n = client_->Receive(absl::MakeSpan(&slot, 1));
    if (!n.ok() || *n == 0) return "";
    return std::string(reinterpret_cast<char*>(buf.data()), slot.length);
  }

  std::unique_ptr<EventLoopThread> master_thread_;
  std::vector<std::unique_ptr<EventLoopThread>> worker_threads_;
  std::vector<std::unique_ptr<RecordingSink>> sinks_;
  std::unique_ptr<Master> master_;
  SocketAddress server_;
  std::unique_ptr<UdpSocket> client_;
  std::unique_ptr<UdpSender> sender_;
};

TEST_F(MasterTest, DirectModeHandsEverythingToTheOneWorker) {
  StartServer(0);
  EXPECT_TRUE(master_->direct());
  uint8_t cid[20];
  master_->cid_codec().Generate(0, cid);
  for (int i = 0; i < 10; ++i) Send(Initial("client" + std::to_string(i) + "x"));
  for (int i = 0; i < 5; ++i) Send(ShortHeader(cid, master_->cid_codec().cid_len(), 60, i));
  ASSERT_TRUE(sinks_[0]->WaitFor(15));
  EXPECT_EQ(OnMaster([this] { return master_->datagrams_received(); }), 15u);
}

TEST_F(MasterTest, DirectModeServesOneReadPerLoopTurn) {
  // Datagrams queued while the loop is busy are served one read (at most one recvmmsg batch)
  // per turn: what the connections flush after the batch, and their timers, wait for one batch,
  // not for the socket's whole backlog.
  StartServer(0, 4096, true, 0, /*gro=*/false);
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::promise<void> blocked;
  master_thread_->loop()->Post([&blocked, released] {
    blocked.set_value();
    released.wait();
  });
  blocked.get_future().wait();
  uint8_t cid[20];
  master_->cid_codec().Generate(0, cid);
  constexpr size_t kDatagrams = 200;  // well within the socket's receive buffer
  for (size_t i = 0; i < kDatagrams; ++i) {
    Send(ShortHeader(cid, master_->cid_codec().cid_len(), 60 + i % 7, static_cast<uint8_t>(i)));
  }
  release.set_value();
  ASSERT_TRUE(sinks_[0]->WaitFor(kDatagrams));
  const std::vector<RecordingSink::Call> calls = sinks_[0]->calls();
  ASSERT_GE(calls.size(), kDatagrams / UdpSocket::kMaxBatch);
  for (size_t i = 0; i < calls.size(); ++i) {
    EXPECT_LE(calls[i].packets, UdpSocket::kMaxBatch);
    if (i > 0) {
      EXPECT_GT(calls[i].turn, calls[i - 1].turn) << "two reads served in one turn";
    }
  }
}

TEST_F(MasterTest, RoutesIssuedCidsToTheirWorkerAndInitialsByHash) {
  StartServer(2);
  EXPECT_FALSE(master_->direct());
  const size_t cid_len = master_->cid_codec().cid_len();
  for (int i = 0; i < 100; ++i) {
    uint8_t cid[20];
    master_->cid_codec().Generate(static_cast<uint8_t>(i % 2), cid);
    Send(ShortHeader(cid, cid_len, 100, static_cast<uint8_t>(i)));
  }
  // 200 client-chosen DCIDs, each sent twice as a retransmitted Initial would be.
  for (int i = 0; i < 200; ++i) {
    const std::string dcid = "dcid" + std::to_string(1000 + i);
    Send(Initial(dcid));
    Send(Initial(dcid));
  }
  const size_t total = 100 + 400;
  for (int attempt = 0; attempt < 100; ++attempt) {
    if (sinks_[0]->received().size() + sinks_[1]->received().size() >= total) break;
    sinks_[0]->WaitFor(total, std::chrono::milliseconds(100));
  }
  std::set<std::string> initials[2];
  size_t shorts[2] = {0, 0};
  for (int w = 0; w < 2; ++w) {
    for (const std::string& p : sinks_[w]->received()) {
      InvariantHeader h;
      ASSERT_EQ(ParseInvariantHeader(
                    absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(p.data()), p.size()),
                    cid_len, &h),
                HeaderParse::kOk);
      if (h.long_form) {
        initials[w].emplace(reinterpret_cast<const char*>(h.dcid.data()), h.dcid.size());
      } else {
        EXPECT_EQ(master_->cid_codec().WorkerOf(h.dcid), w) << "short header on the wrong worker";
        ++shorts[w];
      }
    }
  }
  EXPECT_EQ(shorts[0], 50u);
  EXPECT_EQ(shorts[1], 50u);
  // Every DCID went to exactly one worker (both copies together), and both workers got some.
  EXPECT_EQ(initials[0].size() + initials[1].size(), 200u);
  for (const std::string& d : initials[0]) EXPECT_EQ(initials[1].count(d), 0u) << d;
  EXPECT_GT(initials[0].size(), 50u);
  EXPECT_GT(initials[1].size(), 50u);
  EXPECT_EQ(sinks_[0]->received().size() + sinks_[1]->received().size(), total);
  EXPECT_EQ(OnMaster([this] { return master_->drops(DropReason::kRingFull); }), 0u);
}

TEST_F(MasterTest, AnswersUnknownVersionWithVersionNegotiation) {
  StartServer(2);
  Send(Initial("abcdefgh", 0x1a2a3a4a));
  const std::string vn = ReceiveReply();
  ASSERT_GE(vn.size(), 7u + 8 + 4);
  EXPECT_EQ(vn.substr(1, 4), std::string(4, '\0'));
  EXPECT_NE(vn.find(std::string("\x00\x00\x00\x01", 4), 5), std::string::npos);
  // Under 1200 bytes: no reply (amplification), counted.
  Send(Initial("abcdefgh", 0x1a2a3a4a, 600));
  EXPECT_EQ(ReceiveReply(300), "");
  EXPECT_EQ(OnMaster([this] { return master_->version_negotiations_sent(); }), 1u);
  EXPECT_EQ(sinks_[0]->received().size() + sinks_[1]->received().size(), 0u);
}

TEST_F(MasterTest, AnswersForeignShortHeaderWithStatelessReset) {
  StartServer(2);
  uint8_t foreign[16];
  std::memset(foreign, 0x99, sizeof(foreign));
  Send(ShortHeader(foreign, sizeof(foreign), 200, 7));
  const std::string reset = ReceiveReply();
  ASSERT_GE(reset.size(), StatelessResponder::kMinResetLen);
  EXPECT_LT(reset.size(), 200u);
  StatelessResetKey key{};
  key[0] = 0x42;
  StatelessResetTokens tokens(key);
  uint8_t token[kStatelessResetTokenLen];
  tokens.Compute(foreign, token);
  EXPECT_EQ(reset.substr(reset.size() - kStatelessResetTokenLen),
            std::string(reinterpret_cast<char*>(token), kStatelessResetTokenLen));
  // Too small to reset without risking a loop: nothing.
  Send(ShortHeader(foreign, sizeof(foreign), 21, 7));
  EXPECT_EQ(ReceiveReply(300), "");
}

// RFC 9287: once a client has the server's grease_quic_bit, its later Initials (ACKs of the
// server's Initial, coalesced with the Handshake Finished) may have the fixed bit clear; they
// carry a CID the server issued and must reach that connection's worker. A first Initial with
// the bit clear (an unknown DCID) is refused.
TEST_F(MasterTest, GreasedInitialForAnIssuedCidReachesItsWorker) {
  StartServer(2);
  uint8_t cid[20];
  master_->cid_codec().Generate(1, cid);
  const std::string issued(reinterpret_cast<const char*>(cid), master_->cid_codec().cid_len());
  std::string greased = Initial(issued);
  greased[0] = static_cast<char>(0x80);
  std::string unknown = Initial("newclient");
  unknown[0] = static_cast<char>(0x80);
  Send(unknown);
  Send(greased);
  sinks_[1]->WaitFor(1, std::chrono::seconds(5));
  ASSERT_EQ(sinks_[1]->received().size(), 1u);
  EXPECT_EQ(sinks_[1]->received()[0], greased);
  EXPECT_TRUE(sinks_[0]->received().empty());
  EXPECT_EQ(OnMaster([this] { return master_->drops(DropReason::kMalformed); }), 1u);
}

TEST_F(MasterTest, MalformedCorpusIsDroppedAndValidTrafficStillFlows) {
  StartServer(2);
  std::mt19937 rng(99);
  for (int i = 0; i < 2000; ++i) {
    std::string d(1 + rng() % 1400, '\0');
    for (char& c : d) c = static_cast<char>(rng());
    if (i % 3 == 0) d[0] = static_cast<char>(0xc0 | (d[0] & 0x3f));  // long-header shaped
    if (i % 3 == 1) d.resize(std::min<size_t>(d.size(), 6));         // truncated
    Send(d);
  }
  uint8_t cid[20];
  master_->cid_codec().Generate(1, cid);
  Send(ShortHeader(cid, master_->cid_codec().cid_len(), 80, 1));
  // The valid packet arrives after the corpus (one socket, in order).
  for (int attempt = 0; attempt < 100; ++attempt) {
    bool found = false;
    for (const std::string& p : sinks_[1]->received()) {
      found |= p.size() == 80 && std::memcmp(p.data() + 1, cid, 16) == 0;
    }
    if (found) break;
    sinks_[1]->WaitFor(SIZE_MAX, std::chrono::milliseconds(100));
    ASSERT_LT(attempt, 99) << "valid packet never arrived";
  }
  const uint64_t received = OnMaster([this] { return master_->datagrams_received(); });
  EXPECT_EQ(received, 2001u);
  EXPECT_GT(OnMaster([this] { return master_->drops(DropReason::kMalformed); }), 500u);
}

TEST_F(MasterTest, FullRingDropsAndCountsWithoutBlocking) {
  StartServer(2, /*ring_capacity=*/8, /*run_workers=*/false);
  uint8_t cid[20];
  master_->cid_codec().Generate(0, cid);
  for (int i = 0; i < 100; ++i) Send(ShortHeader(cid, master_->cid_codec().cid_len(), 50, i));
  // The master keeps serving: a VN reply proves its loop runs while worker 0 sleeps.
  Send(Initial("abcdefgh", 0x0a0a0a0a));
  ASSERT_NE(ReceiveReply(), "");
  EXPECT_EQ(OnMaster([this] { return master_->routed_to(0); }), 100u);
  EXPECT_EQ(OnMaster([this] { return master_->drops(DropReason::kRingFull); }), 92u);
  EXPECT_EQ(master_->inbox(0)->wakeups_sent(), 1u);  // one empty→non-empty transition
}

// Workers that fall behind hold the master's datagram buffers; past three quarters of them a
// new connection's Initial is dropped (the client repeats it), so that the connections the
// workers already serve keep buffers for their packets instead of losing them.
TEST_F(MasterTest, NewConnectionsAreShedWhileTheWorkersHoldMostBuffers) {
  StartServer(2, /*ring_capacity=*/4096, /*run_workers=*/false, /*max_buffers=*/200);
  const size_t cid_len = master_->cid_codec().cid_len();
  uint8_t cid[20];
  master_->cid_codec().Generate(0, cid);
  // The master has read everything sent before once it answers an unknown version.
  auto settle = [this] {
    Send(Initial("vn-probe", 0x0a0a0a0a));
    ASSERT_NE(ReceiveReply(), "");
  };
  auto routed = [this] {
    return OnMaster([this] { return master_->routed_to(0) + master_->routed_to(1); });
  };
  for (int i = 0; i < 5; ++i) Send(Initial("early" + std::to_string(i) + "xyz"));
  for (int i = 0; i < 145; ++i) Send(ShortHeader(cid, cid_len, 60, static_cast<uint8_t>(i)));
  settle();
  EXPECT_EQ(routed(), 150u);
  EXPECT_EQ(OnMaster([this] { return master_->drops(DropReason::kOverload); }), 0u);
  // 150 of 200 held: new connections wait, the served ones still get through.
  for (int i = 0; i < 10; ++i) Send(Initial("late" + std::to_string(i) + "xyzw"));
  for (int i = 0; i < 10; ++i) Send(ShortHeader(cid, cid_len, 60, static_cast<uint8_t>(i)));
  settle();
  EXPECT_EQ(OnMaster([this] { return master_->drops(DropReason::kOverload); }), 10u);
  EXPECT_EQ(routed(), 160u);
  EXPECT_EQ(OnMaster([this] { return master_->drops(DropReason::kNoBuffer); }), 0u);
}

// With GRO the master reads into 64 KiB buffers, few of them (two per worker's 256 and a
// batch's worth); a datagram that arrived alone moves to a small buffer, so that a worker
// behind on many connections' packets does not hold them all. 800 lone datagrams (each a
// different size, so the kernel cannot coalesce them) queued for a worker that does not run:
// every one is routed, none dropped for want of a buffer (with the large buffers alone, 640).
TEST_F(MasterTest, LoneDatagramsLeaveTheLargeBuffersFree) {
  StartServer(2, /*ring_capacity=*/4096, /*run_workers=*/false);
  if (!master_->sockets()[0]->gro_enabled()) GTEST_SKIP() << "no UDP GRO on this kernel";
  const size_t cid_len = master_->cid_codec().cid_len();
  uint8_t cid[20];
  master_->cid_codec().Generate(0, cid);
  for (int chunk = 0; chunk < 8; ++chunk) {
    for (int i = 0; i < 100; ++i) {
      const size_t size = 40 + static_cast<size_t>(chunk) * 100 + static_cast<size_t>(i);
      Send(ShortHeader(cid, cid_len, size, static_cast<uint8_t>(i)));
    }
    // Read before the next hundred: the socket's own buffer never holds many.
    Send(Initial("vn-probe", 0x0a0a0a0a));
    ASSERT_NE(ReceiveReply(), "");
  }
  EXPECT_EQ(OnMaster([this] { return master_->routed_to(0); }), 800u);
  EXPECT_EQ(OnMaster([this] { return master_->drops(DropReason::kNoBuffer); }), 0u);
}

// The master's receive slots keep their buffers from one read to the next; a buffer that went to
// a worker is replaced before the next read. Datagrams wait in the inbox of a worker that does
// not run yet while the master reads hundreds more into its slots, mixed with datagrams it
// drops (their buffers stay in the slots), in batches of up to 64: when the worker starts, every
// routed datagram must still hold its own bytes — a buffer handed over and still read into would
// show someone else's.
TEST_F(MasterTest, RoutedDatagramsKeepTheirBytesWhileTheSlotsAreReused) {
  for (const bool gro : {false, true}) {
    SCOPED_TRACE(gro ? "GRO" : "no GRO");
    StartServer(1, /*ring_capacity=*/4096, /*run_workers=*/false, /*max_buffers=*/0, gro);
    const size_t cid_len = master_->cid_codec().cid_len();
    uint8_t cid[20];
    master_->cid_codec().Generate(0, cid);
    std::vector<std::string> routed;
    size_t dropped = 0;
    for (int burst = 0; burst < 6; ++burst) {
      for (int i = 0; i < 100; ++i) {
        const int k = burst * 100 + i;
        if (k % 7 == 3) {
          Send(std::string(1, '\x40'));  // too short for a short header: malformed
          ++dropped;
          continue;
        }
        // Sizes differ from one datagram to the next (GRO coalesces only equal sizes); some are
        // over the 2 KiB a lone datagram is copied into under GRO, so their large buffer goes.
        const size_t size = 40 + static_cast<size_t>(k * 37 % 3000);
        std::string d = ShortHeader(cid, cid_len, size, static_cast<uint8_t>(k));
        d.replace(1 + cid_len, 4, absl::StrFormat("%04d", k));
        if (!gro && size > 2048) {
          Send(d);  // larger than a buffer without GRO: truncated, dropped as malformed
          ++dropped;
          continue;
        }
        Send(d);
        routed.push_back(std::move(d));
      }
      Send(Initial("vn-probe", 0x0a0a0a0a));  // the master has read everything before it
      ASSERT_NE(ReceiveReply(), "");
    }
    EXPECT_EQ(OnMaster([this] { return master_->routed_to(0); }), routed.size());
    EXPECT_EQ(OnMaster([this] { return master_->drops(DropReason::kMalformed); }), dropped);
    ASSERT_TRUE(worker_threads_[0]->Start().ok());
    ASSERT_TRUE(sinks_[0]->WaitFor(routed.size()));
    EXPECT_EQ(sinks_[0]->received(), routed);
    TearDown();
    master_thread_.reset();
    worker_threads_.clear();
    sinks_.clear();
  }
}

}  // namespace
}  // namespace petrel::quic
