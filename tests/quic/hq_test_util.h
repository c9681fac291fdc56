// Internal (tests): helpers for loopback QUIC tests — a temporary document root with random
// files, SHA-256 of files, and an HqServer running on its own thread.
#ifndef PETREL_TESTS_QUIC_HQ_TEST_UTIL_H_
#define PETREL_TESTS_QUIC_HQ_TEST_UTIL_H_

#include <openssl/rand.h>
#include <openssl/sha.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "quic/hq/hq_client.h"
#include "quic/hq/hq_server.h"

namespace petrel::hq::testing {

// A directory under /tmp, removed with everything in it on destruction.
class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/petrel-quic-test-XXXXXX";
    path_ = ::mkdtemp(tmpl);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Writes `size` random bytes to `path`, in 1 MiB pieces.
inline void WriteRandomFile(const std::string& path, size_t size) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  std::string buf(std::min<size_t>(size, 1 << 20), '\0');
  for (size_t done = 0; done < size;) {
    const size_t n = std::min(buf.size(), size - done);
    RAND_bytes(reinterpret_cast<uint8_t*>(buf.data()), n);
    out.write(buf.data(), static_cast<std::streamsize>(n));
    done += n;
  }
}

// Hex SHA-256 of a file's contents; empty if it cannot be read.
inline std::string FileSha256(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return {};
  SHA256_CTX ctx;
  SHA256_Init(&ctx);
  char buf[65536];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) SHA256_Update(&ctx, buf, n);
  std::fclose(f);
  uint8_t md[SHA256_DIGEST_LENGTH];
  SHA256_Final(md, &ctx);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  for (uint8_t b : md) {
    hex.push_back(kHex[b >> 4]);
    hex.push_back(kHex[b & 15]);
  }
  return hex;
}

// An HqServer on 127.0.0.1 (port picked by the kernel) whose Run() runs on a thread.
class RunningHqServer {
 public:
  // `setup` runs before Run() starts, on the constructing thread.
  RunningHqServer(QuicServerConfig config, const std::string& root,
                  const std::function<void(HqServer&)>& setup = nullptr) {
    config.listen = {*SocketAddress::Parse("127.0.0.1", 0)};
    absl::StatusOr<std::unique_ptr<HqServer>> hq = HqServer::Create(std::move(config), root);
    EXPECT_TRUE(hq.ok()) << hq.status();
    if (!hq.ok()) return;
    hq_ = *std::move(hq);
    if (setup) setup(*hq_);
    thread_ = std::thread([this] { run_status_ = hq_->server().Run(); });
  }
  ~RunningHqServer() { Stop().IgnoreError(); }

  // Graceful stop and join; returns Run()'s status.
  absl::Status Stop(Duration deadline = std::chrono::seconds(5)) {
    if (thread_.joinable()) {
      hq_->server().Stop(deadline);
      thread_.join();
    }
    return run_status_;
  }

  bool ok() const { return hq_ != nullptr; }
  HqServer& hq() { return *hq_; }
  SocketAddress address() const { return hq_->server().local_addresses()[0]; }

 private:
  std::unique_ptr<HqServer> hq_;
  std::thread thread_;
  absl::Status run_status_;
};

constexpr size_t kSmallFiles = 2000;

// Files shared by every test: 1 KiB, 10 MB and kSmallFiles small ones.
class Docs {
 public:
  // Made once per process and kept to its end (tests on several threads use it); the files go
  // at exit. Without that, every test process left ~18 MB in /tmp.
  static Docs& Get() {
    static Docs* docs = [] {
      auto* d = new Docs();
      std::atexit([] {
        std::error_code ec;
        std::filesystem::remove_all(Get().root(), ec);
      });
      return d;
    }();
    return *docs;
  }
  const std::string& root() const { return dir_.path(); }

 private:
  Docs() {
    WriteRandomFile(dir_.path() + "/1k.bin", 1024);
    WriteRandomFile(dir_.path() + "/10m.bin", 10'000'000);
    for (size_t i = 0; i < kSmallFiles; ++i) {
      WriteRandomFile(absl::StrCat(dir_.path(), "/s", i), 64 + i % 200);
    }
  }
  TempDir dir_;
};

// Runs each test with workers = 0 and workers = 2 (the parameter).
class HqLoopbackTest : public ::testing::TestWithParam<size_t> {
 protected:
  QuicServerConfig ServerConfig() {
    QuicServerConfig c;
    c.workers = GetParam();
    return c;
  }

  HqClientOptions ClientOptions(const RunningHqServer& server) {
    HqClientOptions o;
    o.quic.server = server.address();
    o.quic.verify_peer = false;
    o.quic.limits.idle_timeout_ms = 10'000;  // bounds every test in time
    o.download_dir = download_.path();
    return o;
  }

  void ExpectSame(const std::string& name) {
    EXPECT_EQ(FileSha256(download_.path() + "/" + name),
              FileSha256(Docs::Get().root() + "/" + name))
        << name;
  }

  // Fetches `path` ("/name") over one connection with `o` and checks the download byte for
  // byte; the client's result goes to `*result` when given.
  void FetchOneAndCompare(HqClientOptions o, const std::string& path,
                          HqClientResult* result = nullptr) {
    o.paths = {path};
    absl::StatusOr<HqClientResult> r = RunHqClient(o);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->completed, 1u);
    ExpectSame(path.substr(1));
    if (result != nullptr) *result = *r;
  }

  TempDir download_;
};

}  // namespace petrel::hq::testing

#endif  // PETREL_TESTS_QUIC_HQ_TEST_UTIL_H_
