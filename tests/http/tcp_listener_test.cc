#include "http/tcp/tcp_listener.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <vector>

namespace petrel::http {
namespace {

using std::chrono::milliseconds;

int Connect(const SocketAddress& to) {
  int fd = socket(to.family(), SOCK_STREAM | SOCK_CLOEXEC, 0);
  EXPECT_GE(fd, 0);
  EXPECT_EQ(connect(fd, to.sockaddr_ptr(), to.length()), 0);  // the backlog completes it
  return fd;
}

class TcpListenerTest : public ::testing::Test {
 protected:
  void Listen(TcpListenerOptions options = {}) {
    auto l = TcpListener::Listen(&loop_, *SocketAddress::Parse("127.0.0.1", 0), options,
                                 [this](int fd, const SocketAddress& peer, const SocketAddress&) {
                                   accepted_.push_back(fd);
                                   EXPECT_EQ(peer.HostString(), "127.0.0.1");
                                 });
    ASSERT_TRUE(l.ok()) << l.status();
    listener_ = *std::move(l);
  }
  // Runs loop turns until `pred` or the deadline.
  template <typename P>
  bool RunUntil(P pred, milliseconds deadline = milliseconds(5000)) {
    const auto end = std::chrono::steady_clock::now() + deadline;
    while (!pred() && std::chrono::steady_clock::now() < end) loop_.RunOnce(milliseconds(20));
    return pred();
  }
  void RunFor(milliseconds d) {
    const auto end = std::chrono::steady_clock::now() + d;
    while (std::chrono::steady_clock::now() < end) loop_.RunOnce(milliseconds(10));
  }
  void TearDown() override {
    for (int fd : accepted_) close(fd);
    for (int fd : clients_) close(fd);
    listener_.reset();
  }

  EventLoop loop_;
  std::unique_ptr<TcpListener> listener_;
  std::vector<int> accepted_;
  std::vector<int> clients_;
};

TEST_F(TcpListenerTest, AcceptsUntilEagainWithNoDelay) {
  Listen();
  for (int i = 0; i < 50; ++i) clients_.push_back(Connect(listener_->local_address()));
  ASSERT_TRUE(RunUntil([&] { return accepted_.size() == 50; }));
  // One readiness event takes every pending connection (accept until EAGAIN).
  EXPECT_LE(listener_->accept_wakeups(), 3u);
  int nodelay = 0;
  socklen_t len = sizeof(nodelay);
  ASSERT_EQ(getsockopt(accepted_[0], IPPROTO_TCP, TCP_NODELAY, &nodelay, &len), 0);
  EXPECT_EQ(nodelay, 1);
  EXPECT_EQ(listener_->open_connections(), 50u);
}

TEST_F(TcpListenerTest, ConnectionLimitPausesWithoutSpinning) {
  TcpListenerOptions options;
  options.max_connections = 3;
  Listen(options);
  for (int i = 0; i < 10; ++i) clients_.push_back(Connect(listener_->local_address()));
  ASSERT_TRUE(RunUntil([&] { return accepted_.size() == 3; }));
  EXPECT_TRUE(listener_->paused());
  const uint64_t wakeups = listener_->accept_wakeups();
  const uint64_t turns = loop_.turns();
  RunFor(milliseconds(200));  // seven connections wait in the backlog meanwhile
  EXPECT_EQ(listener_->accept_wakeups(), wakeups) << "a paused listener must not be polled";
  EXPECT_LT(loop_.turns() - turns, 30u) << "the loop must sleep, not spin";
  EXPECT_EQ(accepted_.size(), 3u);

  close(accepted_.back());
  accepted_.pop_back();
  listener_->ConnectionClosed();
  ASSERT_TRUE(RunUntil([&] { return accepted_.size() == 3 && listener_->accepted() == 4; }));
  EXPECT_TRUE(listener_->paused());
}

TEST_F(TcpListenerTest, DescriptorExhaustionPausesAndRetries) {
  Listen();
  for (int i = 0; i < 5; ++i) clients_.push_back(Connect(listener_->local_address()));
  // Leave room for exactly two more descriptors.
  rlimit old{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &old), 0);
  int probe = dup(0);
  ASSERT_GE(probe, 0);
  close(probe);
  rlimit tight = old;
  tight.rlim_cur = static_cast<rlim_t>(probe + 2);
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &tight), 0);
  ASSERT_TRUE(RunUntil([&] { return listener_->descriptor_exhaustions() > 0; }));
  EXPECT_EQ(accepted_.size(), 2u);
  const uint64_t wakeups = listener_->accept_wakeups();
  RunFor(milliseconds(300));
  // Paused between 100 ms retries: a handful of wake-ups, not thousands.
  EXPECT_LE(listener_->accept_wakeups() - wakeups, 5u);
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &old), 0);
  EXPECT_TRUE(RunUntil([&] { return accepted_.size() == 5; }));
}

}  // namespace
}  // namespace petrel::http
