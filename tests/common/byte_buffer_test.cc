#include "petrel/common/byte_buffer.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace petrel {
namespace {

std::string Pattern(size_t n, int seed = 0) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>('a' + (i * 7 + seed) % 26);
  return s;
}

TEST(ByteBufferTest, StartsEmptyWithoutStorage) {
  ByteBuffer buf;
  EXPECT_EQ(buf.capacity(), 0u);
  EXPECT_EQ(buf.ReadableBytes(), 0u);
  EXPECT_TRUE(buf.empty());
  EXPECT_EQ(buf.Readable(), "");
}

TEST(ByteBufferTest, AppendAndConsume) {
  ByteBuffer buf;
  buf.Append("hello ");
  buf.Append("world", 5);
  EXPECT_EQ(buf.Readable(), "hello world");
  EXPECT_EQ(buf.ReadableBytes(), 11u);
  buf.Consume(6);
  EXPECT_EQ(buf.Readable(), "world");
  buf.Append("!");
  EXPECT_EQ(buf.Readable(), "world!");
  buf.ConsumeAll();
  EXPECT_TRUE(buf.empty());
  buf.Append(nullptr, 0);  // a no-op, not a crash
  EXPECT_TRUE(buf.empty());
}

TEST(ByteBufferTest, ConsumingEverythingRewindsToTheFront) {
  ByteBuffer buf(16);
  buf.Append("0123456789");
  buf.Consume(10);
  EXPECT_EQ(buf.WritableBytes(), 16u);  // indices back at 0
}

TEST(ByteBufferTest, CompactsInsteadOfGrowingWhenFrontSpaceSuffices) {
  ByteBuffer buf(64);
  buf.Append(Pattern(60));
  buf.Consume(50);  // 10 readable at offset 50, 4 writable at the tail, 50 free in front
  const std::string rest = std::string(buf.Readable());
  ASSERT_EQ(buf.WritableBytes(), 4u);

  char* tail = buf.WritableTail(40);
  EXPECT_EQ(buf.capacity(), 64u);  // compacted, not grown
  EXPECT_EQ(buf.Readable(), rest);
  EXPECT_GE(buf.WritableBytes(), 40u);
  EXPECT_EQ(tail, buf.data() + 10);
  std::copy_n("xyz", 3, tail);
  buf.CommitWrite(3);
  EXPECT_EQ(buf.Readable(), rest + "xyz");
}

TEST(ByteBufferTest, GrowsWhenFrontSpaceIsNotEnough) {
  ByteBuffer buf(32);
  buf.Append(Pattern(30));
  buf.Consume(5);
  const std::string rest = std::string(buf.Readable());
  buf.WritableTail(20);  // 25 readable + 20 > 32
  EXPECT_GE(buf.capacity(), 45u);
  EXPECT_EQ(buf.Readable(), rest);
  EXPECT_GE(buf.WritableBytes(), 20u);
}

TEST(ByteBufferTest, GrowthIsGeometric) {
  ByteBuffer buf(16);
  buf.Append(Pattern(17));
  EXPECT_GE(buf.capacity(), 32u);
}

