#include "quic/hq/hq_server.h"

#include <fcntl.h>
#include <unistd.h>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "petrel/common/event_loop.h"
#include "petrel/common/timer.h"

namespace petrel::hq {
namespace {

constexpr size_t kMaxRequest = 8192;
constexpr size_t kChunk = 64 * 1024;

}  // namespace

struct HqServer::Transfer {
  std::string request;
  int fd = -1;
  uint64_t offset = 0;
  std::string chunk;  // read but refused by a full stream: resent on writable
  bool responding = false;
  bool done = false;
  ~Transfer() {
    if (fd >= 0) ::close(fd);
  }
};

struct HqServer::Transfers final : QuicConnection::AppData {
  absl::flat_hash_map<int64_t, std::unique_ptr<Transfer>> by_stream;
  bool key_updated = false;
  // Tries the key update again while ngtcp2 refuses it (RFC 9001 §6: not before a packet of
  // the current phase was acknowledged, nor within three PTOs of the previous update).
  std::unique_ptr<Timer> key_update_retry;
};

HqServer::Transfers& HqServer::TransfersOf(QuicConnection& c) {
  auto* all = static_cast<Transfers*>(c.app_data());
  if (all == nullptr) {
    auto fresh = std::make_unique<Transfers>();
    all = fresh.get();
    c.set_app_data(std::move(fresh));
  }
  return *all;
}

HqServer::Transfer* HqServer::Find(QuicConnection& c, int64_t stream, bool create) {
  if (!create) {
    auto* all = static_cast<Transfers*>(c.app_data());
    if (all == nullptr) return nullptr;
    auto it = all->by_stream.find(stream);
    return it == all->by_stream.end() ? nullptr : it->second.get();
  }
  std::unique_ptr<Transfer>& slot = TransfersOf(c).by_stream[stream];
  if (slot == nullptr) slot = std::make_unique<Transfer>();
  return slot.get();
}

std::optional<std::string> ResolveRequest(const std::string& root, absl::string_view request) {
  absl::string_view r = request;
  if (!absl::ConsumePrefix(&r, "GET ")) return std::nullopt;
  absl::ConsumeSuffix(&r, "\r\n") || absl::ConsumeSuffix(&r, "\n");
  if (r.empty() || r[0] != '/') return std::nullopt;
  if (absl::StrContains(r, '\\') || absl::StrContains(r, '\0') || absl::StrContains(r, ' ')) {
    return std::nullopt;
  }
  for (absl::string_view seg : absl::StrSplit(r, '/')) {
    if (seg == "..") return std::nullopt;
  }
  return root + std::string(r);
}

absl::StatusOr<std::unique_ptr<HqServer>> HqServer::Create(QuicServerConfig config,
                                                           std::string root) {
  std::unique_ptr<HqServer> hq(new HqServer(std::move(root)));
  HqServer* h = hq.get();
  config.alpn = {"hq-interop"};
  QuicServerCallbacks cb;
  cb.on_stream_data = [h](QuicConnection& c, int64_t s, absl::string_view d, bool fin) {
    h->OnData(c, s, d, fin);
  };
  cb.on_stream_writable = [h](QuicConnection& c, int64_t s) { h->Pump(c, s); };
  cb.on_stream_reset = [h](QuicConnection& c, int64_t s, uint64_t) { h->Forget(c, s); };
  cb.on_stream_closed = [h](QuicConnection& c, int64_t s) { h->Forget(c, s); };
  absl::StatusOr<std::unique_ptr<QuicServer>> server =
      QuicServer::Create(std::move(config), std::move(cb));
  if (!server.ok()) return server.status();
  hq->server_ = *std::move(server);
  return hq;
}

HqServer::HqServer(std::string root) : root_(std::move(root)) {}
HqServer::~HqServer() = default;

uint64_t HqServer::files_served() const { return files_served_.load(std::memory_order_relaxed); }

void HqServer::OnData(QuicConnection& c, int64_t stream, absl::string_view data, bool fin) {
  c.Consume(stream, data.size());
  Transfer* t = Find(c, stream, /*create=*/true);
  if (t->responding) return;
  if (t->request.size() + data.size() > kMaxRequest) {
    c.ResetStream(stream, 0x10c);  // H3_REQUEST_REJECTED-like: too long
    return;
  }
  t->request.append(data.data(), data.size());
  if (!fin) return;
  t->responding = true;
  std::optional<std::string> path = ResolveRequest(root_, t->request);
  if (path.has_value()) t->fd = ::open(path->c_str(), O_RDONLY | O_CLOEXEC);
  if (t->fd < 0) {
    c.Write(stream, {}, true);  // not found: an empty answer (HTTP/0.9 has no status)
    t->done = true;
    return;
  }
  Pump(c, stream);
}

void HqServer::MaybeUpdateKeys(QuicConnection& c) {
  if (!initiate_key_update_) return;
  Transfers* all = &TransfersOf(c);
  if (all->key_updated) return;
  if (c.InitiateKeyUpdate()) {
    all->key_updated = true;
    key_updates_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  if (all->key_update_retry == nullptr) {
    // Owned by the connection's app data: it goes with the connection.
    all->key_update_retry =
        std::make_unique<Timer>(EventLoop::Current(), [this, &c] { MaybeUpdateKeys(c); });
  }
  if (!all->key_update_retry->armed()) {
    all->key_update_retry->StartAfter(std::chrono::milliseconds(5));
  }
}

void HqServer::Pump(QuicConnection& c, int64_t stream) {
  Transfer* t = Find(c, stream, /*create=*/false);
  if (t == nullptr) return;
  MaybeUpdateKeys(c);
  while (!t->done && t->fd >= 0) {
    if (t->chunk.empty()) {
      t->chunk.resize(kChunk);
      const ssize_t n = ::pread(t->fd, t->chunk.data(), kChunk, static_cast<off_t>(t->offset));
      if (n < 0) {
        c.ResetStream(stream, 0x102);
        t->done = true;
        return;
      }
      t->chunk.resize(static_cast<size_t>(n));
      if (n == 0) {
        if (!c.Write(stream, {}, true)) return;  // FIN waits for room like data
        t->done = true;
        files_served_.fetch_add(1, std::memory_order_relaxed);
        return;
      }
    }
    if (!c.Write(stream, t->chunk, false)) return;  // on_stream_writable resumes
    t->offset += t->chunk.size();
    t->chunk.clear();
  }
}

void HqServer::Forget(QuicConnection& c, int64_t stream) {
  if (auto* all = static_cast<Transfers*>(c.app_data()); all != nullptr) {
    all->by_stream.erase(stream);
  }
}

}  // namespace petrel::hq
