#include "options.h"

#include <cmath>
#include <functional>
#include <map>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"

namespace petrel::netsim {
namespace {

absl::Status Bad(absl::string_view name, absl::string_view value, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("--", name, " '", value, "': ", why));
}

absl::Status ParseInt(absl::string_view name, absl::string_view value, int64_t min, int64_t max,
                      int64_t* out) {
  int64_t v = 0;
  if (!absl::SimpleAtoi(value, &v)) return Bad(name, value, "not an integer");
  if (v < min || v > max) return Bad(name, value, absl::StrCat("must be in ", min, "..", max));
  *out = v;
  return absl::OkStatus();
}

absl::Status ParseDouble(absl::string_view name, absl::string_view value, double min, double max,
                         double* out) {
  double v = 0;
  if (!absl::SimpleAtod(value, &v) || !std::isfinite(v)) return Bad(name, value, "not a number");
  if (v < min || v > max) return Bad(name, value, absl::StrCat("must be in ", min, "..", max));
  *out = v;
  return absl::OkStatus();
}

absl::Status ParseList(absl::string_view name, absl::string_view value,
                       std::vector<uint64_t>* out) {
  out->clear();
  for (absl::string_view item : absl::StrSplit(value, ',', absl::SkipWhitespace())) {
    uint64_t n = 0;
    if (!absl::SimpleAtoi(item, &n) || n == 0) {
      return Bad(name, value, "expected a comma list of datagram numbers >= 1");
    }
    out->push_back(n);
  }
  return absl::OkStatus();
}

absl::Status ParseAddress(absl::string_view name, absl::string_view value, SocketAddress* out) {
  absl::StatusOr<SocketAddress> a = SocketAddress::ParseHostPort(value);
  if (!a.ok()) return Bad(name, value, a.status().message());
  *out = *a;
  return absl::OkStatus();
}

}  // namespace

const char* Usage() {
  return R"(usage: petrel-netsim --listen HOST:PORT --server HOST:PORT [options]
  Relays UDP between clients (sending to --listen) and --server, one upstream socket per
  client source address (a NAT), impairing each direction as configured.
  --delay-ms N             one-way delay added in each direction (default 0)
  --bandwidth-mbps R       rate limit per direction, Mbit/s on the wire incl. IP+UDP headers
                           (default 0 = unlimited)
  --queue N                datagrams waiting per direction for the rate limiter; tail-drop
                           beyond (default 25; only with --bandwidth-mbps)
  --loss-to-server P / --loss-to-client P        random drop, percent (0-100)
  --corrupt-to-server P / --corrupt-to-client P  replace one of the first 51 bytes (where the
                           QUIC header is) of P% of datagrams; Version Negotiation is spared
  --burst-to-server N / --burst-to-client N      at most N random drops (or corruptions) in a
                           row, the next datagram passes (default 0 = no limit)
  --drop-to-server-packets LIST / --drop-to-client-packets LIST
                           drop the Nth datagrams (1-based, comma list) of that direction
  --blackhole-on-ms N --blackhole-off-ms M
                           link up N ms, then everything dropped for M ms, repeating
  --rebind port|addr       replace the upstream sockets after --first-rebind-ms (default 1000),
                           then every --rebind-every-ms (default 5000): `port` = new source
                           port, `addr` = new source address in 127.0.0.2-254 (IPv4 loopback)
  --seed N                 RNG seed (default: time); printed on stderr
  --ready-file F           written with the listen port once relaying
  --stats-file F           JSON counters per direction, written on exit
  --max-seconds N          exit after N seconds (default 600)
  -v                       log every datagram decision to stderr
  Schedules (blackhole, rebind) start at the first datagram from a client.
)";
}

