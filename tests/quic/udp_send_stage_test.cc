// UdpSender's stage: batches staged by several owners in one loop batch leave with one
// sendmmsg, byte for byte and in order, each with its own peer, source address, ECN and GSO
// size; a send at once never overtakes what is staged; and what a full socket refuses goes back
// to its owners, in order, to be sent when the socket drains. The last needs a socket that can
// be full: like send_blocked_test, that case runs itself again in a user + network namespace
// whose loopback has a rate-limiting qdisc.
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "petrel/common/event_loop.h"
#include "quic/udp/udp_socket.h"
#include "support/rate_limited_netns.h"

namespace petrel::quic {
namespace {

constexpr char kInNamespace[] = "PETREL_SEND_STAGE_NETNS";

// Records what the sender gives back.
class RecordingOwner : public UdpSender::StagedOwner, public UdpSender::Waiter {
 public:
  struct Refused {
    std::string bytes;
    size_t segment_size;
    SocketAddress peer;
    uint8_t ecn;
  };
  void OnStagedBatchRefused(UdpSender* sender, const SendBatch& batch) override {
    refused.push_back(Refused{std::string(reinterpret_cast<const char*>(batch.data), batch.length),
                              batch.segment_size, *batch.peer, batch.ecn});
    if (!waiting) {
      waiting = true;
      sender->Wait(this);
    }
  }
  void OnSocketWritable() override {
    waiting = false;
    ++writable;
  }
  std::vector<Refused> refused;
  bool waiting = false;
  int writable = 0;
};

// Datagrams received on `sock` (GRO batches split into their datagrams), until `want` arrived
// or none came for `timeout_ms`.
std::vector<std::string> Receive(UdpSocket& sock, size_t want, int timeout_ms = 2000,
                                 std::vector<RecvSlot>* seen = nullptr) {
  std::vector<std::vector<uint8_t>> buffers(UdpSocket::kMaxBatch, std::vector<uint8_t>(65536));
  std::vector<RecvSlot> slots(UdpSocket::kMaxBatch);
  std::vector<std::string> out;
  while (out.size() < want) {
    pollfd p{sock.fd(), POLLIN, 0};
    if (poll(&p, 1, timeout_ms) != 1) break;
    for (size_t i = 0; i < slots.size(); ++i) {
      slots[i].data = buffers[i].data();
      slots[i].capacity = buffers[i].size();
    }
    absl::StatusOr<size_t> n = sock.Receive(absl::MakeSpan(slots));
    EXPECT_TRUE(n.ok()) << n.status();
    if (!n.ok()) break;
    for (size_t i = 0; i < *n; ++i) {
      const RecvSlot& s = slots[i];
      if (seen != nullptr) seen->push_back(s);
      const size_t seg = s.segment_size == 0 ? s.length : s.segment_size;
      for (size_t off = 0; off < s.length; off += seg) {
        out.emplace_back(reinterpret_cast<const char*>(s.data + off),
                         std::min(seg, s.length - off));
      }
    }
  }
  return out;
}

// Writes a batch of `segments` datagrams of `seg` bytes (the last `short_by` shorter) at the
// sender's staging space, each datagram tagged with `tag` and its index; returns the batch and
// the datagrams it holds.
struct Written {
  SendBatch batch;
  std::vector<std::string> datagrams;
};
Written WriteBatch(UdpSender& sender, size_t segments, size_t seg, size_t short_by, char tag,
                   const SocketAddress* peer, uint8_t ecn) {
  Written w;
  uint8_t* space = sender.StagingSpace();
  EXPECT_NE(space, nullptr);
  size_t len = 0;
  for (size_t i = 0; i < segments; ++i) {
    const size_t n = i + 1 < segments ? seg : seg - short_by;
    std::string d(n, '\0');
    for (size_t k = 0; k < n; ++k) d[k] = static_cast<char>(tag + i * 3 + k % 251);
    d[0] = tag;
    std::memcpy(space + len, d.data(), n);
    len += n;
    w.datagrams.push_back(std::move(d));
  }
  w.batch = SendBatch{space, len, segments > 1 ? seg : 0, peer, nullptr, ecn};
  return w;
}

UdpSenderOptions Staging() {
  UdpSenderOptions o;
  o.stage = true;
  return o;
}

struct Fixture {
  explicit Fixture(bool gso = true) {
    UdpSocketOptions o;
    o.enable_gso = gso;
    auto s = UdpSocket::Bind(*SocketAddress::Parse("127.0.0.1", 0), o);
    auto r1 = UdpSocket::Bind(*SocketAddress::Parse("127.0.0.1", 0), {});
    auto r2 = UdpSocket::Bind(*SocketAddress::Parse("127.0.0.1", 0), {});
    EXPECT_TRUE(s.ok() && r1.ok() && r2.ok());
    socket = std::move(*s);
    receivers[0] = std::move(*r1);
    receivers[1] = std::move(*r2);
    sender = std::make_unique<UdpSender>(*socket, Staging());
    EXPECT_TRUE(sender->WatchWritability(&loop).ok());
  }
  ~Fixture() { sender.reset(); }
  // One loop turn: the stage is sent when the loop's batch ends.
  void Turn() { loop.RunOnce(Duration::zero()); }

