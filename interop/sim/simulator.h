// Internal (petrel-netsim): the relay. One thread, one epoll instance: the listen socket (from
// clients), one upstream socket per client (NAT), and a signalfd for SIGINT/SIGTERM. Each
// received datagram goes through its Direction; whatever is due is sent with sendmmsg. The
// epoll_pwait2 timeout is the next delivery time (nanosecond resolution), so a 10 Mbit/s link
// paces at its serialization times instead of in millisecond bursts.
#ifndef PETREL_INTEROP_SIM_SIMULATOR_H_
#define PETREL_INTEROP_SIM_SIMULATOR_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "link.h"
#include "nat.h"
#include "options.h"
#include "udp.h"

namespace petrel::netsim {

class Simulator {
 public:
  // `options.seed` is used as given (the caller picks one when --seed is absent).
  explicit Simulator(const SimOptions& options);
  ~Simulator();
  Simulator(const Simulator&) = delete;
  Simulator& operator=(const Simulator&) = delete;

  // Opens the sockets and blocks SIGINT/SIGTERM into a signalfd. Call once, before Run().
  absl::Status Init();
  uint16_t listen_port() const { return listen_address_.port(); }
  const SocketAddress& listen_address() const { return listen_address_; }

  // Relays until SIGINT/SIGTERM or --max-seconds. Datagrams still in the delay lines then are
  // dropped (counted as in_flight).
  absl::Status Run();

  // The counters as JSON: {"seed":..,"to_server":{..},"to_client":{..},...}.
  std::string StatsJson() const;

 private:
  void DrainListen(Nanos now);
  void DrainUpstream(NatEntry* entry, Nanos now);
  void Ingress(Direction& dir, const uint8_t* data, size_t size, uint8_t ecn, uint32_t route,
               Nanos now);
  void Deliver(Nanos now);
  void MaybeRebind(Nanos now);
  std::unique_ptr<Datagram> Acquire();
  void Release(std::unique_ptr<Datagram> d);

  const SimOptions options_;
  int epoll_fd_ = -1;
  int listen_fd_ = -1;
  int signal_fd_ = -1;
  SocketAddress listen_address_;
  std::unique_ptr<NatTable> nat_;
  Direction to_server_;
  Direction to_client_;
  UdpReceiver receiver_;
  UdpSender sender_to_server_;
  UdpSender sender_to_client_;

  // The schedules (blackhole, rebind) start at the first datagram from a client.
  bool started_ = false;
  Nanos epoch_ = 0;
  Nanos next_rebind_ = 0;  // INT64_MAX when rebinding is off
  uint64_t rebinds_ = 0;
  uint64_t nat_refused_ = 0;

  std::vector<std::unique_ptr<Datagram>> free_;     // recycled datagrams
  std::vector<std::unique_ptr<Datagram>> sending_;  // handed to the senders until Flush()
};

}  // namespace petrel::netsim

#endif  // PETREL_INTEROP_SIM_SIMULATOR_H_
