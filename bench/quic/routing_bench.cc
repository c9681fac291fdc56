// The QUIC master's routing rate: a sender thread blasts synthetic short-header datagrams over
// loopback at a master with N workers whose sinks only count; prints datagrams/s routed and
// drops. With GRO on, the kernel coalesces the sender's GSO batches and the master routes a
// batch as one unit; with GRO off it parses and routes every datagram.
//
// Usage: routing_bench [--workers N] [--seconds S] [--gro 0|1] [--size BYTES]
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "petrel/common/event_loop_thread.h"
#include "quic/dispatch/master.h"

namespace {

using petrel::quic::ReceivedPacket;

class CountingSink : public petrel::quic::PacketSink {
 public:
  void OnPackets(absl::Span<const ReceivedPacket> packets) override {
    uint64_t n = 0;
    for (const ReceivedPacket& p : packets) {
      n += p.segment_size != 0 ? (p.length + p.segment_size - 1) / p.segment_size : 1;
    }
    count.fetch_add(n, std::memory_order_relaxed);
  }
  std::atomic<uint64_t> count{0};
};

struct Args {
  size_t workers = 2;
  double seconds = 3;
  bool gro = false;
  size_t size = 1200;
};

Args Parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string k = argv[i];
    if (k == "--workers")
      a.workers = std::strtoul(argv[i + 1], nullptr, 10);
    else if (k == "--seconds")
      a.seconds = std::strtod(argv[i + 1], nullptr);
    else if (k == "--gro")
      a.gro = std::strcmp(argv[i + 1], "1") == 0;
    else if (k == "--size")
      a.size = std::strtoul(argv[i + 1], nullptr, 10);
    else {
      std::fprintf(stderr,
                   "usage: routing_bench [--workers N] [--seconds S] [--gro 0|1] [--size B]\n");
      std::exit(2);
    }
  }
  return a;
}

}  // namespace

int main(int argc, char** argv) {
  const Args args = Parse(argc, argv);
  petrel::EventLoopThread master_thread("bench-master");
  if (!master_thread.Start().ok()) return 1;
  std::vector<std::unique_ptr<petrel::EventLoopThread>> worker_threads;
  std::vector<std::unique_ptr<CountingSink>> sinks;
  std::vector<petrel::quic::WorkerPort> ports;
  for (size_t i = 0; i < std::max<size_t>(args.workers, 1); ++i) {
    sinks.push_back(std::make_unique<CountingSink>());
    if (args.workers == 0) {
      ports.push_back({master_thread.loop(), sinks.back().get()});
    } else {
      worker_threads.push_back(std::make_unique<petrel::EventLoopThread>("bench-worker"));
      if (!worker_threads.back()->Start().ok()) return 1;
      ports.push_back({worker_threads.back()->loop(), sinks.back().get()});
    }
  }
  petrel::quic::MasterConfig config;
  config.listen = {*petrel::SocketAddress::Parse("127.0.0.1", 0)};
  config.socket_options.enable_gro = args.gro;
  config.socket_options.recv_buffer_bytes = 32 << 20;
  auto master = petrel::quic::Master::Create(config, master_thread.loop(), ports);
  if (!master.ok()) {
    std::fprintf(stderr, "%s\n", master.status().ToString().c_str());
    return 1;
  }
  std::atomic<bool> started{false};
  master_thread.loop()->Post([&] {
    if (!(*master)->Start().ok()) std::abort();
    started = true;
  });
  while (!started) std::this_thread::yield();
  const petrel::SocketAddress server = (*master)->sockets()[0]->local_address();

  // As many datagrams per sendmsg (GSO) as fit in one 64 KiB send, CIDs cycling over workers.
  const size_t per_send = std::min<size_t>(64, 65000 / args.size);
  auto client = petrel::quic::UdpSocket::Bind(*petrel::SocketAddress::Parse("127.0.0.1", 0), {});
  if (!client.ok()) return 1;
  petrel::quic::UdpSender sender(**client);
  const size_t cid_len = (*master)->cid_codec().cid_len();
  const size_t n_workers = std::max<size_t>(args.workers, 1);
  std::vector<std::vector<uint8_t>> batches(n_workers);
  for (size_t w = 0; w < n_workers; ++w) {
    batches[w].resize(per_send * args.size, 0x5a);
    for (size_t i = 0; i < per_send; ++i) {
      uint8_t* p = batches[w].data() + i * args.size;
      p[0] = 0x40;
      (*master)->cid_codec().Generate(static_cast<uint8_t>(w), p + 1);
    }
  }
  (void)cid_len;
  std::atomic<bool> stop{false};
  uint64_t sent = 0;
  std::thread blaster([&] {
    size_t w = 0;
    while (!stop.load(std::memory_order_relaxed)) {
      petrel::quic::SendBatch b{batches[w].data(), batches[w].size(), args.size,
                                &server,           nullptr,           0};
      petrel::quic::SendResult r = sender.Send(b);
      sent += r.bytes_sent / args.size;
      w = (w + 1) % n_workers;
    }
  });
  const auto t0 = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(std::chrono::duration<double>(args.seconds));
  stop = true;
  blaster.join();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // let the rings drain
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  uint64_t received = 0, ring_full = 0, no_buffer = 0;
  std::atomic<bool> read{false};
  master_thread.loop()->Post([&] {
    received = (*master)->datagrams_received();
    ring_full = (*master)->drops(petrel::quic::DropReason::kRingFull);
    no_buffer = (*master)->drops(petrel::quic::DropReason::kNoBuffer);
    (*master)->StopReceiving();
    read = true;
  });
  while (!read) std::this_thread::yield();
  uint64_t handled = 0;
  for (auto& s : sinks) handled += s->count.load();
  std::printf(
      "workers=%zu gro=%d size=%zu seconds=%.2f sent=%llu received=%llu routed_to_workers=%llu "
      "ring_full=%llu no_buffer=%llu master_rate=%.0f datagrams/s worker_rate=%.0f datagrams/s\n",
      args.workers, args.gro ? 1 : 0, args.size, elapsed, static_cast<unsigned long long>(sent),
      static_cast<unsigned long long>(received), static_cast<unsigned long long>(handled),
      static_cast<unsigned long long>(ring_full), static_cast<unsigned long long>(no_buffer),
      received / elapsed, handled / elapsed);
  master_thread.Stop();
  for (auto& w : worker_threads) w->Stop();
  return 0;
}
