// Internal (tests): running the external peers (curl, nghttp, h2load, gtlsclient, ...) as
// subprocesses, always under a time limit, a temporary directory, and small file/digest helpers
// for checking what they transferred byte for byte.
#ifndef PETREL_TESTS_SUPPORT_COMMAND_H_
#define PETREL_TESTS_SUPPORT_COMMAND_H_

#include <openssl/sha.h>
#include <stdlib.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace petrel::testing {

struct CommandResult {
  int exit_code = -1;  // -1: killed or could not run
  std::string output;  // stdout and stderr
};

// Runs `cmd` through the shell with stderr merged into stdout, under `timeout -k 5`, so a hung
// peer fails the test instead of hanging it.
inline CommandResult RunCommand(const std::string& cmd, int timeout_s = 120) {
  CommandResult r;
  FILE* p = ::popen(absl::StrCat("timeout -k 5 ", timeout_s, " ", cmd, " 2>&1").c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  // fread, not fgets: binary output (compressed bodies) may hold NUL bytes.
  for (size_t n; (n = std::fread(buf, 1, sizeof(buf), p)) > 0;) r.output.append(buf, n);
  const int status = ::pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

// A fresh directory under /tmp, removed with its contents on destruction.
class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/petrel-test-XXXXXX";
    if (::mkdtemp(tmpl) != nullptr) path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(absl::string_view name) const {
    return path_ / std::string(name);
  }

 private:
  std::filesystem::path path_;
};

inline std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

inline std::string Sha256Hex(absl::string_view bytes) {
  uint8_t md[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), md);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  for (uint8_t b : md) {
    hex.push_back(kHex[b >> 4]);
    hex.push_back(kHex[b & 15]);
  }
  return hex;
}

}  // namespace petrel::testing

#endif  // PETREL_TESTS_SUPPORT_COMMAND_H_
