#include "quic/connection/stream_send_queue.h"

#include <string>

#include "gtest/gtest.h"

namespace petrel::quic {
namespace {

std::string Gather(const StreamSendQueue& q, bool* all) {
  ngtcp2_vec v[8];
  const size_t n = q.Unsent(v, 8, all);
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

}  // namespace
}  // namespace petrel::quic
