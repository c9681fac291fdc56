#include "h1_test_server.h"

#include <openssl/sha.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstdio>
#include <future>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "http/tcp/tcp_listener.h"
#include "petrel/common/event_loop.h"
#include "petrel/common/timer.h"
#include "petrel/http/router.h"
#include "petrel/http/static_files.h"
#include "quic/tls/certificate.h"
#include "quic/tls/tls_context.h"

namespace petrel::http {
namespace {

uint64_t QueryInt(absl::string_view query, absl::string_view name, uint64_t fallback) {
  for (absl::string_view kv : absl::StrSplit(query, '&')) {
    std::pair<absl::string_view, absl::string_view> p = absl::StrSplit(kv, '=');
    uint64_t v = 0;
    if (p.first == name && absl::SimpleAtoi(p.second, &v)) return v;
  }
  return fallback;
}

// /big and /stream: `total` deterministic bytes in chunks of whatever size the engine asks for.
class BigProducer final : public BodyProducer {
 public:
  BigProducer(uint64_t total, bool known_length, std::atomic<uint64_t>* produced)
      : total_(total), known_length_(known_length), produced_(produced) {}
  std::optional<uint64_t> Length() const override {
    return known_length_ ? std::optional<uint64_t>(total_) : std::nullopt;
  }

 private:
  BodyReadResult DoRead(size_t max_bytes, std::string* out) override {
    const uint64_t n = std::min<uint64_t>(max_bytes, total_ - pos_);
    for (uint64_t i = 0; i < n; ++i) out->push_back(H1BigByte(pos_ + i));
    pos_ += n;
    produced_->fetch_add(n, std::memory_order_relaxed);
    return pos_ == total_ ? BodyReadResult::End() : BodyReadResult::Data();
  }
  const uint64_t total_;
  const bool known_length_;
  std::atomic<uint64_t>* const produced_;
  uint64_t pos_ = 0;
};

// Hashes a request body as it streams in.
struct Sha256State {
  SHA256_CTX ctx;
  uint64_t bytes = 0;
};

}  // namespace

struct H1TestServer::Impl {
  // One accepted socket; under TLS it waits for the handshake, then runs an H1Connection.
  struct Conn final : StreamHandler {
    Impl* impl = nullptr;
    std::unique_ptr<TcpStream> stream;
    std::unique_ptr<H1Connection> h1;  // declared after `stream`: destroyed first

    void StartH1() {
      h1 = std::make_unique<H1Connection>(
          &impl->loop, stream.get(),
          [router = &impl->router](Request& req, Response& res) { router->Handle(req, res); },
          impl->options.h1);
      h1->set_on_closed([this](const absl::Status& status) {
        if (!status.ok())
          fprintf(stderr, "h1 test server: closed: %s\n", status.ToString().c_str());
        impl->Release(this);
      });
      if (!h1->Start().ok()) stream->Close(absl::InternalError("h1 start"));
    }
    void OnHandshakeDone() override { StartH1(); }
    void OnReadable(ByteBuffer&) override {}
    void OnClosed(const absl::Status&) override { impl->Release(this); }
  };

  Impl(H1TestServer* o, const Options& opts) : owner(o), options(opts) {}

  void Release(Conn* c) {
    if (stopping) return;
    if (c->h1 != nullptr) {
      owner->continues_sent_.fetch_add(c->h1->continues_sent());
      owner->error_responses_.fetch_add(c->h1->error_responses());
      owner->sendfile_responses_.fetch_add(c->h1->sendfile_responses());
      size_t prev = owner->max_pending_output_.load();
      const size_t mine = c->h1->max_pending_output();
      while (mine > prev && !owner->max_pending_output_.compare_exchange_weak(prev, mine)) {
      }
    }
    loop.RunAfterBatch([this, c] {
      if (conns.erase(c) > 0) {
        listener->ConnectionClosed();
        owner->closed_connections_.fetch_add(1);
        owner->NotifyAll();
      }
    });
  }