absl::StatusOr<SimOptions> ParseOptions(int argc, const char* const* argv) {
  SimOptions o;
  using Setter = std::function<absl::Status(absl::string_view name, absl::string_view value)>;
  const std::map<absl::string_view, Setter> with_value = {
      {"listen", [&](auto n, auto v) { return ParseAddress(n, v, &o.listen); }},
      {"server", [&](auto n, auto v) { return ParseAddress(n, v, &o.server); }},
      {"delay-ms", [&](auto n, auto v) { return ParseInt(n, v, 0, 600'000, &o.delay_ms); }},
      {"bandwidth-mbps",
       [&](auto n, auto v) { return ParseDouble(n, v, 0, 1e6, &o.bandwidth_mbps); }},
      {"queue", [&](auto n, auto v) { return ParseInt(n, v, 1, 1'000'000, &o.queue); }},
      {"loss-to-server",
       [&](auto n, auto v) { return ParseDouble(n, v, 0, 100, &o.to_server.loss_percent); }},
      {"loss-to-client",
       [&](auto n, auto v) { return ParseDouble(n, v, 0, 100, &o.to_client.loss_percent); }},
      {"corrupt-to-server",
       [&](auto n, auto v) { return ParseDouble(n, v, 0, 100, &o.to_server.corrupt_percent); }},
      {"corrupt-to-client",
       [&](auto n, auto v) { return ParseDouble(n, v, 0, 100, &o.to_client.corrupt_percent); }},
      {"burst-to-server",
       [&](auto n, auto v) { return ParseInt(n, v, 0, 1'000'000, &o.to_server.max_burst); }},
      {"burst-to-client",
       [&](auto n, auto v) { return ParseInt(n, v, 0, 1'000'000, &o.to_client.max_burst); }},
      {"drop-to-server-packets",
       [&](auto n, auto v) { return ParseList(n, v, &o.to_server.drop_packets); }},
      {"drop-to-client-packets",
       [&](auto n, auto v) { return ParseList(n, v, &o.to_client.drop_packets); }},
      {"blackhole-on-ms",
       [&](auto n, auto v) { return ParseInt(n, v, 1, 86'400'000, &o.blackhole_on_ms); }},
      {"blackhole-off-ms",
       [&](auto n, auto v) { return ParseInt(n, v, 1, 86'400'000, &o.blackhole_off_ms); }},
      {"rebind",
       [&](auto n, auto v) {
         if (v == "port") {
           o.rebind = RebindMode::kPort;
         } else if (v == "addr") {
           o.rebind = RebindMode::kAddr;
         } else {
           return Bad(n, v, "expected port or addr");
         }
         return absl::OkStatus();
       }},
      {"first-rebind-ms",
       [&](auto n, auto v) { return ParseInt(n, v, 0, 86'400'000, &o.first_rebind_ms); }},
      {"rebind-every-ms",
       [&](auto n, auto v) { return ParseInt(n, v, 1, 86'400'000, &o.rebind_every_ms); }},
      {"seed",
       [&](auto n, auto v) {
         if (!absl::SimpleAtoi(v, &o.seed)) return Bad(n, v, "not an unsigned integer");
         o.seed_given = true;
         return absl::OkStatus();
       }},
      {"ready-file",
       [&](auto, auto v) {
         o.ready_file = std::string(v);
         return absl::OkStatus();
       }},
      {"stats-file",
       [&](auto, auto v) {
         o.stats_file = std::string(v);
         return absl::OkStatus();
       }},
      {"max-seconds",
       [&](auto n, auto v) { return ParseInt(n, v, 1, 30 * 86'400, &o.max_seconds); }},
  };

  for (int i = 1; i < argc; ++i) {
    absl::string_view arg = argv[i];
    if (arg == "-v" || arg == "--v" || arg == "--verbose") {
      o.verbose = true;
      continue;
    }
    if (arg == "-h" || arg == "--help") {
      o.help = true;
      return o;
    }
    if (arg.substr(0, 2) != "--") {
      return absl::InvalidArgumentError(absl::StrCat("unexpected argument '", arg, "'"));
    }
    absl::string_view name = arg.substr(2);
    absl::string_view value;
    bool has_value = false;
    if (size_t eq = name.find('='); eq != absl::string_view::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      has_value = true;
    }
    auto it = with_value.find(name);
    if (it == with_value.end()) {
      return absl::InvalidArgumentError(absl::StrCat("unknown option '--", name, "'"));
    }
    if (!has_value) {
      if (i + 1 >= argc) {
        return absl::InvalidArgumentError(absl::StrCat("--", name, " needs a value"));
      }
      value = argv[++i];
    }
    if (absl::Status s = it->second(name, value); !s.ok()) return s;
  }

  if (o.listen.empty() || o.server.empty()) {
    return absl::InvalidArgumentError("--listen and --server are required");
  }
  if ((o.blackhole_on_ms > 0) != (o.blackhole_off_ms > 0)) {
    return absl::InvalidArgumentError("--blackhole-on-ms and --blackhole-off-ms go together");
  }
  if (o.rebind == RebindMode::kAddr) {
    // The new source addresses are other 127/8 addresses, which reach only a loopback server.
    const std::string host = o.server.HostString();
    if (o.server.is_v6() || host.rfind("127.", 0) != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("--rebind addr needs an IPv4 loopback --server, not ", host));
    }
  }
  return o;
}

}  // namespace petrel::netsim
