#include "nat.h"

#include <sys/epoll.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "absl/strings/str_cat.h"
#include "udp.h"

namespace petrel::netsim {

NatTable::NatTable(int epoll_fd, const SocketAddress& server, RebindMode mode, uint64_t seed)
    : epoll_fd_(epoll_fd), server_(server), mode_(mode), rng_(seed) {}

NatTable::~NatTable() {
  for (auto& e : entries_) {
    if (e->fd >= 0) ::close(e->fd);
  }
}

NatEntry* NatTable::Find(const SocketAddress& client) {
  auto it = by_client_.find(client);
  return it == by_client_.end() ? nullptr : it->second;
}

SocketAddress NatTable::NextBindAddress(const NatEntry* previous) {
  // The wildcard of the server's family: the kernel picks the source address by route.
  SocketAddress any = *SocketAddress::Parse(server_.is_v6() ? "::" : "0.0.0.0", 0);
  if (mode_ != RebindMode::kAddr || previous == nullptr) return any;
  // Linux routes all of 127.0.0.0/8 over lo, so any of these is a distinct, working source.
  const std::string current = previous->source.HostString();
  for (;;) {
    const int host = std::uniform_int_distribution<int>(2, 254)(rng_);
    const std::string candidate = absl::StrCat("127.0.0.", host);
    if (candidate != current) return *SocketAddress::Parse(candidate, 0);
  }
}

absl::StatusOr<NatEntry*> NatTable::Add(const SocketAddress& client) {
  if (entries_.size() >= kMaxEntries) {
    return absl::ResourceExhaustedError(absl::StrCat("NAT table full (", kMaxEntries, ")"));
  }
  absl::StatusOr<int> fd = OpenUdpSocket(NextBindAddress(nullptr));
  if (!fd.ok()) return fd.status();
  auto entry = std::make_unique<NatEntry>();
  entry->id = static_cast<uint32_t>(entries_.size());
  entry->client = client;
  entry->fd = *fd;
  entry->source = LocalAddress(*fd);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = entry->id;
  if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, *fd, &ev) != 0) {
    const int err = errno;
    ::close(*fd);
    return absl::ErrnoToStatus(err, "epoll_ctl");
  }
  NatEntry* raw = entry.get();
  entries_.push_back(std::move(entry));
  by_client_[client] = raw;
  std::fprintf(stderr, "netsim: new mapping %s -> source %s\n", client.ToString().c_str(),
               raw->source.ToString().c_str());
  return raw;
}

size_t NatTable::RebindAll() {
  size_t rebound = 0;
  for (auto& e : entries_) {
    // Open the new socket before closing the old one, so the kernel cannot hand out the same
    // port again.
    absl::StatusOr<int> fd = OpenUdpSocket(NextBindAddress(e.get()));
    if (!fd.ok()) {
      std::fprintf(stderr, "netsim: rebind of %s failed: %s\n", e->client.ToString().c_str(),
                   std::string(fd.status().message()).c_str());
      continue;
    }
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = e->id;
    if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, *fd, &ev) != 0) {
      std::perror("netsim: epoll_ctl");
      ::close(*fd);
      continue;
    }
    ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, e->fd, nullptr);
    ::close(e->fd);
    const SocketAddress old_source = e->source;
    e->fd = *fd;
    e->source = LocalAddress(*fd);
    ++rebound;
    std::fprintf(stderr, "netsim: rebind %s: source %s -> %s\n", e->client.ToString().c_str(),
                 old_source.ToString().c_str(), e->source.ToString().c_str());
  }
  return rebound;
}

}  // namespace petrel::netsim
