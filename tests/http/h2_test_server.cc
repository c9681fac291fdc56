#include "h2_test_server.h"

#include <algorithm>
#include <chrono>
#include <mutex>
#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "http/h2/protocol_detect.h"
#include "http/tcp/tcp_listener.h"
#include "http/tcp/tcp_stream.h"
#include "petrel/common/event_loop.h"
#include "petrel/common/timer.h"
#include "petrel/http/method.h"
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

// /big: `total` deterministic bytes, in chunks of whatever size the engine asks for.
class BigProducer final : public BodyProducer {
 public:
  BigProducer(uint64_t total, std::atomic<uint64_t>* produced)
      : total_(total), produced_(produced) {}
  std::optional<uint64_t> Length() const override { return total_; }

 private:
  BodyReadResult DoRead(size_t max_bytes, std::string* out) override {
    const uint64_t n = std::min<uint64_t>(max_bytes, total_ - pos_);
    for (uint64_t i = 0; i < n; ++i) out->push_back(BigByte(pos_ + i));
    pos_ += n;
    produced_->fetch_add(n, std::memory_order_relaxed);
    return pos_ == total_ ? BodyReadResult::End() : BodyReadResult::Data();
  }
  const uint64_t total_;
  std::atomic<uint64_t>* const produced_;
  uint64_t pos_ = 0;
};

}  // namespace

struct H2TestServer::Impl {
  // One accepted socket: picks the protocol, then hands the stream to an H2Connection.
  struct Conn final : StreamHandler {
    Impl* impl = nullptr;
    std::unique_ptr<TcpStream> stream;
    std::unique_ptr<H2Connection> h2;  // declared after `stream`: destroyed first

    void StartH2() {
      h2 = std::make_unique<H2Connection>(
          &impl->loop, stream.get(),
          [router = &impl->router](Request& req, Response& res) { router->Handle(req, res); },
          impl->options.h2);
      h2->set_on_closed([this](const absl::Status&) { impl->Release(this); });
      if (!h2->Start().ok()) stream->Close(absl::InternalError("h2 start"));
    }
    void OnHandshakeDone() override {
      if (quic::SelectedAlpn(stream->ssl()) == "h2") {
        StartH2();
      } else {
        stream->Close(absl::FailedPreconditionError("no h2 ALPN"));
      }
    }
    void OnReadable(ByteBuffer& input) override {
      switch (DetectCleartextProtocol(input.Readable())) {
        case CleartextProtocol::kNeedMore:
          return;
        case CleartextProtocol::kH2:
          StartH2();  // reads `input` in place
          return;
        case CleartextProtocol::kH1:
          stream->Close(absl::FailedPreconditionError("h1 is not served here"));
          return;
      }
    }
    void OnClosed(const absl::Status&) override { impl->Release(this); }
  };

  explicit Impl(H2TestServer* o, const Options& opts) : owner(o), options(opts) {}

  void Release(Conn* c) {
    if (stopping) return;
    if (c->h2 != nullptr) {
      std::lock_guard<std::mutex> lock(mu);
      if (!c->h2->calm_reason().empty()) calm_reason = std::string(c->h2->calm_reason());
      owner->last_writes_.store(c->h2->writes());
      owner->last_flushes_.store(c->h2->flushes());
      owner->last_pool_fresh_.store(c->h2->mem_pool().fresh());
    }
    loop.RunAfterBatch([this, c] {
      if (conns.erase(c) > 0) {
        listener->ConnectionClosed();
        owner->closed_connections_.fetch_add(1);
      }
    });
  }