TEST(ByteBufferTest, BigAppendsKeepEveryByte) {
  ByteBuffer buf;
  std::string expected;
  for (int i = 0; i < 50; ++i) {
    const std::string chunk = Pattern(10'000 + i * 997, i);
    buf.Append(chunk);
    expected += chunk;
    if (i % 3 == 0) {
      buf.Consume(1234);
      expected.erase(0, 1234);
    }
  }
  EXPECT_EQ(buf.Readable(), expected);
  buf.Append(Pattern(4 << 20));
  expected += Pattern(4 << 20);
  EXPECT_EQ(buf.Readable(), expected);
}

TEST(ByteBufferTest, ShrinkReleasesUnusedCapacity) {
  ByteBuffer buf(1024);
  buf.Append(Pattern(100));
  buf.Consume(40);
  buf.Shrink();
  EXPECT_EQ(buf.capacity(), 60u);
  EXPECT_EQ(buf.Readable(), Pattern(100).substr(40));
  buf.ConsumeAll();
  buf.Shrink();
  EXPECT_EQ(buf.capacity(), 0u);
  buf.Append("again");
  EXPECT_EQ(buf.Readable(), "again");
}

TEST(ByteBufferTest, MoveTransfersContents) {
  ByteBuffer a;
  a.Append("payload");
  ByteBuffer b(std::move(a));
  EXPECT_EQ(b.Readable(), "payload");
  EXPECT_EQ(a.capacity(), 0u);  // NOLINT(bugprone-use-after-move): moved-from is empty
  a = std::move(b);
  EXPECT_EQ(a.Readable(), "payload");
}

class ByteBufferFdTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fds_), 0);
    // Room for the large transfers below without a reader on the other side.
    const int size = 4 << 20;
    ::setsockopt(fds_[0], SOL_SOCKET, SO_SNDBUF, &size, sizeof(size));
    ::setsockopt(fds_[1], SOL_SOCKET, SO_RCVBUF, &size, sizeof(size));
  }
  void TearDown() override {
    ::close(fds_[0]);
    ::close(fds_[1]);
  }
  void WriteAll(const std::string& s) {
    size_t off = 0;
    while (off < s.size()) {
      const ssize_t n = ::write(fds_[0], s.data() + off, s.size() - off);
      ASSERT_GT(n, 0) << "errno " << errno;
      off += static_cast<size_t>(n);
    }
  }
  int fds_[2] = {-1, -1};
};

TEST_F(ByteBufferFdTest, ReadIntoTailWithoutSpill) {
  ByteBuffer buf(1024);
  WriteAll("ping");
  absl::StatusOr<size_t> n = buf.ReadFromFd(fds_[1]);
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(*n, 4u);
  EXPECT_EQ(buf.Readable(), "ping");
  EXPECT_EQ(buf.capacity(), 1024u);
}

TEST_F(ByteBufferFdTest, ReadSpillsPastTheTailAndGrowsByWhatArrived) {
  ByteBuffer buf(16);
  buf.Append("head:");
  const std::string data = Pattern(40'000);
  WriteAll(data);
  absl::StatusOr<size_t> n = buf.ReadFromFd(fds_[1]);
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_GT(*n, 11u);  // more than fitted in the tail: the spill was used
  while (buf.ReadableBytes() < 5 + data.size()) {
    n = buf.ReadFromFd(fds_[1]);
    ASSERT_TRUE(n.ok()) << n.status();
  }
  EXPECT_EQ(buf.Readable(), "head:" + data);
  n = buf.ReadFromFd(fds_[1]);
  EXPECT_EQ(n.status().code(), absl::StatusCode::kUnavailable);  // EAGAIN
}

TEST_F(ByteBufferFdTest, ReadRespectsMax) {
  ByteBuffer buf;
  WriteAll(Pattern(1000));
  absl::StatusOr<size_t> n = buf.ReadFromFd(fds_[1], 300);
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(*n, 300u);
  EXPECT_EQ(buf.Readable(), Pattern(1000).substr(0, 300));
  EXPECT_EQ(*buf.ReadFromFd(fds_[1], 0), 0u);
}

TEST_F(ByteBufferFdTest, ReadReportsEndOfFile) {
  ByteBuffer buf;
  WriteAll("last");
  ::shutdown(fds_[0], SHUT_WR);
  EXPECT_EQ(*buf.ReadFromFd(fds_[1]), 4u);
  EXPECT_EQ(*buf.ReadFromFd(fds_[1]), 0u);
  EXPECT_EQ(buf.Readable(), "last");
}

TEST_F(ByteBufferFdTest, ReadFromBadFdIsAnError) {
  ByteBuffer buf;
  absl::StatusOr<size_t> n = buf.ReadFromFd(-1);
  EXPECT_FALSE(n.ok());
  EXPECT_NE(n.status().code(), absl::StatusCode::kUnavailable);
}

TEST_F(ByteBufferFdTest, WriteConsumesWhatWasWritten) {
  ByteBuffer out;
  out.Append("response bytes");
  absl::StatusOr<size_t> n = out.WriteToFd(fds_[0], 8);
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(*n, 8u);
  EXPECT_EQ(out.Readable(), " bytes");
  ASSERT_TRUE(out.WriteToFd(fds_[0]).ok());
  EXPECT_TRUE(out.empty());

  ByteBuffer in;
  while (in.ReadableBytes() < 14) ASSERT_TRUE(in.ReadFromFd(fds_[1]).ok());
  EXPECT_EQ(in.Readable(), "response bytes");
}

TEST_F(ByteBufferFdTest, WriteToClosedPeerIsEpipeNotSignal) {
  ::close(fds_[1]);
  fds_[1] = ::open("/dev/null", O_RDONLY | O_CLOEXEC);  // keep TearDown's close harmless
  ByteBuffer out;
  out.Append("into the void");
  absl::StatusOr<size_t> n = out.WriteToFd(fds_[0]);
  EXPECT_FALSE(n.ok());  // the process is still alive: MSG_NOSIGNAL worked
  EXPECT_EQ(out.Readable(), "into the void");
}

TEST(ByteBufferPipeTest, WorksOnPipes) {
  int p[2];
  ASSERT_EQ(::pipe2(p, O_NONBLOCK | O_CLOEXEC), 0);
  ByteBuffer out;
  out.Append("through a pipe");
  absl::StatusOr<size_t> n = out.WriteToFd(p[1]);  // send() fails with ENOTSOCK, write() works
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(*n, 14u);
  ByteBuffer in;
  n = in.ReadFromFd(p[0]);
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(in.Readable(), "through a pipe");
  ::close(p[0]);
  ::close(p[1]);
}

}  // namespace
}  // namespace petrel

