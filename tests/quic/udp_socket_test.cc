#include "quic/udp/udp_socket.h"

#include <gtest/gtest.h>
#include <poll.h>

#include <string>
#include <utility>
#include <vector>

namespace petrel::quic {
namespace {

struct Receiver {
  std::vector<std::vector<uint8_t>> buffers;
  std::vector<RecvSlot> slots;
  explicit Receiver(size_t count, size_t size = 65536) : buffers(count), slots(count) {
    for (size_t i = 0; i < count; ++i) {
      buffers[i].resize(size);
      slots[i].data = buffers[i].data();
      slots[i].capacity = size;
    }
  }
};

bool WaitReadable(int fd, int timeout_ms = 2000) {
  pollfd p{fd, POLLIN, 0};
  return poll(&p, 1, timeout_ms) == 1;
}

// Receives until `want_datagrams` datagrams (GRO batches counted by their segments) arrived or
// nothing more comes within the poll timeout. Appends each datagram's bytes to `out`.
size_t ReceiveDatagrams(UdpSocket& sock, size_t want_datagrams, std::vector<std::string>* out,
                        std::vector<RecvSlot>* seen = nullptr, int timeout_ms = 2000) {
  Receiver r(UdpSocket::kMaxBatch);
  while (out->size() < want_datagrams && WaitReadable(sock.fd(), timeout_ms)) {
    auto n = sock.Receive(absl::MakeSpan(r.slots));
    EXPECT_TRUE(n.ok()) << n.status();
    for (size_t i = 0; i < *n; ++i) {
      const RecvSlot& s = r.slots[i];
      if (seen != nullptr) seen->push_back(s);
      const size_t seg = s.segment_size == 0 ? s.length : s.segment_size;
      for (size_t off = 0; off < s.length; off += seg) {
        out->emplace_back(reinterpret_cast<const char*>(s.data + off),
                          std::min(seg, s.length - off));
      }
    }
  }
  return out->size();
}

std::vector<uint8_t> Pattern(size_t segments, size_t seg_size) {
  std::vector<uint8_t> data(segments * seg_size);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i * 7 + i / seg_size);
  return data;
}

void RoundTrip(const char* host, bool gso, bool gro) {
  UdpSocketOptions opts;
  opts.enable_gso = gso;
  opts.enable_gro = gro;
  auto a = UdpSocket::Bind(*SocketAddress::Parse(host, 0), opts);
  auto b = UdpSocket::Bind(*SocketAddress::Parse(host, 0), opts);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ((*a)->gso_enabled(), gso);  // this kernel has UDP_SEGMENT

  constexpr size_t kSegments = 10, kSeg = 1200;
  const std::vector<uint8_t> data = Pattern(kSegments, kSeg);
  SendBatch batch;
  batch.data = data.data();
  batch.length = data.size() - 100;  // the last segment is shorter
  batch.segment_size = kSeg;
  batch.peer = &(*b)->local_address();
  batch.ecn = 0x2;  // ECT(0)
  UdpSender sender(**a);
  SendResult r = sender.Send(batch);
  ASSERT_EQ(r.error, 0);
  EXPECT_EQ(r.bytes_sent, batch.length);
  EXPECT_EQ(sender.sendmsg_calls(), gso ? 1u : kSegments);

  std::vector<std::string> got;
  std::vector<RecvSlot> seen;
  ASSERT_EQ(ReceiveDatagrams(**b, kSegments, &got, &seen), kSegments);
  for (size_t i = 0; i < kSegments; ++i) {
    const size_t len = i + 1 < kSegments ? kSeg : kSeg - 100;
    EXPECT_EQ(got[i], std::string(reinterpret_cast<const char*>(data.data() + i * kSeg), len));
  }
  for (const RecvSlot& s : seen) {
    EXPECT_EQ(s.ecn, 0x2);
    EXPECT_EQ(s.peer, (*a)->local_address());
    EXPECT_EQ(s.local.HostString(), (*b)->local_address().HostString());
    EXPECT_EQ(s.local.port(), (*b)->local_address().port());
  }
  if (!gro) {
    EXPECT_EQ(seen.size(), kSegments);
  } else if (gso) {
    // Loopback hands a GSO send to a GRO socket as one coalesced batch.
    EXPECT_LT(seen.size(), kSegments);
    EXPECT_EQ(seen[0].segment_size, kSeg);
  }
}

TEST(UdpSocketTest, GsoAndGroIpv4) { RoundTrip("127.0.0.1", true, true); }
TEST(UdpSocketTest, FallbackWithoutGsoOrGroIpv4) { RoundTrip("127.0.0.1", false, false); }
TEST(UdpSocketTest, GsoAndGroIpv6) { RoundTrip("::1", true, true); }
TEST(UdpSocketTest, FallbackIpv6) { RoundTrip("::1", false, false); }

// Receive sets only the header fields recvmmsg wrote on its previous call. A read of a lone
// datagram leaves a short control length behind (no UDP_GRO message) and a truncated one the
// MSG_TRUNC flag: the next read must still see a coalesced batch's segment size, its ECN and
// its destination address, and must not take it as truncated.
TEST(UdpSocketTest, EachReadStartsFromFreshHeaders) {
  UdpSocketOptions opts;
  opts.enable_gso = true;
  opts.enable_gro = true;
  auto a = UdpSocket::Bind(*SocketAddress::Parse("127.0.0.1", 0), opts);
  auto b = UdpSocket::Bind(*SocketAddress::Parse("127.0.0.1", 0), opts);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  UdpSender sender(**a);
  const std::vector<uint8_t> data = Pattern(10, 1200);

  SendBatch lone;
  lone.data = data.data();
  lone.length = 300;
  lone.peer = &(*b)->local_address();
  ASSERT_EQ(sender.Send(lone).bytes_sent, 300u);
  SendBatch too_long = lone;
  too_long.length = 2000;
  ASSERT_EQ(sender.Send(too_long).bytes_sent, 2000u);

  Receiver small(UdpSocket::kMaxBatch, 1500);
  size_t seen = 0;
  while (seen < 2 && WaitReadable((*b)->fd())) {
    auto n = (*b)->Receive(absl::MakeSpan(small.slots));
    ASSERT_TRUE(n.ok()) << n.status();
    for (size_t i = 0; i < *n; ++i, ++seen) {
      EXPECT_EQ(small.slots[i].segment_size, 0u);
      EXPECT_EQ(small.slots[i].length, seen == 0 ? 300u : 0u);  // 0: truncated, dropped
    }
  }
  ASSERT_EQ(seen, 2u);

  SendBatch batch;
  batch.data = data.data();
  batch.length = data.size();
  batch.segment_size = 1200;
  batch.peer = &(*b)->local_address();
  batch.ecn = 0x2;
  ASSERT_EQ(sender.Send(batch).bytes_sent, data.size());
  Receiver large(UdpSocket::kMaxBatch);
  ASSERT_TRUE(WaitReadable((*b)->fd()));
  auto n = (*b)->Receive(absl::MakeSpan(large.slots));
  ASSERT_TRUE(n.ok()) << n.status();
  ASSERT_GE(*n, 1u);
  const RecvSlot& first = large.slots[0];
  EXPECT_EQ(first.segment_size, 1200u);  // the UDP_GRO control message was not cut off
  EXPECT_GT(first.length, 1200u);
  EXPECT_EQ(first.ecn, 0x2);
  EXPECT_EQ(first.local.port(), (*b)->local_address().port());
  EXPECT_EQ(first.peer, (*a)->local_address());
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(first.data), first.length),
            std::string(reinterpret_cast<const char*>(data.data()), first.length));
}