  void AddRoutes() {
    (void)router.Get("/hello", [this](Request&, Response& res) {
      owner->hello_hits_.fetch_add(1);
      res.Send(200, "hello", "text/plain");
    });
    (void)router.Get("/info", [](Request& req, Response& res) {
      res.Send(200, absl::StrCat(req.scheme(), " ", req.authority(), " ",
                                 HttpVersionName(req.version()), " ", req.path(), " ", req.query(),
                                 " ", req.alpn().empty() ? "-" : req.alpn()));
    });
    (void)router.Any("/sha256", [](Request& req, Response& res) {
      auto state = std::make_shared<Sha256State>();
      SHA256_Init(&state->ctx);
      req.body().Read(
          [state, &res](absl::string_view chunk, bool last) {
            SHA256_Update(&state->ctx, chunk.data(), chunk.size());
            state->bytes += chunk.size();
            if (!last) return;
            uint8_t digest[SHA256_DIGEST_LENGTH];
            SHA256_Final(digest, &state->ctx);
            res.Send(200, absl::StrCat(absl::BytesToHexString(absl::string_view(
                                           reinterpret_cast<const char*>(digest), sizeof(digest))),
                                       " ", state->bytes));
          },
          [&res](const absl::Status& status) { res.Send(500, std::string(status.message())); });
    });
    (void)router.Any("/echo", [](Request& req, Response& res) {
      StreamingBody& out = res.Stream(200);
      RequestBody& in = req.body();
      out.SetOnWritable([&in] { in.Resume(); });
      in.Read(
          [&out, &in](absl::string_view chunk, bool last) {
            if (!chunk.empty() && !out.Write(chunk)) in.Pause();
            if (last) out.Finish();
          },
          [&out](const absl::Status& status) { out.Fail(status); });
    });
    // Reads the first chunk of the body, then pauses for good (request-body backpressure).
    (void)router.Post("/pause", [this](Request& req, Response&) {
      RequestBody& in = req.body();
      in.Read([this, &in](absl::string_view chunk, bool) {
        owner->pause_seen_.fetch_add(chunk.size());
        in.Pause();
      });
    });
    (void)router.Post("/noread", [](Request&, Response& res) { res.Send(200, "ignored"); });
    (void)router.Get("/file", [this](Request&, Response& res) {
      if (!res.SendFile(200, options.file_path, "application/octet-stream").ok()) {
        res.Send(404, "no file");
      }
    });
    if (!options.static_dir.empty()) (void)router.Get("/static/*", StaticFiles(options.static_dir));
    (void)router.Get("/big", [this](Request& req, Response& res) {
      const uint64_t kib = QueryInt(req.query(), "kib", 1024);
      res.SendBody(
          200, ResponseBody(std::make_unique<BigProducer>(kib << 10, true, &owner->big_produced_)));
    });
    (void)router.Get("/stream", [this](Request& req, Response& res) {
      const uint64_t kib = QueryInt(req.query(), "kib", 1024);
      res.SendBody(200, ResponseBody(std::make_unique<BigProducer>(kib << 10, false,
                                                                   &owner->big_produced_)));
    });
    (void)router.Get("/204", [](Request&, Response& res) { res.Send(204, "must not be sent"); });
    (void)router.Get("/304", [](Request&, Response& res) {
      res.SetHeader("ETag", "\"v1\"");
      res.Send(304, "must not be sent");
    });
    (void)router.Get("/trailers", [](Request&, Response& res) {
      StreamingBody& out = res.Stream(200);
      out.Write("body");
      out.Finish(HeaderMap{{"x-checksum", "42"}});
    });
    (void)router.Get("/slow", [this](Request& req, Response& res) {
      const uint64_t ms = QueryInt(req.query(), "ms", 100);
      Response* r = &res;
      auto timer = std::make_unique<Timer>(&loop, [this, r] {
        r->Send(200, "slow", "text/plain");
        loop.RunAfterBatch([this, r] { slow.erase(r); });
      });
      timer->StartAfter(std::chrono::milliseconds(ms));
      slow[r] = std::move(timer);
      res.SetOnCancel([this, r] {
        if (stopping) return;
        if (auto it = slow.find(r); it != slow.end()) it->second->Cancel();
        loop.RunAfterBatch([this, r] { slow.erase(r); });
      });
      owner->slow_started_.fetch_add(1);
      owner->NotifyAll();
    });
  }

