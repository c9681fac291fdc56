// The router's share of a request with and without middleware: Router::Handle on one Request and
// Response, as an engine runs it (a handler answering 200 with a short text body, the OnDone
// hooks at the end, both objects reset for the next request). Variants: no middleware; the four
// shipped ones (request id, CORS for an allowed origin, the rate limiter with room, a valid
// Bearer token); compression with a body below its threshold; compression of a 4 KiB JSON body
// (gzip, brotli). allocs/op counts operator new calls inside the loop.
#include <benchmark/benchmark.h>

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "petrel/common/socket_address.h"
#include "petrel/http/compression.h"
#include "petrel/http/cors.h"
#include "petrel/http/http_auth.h"
#include "petrel/http/rate_limit.h"
#include "petrel/http/request_id.h"
#include "petrel/http/router.h"
#include "support/allocation_counter.h"

namespace {

enum class Setup { kNone, kFour, kCompressionSmall, kGzip, kBrotli };

std::unique_ptr<petrel::Router> MakeRouter(Setup setup) {
  auto r = std::make_unique<petrel::Router>();
  if (setup == Setup::kFour) {
    r->Use(petrel::RequestIdMiddleware());
    petrel::CorsOptions cors;
    cors.allowed_origins = {"https://app.example"};
    r->Use(petrel::CorsMiddleware(std::move(cors)));
    r->Use(petrel::RateLimitMiddleware({.requests_per_second = 1e12, .burst = 1e12}));
    r->Use(petrel::BearerAuthMiddleware("bench", [](absl::string_view t) { return t == "t0k"; }));
  } else if (setup != Setup::kNone) {
    r->Use(petrel::CompressionMiddleware());
  }
  const bool big = setup == Setup::kGzip || setup == Setup::kBrotli;
  std::string body;
  if (big) {
    for (int i = 0; body.size() < 4096; ++i) absl::StrAppend(&body, "{\"id\":", i, ",\"ok\":true}");
    body.resize(4096);
  } else {
    body = "hello, world\n";
  }
  (void)r->Get("/api/items", [body](petrel::Request&, petrel::Response& res) {
    res.Send(200, body, "application/json");
  });
  return r;
}

void Run(benchmark::State& state, Setup setup) {
  const std::unique_ptr<petrel::Router> router = MakeRouter(setup);
  const petrel::SocketAddress peer = *petrel::SocketAddress::Parse("192.0.2.7", 40000);
  petrel::Request req;
  petrel::Response res;
  petrel::RequestRecord record;
  record.peer = &peer;
  uint64_t bytes = 0;
  petrel::testing::CountAllocationsOfThisThread(true);
  const uint64_t before = petrel::testing::Allocations();
  for (auto _ : state) {
    req.set_method(petrel::Method::kGet);
    req.SetTarget("/api/items");
    req.set_peer_address(peer);
    petrel::HeaderMap& h = req.headers();
    h.Add("host", "api.example");
    h.Add("origin", "https://app.example");
    h.Add("authorization", "Bearer t0k");
    h.Add("accept-encoding", setup == Setup::kGzip ? "gzip" : "gzip, deflate, br");
    router->Handle(req, res);
    if (!res.committed()) state.SkipWithError("not answered");
    bytes += res.body().buffer() != nullptr ? res.body().buffer()->size() : 0;
    record.request = &req;
    record.status = res.status();
    record.completed = true;
    if (res.wants_done()) res.RunDone(record);
    res.Reset();
    req.Reset();
  }
  const uint64_t allocated = petrel::testing::Allocations() - before;
  petrel::testing::CountAllocationsOfThisThread(false);
  state.counters["allocs/op"] =
      benchmark::Counter(static_cast<double>(allocated), benchmark::Counter::kAvgIterations);
  state.counters["body/op"] =
      benchmark::Counter(static_cast<double>(bytes), benchmark::Counter::kAvgIterations);
}

void BM_NoMiddleware(benchmark::State& s) { Run(s, Setup::kNone); }
void BM_FourMiddlewares(benchmark::State& s) { Run(s, Setup::kFour); }
void BM_CompressionBelowThreshold(benchmark::State& s) { Run(s, Setup::kCompressionSmall); }
void BM_CompressionGzip4KiB(benchmark::State& s) { Run(s, Setup::kGzip); }
void BM_CompressionBrotli4KiB(benchmark::State& s) { Run(s, Setup::kBrotli); }
BENCHMARK(BM_NoMiddleware);
BENCHMARK(BM_FourMiddlewares);
BENCHMARK(BM_CompressionBelowThreshold);
BENCHMARK(BM_CompressionGzip4KiB);
BENCHMARK(BM_CompressionBrotli4KiB);

}  // namespace

BENCHMARK_MAIN();