// The kernel reads each slot's buffer (data, capacity) where the caller keeps it: a read fills
// the buffers the slots name at that read, after the caller swapped a slot's buffer in place,
// passed another array of slots, or more slots than before.
TEST(UdpSocketTest, EachReadFillsTheBuffersTheSlotsNameThen) {
  auto a = UdpSocket::Bind(*SocketAddress::Parse("127.0.0.1", 0), {});
  auto b = UdpSocket::Bind(*SocketAddress::Parse("127.0.0.1", 0), {});
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  UdpSender sender(**a);
  const auto send = [&](const std::string& text) {
    SendBatch one;
    one.data = reinterpret_cast<const uint8_t*>(text.data());
    one.length = text.size();
    one.peer = &(*b)->local_address();
    ASSERT_EQ(sender.Send(one).bytes_sent, text.size());
  };
  // Reads what arrived into `slots`; returns each datagram as (buffer it landed in, bytes).
  const auto read = [&](absl::Span<RecvSlot> slots, size_t want) {
    std::vector<std::pair<const uint8_t*, std::string>> got;
    while (got.size() < want && WaitReadable((*b)->fd())) {
      auto n = (*b)->Receive(slots);
      EXPECT_TRUE(n.ok()) << n.status();
      for (size_t i = 0; i < *n; ++i) {
        got.emplace_back(slots[i].data, std::string(reinterpret_cast<const char*>(slots[i].data),
                                                    slots[i].length));
      }
    }
    return got;
  };

  Receiver r(4, 1500);
  send("one");
  auto got = read(absl::MakeSpan(r.slots).subspan(0, 1), 1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].first, r.buffers[0].data());
  EXPECT_EQ(got[0].second, "one");

  std::vector<uint8_t> swapped(1500);
  r.slots[0].data = swapped.data();  // the caller gave slot 0 another buffer
  send("two");
  got = read(absl::MakeSpan(r.slots).subspan(0, 1), 1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].first, swapped.data());
  EXPECT_EQ(got[0].second, "two");
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(r.buffers[0].data()), 3), "one");

  std::vector<uint8_t> lone_buffer(1500);
  RecvSlot lone;
  lone.data = lone_buffer.data();
  lone.capacity = lone_buffer.size();
  send("three");
  got = read(absl::MakeSpan(&lone, 1), 1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].first, lone_buffer.data());
  EXPECT_EQ(got[0].second, "three");

  r.slots[0].data = r.buffers[0].data();
  r.slots[0].capacity = 2;  // a smaller buffer now: the datagram does not fit
  send("four");
  got = read(absl::MakeSpan(r.slots).subspan(0, 1), 1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(r.slots[0].length, 0u);  // truncated: dropped, as the capacity said

  r.slots[0].capacity = 1500;
  send("five");
  send("six");
  send("seven");
  got = read(absl::MakeSpan(r.slots), 3);  // more slots than any read before
  ASSERT_EQ(got.size(), 3u);
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].first, r.buffers[i].data()) << i;
    EXPECT_EQ(got[i].second, (std::vector<std::string>{"five", "six", "seven"})[i]);
  }
}

