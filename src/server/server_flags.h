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

struct ServerOptions {
  HttpServerConfig http;
  std::string root;       // empty: the demo site
  std::string state_dir;  // where the self-signed certificate is kept
  std::string user;       // run as this user once listening; empty: stay
  Duration grace = std::chrono::seconds(5);
  LogLevel log_level = LogLevel::kInfo;
  bool help = false;     // --help / --helpfull: print usage and exit 0
  bool version = false;  // --version
  std::string help_text;
};

// Parses the command line (after a --config file, which it names). Flag names take '-' or
// '_' alike (--https-port, --https_port). Errors name the key and the reason.
absl::StatusOr<ServerOptions> ParseServerFlags(int argc, char** argv);

}  // namespace petrel::server

#endif  // PETREL_SERVER_SERVER_FLAGS_H_
