// StaticFiles as a handler, on a real directory tree whose root has symlinks out of it, asked for
// arbitrary targets with arbitrary Range and conditional fields, with the open-file cache on and
// off. Properties besides "no crash": nothing from outside the root is ever served (the files
// there carry a marker no file inside has); what is served is a byte range of a file inside; the
// status is one StaticFiles documents.
#include <fuzzer/FuzzedDataProvider.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "fuzz_check.h"
#include "petrel/http/body.h"
#include "petrel/http/request.h"
#include "petrel/http/response.h"
#include "petrel/http/router.h"
#include "petrel/http/static_files.h"

namespace {

constexpr absl::string_view kOutsideMarker = "OUTSIDE-THE-ROOT";

struct Tree {
  std::string base;
  std::vector<std::string> inside_contents;
  petrel::Router cached;
  petrel::Router uncached;
};

Tree* tree = nullptr;

void Write(const std::string& path, absl::string_view bytes) {
  std::ofstream(path, std::ios::binary)
      .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

void RemoveTree() {
  std::error_code ec;
  std::filesystem::remove_all(tree->base, ec);
}

// What the handler put in the response body, read back.
std::string BodyOf(petrel::Response& res) {
  if (const std::string* b = res.body().buffer()) return *b;
  std::string bytes;
  if (const petrel::FileBody* f = res.body().file()) {
    while (bytes.size() < f->length()) {
      absl::StatusOr<size_t> n = f->ReadAt(bytes.size(), 4096, &bytes);
      if (!n.ok() || *n == 0) break;
    }
  }
  return bytes;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  tree = new Tree;
  char tmpl[] = "/tmp/petrel-fuzz-static-XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) std::abort();
  tree->base = tmpl;
  std::atexit(RemoveTree);
  const std::string root = tree->base + "/www";
  const std::string outside = tree->base + "/outside";
  std::filesystem::create_directories(root + "/sub/deeper");
  std::filesystem::create_directories(outside + "/dir");
  Write(outside + "/secret.txt", std::string(kOutsideMarker) + " secret\n");
  Write(outside + "/dir/index.html", std::string(kOutsideMarker) + " index\n");
  const std::vector<std::pair<std::string, std::string>> files = {
      {"a.txt", "hello world\n"},
      {"index.html", "<p>root index</p>\n"},
      {"sub/index.html", "<p>sub index</p>\n"},
      {"sub/deeper/b.css", "p { color: red }\n"},
      {"a b.txt", "spaced name\n"},
      {"%2e%2e", "a file named with a literal percent\n"},
      {"empty", ""},
      {"big.bin", std::string(40000, 'x')},
  };
  for (const auto& [name, content] : files) {
    Write(root + "/" + name, content);
    tree->inside_contents.push_back(content);
  }
  std::filesystem::create_symlink("../outside/secret.txt", root + "/escape");
  std::filesystem::create_symlink("../outside", root + "/escdir");
  std::filesystem::create_symlink(outside, root + "/sub/abs");
  std::filesystem::create_symlink("a.txt", root + "/inlink");
  std::filesystem::create_symlink("../../outside/dir", root + "/sub/deeper/up");
  petrel::StaticFilesOptions options;
  options.file_cache_revalidate = absl::ZeroDuration();
  options.list_directories = true;
  (void)tree->cached.Get("/*", petrel::StaticFiles(root, options));
  (void)tree->cached.Get("/files/*", petrel::StaticFiles(root, options));
  options.file_cache_entries = 0;
  (void)tree->uncached.Get("/*", petrel::StaticFiles(root, options));
  (void)tree->uncached.Get("/files/*", petrel::StaticFiles(root, options));
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static constexpr absl::string_view kFields[] = {
      "Range", "If-Range", "If-Match", "If-None-Match", "If-Modified-Since", "If-Unmodified-Since"};
  if (size > 2048) return 0;
  FuzzedDataProvider in(data, size);
  const bool head = in.ConsumeBool();
  const bool use_cache = in.ConsumeBool();
  petrel::Request req;
  req.set_method(head ? petrel::Method::kHead : petrel::Method::kGet);
  const size_t fields = in.ConsumeIntegralInRange<size_t>(0, 3);
  for (size_t i = 0; i < fields; ++i) {
    const absl::string_view name = kFields[in.ConsumeIntegralInRange<size_t>(0, 5)];
    req.headers().Add(name, in.ConsumeRandomLengthString(64));
  }
  req.SetTarget(in.ConsumeRemainingBytesAsString());
  petrel::Response res;
  (use_cache ? tree->cached : tree->uncached).Handle(req, res);
  const int s = res.status();
  PETREL_FUZZ_CHECK(s == 200 || s == 206 || s == 301 || s == 304 || s == 400 || s == 403 ||
                    s == 404 || s == 412 || s == 416);
  const std::string body = BodyOf(res);
  PETREL_FUZZ_CHECK(!absl::StrContains(body, kOutsideMarker));
  if ((s == 200 || s == 206) && !head && !absl::StartsWith(body, "<!DOCTYPE html>")) {
    bool found = false;
    for (const std::string& content : tree->inside_contents) {
      found = found || absl::StrContains(content, body);
    }
    PETREL_FUZZ_CHECK(found);
  }
  return 0;
}
