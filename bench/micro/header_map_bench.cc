// HeaderMap on a typical browser request's 14 fields: building it, finding a field near the end
// in another case, and missing a field — beside std::multimap with a case-insensitive order
// (the obvious alternative) in the same binary.
#include <benchmark/benchmark.h>
#include <strings.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "petrel/http/header_map.h"

namespace {

const std::vector<std::pair<std::string, std::string>>& RequestFields() {
  static const auto* fields = new std::vector<std::pair<std::string, std::string>>{
      {"Host", "www.example.com"},
      {"User-Agent", "Mozilla/5.0 (X11; Linux x86_64; rv:120.0) Gecko/20100101 Firefox/120.0"},
      {"Accept", "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"},
      {"Accept-Language", "en-US,en;q=0.5"},
      {"Accept-Encoding", "gzip, deflate, br"},
      {"Connection", "keep-alive"},
      {"Referer", "https://www.example.com/index.html"},
      {"Cookie", "session=0123456789abcdef; theme=dark"},
      {"Upgrade-Insecure-Requests", "1"},
      {"Sec-Fetch-Dest", "document"},
      {"Sec-Fetch-Mode", "navigate"},
      {"Sec-Fetch-Site", "same-origin"},
      {"If-None-Match", "\"5f3e-1a2b\""},
      {"Cache-Control", "max-age=0"},
  };
  return *fields;
}

struct CaseLess {
  bool operator()(const std::string& a, const std::string& b) const {
    return strcasecmp(a.c_str(), b.c_str()) < 0;
  }
};
using MultiMap = std::multimap<std::string, std::string, CaseLess>;

void BM_HeaderMapBuild(benchmark::State& state) {
  for (auto _ : state) {
    petrel::HeaderMap h;
    for (const auto& [n, v] : RequestFields()) h.Add(n, v);
    benchmark::DoNotOptimize(h);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_HeaderMapBuild);

void BM_MultimapBuild(benchmark::State& state) {
  for (auto _ : state) {
    MultiMap h;
    for (const auto& [n, v] : RequestFields()) h.emplace(n, v);
    benchmark::DoNotOptimize(h);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_MultimapBuild);

void BM_HeaderMapGetHit(benchmark::State& state) {
  petrel::HeaderMap h;
  for (const auto& [n, v] : RequestFields()) h.Add(n, v);
  for (auto _ : state) benchmark::DoNotOptimize(h.Get("if-none-match"));
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_HeaderMapGetHit);

void BM_MultimapGetHit(benchmark::State& state) {
  MultiMap h;
  for (const auto& [n, v] : RequestFields()) h.emplace(n, v);
  const std::string key = "if-none-match";
  for (auto _ : state) benchmark::DoNotOptimize(h.find(key));
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_MultimapGetHit);

void BM_HeaderMapGetMiss(benchmark::State& state) {
  petrel::HeaderMap h;
  for (const auto& [n, v] : RequestFields()) h.Add(n, v);
  for (auto _ : state) benchmark::DoNotOptimize(h.Get("content-length"));
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_HeaderMapGetMiss);

void BM_MultimapGetMiss(benchmark::State& state) {
  MultiMap h;
  for (const auto& [n, v] : RequestFields()) h.emplace(n, v);
  const std::string key = "content-length";
  for (auto _ : state) benchmark::DoNotOptimize(h.find(key));
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_MultimapGetMiss);

}  // namespace

BENCHMARK_MAIN();
