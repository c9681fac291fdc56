// Once warm, the receive path — recvmmsg into pooled buffers, header parse, routing, the SPSC
// hand-off to a worker and the buffers' way back — makes no heap allocation per datagram. Every
// C++ allocation of the process (operator new; Petrel's containers and abseil allocate through
// it) is counted while 20 bursts of datagrams cross a master with one worker thread.
#include <gtest/gtest.h>
#include <malloc.h>

#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <new>

#include "petrel/common/event_loop_thread.h"
#include "quic/dispatch/master.h"
#include "support/allocation_counter.h"

namespace petrel::quic {
namespace {

// Counts datagrams; never allocates.
class CountingSink : public PacketSink {
 public:
  void OnPackets(absl::Span<const ReceivedPacket> packets) override {
    std::lock_guard<std::mutex> lock(mu_);
    count_ += packets.size();
    cv_.notify_all();
  }
  bool WaitFor(uint64_t n) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, std::chrono::seconds(10), [&] { return count_ >= n; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  uint64_t count_ = 0;
};

TEST(MasterNoAllocTest, WarmReceivePathDoesNotAllocate) {
  testing::CountAllocationsOfEveryThread(true);
  EventLoopThread master_thread("noalloc-master");
  EventLoopThread worker_thread("noalloc-worker");
  ASSERT_TRUE(master_thread.Start().ok());
  ASSERT_TRUE(worker_thread.Start().ok());
  CountingSink sink;
  MasterConfig config;
  config.listen = {*SocketAddress::Parse("127.0.0.1", 0)};
  config.socket_options.enable_gro = false;  // every datagram routed on its own
  // The pool's size is then fixed, whatever the scheduling: a slow worker under load would
  // otherwise grow it to a new high-water mark during the measurement.
  config.preallocate_buffers = true;
  auto master = Master::Create(config, master_thread.loop(), {{worker_thread.loop(), &sink}});
  ASSERT_TRUE(master.ok()) << master.status();
  std::atomic<bool> started{false};
  master_thread.loop()->Post([&] {
    ASSERT_TRUE((*master)->Start().ok());
    started = true;
  });
  while (!started) std::this_thread::yield();

  auto client = UdpSocket::Bind(*SocketAddress::Parse("127.0.0.1", 0), {});
  ASSERT_TRUE(client.ok());
  UdpSender sender(**client);
  const SocketAddress server = (*master)->sockets()[0]->local_address();
  uint8_t datagram[1200] = {0x41};
  (*master)->cid_codec().Generate(0, datagram + 1);

  uint64_t sent = 0;
  auto burst = [&](int count) {
    for (int i = 0; i < count; ++i) {
      SendBatch b{datagram, sizeof(datagram), 0, &server, nullptr, 0};
      ASSERT_EQ(sender.Send(b).bytes_sent, sizeof(datagram));
    }
    sent += count;
    ASSERT_TRUE(sink.WaitFor(sent));
  };
  // Warm: the pool grows slabs up to the largest number of buffers in flight, rings and
  // thread-local state are touched once. Bursts twice the measured size, until a whole round
  // allocates nothing.
  constexpr int kBurst = 500;
  bool warm = false;
  for (int round = 0; round < 20 && !warm; ++round) {
    const uint64_t start = testing::Allocations();
    for (int i = 0; i < 4; ++i) burst(2 * kBurst);
    warm = testing::Allocations() == start;
  }
  ASSERT_TRUE(warm) << "the receive path kept allocating while warming up";
  const uint64_t before = testing::Allocations();
  for (int i = 0; i < 20; ++i) burst(kBurst);
  const uint64_t after = testing::Allocations();
  EXPECT_EQ(after - before, 0u) << "allocations while routing " << 20 * kBurst << " datagrams";

  // The counter works: the same kind of work done cold allocates.
  const uint64_t cold = testing::Allocations();
  auto again = Master::Create(config, master_thread.loop(), {{worker_thread.loop(), &sink}});
  EXPECT_GT(testing::Allocations(), cold);

  std::atomic<bool> stopped{false};
  master_thread.loop()->Post([&] {
    (*master)->StopReceiving();
    stopped = true;
  });
  while (!stopped) std::this_thread::yield();
  master_thread.Stop();
  worker_thread.Stop();
}

}  // namespace
}  // namespace petrel::quic