TEST(UdpSocketTest, EmptyReceiveReturnsZero) {
  auto a = UdpSocket::Bind(*SocketAddress::Parse("127.0.0.1", 0), {});
  ASSERT_TRUE(a.ok());
  Receiver r(4);
  auto n = (*a)->Receive(absl::MakeSpan(r.slots));
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 0u);
}

TEST(UdpSocketTest, SendsFromChosenSourceAddress) {
  // Bound to the wildcard, the socket must answer from the address the peer used.
  auto server = UdpSocket::Bind(*SocketAddress::Parse("0.0.0.0", 0), {});
  ASSERT_TRUE(server.ok());
  auto client = UdpSocket::Bind(*SocketAddress::Parse("127.0.0.1", 0), {});
  ASSERT_TRUE(client.ok());
  SocketAddress target = *SocketAddress::Parse("127.0.0.2", (*server)->local_address().port());
  const uint8_t ping[] = {'p'};
  SendBatch out{ping, 1, 0, &target, nullptr, 0};
  ASSERT_EQ(UdpSender(**client).Send(out).bytes_sent, 1u);
  std::vector<std::string> got;
  std::vector<RecvSlot> seen;
  ASSERT_EQ(ReceiveDatagrams(**server, 1, &got, &seen), 1u);
  EXPECT_EQ(seen[0].local.HostString(), "127.0.0.2");

  const uint8_t pong[] = {'P'};
  SendBatch reply{pong, 1, 0, &seen[0].peer, &seen[0].local, 0};
  ASSERT_EQ(UdpSender(**server).Send(reply).bytes_sent, 1u);
  got.clear();
  seen.clear();
  ASSERT_EQ(ReceiveDatagrams(**client, 1, &got, &seen), 1u);
  EXPECT_EQ(seen[0].peer.HostString(), "127.0.0.2");
}

TEST(UdpSocketTest, LossHookDropsAboutTheConfiguredShare) {
  UdpSenderOptions lossy;
  lossy.test_tx_loss = 0.25;
  lossy.test_loss_seed = 42;
  auto a = UdpSocket::Bind(*SocketAddress::Parse("127.0.0.1", 0), {});
  auto b = UdpSocket::Bind(*SocketAddress::Parse("127.0.0.1", 0), {});
  ASSERT_TRUE(a.ok() && b.ok());
  UdpSender sender(**a, lossy);
  constexpr size_t kSegments = 400, kSeg = 100;
  const std::vector<uint8_t> data = Pattern(kSegments, kSeg);
  for (size_t off = 0; off < data.size(); off += 40 * kSeg) {
    SendBatch batch{data.data() + off, 40 * kSeg, kSeg, &(*b)->local_address(), nullptr, 0};
    ASSERT_EQ(sender.Send(batch).bytes_sent, batch.length);  // dropped segments count as sent
  }
  std::vector<std::string> got;
  // Everything sent is already queued on loopback; a short wait ends the read.
  ReceiveDatagrams(**b, kSegments, &got, nullptr, 200);
  EXPECT_GT(got.size(), kSegments * 60 / 100);
  EXPECT_LT(got.size(), kSegments * 90 / 100);
}

}  // namespace
}  // namespace petrel::quic