  EventLoop loop;
  std::unique_ptr<UdpSocket> socket;
  std::unique_ptr<UdpSocket> receivers[2];
  std::unique_ptr<UdpSender> sender;
};

void StagedBatchesLeaveTogether(bool gso) {
  Fixture f(gso);
  RecordingOwner a, b;
  // Five batches, alternating owners, peers and ECN marks; GSO batches of 3 datagrams.
  std::vector<std::string> expected[2];
  for (int i = 0; i < 5; ++i) {
    const int to = i % 2;
    Written w = WriteBatch(*f.sender, 3, 1200, 100 + i, static_cast<char>('A' + i),
                           &f.receivers[to]->local_address(), to == 0 ? 0x2 : 0x1);
    const SendResult r = f.sender->Send(w.batch, i % 2 == 0 ? &a : &b);
    EXPECT_EQ(r.bytes_sent, w.batch.length);
    EXPECT_FALSE(r.would_block);
    for (std::string& d : w.datagrams) expected[to].push_back(std::move(d));
  }
  // Nothing has left yet: staged until the loop's batch ends.
  EXPECT_EQ(f.sender->sendmsg_calls(), 0u);
  EXPECT_EQ(f.sender->sendmmsg_calls(), 0u);
  EXPECT_EQ(f.sender->staged_messages(), gso ? 5u : 15u);
  f.Turn();
  EXPECT_EQ(f.sender->staged_messages(), 0u);
  EXPECT_EQ(f.sender->sendmmsg_calls(), 1u);
  EXPECT_EQ(f.sender->sendmsg_calls(), 0u);
  for (int to = 0; to < 2; ++to) {
    std::vector<RecvSlot> seen;
    EXPECT_EQ(Receive(*f.receivers[to], expected[to].size(), 2000, &seen), expected[to]);
    for (const RecvSlot& s : seen) {
      EXPECT_EQ(s.ecn, to == 0 ? 0x2 : 0x1);
      EXPECT_EQ(s.peer, f.socket->local_address());
    }
  }
  EXPECT_TRUE(a.refused.empty());
  EXPECT_TRUE(b.refused.empty());
}

TEST(UdpSendStageTest, BatchesOfSeveralOwnersLeaveInOneSendmmsg) {
  StagedBatchesLeaveTogether(true);
}

TEST(UdpSendStageTest, WithoutGsoEachDatagramIsAMessageOfTheSameCall) {
  StagedBatchesLeaveTogether(false);
}

TEST(UdpSendStageTest, OnlyASenderAskedToStageDoes) {
  EventLoop loop;
  auto s = UdpSocket::Bind(*SocketAddress::Parse("127.0.0.1", 0), {});
  ASSERT_TRUE(s.ok());
  UdpSender plain(**s);
  ASSERT_TRUE(plain.WatchWritability(&loop).ok());
  EXPECT_FALSE(plain.can_stage());
  EXPECT_EQ(plain.StagingSpace(), nullptr);
  UdpSenderOptions lossy = Staging();
  lossy.test_tx_loss = 0.5;  // the loss hook drops per datagram, at once
  UdpSender with_loss(**s, lossy);
  ASSERT_TRUE(with_loss.WatchWritability(&loop).ok());
  EXPECT_EQ(with_loss.StagingSpace(), nullptr);
  UdpSender unwatched(**s, Staging());  // no loop: no end of batch to send at
  EXPECT_EQ(unwatched.StagingSpace(), nullptr);
}

TEST(UdpSendStageTest, ASendAtOnceGoesAfterWhatIsStaged) {
  Fixture f;
  RecordingOwner a;
  const SocketAddress& peer = f.receivers[0]->local_address();
  Written first = WriteBatch(*f.sender, 2, 1000, 0, 'x', &peer, 0);
  ASSERT_EQ(f.sender->Send(first.batch, &a).bytes_sent, first.batch.length);
  // Not at the staging space (and no owner): sent at once, after the staged batch.
  const std::string now = "sent at once";
  const SendBatch direct{
      reinterpret_cast<const uint8_t*>(now.data()), now.size(), 0, &peer, nullptr, 0};
  ASSERT_EQ(f.sender->Send(direct).bytes_sent, now.size());
  EXPECT_EQ(f.sender->sendmmsg_calls(), 1u);
  EXPECT_EQ(f.sender->sendmsg_calls(), 1u);
  EXPECT_EQ(f.sender->staged_messages(), 0u);
  std::vector<std::string> want = first.datagrams;
  want.push_back(now);
  EXPECT_EQ(Receive(*f.receivers[0], want.size()), want);
  f.Turn();  // the end-of-batch flush finds nothing to do
  EXPECT_EQ(f.sender->sendmmsg_calls(), 1u);
}

TEST(UdpSendStageTest, ABatchWrittenElsewhereOrWithoutOwnerIsNotStaged) {
  Fixture f;
  RecordingOwner a;
  const SocketAddress& peer = f.receivers[0]->local_address();
  std::string elsewhere(800, 'e');
  const SendBatch batch{
      reinterpret_cast<const uint8_t*>(elsewhere.data()), elsewhere.size(), 0, &peer, nullptr, 0};
  EXPECT_EQ(f.sender->Send(batch, &a).bytes_sent, elsewhere.size());
  EXPECT_EQ(f.sender->staged_messages(), 0u);
  EXPECT_EQ(f.sender->sendmsg_calls(), 1u);
  Written w = WriteBatch(*f.sender, 1, 900, 0, 'n', &peer, 0);
  EXPECT_EQ(f.sender->Send(w.batch).bytes_sent, w.batch.length);  // no owner: at once
  EXPECT_EQ(f.sender->staged_messages(), 0u);
  EXPECT_EQ(f.sender->sendmsg_calls(), 2u);
  std::vector<std::string> want = {elsewhere, w.datagrams[0]};
  EXPECT_EQ(Receive(*f.receivers[0], 2), want);
}

TEST(UdpSendStageTest, AStageOutOfBytesIsSentToMakeRoom) {
  Fixture f;
  RecordingOwner a;
  const SocketAddress& peer = f.receivers[0]->local_address();
  // Batches of 40 datagrams of 1,400 bytes (56,000 bytes): the arena holds a few of them with
  // room for a full batch after each. (Only counted: a whole stage may be more than the
  // receiving socket's buffer holds on a machine with the default rmem_max.)
  const size_t per_stage = (UdpSender::kStageBytes - UdpSocket::kMaxGsoBytes) / 56000 + 1;
  constexpr size_t kBatches = 20;
  for (size_t i = 0; i < kBatches; ++i) {
    Written w = WriteBatch(*f.sender, 40, 1400, 0, static_cast<char>('a' + i), &peer, 0);
    ASSERT_EQ(f.sender->Send(w.batch, &a).bytes_sent, w.batch.length);
    EXPECT_EQ(f.sender->staged_messages(), i % per_stage + 1) << "batch " << i;
    EXPECT_EQ(f.sender->sendmmsg_calls(), i / per_stage);
  }
  f.Turn();
  EXPECT_EQ(f.sender->sendmmsg_calls(), (kBatches + per_stage - 1) / per_stage);
  EXPECT_EQ(f.sender->sendmsg_calls(), 0u);
  EXPECT_TRUE(a.refused.empty());
}

TEST(UdpSendStageTest, AStageOutOfMessagesIsSentToMakeRoomInOrder) {
  Fixture f;
  RecordingOwner a;
  const SocketAddress& peer = f.receivers[0]->local_address();
  constexpr size_t kBatches = 150;
  std::vector<std::string> want;
  for (size_t i = 0; i < kBatches; ++i) {
    Written w = WriteBatch(*f.sender, 1, 100, 0, static_cast<char>(i), &peer, 0);
    ASSERT_EQ(f.sender->Send(w.batch, &a).bytes_sent, w.batch.length);
    want.push_back(w.datagrams[0]);
  }
  EXPECT_EQ(f.sender->sendmmsg_calls(), kBatches / UdpSender::kMaxStagedMessages);
  f.Turn();
  EXPECT_EQ(f.sender->sendmmsg_calls(),
            (kBatches + UdpSender::kMaxStagedMessages - 1) / UdpSender::kMaxStagedMessages);
  EXPECT_EQ(Receive(*f.receivers[0], want.size()), want);
}

TEST(UdpSendStageTest, AForgottenOwnersBatchesStillLeave) {
  Fixture f;
  auto gone = std::make_unique<RecordingOwner>();
  const SocketAddress& peer = f.receivers[0]->local_address();
  Written w = WriteBatch(*f.sender, 2, 700, 10, 'g', &peer, 0);
  ASSERT_EQ(f.sender->Send(w.batch, gone.get()).bytes_sent, w.batch.length);
  f.sender->ForgetStaged(gone.get());
  gone.reset();
  f.Turn();
  EXPECT_EQ(Receive(*f.receivers[0], 2), w.datagrams);
}

TEST(UdpSendStageTest, DestroyingTheSenderSendsWhatIsStaged) {
  Fixture f;
  RecordingOwner a;
  const SocketAddress& peer = f.receivers[0]->local_address();
  Written w = WriteBatch(*f.sender, 1, 500, 0, 'd', &peer, 0);
  ASSERT_EQ(f.sender->Send(w.batch, &a).bytes_sent, w.batch.length);
  f.sender.reset();
  EXPECT_EQ(Receive(*f.receivers[0], 1), w.datagrams);
}

// Meaningful only inside the namespace (see the file comment): the sender's socket buffer
// holds a few datagrams and the qdisc drains it slowly.
void RefusedBatchesGoBackInOrder() {
  UdpSocketOptions small;
  small.send_buffer_bytes = 4096;
  Fixture f;
  f.sender.reset();
  f.socket.reset();
  auto s = UdpSocket::Bind(*SocketAddress::Parse("127.0.0.1", 0), small);
  ASSERT_TRUE(s.ok());
  f.socket = std::move(*s);
  f.sender = std::make_unique<UdpSender>(*f.socket, Staging());
  ASSERT_TRUE(f.sender->WatchWritability(&f.loop).ok());

  RecordingOwner owners[3];
  std::vector<std::string> staged[3];  // each owner's datagrams, in the order staged
  std::vector<std::string> all;        // everyone's, in the order staged
  for (int i = 0; i < 24; ++i) {
    Written w = WriteBatch(*f.sender, 3, 1200, 0, static_cast<char>('A' + i),
                           &f.receivers[0]->local_address(), 0);
    ASSERT_EQ(f.sender->Send(w.batch, &owners[i % 3]).bytes_sent, w.batch.length);
    for (const std::string& d : w.datagrams) {
      staged[i % 3].push_back(d);
      all.push_back(d);
    }
  }
  f.Turn();
  ASSERT_TRUE(f.sender->blocked()) << "the socket took everything: this test proves nothing";
  // What was sent is a prefix of the staged order; what came back, each owner's rest.
  size_t refused = 0;
  for (int o = 0; o < 3; ++o) {
    std::vector<std::string> back;
    for (const RecordingOwner::Refused& r : owners[o].refused) {
      const size_t seg = r.segment_size == 0 ? r.bytes.size() : r.segment_size;
      for (size_t off = 0; off < r.bytes.size(); off += seg)
        back.push_back(r.bytes.substr(off, seg));
    }
    ASSERT_LE(back.size(), staged[o].size());
    EXPECT_TRUE(std::equal(back.begin(), back.end(), staged[o].end() - back.size()))
        << "owner " << o << ": not the end of what it staged, in order";
    refused += back.size();
    EXPECT_EQ(owners[o].waiting, !back.empty());
  }
  ASSERT_GT(refused, 0u);
  const size_t sent = all.size() - refused;
  std::vector<std::string> got = Receive(*f.receivers[0], sent, 2000);
  EXPECT_EQ(got, std::vector<std::string>(all.begin(), all.begin() + sent));

  // The owners are told when the socket drains; resending what came back, in the staged
  // order (owner by owner), delivers every datagram.
  for (int turns = 0; turns < 2000 && f.sender->blocked(); ++turns) {
    f.loop.RunOnce(std::chrono::milliseconds(10));
  }
  ASSERT_FALSE(f.sender->blocked());
  for (int o = 0; o < 3; ++o) {
    EXPECT_EQ(owners[o].writable, owners[o].refused.empty() ? 0 : 1);
    for (const RecordingOwner::Refused& r : owners[o].refused) {
      const SendBatch batch{reinterpret_cast<const uint8_t*>(r.bytes.data()),
                            r.bytes.size(),
                            r.segment_size,
                            &r.peer,
                            nullptr,
                            r.ecn};
      SendResult res = f.sender->Send(batch);
      for (int turns = 0; turns < 2000 && res.would_block; ++turns) {
        f.loop.RunOnce(std::chrono::milliseconds(10));
        if (!f.sender->blocked()) res = f.sender->Send(batch);
      }
      ASSERT_EQ(res.bytes_sent, r.bytes.size());
      std::vector<std::string> more = Receive(*f.receivers[0], (r.bytes.size() + 1199) / 1200);
      got.insert(got.end(), more.begin(), more.end());
    }
  }
  std::multiset<std::string> sent_all(got.begin(), got.end());
  EXPECT_EQ(sent_all, std::multiset<std::string>(all.begin(), all.end()));
}

TEST(UdpSendStageTest, RefusedBatchesGoBackToTheirOwnersInOrder) {
  if (petrel::testing::InRateLimitedNetns(kInNamespace)) {
    RefusedBatchesGoBackInOrder();
    return;
  }
  // 20 Mbit/s with a small burst: the socket's few KiB stay queued for a while.
  petrel::testing::RunInRateLimitedNetns(kInNamespace, "rate 20mbit burst 8kb latency 200ms",
                                         /*pin_cpu0=*/false, 120);
}

}  // namespace
}  // namespace petrel::quic
