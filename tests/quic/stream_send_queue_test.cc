#include "quic/connection/stream_send_queue.h"

#include <cstdint>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace petrel::quic {
namespace {

std::string Gather(const StreamSendQueue& q, bool* all) {
  ngtcp2_vec v[8];
  const size_t n = q.Unsent(v, 8, SIZE_MAX, all);
  std::string out;
  for (size_t i = 0; i < n; ++i) out.append(reinterpret_cast<const char*>(v[i].base), v[i].len);
  return out;
}

TEST(StreamSendQueueTest, SendsInOrderAcrossChunksAndFreesOnAck) {
  StreamSendQueue q(100);
  ASSERT_TRUE(q.Append("hello ", false));
  ASSERT_TRUE(q.Append("world", true));
  bool all = false;
  EXPECT_EQ(Gather(q, &all), "hello world");
  EXPECT_TRUE(all);
  q.MarkSent(3, false);
  EXPECT_EQ(Gather(q, &all), "lo world");
  q.MarkSent(8, true);
  EXPECT_FALSE(q.has_unsent());
  EXPECT_EQ(q.buffered(), 11u);
  q.Ack(0, 6);
  EXPECT_EQ(q.buffered(), 5u);
  EXPECT_FALSE(q.done());
  q.Ack(6, 5);
  EXPECT_TRUE(q.done());
}

TEST(StreamSendQueueTest, RefusesWhenFullUntilAcked) {
  StreamSendQueue q(10);
  ASSERT_TRUE(q.Append("0123456789", false));
  EXPECT_TRUE(q.full());
  EXPECT_FALSE(q.Append("x", false));
  q.MarkSent(10, false);
  EXPECT_FALSE(q.Append("x", false));  // sent but unacknowledged still counts
  q.Ack(0, 4);
  EXPECT_FALSE(q.full());
  EXPECT_TRUE(q.Append("abcd", false));
  bool all = false;
  EXPECT_EQ(Gather(q, &all), "abcd");
}

TEST(StreamSendQueueTest, FinAloneAndAfterFin) {
  StreamSendQueue q(10);
  ASSERT_TRUE(q.Append("", true));
  EXPECT_TRUE(q.has_unsent());
  EXPECT_FALSE(q.Append("late", false));
  q.MarkSent(0, true);
  EXPECT_TRUE(q.done());
}

TEST(StreamSendQueueTest, ReferencesAreSentInPlaceAndCopiesAreNot) {
  StreamSendQueue q(100);
  std::string mine = "by reference";
  std::string temp = "copied";
  ASSERT_TRUE(q.AppendRef(mine, false));
  ASSERT_TRUE(q.Append(temp, false));
  ASSERT_TRUE(q.AppendRef(mine, true));
  temp.assign("zzzzzz");  // the copy does not see later changes to the caller's bytes
  ngtcp2_vec v[8];
  bool all = false;
  ASSERT_EQ(q.Unsent(v, 8, SIZE_MAX, &all), 3u);
  EXPECT_TRUE(all);
  EXPECT_EQ(v[0].base, reinterpret_cast<const uint8_t*>(mine.data()));
  EXPECT_EQ(v[2].base, reinterpret_cast<const uint8_t*>(mine.data()));
  EXPECT_NE(v[1].base, reinterpret_cast<const uint8_t*>(temp.data()));
  EXPECT_EQ(Gather(q, &all), "by referencecopiedby reference");
}

TEST(StreamSendQueueTest, PartialSendsResumeMidRangeAndFinGoesWithTheLastByte) {
  StreamSendQueue q(1000);
  const std::string a = "0123456789";
  const std::string b = "abcdef";
  ASSERT_TRUE(q.AppendRef(a, false));
  ASSERT_TRUE(q.Append(b, false));
  ASSERT_TRUE(q.AppendRef(a, true));
  bool all = false;
  q.MarkSent(4, false);
  EXPECT_EQ(Gather(q, &all), "456789abcdef0123456789");
  q.MarkSent(6, false);  // exactly the end of the first range
  EXPECT_EQ(Gather(q, &all), "abcdef0123456789");
  q.MarkSent(9, false);  // into the third
  EXPECT_EQ(Gather(q, &all), "3456789");
  EXPECT_TRUE(all);
  EXPECT_TRUE(q.has_unsent());
  q.MarkSent(7, true);
  EXPECT_FALSE(q.has_unsent());
  EXPECT_TRUE(q.fin_sent());
  EXPECT_FALSE(q.done());
  // A vec limit smaller than the ranges left: `all` says the FIN must wait.
  StreamSendQueue r(1000);
  ASSERT_TRUE(r.AppendRef(a, false));
  ASSERT_TRUE(r.AppendRef(b, true));
  ngtcp2_vec v[1];
  ASSERT_EQ(r.Unsent(v, 1, SIZE_MAX, &all), 1u);
  EXPECT_FALSE(all);
}

TEST(StreamSendQueueTest, UnsentStopsOnceItHoldsEnoughForAPacket) {
  // Many small queued ranges (DATA frame headers and body chunks): what one packet can carry is
  // gathered, not the whole queue, so a packet's cost does not grow with what waits behind it.
  StreamSendQueue q(1 << 20);
  const std::string piece(100, 'p');
  for (int i = 0; i < 50; ++i) ASSERT_TRUE(q.AppendRef(piece, i == 49));
  ngtcp2_vec v[64];
  bool all = true;
  ASSERT_EQ(q.Unsent(v, 64, 250, &all), 3u);  // 300 bytes >= 250
  EXPECT_FALSE(all);
  ASSERT_EQ(q.Unsent(v, 64, 300, &all), 3u);
  ASSERT_EQ(q.Unsent(v, 64, 301, &all), 4u);
  q.MarkSent(4850, false);                   // within the last two ranges
  ASSERT_EQ(q.Unsent(v, 64, 50, &all), 1u);  // the rest of the 49th piece
  EXPECT_FALSE(all);
  ASSERT_EQ(q.Unsent(v, 64, 51, &all), 2u);  // and the last
  EXPECT_TRUE(all);                          // the last range is in: the FIN may go with it
}

TEST(StreamSendQueueTest, AcksDropOnlyWholeSentRangesInOrder) {
  StreamSendQueue q(1000);
  const std::string a(10, 'a');
  const std::string b(10, 'b');
  ASSERT_TRUE(q.AppendRef(a, false));
  ASSERT_TRUE(q.Append(b, false));
  ASSERT_TRUE(q.AppendRef(a, false));
  q.MarkSent(25, false);
  // ngtcp2 acknowledges in stream order, in pieces that need not match the ranges.
  q.Ack(0, 3);
  EXPECT_EQ(q.ranges(), 3u);
  EXPECT_EQ(q.buffered(), 27u);
  q.Ack(3, 12);  // the first range and half the second
  EXPECT_EQ(q.ranges(), 2u);
  q.Ack(15, 10);  // all that was sent: the unsent tail keeps the third range
  EXPECT_EQ(q.ranges(), 1u);
  bool all = false;
  EXPECT_EQ(Gather(q, &all), "aaaaa");
  q.MarkSent(5, false);
  q.Ack(25, 5);
  EXPECT_EQ(q.ranges(), 0u);
  EXPECT_EQ(q.buffered(), 0u);
  EXPECT_FALSE(q.has_unsent());
}

TEST(StreamSendQueueTest, RingWrapsAndGrowsWithoutLosingOrder) {
  StreamSendQueue q(1 << 20);
  std::vector<std::string> chunks;
  for (int i = 0; i < 64; ++i) {
    chunks.push_back(std::string(1 + i % 7, static_cast<char>('A' + i % 26)));
  }
  std::string expected;
  uint64_t sent = 0;
  uint64_t acked = 0;
  size_t next = 0;
  // Queue a few, send them, acknowledge half of what is outstanding, repeat: the head wraps
  // around the ring, which grows while ranges are queued; bytes come out in order throughout.
  for (int round = 0; next < chunks.size(); ++round) {
    for (int k = 0; k < 1 + round % 5 && next < chunks.size(); ++k, ++next) {
      if (next % 3 == 0) {
        ASSERT_TRUE(q.Append(chunks[next], false));
      } else {
        ASSERT_TRUE(q.AppendRef(chunks[next], false));
      }
      expected += chunks[next];
    }
    bool all = false;
    const std::string unsent = Gather(q, &all);
    ASSERT_EQ(unsent, expected.substr(sent));
    // Send in two pieces, the first ending mid-range.
    q.MarkSent(unsent.size() / 2, false);
    q.MarkSent(unsent.size() - unsent.size() / 2, false);
    sent += unsent.size();
    const uint64_t n = (sent - acked) / 2;
    q.Ack(acked, n);
    acked += n;
    ASSERT_EQ(q.buffered(), expected.size() - acked);
  }
  q.Ack(acked, sent - acked);
  EXPECT_EQ(q.ranges(), 0u);
  EXPECT_EQ(q.buffered(), 0u);
  ASSERT_TRUE(q.AppendRef(chunks[0], true));  // still usable after all that
  bool all = false;
  EXPECT_EQ(Gather(q, &all), chunks[0]);
}

TEST(StreamSendQueueTest, ResetForgetsEverythingForTheNextStream) {
  StreamSendQueue q(100);
  const std::string a = "first life";
  ASSERT_TRUE(q.AppendRef(a, false));
  ASSERT_TRUE(q.Append("copy", true));
  q.MarkSent(5, false);
  q.Reset();  // e.g. the stream was reset: its references are no longer read
  EXPECT_EQ(q.ranges(), 0u);
  EXPECT_FALSE(q.has_unsent());
  EXPECT_FALSE(q.fin_queued());
  const std::string b = "second";
  ASSERT_TRUE(q.AppendRef(b, true));
  bool all = false;
  EXPECT_EQ(Gather(q, &all), "second");
  EXPECT_TRUE(all);
  q.MarkSent(6, true);
  q.Ack(0, 6);
  EXPECT_TRUE(q.done());
}

}  // namespace
}  // namespace petrel::quic