namespace petrel {
namespace {

// A connected TCP pair on loopback whose client end is reset (SO_LINGER 0, close): the server
// end's next read or write fails with ECONNRESET / EPIPE.
class ByteBufferResetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&addr), len), 0);
    ASSERT_EQ(::listen(listener, 1), 0);
    ASSERT_EQ(::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len), 0);
    const int client = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ASSERT_EQ(::connect(client, reinterpret_cast<sockaddr*>(&addr), len), 0);
    server_ = ::accept4(listener, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    ::close(listener);
    ASSERT_GE(server_, 0);
    const linger reset{1, 0};
    ASSERT_EQ(::setsockopt(client, SOL_SOCKET, SO_LINGER, &reset, sizeof(reset)), 0);
    ::close(client);  // RST
    pollfd p{server_, POLLIN, 0};
    ASSERT_EQ(::poll(&p, 1, 10000), 1);  // the reset has arrived
  }
  void TearDown() override { ::close(server_); }
  int server_ = -1;
};

// A reset is an error of its own, not "nothing to read now" (kUnavailable), so the caller closes
// at once and with the reason.
TEST_F(ByteBufferResetTest, ReadAfterResetIsNotWouldBlock) {
  ByteBuffer buf;
  absl::StatusOr<size_t> n = buf.ReadFromFd(server_);
  ASSERT_FALSE(n.ok());
  EXPECT_NE(n.status().code(), absl::StatusCode::kUnavailable) << n.status();
  EXPECT_TRUE(absl::StrContains(n.status().message(), "reset")) << n.status();
}

TEST_F(ByteBufferResetTest, WriteAfterResetIsNotWouldBlock) {
  ByteBuffer buf;
  buf.Append("after the reset");
  absl::StatusOr<size_t> n = buf.WriteToFd(server_);
  ASSERT_FALSE(n.ok());
  EXPECT_NE(n.status().code(), absl::StatusCode::kUnavailable) << n.status();
}

}  // namespace
}  // namespace petrel