  H1TestServer* const owner;
  const Options options;
  EventLoop loop;
  Router router;
  std::unique_ptr<quic::TlsServerContext> tls;
  std::unique_ptr<TcpListener> listener;
  absl::flat_hash_map<Conn*, std::unique_ptr<Conn>> conns;
  absl::flat_hash_map<Response*, std::unique_ptr<Timer>> slow;
  bool stopping = false;  // teardown: no more RunAfterBatch work
};

H1TestServer::H1TestServer(const Options& options) {
  std::promise<uint16_t> started;
  std::future<uint16_t> port = started.get_future();
  thread_ = std::thread([this, options, &started] {
    impl_ = std::make_unique<Impl>(this, options);
    Impl* impl = impl_.get();
    impl->AddRoutes();
    if (options.tls) {
      auto pem = quic::GenerateSelfSigned({"localhost", "127.0.0.1"});
      quic::TlsServerConfig config;
      if (pem.ok()) config.certificate = *pem;
      config.alpn = {"http/1.1", "http/1.0"};
      config.tls13_only = false;
      auto ctx = quic::TlsServerContext::Create(config);
      if (!pem.ok() || !ctx.ok()) {
        started.set_value(0);
        return;
      }
      impl->tls = *std::move(ctx);
    }
    auto listener = TcpListener::Listen(
        &impl->loop, *SocketAddress::Parse("127.0.0.1", 0), {},
        [this, impl](int fd, const SocketAddress& peer, const SocketAddress& local) {
          accepted_.fetch_add(1);
          if (impl->options.sndbuf > 0) {
            setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &impl->options.sndbuf,
                       sizeof(impl->options.sndbuf));
          }
          auto s = TcpStream::Create(&impl->loop, fd, peer, local,
                                     impl->tls != nullptr ? impl->tls->NewSsl() : nullptr,
                                     impl->options.stream);
          if (!s.ok()) {
            impl->listener->ConnectionClosed();
            return;
          }
          auto c = std::make_unique<Impl::Conn>();
          c->impl = impl;
          c->stream = *std::move(s);
          c->stream->set_handler(c.get());
          Impl::Conn* raw = c.get();
          impl->conns[raw] = std::move(c);
          if (impl->tls == nullptr) raw->StartH1();
        });
    if (!listener.ok()) {
      started.set_value(0);
      return;
    }
    impl->listener = *std::move(listener);
    started.set_value(impl->listener->local_address().port());
    impl->loop.Run();
    // Teardown on the loop thread: connections before the listener and the loop.
    impl->stopping = true;
    impl->conns.clear();
    impl->slow.clear();
    impl->listener.reset();
  });
  port_ = port.get();
}

H1TestServer::~H1TestServer() {
  if (impl_ != nullptr) impl_->loop.Stop();
  thread_.join();
  impl_.reset();
}

void H1TestServer::NotifyAll() {
  std::lock_guard<std::mutex> lock(mu_);
  cv_.notify_all();
}

void H1TestServer::ShutdownConnections() {
  std::promise<void> done;
  impl_->loop.Post([this, &done] {
    for (auto& [raw, c] : impl_->conns) {
      if (c->h1 != nullptr) c->h1->Shutdown();
    }
    done.set_value();
  });
  done.get_future().wait();
}

void H1TestServer::RunOnLoop(absl::AnyInvocable<void()> task) {
  std::promise<void> done;
  impl_->loop.Post([&task, &done] {
    task();
    done.set_value();
  });
  done.get_future().wait();
}

TcpIoCounters H1TestServer::live_io_counters() {
  TcpIoCounters total;
  RunOnLoop([&] {
    for (auto& [raw, c] : impl_->conns) {
      total.reads += c->stream->io_counters().reads;
      total.writes += c->stream->io_counters().writes;
    }
  });
  return total;
}

std::optional<H1TestServer::LiveConnection> H1TestServer::live_connection(
    uint16_t peer_port, std::chrono::milliseconds timeout) {
  // Shared with the task: a loop that does not answer in time may still run it later.
  auto answer = std::make_shared<std::promise<std::optional<LiveConnection>>>();
  std::future<std::optional<LiveConnection>> result = answer->get_future();
  impl_->loop.Post([impl = impl_.get(), peer_port, answer] {
    std::optional<LiveConnection> found;
    for (auto& [raw, c] : impl->conns) {
      if (c->stream->peer().port() != peer_port) continue;
      LiveConnection live;
      live.pending_output = c->stream->pending_output();
      if (c->h1 != nullptr) live.max_pending_output = c->h1->max_pending_output();
      found = live;
    }
    answer->set_value(found);
  });
  if (result.wait_for(timeout) != std::future_status::ready) return std::nullopt;
  return result.get();
}

bool H1TestServer::WaitLiveConnection(uint16_t peer_port,
                                      absl::FunctionRef<bool(const LiveConnection&)> pred,
                                      std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    const std::optional<LiveConnection> live = live_connection(peer_port, left);
    if (live.has_value() && pred(*live)) return true;
    // Only how soon the wait notices; the state waited for persists.
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

bool H1TestServer::WaitClosed(int n, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, timeout, [&] { return closed_connections_.load() >= n; });
}

bool H1TestServer::WaitSlowStarted(int n, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, timeout, [&] { return slow_started_.load() >= n; });
}

}  // namespace petrel::http
