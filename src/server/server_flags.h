// Internal (petrel-server): the binary's configuration — abseil flags, optionally preset from
// a config file with the same keys — checked and turned into an HttpServerConfig.
#ifndef PETREL_SERVER_SERVER_FLAGS_H_
#define PETREL_SERVER_SERVER_FLAGS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "petrel/common/clock.h"
#include "petrel/common/log.h"
#include "petrel/http/http_server.h"

namespace petrel::server {

// A [host ...] section of the config file: a site of its own for some host names.
struct SiteOptions {
  std::vector<std::string> names;
  std::string root;
  std::string cert;
  std::string key;
  bool alt_svc = true;
  std::string where;  // "config FILE:LINE", for messages about it
};

struct ServerOptions {
  HttpServerConfig http;  // http.hosts: the sites' names and certificates
  std::vector<SiteOptions> sites;
  std::string root;            // empty: the demo site
  bool compress = false;       // CompressionMiddleware on every site
  bool precompressed = false;  // StaticFiles serves .br/.gz siblings
  bool request_id = false;     // RequestIdMiddleware on every site
  std::string websocket_echo;  // a WebSocket echo route at this path on every site; empty: none
  std::string state_dir;       // where the self-signed certificate is kept
  std::string user;            // run as this user once listening; empty: stay
  Duration grace = std::chrono::seconds(5);
  LogLevel log_level = LogLevel::kInfo;
  std::string log_file;  // empty: stderr
  int usable_cores = 1;  // UsableCores() when parsed: what --workers -1 sized the threads by
  bool help = false;     // --help / --helpfull: print usage and exit 0
  bool version = false;  // --version
  std::string help_text;
};

// Parses the command line (after a --config file, which it names). Flag names take '-' or
// '_' alike (--https-port, --https_port). Errors name the key and the reason (and the file and
// line for the config file). May be called again (SIGHUP): it starts from the defaults.
//
// The config file: 'key = value' lines with the flags' keys, then optionally sections for
// virtual hosts, each until the next:
//   [host a.example www.a.example]
//   root = /srv/a          (required)
//   cert = /etc/a.pem      (optional, with key: presented to clients that ask for these names)
//   key = /etc/a.key
//   alt-svc = false        (optional)
absl::StatusOr<ServerOptions> ParseServerFlags(int argc, char** argv);

// The cores this process may run on (its CPU affinity), which `--workers -1` sizes the threads by.
int UsableCores();

}  // namespace petrel::server

#endif  // PETREL_SERVER_SERVER_FLAGS_H_
