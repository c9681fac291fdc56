// Internal (petrel-netsim): the command line of the simulator, parsed into one value.
#ifndef PETREL_INTEROP_SIM_OPTIONS_H_
#define PETREL_INTEROP_SIM_OPTIONS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "petrel/common/socket_address.h"

namespace petrel::netsim {

enum class RebindMode { kNone, kPort, kAddr };

// Impairments of one direction of the link (client -> server or server -> client).
struct DirectionOptions {
  double loss_percent = 0;     // random drop, 0-100
  double corrupt_percent = 0;  // one random byte flipped, 0-100
  // At most this many random drops (and, separately, corruptions) in a row; the next datagram
  // then passes untouched. 0 = no limit. The runner's loss/corruption scenarios use 3.
  int64_t max_burst = 0;
  // 1-based indices of datagrams (counted per direction, as they arrive) that are dropped.
  std::vector<uint64_t> drop_packets;
};

struct SimOptions {
  SocketAddress listen;
  SocketAddress server;
  int64_t delay_ms = 0;       // one-way, both directions
  double bandwidth_mbps = 0;  // per direction; 0 = unlimited
  int64_t queue = 25;         // datagrams waiting for the rate limiter, per direction
  DirectionOptions to_server;
  DirectionOptions to_client;
  int64_t blackhole_on_ms = 0;  // both > 0: up for `on`, then down for `off`, repeating
  int64_t blackhole_off_ms = 0;
  RebindMode rebind = RebindMode::kNone;
  int64_t first_rebind_ms = 1000;
  int64_t rebind_every_ms = 5000;
  uint64_t seed = 0;
  bool seed_given = false;
  std::string ready_file;
  std::string stats_file;
  int64_t max_seconds = 600;
  bool verbose = false;
  bool help = false;  // --help / -h: print Usage() and exit 0
};

// Parses argv (argv[0] is skipped). Accepts `--name value` and `--name=value`. Returns
// InvalidArgument with a message naming the bad option; unknown options are errors.
absl::StatusOr<SimOptions> ParseOptions(int argc, const char* const* argv);

// The --help text.
const char* Usage();

}  // namespace petrel::netsim

#endif  // PETREL_INTEROP_SIM_OPTIONS_H_
