#include "quic/hq/hq_client.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "petrel/common/timer.h"

namespace petrel::hq {
namespace {

struct Download {
  int fd = -1;
  ~Download() {
    if (fd >= 0) ::close(fd);
  }
};

std::string BaseName(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// One connection's fetch state; lives on the client's loop thread.
class Fetcher {
 public:
  Fetcher(const HqClientOptions& options, HqClientResult* result)
      : options_(options), result_(result), pending_(options.paths.begin(), options.paths.end()) {}

  void set_client(QuicClient* client) { client_ = client; }

  void OpenMore(QuicConnection& c) {
    while (!pending_.empty() && active_.size() < options_.max_parallel) {
      const int64_t id = c.OpenBidiStream();
      if (id < 0) return;  // on_streams_available retries
      const std::string path = pending_.front();
      pending_.pop_front();
      auto d = std::make_unique<Download>();
      const std::string file = absl::StrCat(options_.download_dir, "/", BaseName(path));
      d->fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      active_[id] = std::move(d);
      c.Write(id, absl::StrCat("GET ", path, "\r\n"), true);
    }
    MaybeFinish(c);
  }

  void OnData(QuicConnection& c, int64_t id, absl::string_view data, bool fin) {
    if (!data.empty() && !saw_data_) {
      saw_data_ = true;
      if (options_.on_first_data) options_.on_first_data();
    }
    received_ += data.size();
    MaybeMigrate();
    auto it = active_.find(id);
    c.Consume(id, data.size());
    if (it == active_.end()) return;
    if (it->second->fd >= 0) {
      size_t off = 0;
      while (off < data.size()) {
        const ssize_t n = ::write(it->second->fd, data.data() + off, data.size() - off);
        if (n <= 0) break;
        off += static_cast<size_t>(n);
      }
      if (off < data.size()) {
        ::close(it->second->fd);
        it->second->fd = -1;
      }
    }
    if (!fin) return;
    if (it->second->fd >= 0) {
      ++result_->completed;
    } else {
      ++result_->failed;
    }
    active_.erase(it);
    OpenMore(c);
  }

  void OnReset(QuicConnection& c, int64_t id) {
    if (active_.erase(id) > 0) ++result_->failed;
    OpenMore(c);
  }

  void OnConnected(QuicConnection& c) {
    if (!options_.allowed_ciphers.empty() &&
        std::find(options_.allowed_ciphers.begin(), options_.allowed_ciphers.end(), c.cipher()) ==
            options_.allowed_ciphers.end()) {
      std::fprintf(stderr, "petrel-hq-client: the server chose %s, which is not allowed\n",
                   c.cipher().c_str());
      result_->cipher_rejected = true;
      closing_ = true;
      c.Close(0);
      return;
    }
    if (options_.key_update && client_ != nullptr) {
      key_update_wanted_ = true;
    }
    OpenMore(c);
  }

  void TryKeyUpdate() {
    if (key_update_wanted_ && options_.key_update_after && !options_.key_update_after()) return;
    if (key_update_wanted_ && client_->InitiateKeyUpdate()) {
      key_update_wanted_ = false;
      result_->key_update_initiated = true;
    }
  }

  void MaybeFinish(QuicConnection& c) {
    if (pending_.empty() && active_.empty() && options_.close_when_done && !closing_) {
      // A key update asked for and not made yet — ngtcp2 refuses one until three PTOs after
      // the previous update (the server's, say) was confirmed — is tried again before closing:
      // a fast transfer may be over before that.
      if (key_update_wanted_) {
        if (key_update_timer_ != nullptr && !key_update_timer_->armed()) {
          key_update_timer_->StartAfter(std::chrono::milliseconds(5));
        }
        return;
      }
      // Closing before the ticket arrived would leave nothing to resume with.
      if (options_.wait_for_session && result_->session.empty() && !session_wait_over_) {
        if (session_timer_ != nullptr && !session_timer_->armed()) {
          session_timer_->StartAfter(options_.session_wait);
        }
        return;
      }
      closing_ = true;
      c.Close(0);
    }
  }

  // A ticket arrived, or the wait for one is over: close if everything else is done.
  void OnSessionOrTimeout(bool timeout) {
    if (timeout) session_wait_over_ = true;
    if (client_ != nullptr && client_->connection() != nullptr && !client_->closed()) {
      MaybeFinish(*client_->connection());
    }
  }

  void set_session_timer(Timer* t) { session_timer_ = t; }
  void set_key_update_timer(Timer* t) { key_update_timer_ = t; }

  void OnKeyUpdateTimer() {
    TryKeyUpdate();
    if (client_ != nullptr && client_->connection() != nullptr && !client_->closed()) {
      MaybeFinish(*client_->connection());
    }
  }

  // The migration runs from a posted task: it must not re-enter the connection from inside
  // its own packet processing.
  void MaybeMigrate() {
    if (!options_.migrate || migrate_posted_ || received_ < options_.migrate_after) return;
    migrate_posted_ = true;
    QuicClient* client = client_;
    HqClientResult* result = result_;
    const SocketAddress original = options_.quic.server;
    const QuicClient::Migration how = options_.migrate_probe_first
                                          ? QuicClient::Migration::kProbeFirst
                                          : QuicClient::Migration::kImmediate;
    client->loop()->Post([client, result, original, how] {
      if (client->closed()) return;
      if (client->remote_address() != original) {
        std::fprintf(stderr,
                     "petrel-hq-client: already moved to %s (preferred address); no migration\n",
                     client->remote_address().ToString().c_str());
        return;
      }
      SocketAddress local = client->local_address();
      local.set_port(0);
      const absl::Status s = client->MigrateTo(local, how);
      if (!s.ok()) {
        std::fprintf(stderr, "petrel-hq-client: migration: %s\n", s.ToString().c_str());
        return;
      }
      result->migrated = true;
      std::fprintf(stderr, "petrel-hq-client: migrated to local %s\n",
                   client->local_address().ToString().c_str());
    });
  }

 private:
  const HqClientOptions& options_;
  HqClientResult* result_;
  QuicClient* client_ = nullptr;
  std::deque<std::string> pending_;
  absl::flat_hash_map<int64_t, std::unique_ptr<Download>> active_;
  bool key_update_wanted_ = false;
  bool closing_ = false;
  bool saw_data_ = false;
  uint64_t received_ = 0;
  bool migrate_posted_ = false;
  Timer* session_timer_ = nullptr;
  Timer* key_update_timer_ = nullptr;
  bool session_wait_over_ = false;
};

}  // namespace

absl::StatusOr<HqClientResult> RunHqClient(const HqClientOptions& options) {
  HqClientResult result;
  Fetcher fetcher(options, &result);
  QuicClientConfig config = options.quic;
  config.alpn = {"hq-interop"};
  QuicClientCallbacks cb;
  cb.on_connected = [&](QuicConnection& c) { fetcher.OnConnected(c); };
  cb.on_stream_data = [&](QuicConnection& c, int64_t s, absl::string_view d, bool fin) {
    fetcher.TryKeyUpdate();
    fetcher.OnData(c, s, d, fin);
  };
  cb.on_stream_reset = [&](QuicConnection& c, int64_t s, uint64_t) { fetcher.OnReset(c, s); };
  cb.on_streams_available = [&](QuicConnection& c) { fetcher.OpenMore(c); };
  cb.on_session = [&](std::string session, std::string params) {
    result.session = std::move(session);
    result.transport_params = std::move(params);
    fetcher.OnSessionOrTimeout(/*timeout=*/false);
  };
  absl::StatusOr<std::unique_ptr<QuicClient>> client = QuicClient::Create(config, std::move(cb));
  if (!client.ok()) return client.status();
  fetcher.set_client(client->get());
  // Declared after the client (whose loop it uses), so destroyed before it.
  auto session_timer = std::make_unique<Timer>(
      (*client)->loop(), [&fetcher] { fetcher.OnSessionOrTimeout(/*timeout=*/true); });
  fetcher.set_session_timer(session_timer.get());
  auto key_update_timer =
      std::make_unique<Timer>((*client)->loop(), [&fetcher] { fetcher.OnKeyUpdateTimer(); });
  fetcher.set_key_update_timer(key_update_timer.get());
  // With a session and remembered parameters, the requests travel with the ClientHello in
  // 0-RTT: they are queued before the first flight is written (queued after it, they wait for
  // the next write, by which time the handshake is often done and they go in 1-RTT).
  const bool early = !config.session.empty() && !config.transport_params.empty();
  absl::Status connected = (*client)->Connect([&fetcher, early](QuicConnection& c) {
    if (early) fetcher.OpenMore(c);
  });
  if (!connected.ok()) return connected;
  (*client)->Run();
  result.handshake_completed = (*client)->handshake_completed();
  result.session_reused = (*client)->session_reused();
  result.early_data_accepted = (*client)->early_data_accepted();
  result.close_error = (*client)->close_error();
  if (QuicConnection* c = (*client)->connection(); c != nullptr) {
    result.version = c->version();
    result.cipher = c->cipher();
  }
  result.remote = (*client)->remote_address();
  fetcher.set_session_timer(nullptr);
  session_timer.reset();
  fetcher.set_key_update_timer(nullptr);
  key_update_timer.reset();
  return result;
}

}  // namespace petrel::hq
