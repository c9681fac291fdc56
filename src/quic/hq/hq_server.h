// Internal: the HTTP/0.9 ("hq-interop") file server of the QUIC interop runner, on QuicServer:
// a client sends "GET /path\r\n" and FIN on a bidirectional stream; the server answers with the
// file's bytes under `root` and FIN. Files are streamed with backpressure: a chunk is read only
// when the stream has room, so a 100 MB file never sits in memory.
#ifndef PETREL_QUIC_HQ_HQ_SERVER_H_
#define PETREL_QUIC_HQ_HQ_SERVER_H_

#include <atomic>
#include <memory>
#include <optional>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "petrel/quic/quic_server.h"

namespace petrel::hq {

// The file under `root` that `request` ("GET /a/b\r\n") names, or nullopt for a malformed
// request or a path that could escape `root` ("..", backslashes, NUL).
std::optional<std::string> ResolveRequest(const std::string& root, absl::string_view request);

class HqServer {
 public:
  // `config.alpn` is forced to {"hq-interop"}.
  static absl::StatusOr<std::unique_ptr<HqServer>> Create(QuicServerConfig config,
                                                          std::string root);
  ~HqServer();

  QuicServer& server() { return *server_; }
  // Requests answered with a complete file (summed over workers). Safe from any thread.
  uint64_t files_served() const;
  // Testing: each connection starts one key update of its own as soon as ngtcp2 allows it
  // while a file is being sent. Set before Run().
  void set_initiate_key_update(bool on) { initiate_key_update_ = on; }
  // Key updates the server started (summed over workers). Safe from any thread.
  uint64_t key_updates_initiated() const { return key_updates_.load(); }

 private:
  struct Transfer;
  struct Transfers;  // one connection's, kept as its app data

  explicit HqServer(std::string root);
  void OnData(QuicConnection& c, int64_t stream, absl::string_view data, bool fin);
  void Pump(QuicConnection& c, int64_t stream);
  // Starts the key update asked for (set_initiate_key_update), once per connection, as soon as
  // the connection allows it.
  void MaybeUpdateKeys(QuicConnection& c);
  void Forget(QuicConnection& c, int64_t stream);
  // The connection's transfers (its app data), created on first use.
  Transfers& TransfersOf(QuicConnection& c);
  // The connection's transfer of `stream`, created if `create`; null if absent.
  Transfer* Find(QuicConnection& c, int64_t stream, bool create);

  const std::string root_;
  std::unique_ptr<QuicServer> server_;
  // Transfers live in each connection's app data, so workers share nothing but this counter.
  std::atomic<uint64_t> files_served_{0};
  std::atomic<uint64_t> key_updates_{0};
  bool initiate_key_update_ = false;
};

}  // namespace petrel::hq

#endif  // PETREL_QUIC_HQ_HQ_SERVER_H_
