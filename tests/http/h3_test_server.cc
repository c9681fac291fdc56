#include "h3_test_server.h"

#include <openssl/sha.h>

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "petrel/http/static_files.h"

namespace petrel::http {
namespace {

// /gate's producer. Parked producers are listed per thread: a /release resumes the ones of its
// own worker thread only (one connection's requests all run there).
class GateProducer final : public BodyProducer {
 public:
  explicit GateProducer(std::atomic<int>* opened) : opened_(opened) { Parked().push_back(this); }
  ~GateProducer() override { Forget(); }

  // Resumes every gate of this thread; returns how many there were.
  static size_t ReleaseAll() {
    std::vector<GateProducer*> gates = std::exchange(Parked(), {});
    for (GateProducer* g : gates) {
      g->open_ = true;
      g->NotifyResume();
    }
    return gates.size();
  }

 private:
  static std::vector<GateProducer*>& Parked() {
    thread_local std::vector<GateProducer*> parked;
    return parked;
  }
  void Forget() {
    auto& p = Parked();
    p.erase(std::remove(p.begin(), p.end(), this), p.end());
  }
  BodyReadResult DoRead(size_t, std::string* out) override {
    if (!sent_head_) {
      sent_head_ = true;
      out->append("gate:");
      return BodyReadResult::Data();
    }
    if (!open_) return BodyReadResult::WouldBlock();
    out->append("open");
    opened_->fetch_add(1);
    return BodyReadResult::End();
  }

  std::atomic<int>* const opened_;
  bool sent_head_ = false;
  bool open_ = false;
};

// /sha256: hashes the request body as the handler reads it.
struct UploadHash {
  SHA256_CTX ctx;
  uint64_t bytes = 0;
};

}  // namespace

absl::Status H3TestServer::AddRoutes(Router& router) {
  absl::Status s =
      router.Get("/hello", [](Request&, Response& res) { res.Send(200, "hello", "text/plain"); });
  if (!s.ok()) return s;
  if (!options_.static_dir.empty()) {
    s = router.Get("/static/*", StaticFiles(options_.static_dir));
    if (!s.ok()) return s;
  }
  s = router.Get("/files/:name", [dir = options_.files_dir](Request& req, Response& res) {
    const absl::string_view name = req.Param("name");
    if (absl::StrContains(name, "..") || absl::StrContains(name, "%")) {
      res.Send(400, "bad name\n", "text/plain");
      return;
    }
    if (!res.SendFile(200, absl::StrCat(dir, "/", name), "application/octet-stream").ok()) {
      res.Send(404, "no such file\n", "text/plain");
    }
  });
  if (!s.ok()) return s;
  s = router.Post("/sha256", [hashed = &uploads_hashed_](Request& req, Response& res) {
    auto hash = std::make_shared<UploadHash>();  // shared by the two callbacks of one body
    SHA256_Init(&hash->ctx);
    req.body().Read(
        [hash, &res, hashed](absl::string_view chunk, bool last) {
          SHA256_Update(&hash->ctx, chunk.data(), chunk.size());
          hash->bytes += chunk.size();
          if (!last) return;
          uint8_t digest[SHA256_DIGEST_LENGTH];
          SHA256_Final(digest, &hash->ctx);
          hashed->fetch_add(1);
          res.Send(200,
                   absl::StrCat(absl::BytesToHexString(absl::string_view(
                                    reinterpret_cast<const char*>(digest), sizeof(digest))),
                                " ", hash->bytes),
                   "text/plain");
        },
        [&res](const absl::Status& status) { res.Send(400, status.ToString(), "text/plain"); });
  });
  if (!s.ok()) return s;
  s = router.Get("/dated", [](Request&, Response& res) {
    res.SetHeader("Date", "Sun, 06 Nov 1994 08:49:37 GMT");
    res.Send(200, "dated", "text/plain");
  });
  if (!s.ok()) return s;
  s = router.Get("/trailers", [](Request&, Response& res) {
    res.trailers().Add("x-checksum", "42");
    res.Send(200, "body", "text/plain");
  });
  if (!s.ok()) return s;
  s = router.Get("/gate", [opened = &gates_opened_](Request&, Response& res) {
    res.SendBody(200, ResponseBody(std::make_unique<GateProducer>(opened)));
  });
  if (!s.ok()) return s;
  s = router.Get("/hold", [cancelled = &holds_cancelled_](Request&, Response& res) {
    res.SetOnCancel([cancelled] { cancelled->fetch_add(1); });
  });
  if (!s.ok()) return s;
  return router.Get("/release", [](Request&, Response& res) {
    res.Send(200, absl::StrCat("released ", GateProducer::ReleaseAll()), "text/plain");
  });
}

H3TestServer::H3TestServer(const Options& options) : options_(options) {
  router_ = std::make_unique<Router>();
  if (!AddRoutes(*router_).ok()) return;
  callbacks_ = std::make_unique<H3ServerCallbacks>(
      [router = router_.get()](Request& req, Response& res) { router->Handle(req, res); },
      options_.h3);
  QuicServerConfig config;
  absl::StatusOr<SocketAddress> addr = SocketAddress::Parse("127.0.0.1", 0);
  if (!addr.ok()) return;
  config.listen = {*addr};
  config.workers = options_.workers;
  config.alpn = {"h3"};
  config.limits.max_streams_bidi = 100;
  absl::StatusOr<std::unique_ptr<QuicServer>> server =
      QuicServer::Create(std::move(config), callbacks_->Build());
  if (!server.ok()) return;
  server_ = *std::move(server);
  port_ = server_->local_addresses().front().port();
  thread_ = std::thread([this] { (void)server_->Run(); });
}

H3TestServer::~H3TestServer() {
  if (server_ != nullptr) server_->Stop(std::chrono::seconds(2));
  if (thread_.joinable()) thread_.join();
  server_.reset();
}

}  // namespace petrel::http
