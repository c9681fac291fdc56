// Internal: the HTTP/0.9 ("hq-interop") client of the QUIC interop runner, on QuicClient:
// fetches paths over one connection ("GET /path\r\n" + FIN per bidirectional stream, as many in
// parallel as the server allows) and writes each answer to a file in a download directory.
#ifndef PETREL_QUIC_HQ_HQ_CLIENT_H_
#define PETREL_QUIC_HQ_HQ_CLIENT_H_

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "petrel/common/clock.h"
#include "petrel/quic/quic_client.h"

namespace petrel::hq {

struct HqClientOptions {
  QuicClientConfig quic;  // alpn is forced to {"hq-interop"}
  std::string download_dir;
  std::vector<std::string> paths;  // "/a/b"; the file is saved as download_dir + "/b"
  bool key_update = false;         // initiate a key update once the handshake is confirmed
  // With key_update: not before this says so (tests that want the server's update first).
  std::function<bool()> key_update_after;
  size_t max_parallel = 64;
  bool close_when_done = true;
  // Resumption: when everything is fetched but no session ticket has arrived yet, keep the
  // connection open until one does (or `session_wait` passed), so a next connection can resume.
  bool wait_for_session = false;
  Duration session_wait = std::chrono::seconds(3);
  // Active migration (RFC 9000 §9): once `migrate_after` response bytes arrived, move to a new
  // local socket (same family, new port) — unless the connection already moved to the server's
  // preferred address, which is a migration of its own.
  // Immediate by default (the new path carries traffic at once, as the interop runner's
  // connectionmigration expects); `migrate_probe_first` validates it before moving.
  bool migrate = false;
  bool migrate_probe_first = false;
  uint64_t migrate_after = 64 * 1024;
  // Non-empty: the TLS suites the connection may use; another negotiated suite closes it at once
  // and the run fails (cipher_rejected).
  std::vector<std::string> allowed_ciphers;
  // Testing: called once, on the loop thread, when the first response bytes arrive.
  std::function<void()> on_first_data;
};

struct HqClientResult {
  size_t completed = 0;  // answers received up to FIN
  size_t failed = 0;     // reset streams, files that could not be written
  bool handshake_completed = false;
  bool session_reused = false;
  bool early_data_accepted = false;
  bool key_update_initiated = false;
  bool migrated = false;         // the client-initiated migration was started
  bool cipher_rejected = false;  // the negotiated suite is not in allowed_ciphers
  std::string session;           // the last ticket and server transport params (for resumption)
  std::string transport_params;
  int close_error = 0;
  uint32_t version = 0;  // negotiated QUIC version
  std::string cipher;    // TLS cipher suite
  SocketAddress remote;  // the server address in use at the end (preferred address moves it)
};

// Runs one connection to completion (all paths fetched, or the connection ended). Blocks.
absl::StatusOr<HqClientResult> RunHqClient(const HqClientOptions& options);

}  // namespace petrel::hq

#endif  // PETREL_QUIC_HQ_HQ_CLIENT_H_
