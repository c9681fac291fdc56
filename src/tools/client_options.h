// Internal (tools): the command line of petrel-client, parsed and checked, and the rules that
// map a URL to a file under --download. Pure functions: no I/O, no TLS, so the cipher re-exec
// decision can be taken before anything touches BoringSSL.
#ifndef PETREL_TOOLS_CLIENT_OPTIONS_H_
#define PETREL_TOOLS_CLIENT_OPTIONS_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tools/url.h"

namespace petrel::tools {

// The TLS 1.3 suites --ciphers accepts, by their IANA names.
inline constexpr absl::string_view kTls13Suites[] = {
    "TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256"};

struct ClientOptions {
  bool help = false;
  bool verbose = false;
  bool insecure = false;  // -k: no certificate verification
  std::string ca_file;
  std::string method;  // empty: GET, or POST when there is a body
  bool has_body = false;
  std::string body;       // -d STRING
  std::string body_file;  // -d @FILE
  std::vector<std::pair<std::string, std::string>> headers;
  std::string output_file;   // -o
  std::string download_dir;  // --download
  size_t parallel = 0;       // 0: every request at once
  uint64_t limit_rate = 0;   // --limit-rate: bytes/s per response body; 0: no limit
  std::string session_file;
  bool early_data = false;           // --0rtt
  std::vector<std::string> ciphers;  // empty: whatever TLS negotiates
  uint32_t quic_version = 0;         // kQuicVersion1 or kQuicVersion2Draft
  double timeout_seconds = 30;
  std::string connect_to;                  // --connect-to ADDR:PORT, empty: resolve the URL's host
  bool key_update = false;                 // --key-update
  std::string key_log_file;                // --keylog-file; empty: $SSLKEYLOGFILE, if set
  std::string qlog_dir;                    // --qlog-dir
  bool preferred_address_at_once = false;  // --preferred-address-move immediate
  uint64_t keep_alive_ms = 0;              // --keep-alive
  bool websocket = false;                  // --websocket: one WebSocket at the one URL
  std::vector<std::string> ws_protocols;   // --ws-protocol, best first
  std::vector<Url> urls;
};

// The --help text.
extern const char kClientUsage[];

// Parses argv[1..argc). InvalidArgument with a message for the user on any usage error: unknown
// option, missing or bad value, conflicting options, bad URL, URLs on different origins. A
// wss:// URL (--websocket only) is kept with scheme "wss" and https's default port.
absl::StatusOr<ClientOptions> ParseClientOptions(int argc, const char* const* argv);

// True if `ciphers` is non-empty and holds no AES-GCM suite: then BoringSSL must be made to
// prefer ChaCha20 (see petrel_client.cc).
bool WantsChaChaPreference(const std::vector<std::string>& ciphers);

// A byte rate as curl's --limit-rate takes it: digits, optionally followed by k, m or g
// (powers of 1024). InvalidArgument unless it is > 0.
absl::StatusOr<uint64_t> ParseByteRate(absl::string_view text);

// Where --download DIR saves `url_path` (origin form, query allowed): DIR/ followed by the path
// with the query dropped, empty segments collapsed and "index.html" for a path ending in "/".
// InvalidArgument for a "." or ".." segment, so nothing lands outside DIR.
absl::StatusOr<std::string> DownloadPath(absl::string_view dir, absl::string_view url_path);

}  // namespace petrel::tools

#endif  // PETREL_TOOLS_CLIENT_OPTIONS_H_
