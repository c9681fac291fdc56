#include "simulator.h"

#include <errno.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"

namespace petrel::netsim {
namespace {

constexpr uint64_t kListenTag = std::numeric_limits<uint64_t>::max();
constexpr uint64_t kSignalTag = kListenTag - 1;
constexpr Nanos kNever = std::numeric_limits<Nanos>::max();
constexpr Nanos kMs = 1'000'000;
// Datagrams read from one socket per readiness event before the loop looks at the clock
// again, so deliveries stay on time under a flood.
constexpr int kReadBudget = 16 * UdpReceiver::kBatch;
constexpr size_t kMaxFree = 8192;

Nanos Now() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<Nanos>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

LinkConfig MakeConfig(const SimOptions& o, const DirectionOptions& impair) {
  LinkConfig c;
  c.delay = o.delay_ms * kMs;
  c.bandwidth_mbps = o.bandwidth_mbps;
  c.queue = static_cast<size_t>(o.queue);
  c.impair = impair;
  c.blackhole_on = o.blackhole_on_ms * kMs;
  c.blackhole_off = o.blackhole_off_ms * kMs;
  c.header_bytes = o.server.is_v6() ? 48 : 28;
  return c;
}

void AppendStats(std::string* out, const char* name, const Direction& d) {
  const DirectionStats& s = d.stats();
  absl::StrAppend(out, "  \"", name, "\": {\"received\": ", s.received,
                  ", \"forwarded\": ", s.forwarded, ", \"dropped_loss\": ", s.dropped_loss,
                  ", \"dropped_list\": ", s.dropped_list, ", \"dropped_queue\": ", s.dropped_queue,
                  ", \"dropped_blackhole\": ", s.dropped_blackhole,
                  ", \"corrupted\": ", s.corrupted, ", \"bytes\": ", s.bytes,
                  ", \"send_errors\": ", s.send_errors, ", \"in_flight\": ", d.in_flight(), "}");
}

}  // namespace

Simulator::Simulator(const SimOptions& options)
    : options_(options),
      to_server_("to_server", MakeConfig(options, options.to_server), options.seed),
      // Independent streams per direction: one direction's traffic does not shift the other's
      // random decisions, so a seed reproduces each direction on its own.
      to_client_("to_client", MakeConfig(options, options.to_client),
                 options.seed ^ 0x9e3779b97f4a7c15ull),
      next_rebind_(kNever) {}

Simulator::~Simulator() {
  nat_.reset();
  if (listen_fd_ >= 0) ::close(listen_fd_);
  if (signal_fd_ >= 0) ::close(signal_fd_);
  if (epoll_fd_ >= 0) ::close(epoll_fd_);
}

absl::Status Simulator::Init() {
  epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
  if (epoll_fd_ < 0) return absl::ErrnoToStatus(errno, "epoll_create1");

  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGINT);
  sigaddset(&mask, SIGTERM);
  if (::sigprocmask(SIG_BLOCK, &mask, nullptr) != 0) {
    return absl::ErrnoToStatus(errno, "sigprocmask");
  }
  signal_fd_ = ::signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
  if (signal_fd_ < 0) return absl::ErrnoToStatus(errno, "signalfd");

  absl::StatusOr<int> fd = OpenUdpSocket(options_.listen);
  if (!fd.ok()) return fd.status();
  listen_fd_ = *fd;
  listen_address_ = LocalAddress(listen_fd_);

  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = kListenTag;
  if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, listen_fd_, &ev) != 0) {
    return absl::ErrnoToStatus(errno, "epoll_ctl");
  }
  ev.data.u64 = kSignalTag;
  if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, signal_fd_, &ev) != 0) {
    return absl::ErrnoToStatus(errno, "epoll_ctl");
  }
  nat_ = std::make_unique<NatTable>(epoll_fd_, options_.server, options_.rebind,
                                    options_.seed ^ 0x5bd1e995ull);
  return absl::OkStatus();
}

std::unique_ptr<Datagram> Simulator::Acquire() {
  if (free_.empty()) return std::make_unique<Datagram>();
  std::unique_ptr<Datagram> d = std::move(free_.back());
  free_.pop_back();
  return d;
}

void Simulator::Release(std::unique_ptr<Datagram> d) {
  if (d != nullptr && free_.size() < kMaxFree) free_.push_back(std::move(d));
}

void Simulator::Ingress(Direction& dir, const uint8_t* data, size_t size, uint8_t ecn,
                        uint32_t route, Nanos now) {
  std::unique_ptr<Datagram> d = Acquire();
  d->data.assign(data, data + size);
  d->ecn = ecn;
  d->route = route;
  bool corrupted = false;
  const Verdict v = dir.Admit(d, now, now - epoch_, &corrupted);
  if (options_.verbose) {
    std::fprintf(stderr, "netsim: %10.3f ms %s #%llu %zu B ecn=%u nat=%u %s%s\n",
                 static_cast<double>(now - epoch_) / kMs, dir.name().c_str(),
                 static_cast<unsigned long long>(dir.stats().received), size, ecn, route,
                 VerdictName(v), corrupted ? " corrupted" : "");
  }
  Release(std::move(d));  // null when the direction took it
}

