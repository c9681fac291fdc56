// Router lookup: a 32-route table like a small API server's, matched against exact, parameter,
// wildcard, 405 and 404 paths. Match must not allocate on success (≤ 4 parameters).
#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "petrel/http/router.h"

namespace {

petrel::Router& Table() {
  static petrel::Router* router = [] {
    auto* r = new petrel::Router();
    auto noop = [](petrel::Request&, petrel::Response&) {};
    for (int i = 0; i < 20; ++i) (void)r->Get(absl::StrCat("/api/v1/resource", i), noop);
    (void)r->Get("/", noop);
    (void)r->Get("/hello", noop);
    (void)r->Post("/echo", noop);
    (void)r->Get("/users/:id", noop);
    (void)r->Get("/users/me", noop);
    (void)r->Get("/users/:id/posts/:post", noop);
    (void)r->Put("/users/:id/posts/:post", noop);
    (void)r->Delete("/users/:id", noop);
    (void)r->Get("/files/*", noop);
    (void)r->Get("/static/css/*", noop);
    (void)r->Get("/static/js/*", noop);
    (void)r->Get("/metrics", noop);
    return r;
  }();
  return *router;
}

void Lookup(benchmark::State& state, petrel::Method method, const char* path, int want) {
  petrel::Router& router = Table();
  for (auto _ : state) {
    petrel::RouteMatch m = router.Match(method, path);
    if (m.status != want) state.SkipWithError("unexpected status");
    benchmark::DoNotOptimize(m);
  }
  state.SetItemsProcessed(state.iterations());
}

void BM_RouterExact(benchmark::State& s) {
  Lookup(s, petrel::Method::kGet, "/api/v1/resource17", 200);
}
void BM_RouterTwoParams(benchmark::State& s) {
  Lookup(s, petrel::Method::kGet, "/users/12345/posts/678", 200);
}
void BM_RouterLiteralOverParam(benchmark::State& s) {
  Lookup(s, petrel::Method::kGet, "/users/me", 200);
}
void BM_RouterWildcard(benchmark::State& s) {
  Lookup(s, petrel::Method::kGet, "/files/2026/12/01/report.pdf", 200);
}
void BM_RouterNotFound(benchmark::State& s) {
  Lookup(s, petrel::Method::kGet, "/nothing/here", 404);
}
void BM_RouterMethodNotAllowed(benchmark::State& s) {
  Lookup(s, petrel::Method::kPost, "/hello", 405);
}
BENCHMARK(BM_RouterExact);
BENCHMARK(BM_RouterTwoParams);
BENCHMARK(BM_RouterLiteralOverParam);
BENCHMARK(BM_RouterWildcard);
BENCHMARK(BM_RouterNotFound);
BENCHMARK(BM_RouterMethodNotAllowed);

}  // namespace

BENCHMARK_MAIN();
