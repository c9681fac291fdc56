// Internal (petrel-netsim): the NAT between clients and the server. Each client source address
// gets an upstream socket of its own, so the server sees one source per client, and a rebind
// replaces that socket (new port, or new 127/8 address), as a NAT that lost its mapping would.
// Single-threaded; registers the upstream sockets with the simulator's epoll instance.
#ifndef PETREL_INTEROP_SIM_NAT_H_
#define PETREL_INTEROP_SIM_NAT_H_

#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "options.h"
#include "petrel/common/socket_address.h"

namespace petrel::netsim {

struct NatEntry {
  uint32_t id = 0;       // index in the table; also the epoll data of its socket
  SocketAddress client;  // where the replies go
  int fd = -1;           // the upstream socket
  SocketAddress source;  // its local address: the client's address as the server sees it
};

class NatTable {
 public:
  // Entries beyond this are refused (their datagrams dropped): a runaway client must not
  // exhaust descriptors.
  static constexpr size_t kMaxEntries = 4096;

  NatTable(int epoll_fd, const SocketAddress& server, RebindMode mode, uint64_t seed);
  ~NatTable();  // closes the upstream sockets
  NatTable(const NatTable&) = delete;
  NatTable& operator=(const NatTable&) = delete;

  NatEntry* Find(const SocketAddress& client);
  // A new entry with a fresh upstream socket, registered for reading with epoll data = id.
  absl::StatusOr<NatEntry*> Add(const SocketAddress& client);
  NatEntry* Get(uint32_t id) { return id < entries_.size() ? entries_[id].get() : nullptr; }

  // Gives every entry a new upstream socket and closes the old one (datagrams the server sends
  // to the old mapping are lost, as behind a real NAT). Logs each change to stderr. Returns the
  // number of entries rebound.
  size_t RebindAll();

  size_t size() const { return entries_.size(); }

 private:
  SocketAddress NextBindAddress(const NatEntry* previous);

  const int epoll_fd_;
  const SocketAddress server_;
  const RebindMode mode_;
  std::mt19937_64 rng_;
  std::vector<std::unique_ptr<NatEntry>> entries_;
  absl::flat_hash_map<SocketAddress, NatEntry*> by_client_;
};

}  // namespace petrel::netsim

#endif  // PETREL_INTEROP_SIM_NAT_H_