void Simulator::DrainListen(Nanos now) {
  for (int total = 0; total < kReadBudget;) {
    const int n = receiver_.Receive(listen_fd_);
    if (n < 0) {
      std::perror("netsim: recvmmsg (listen)");
      return;
    }
    if (n == 0) return;
    total += n;
    for (int i = 0; i < n; ++i) {
      const SocketAddress client = receiver_.peer(i);
      NatEntry* entry = nat_->Find(client);
      if (entry == nullptr) {
        absl::StatusOr<NatEntry*> added = nat_->Add(client);
        if (!added.ok()) {
          if (nat_refused_++ == 0) {
            std::fprintf(stderr, "netsim: no mapping for %s: %s\n", client.ToString().c_str(),
                         std::string(added.status().message()).c_str());
          }
          continue;
        }
        entry = *added;
      }
      if (!started_) {
        started_ = true;
        epoch_ = now;
        if (options_.rebind != RebindMode::kNone) {
          next_rebind_ = epoch_ + options_.first_rebind_ms * kMs;
        }
      }
      Ingress(to_server_, receiver_.data(i), receiver_.size(i), receiver_.ecn(i), entry->id, now);
    }
  }
}

void Simulator::DrainUpstream(NatEntry* entry, Nanos now) {
  for (int total = 0; total < kReadBudget;) {
    const int n = receiver_.Receive(entry->fd);
    if (n < 0) {
      // ECONNREFUSED and friends from ICMP errors: nothing to relay.
      if (options_.verbose) std::perror("netsim: recvmmsg (upstream)");
      return;
    }
    if (n == 0) return;
    total += n;
    for (int i = 0; i < n; ++i) {
      Ingress(to_client_, receiver_.data(i), receiver_.size(i), receiver_.ecn(i), entry->id, now);
    }
  }
}

void Simulator::Deliver(Nanos now) {
  while (std::unique_ptr<Datagram> d = to_server_.PopDue(now)) {
    NatEntry* entry = nat_->Get(d->route);
    sender_to_server_.Add(entry->fd, options_.server, d->data.data(), d->data.size(), d->ecn);
    DirectionStats& s = to_server_.mutable_stats();
    ++s.forwarded;
    s.bytes += d->data.size();
    sending_.push_back(std::move(d));
  }
  while (std::unique_ptr<Datagram> d = to_client_.PopDue(now)) {
    NatEntry* entry = nat_->Get(d->route);
    sender_to_client_.Add(listen_fd_, entry->client, d->data.data(), d->data.size(), d->ecn);
    DirectionStats& s = to_client_.mutable_stats();
    ++s.forwarded;
    s.bytes += d->data.size();
    sending_.push_back(std::move(d));
  }
  if (sending_.empty()) return;
  sender_to_server_.Flush();
  sender_to_client_.Flush();
  // Refused datagrams were counted as forwarded above; move them (count only: the byte total
  // stays an upper bound) to send_errors.
  for (auto [dir, sender] :
       {std::pair{&to_server_, &sender_to_server_}, std::pair{&to_client_, &sender_to_client_}}) {
    const uint64_t failed = sender->TakeFailures();
    dir->mutable_stats().forwarded -= failed;
    dir->mutable_stats().send_errors += failed;
  }
  for (auto& d : sending_) Release(std::move(d));
  sending_.clear();
}

void Simulator::MaybeRebind(Nanos now) {
  if (now < next_rebind_) return;
  rebinds_ += nat_->RebindAll();
  next_rebind_ += options_.rebind_every_ms * kMs;
  if (next_rebind_ <= now) next_rebind_ = now + options_.rebind_every_ms * kMs;
}

absl::Status Simulator::Run() {
  const Nanos deadline = Now() + options_.max_seconds * 1'000 * kMs;
  std::array<epoll_event, 64> events{};
  for (;;) {
    Nanos now = Now();
    Deliver(now);
    MaybeRebind(now);
    if (now >= deadline) {
      std::fprintf(stderr, "netsim: --max-seconds reached\n");
      return absl::OkStatus();
    }
    const Nanos next = std::min(
        {to_server_.NextDeliveryAt(), to_client_.NextDeliveryAt(), next_rebind_, deadline});
    const Nanos wait = std::max<Nanos>(0, next - now);
    timespec timeout{};
    timeout.tv_sec = wait / 1'000'000'000;
    timeout.tv_nsec = wait % 1'000'000'000;
    const int n = ::epoll_pwait2(epoll_fd_, events.data(), static_cast<int>(events.size()),
                                 &timeout, nullptr);
    if (n < 0) {
      if (errno == EINTR) continue;
      return absl::ErrnoToStatus(errno, "epoll_pwait2");
    }
    now = Now();
    for (int i = 0; i < n; ++i) {
      const uint64_t tag = events[i].data.u64;
      if (tag == kSignalTag) {
        signalfd_siginfo info{};
        if (::read(signal_fd_, &info, sizeof(info)) == sizeof(info)) {
          std::fprintf(stderr, "netsim: signal %u, exiting\n", info.ssi_signo);
          return absl::OkStatus();
        }
      } else if (tag == kListenTag) {
        DrainListen(now);
      } else if (NatEntry* entry = nat_->Get(static_cast<uint32_t>(tag)); entry != nullptr) {
        DrainUpstream(entry, now);
      }
    }
  }
}

std::string Simulator::StatsJson() const {
  std::string out = absl::StrCat(
      "{\n  \"seed\": ", options_.seed, ",\n  \"nat_entries\": ", nat_ ? nat_->size() : 0,
      ",\n  \"rebinds\": ", rebinds_, ",\n  \"nat_refused\": ", nat_refused_, ",\n");
  AppendStats(&out, "to_server", to_server_);
  out += ",\n";
  AppendStats(&out, "to_client", to_client_);
  out += "\n}\n";
  return out;
}

}  // namespace petrel::netsim