  void AddRoutes() {
    if (!options.static_dir.empty()) (void)router.Get("/static/*", StaticFiles(options.static_dir));
    (void)router.Get("/hello",
                     [](Request&, Response& res) { res.Send(200, "hello", "text/plain"); });
    (void)router.Post("/echo", [](Request& req, Response& res) {
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
    // Never reads the body and never answers (the connection's end cancels it): for the
    // flow-control test.
    (void)router.Post("/hold", [](Request&, Response&) {});
    (void)router.Get("/big", [this](Request& req, Response& res) {
      const uint64_t mib = QueryInt(req.query(), "mib", 1);
      res.SendBody(200,
                   ResponseBody(std::make_unique<BigProducer>(mib << 20, &owner->big_produced_)));
    });
    // A buffer body of `bytes` bytes, there at once (no producer to wait for): for the
    // scheduling tests, whose order must not depend on when a producer has data.
    (void)router.Get("/sized", [](Request& req, Response& res) {
      const uint64_t bytes = QueryInt(req.query(), "bytes", 1);
      res.Send(200, std::string(bytes, 'p'), "application/octet-stream");
    });
    (void)router.Get("/slow", [this](Request& req, Response& res) {
      const uint64_t ms = QueryInt(req.query(), "ms", 100);
      Response* r = &res;
      auto timer = std::make_unique<Timer>(&loop, [this, r] {
        r->Send(200, "slow", "text/plain");
        owner->slow_done_.fetch_add(1);
        loop.RunAfterBatch([this, r] { slow.erase(r); });
      });
      timer->StartAfter(std::chrono::milliseconds(ms));
      slow[r] = std::move(timer);
      res.SetOnCancel([this, r] {
        if (stopping) return;
        owner->slow_cancelled_.fetch_add(1);
        if (auto it = slow.find(r); it != slow.end()) it->second->Cancel();
        loop.RunAfterBatch([this, r] { slow.erase(r); });
      });
    });
    (void)router.Post("/request-trailers", [](Request& req, Response& res) {
      req.body().ReadAll(1 << 20, [&req, &res](absl::StatusOr<std::string> body) {
        if (!body.ok()) return res.Send(500, std::string(body.status().message()));
        res.Send(200, absl::StrCat(*body, "|", req.body().trailers().Get("x-t").value_or("none")));
      });
    });
    // Answers with the request's method (streams are recycled: a stale one would show).
    for (const absl::string_view name : {"GET", "PUT", "DELETE", "PURGE"}) {
      (void)router.Add(*Method::Parse(name), "/method", [](Request& req, Response& res) {
        res.Send(200, std::string(req.method().name()), "text/plain");
      });
    }
    (void)router.Get("/dated", [](Request&, Response& res) {
      res.SetHeader("Date", "Sun, 06 Nov 1994 08:49:37 GMT");
      res.Send(200, "dated", "text/plain");
    });
    (void)router.Get("/trailers", [](Request&, Response& res) {
      StreamingBody& out = res.Stream(200);
      out.Write("body");
      out.Finish(HeaderMap{{"x-checksum", "42"}});
    });
  }

  H2TestServer* const owner;
  const Options options;
  EventLoop loop;
  Router router;
  std::unique_ptr<quic::TlsServerContext> tls;
  std::unique_ptr<TcpListener> listener;
  absl::flat_hash_map<Conn*, std::unique_ptr<Conn>> conns;
  absl::flat_hash_map<Response*, std::unique_ptr<Timer>> slow;
  std::mutex mu;
  std::string calm_reason;
  bool stopping = false;  // teardown: no more RunAfterBatch work
};

H2TestServer::H2TestServer(const Options& options) {
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
      config.alpn = {"h2"};
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
        [impl](int fd, const SocketAddress& peer, const SocketAddress& local) {
          auto s = TcpStream::Create(&impl->loop, fd, peer, local,
                                     impl->tls != nullptr ? impl->tls->NewSsl() : nullptr);
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

H2TestServer::~H2TestServer() {
  if (impl_ != nullptr) impl_->loop.Stop();
  thread_.join();
  impl_.reset();
}

void H2TestServer::ShutdownConnections() {
  std::promise<void> done;
  impl_->loop.Post([this, &done] {
    for (auto& [raw, c] : impl_->conns) {
      if (c->h2 != nullptr) c->h2->Shutdown();
    }
    done.set_value();
  });
  done.get_future().wait();
}

bool H2TestServer::WaitForClosedConnections(int n) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (closed_connections_.load() < n) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

void H2TestServer::RunOnLoop(absl::AnyInvocable<void()> fn) {
  std::promise<void> done;
  impl_->loop.Post([&fn, &done] {
    fn();
    done.set_value();
  });
  done.get_future().wait();
}

std::string H2TestServer::last_calm_reason() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->calm_reason;
}

}  // namespace petrel::http
