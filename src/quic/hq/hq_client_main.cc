// petrel-hq-client: the hq-interop client.
//   petrel-hq-client [--insecure|--ca F] [--session-file F] [--0rtt] [--key-update]
//                    [--qlog-dir D] [--keylog F] --download DIR URL...
// URLs are https://HOST:PORT/PATH and must share one origin (one connection fetches them all).
#include <netdb.h>
#include <sys/socket.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/strip.h"
#include "quic/hq/hq_client.h"

namespace {

int Usage() {
  std::fprintf(stderr,
               "usage: petrel-hq-client [--insecure|--ca F] [--session-file F] [--0rtt] "
               "[--key-update] [--qlog-dir D] [--keylog F] --download DIR URL...\n");
  return 2;
}

struct Url {
  std::string host;
  uint16_t port = 443;
  std::string path;
};

bool ParseUrl(absl::string_view s, Url* out) {
  if (!absl::ConsumePrefix(&s, "https://")) return false;
  const size_t slash = s.find('/');
  absl::string_view authority = s.substr(0, slash);
  out->path = slash == absl::string_view::npos ? "/" : std::string(s.substr(slash));
  if (!authority.empty() && authority[0] == '[') {
    const size_t close = authority.find(']');
    if (close == absl::string_view::npos) return false;
    out->host = std::string(authority.substr(1, close - 1));
    authority.remove_prefix(close + 1);
  } else {
    const size_t colon = authority.rfind(':');
    out->host = std::string(authority.substr(0, colon));
    authority.remove_prefix(colon == absl::string_view::npos ? authority.size() : colon);
  }
  if (absl::ConsumePrefix(&authority, ":")) {
    uint32_t port = 0;
    if (!absl::SimpleAtoi(authority, &port) || port == 0 || port > 65535) return false;
    out->port = static_cast<uint16_t>(port);
  }
  return !out->host.empty();
}

bool Resolve(const Url& url, petrel::SocketAddress* out) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* res = nullptr;
  if (getaddrinfo(url.host.c_str(), std::to_string(url.port).c_str(), &hints, &res) != 0) {
    return false;
  }
  *out = petrel::SocketAddress(res->ai_addr, res->ai_addrlen);
  freeaddrinfo(res);
  return !out->empty();
}

// Session file: decimal length of the session, '\n', session, then the transport parameters.
bool ReadSession(const std::string& file, std::string* session, std::string* params) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return false;
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string all = ss.str();
  const size_t nl = all.find('\n');
  size_t len = 0;
  if (nl == std::string::npos || !absl::SimpleAtoi(all.substr(0, nl), &len) ||
      nl + 1 + len > all.size()) {
    return false;
  }
  *session = all.substr(nl + 1, len);
  *params = all.substr(nl + 1 + len);
  return true;
}

void WriteSession(const std::string& file, const std::string& session, const std::string& params) {
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  out << session.size() << '\n' << session << params;
}

}  // namespace

int main(int argc, char** argv) {
  petrel::hq::HqClientOptions options;
  std::string session_file;
  bool zero_rtt = false;
  std::vector<Url> urls;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
    const char* v = nullptr;
    if (a == "--insecure") {
      options.quic.verify_peer = false;
    } else if (a == "--ca" && (v = next())) {
      options.quic.ca_file = v;
    } else if (a == "--session-file" && (v = next())) {
      session_file = v;
    } else if (a == "--0rtt") {
      zero_rtt = true;
    } else if (a == "--key-update") {
      options.key_update = true;
    } else if (a == "--download" && (v = next())) {
      options.download_dir = v;
    } else if (a == "--qlog-dir" && (v = next())) {
      options.quic.qlog_dir = v;
    } else if (a == "--keylog" && (v = next())) {
      options.quic.key_log_file = v;
    } else if (!absl::StartsWith(a, "--")) {
      Url u;
      if (!ParseUrl(a, &u)) return Usage();
      urls.push_back(u);
    } else {
      return Usage();
    }
  }
  if (urls.empty() || options.download_dir.empty()) return Usage();
  if (options.quic.key_log_file.empty()) {
    if (const char* env = std::getenv("SSLKEYLOGFILE")) options.quic.key_log_file = env;
  }
  if (!Resolve(urls[0], &options.quic.server)) {
    std::fprintf(stderr, "petrel-hq-client: cannot resolve %s\n", urls[0].host.c_str());
    return 1;
  }
  options.quic.server_name = urls[0].host;
  for (const Url& u : urls) options.paths.push_back(u.path);
  if (!session_file.empty()) {
    std::string session, params;
    if (ReadSession(session_file, &session, &params)) {
      options.quic.session = session;
      if (zero_rtt) options.quic.transport_params = params;
    }
  }
  options.quic.early_data = zero_rtt;
  absl::StatusOr<petrel::hq::HqClientResult> r = petrel::hq::RunHqClient(options);
  if (!r.ok()) {
    std::fprintf(stderr, "petrel-hq-client: %s\n", r.status().ToString().c_str());
    return 1;
  }
  if (!session_file.empty() && !r->session.empty()) {
    WriteSession(session_file, r->session, r->transport_params);
  }
  std::fprintf(stderr, "petrel-hq-client: %zu of %zu downloaded (resumed=%d, 0-RTT=%d)\n",
               r->completed, options.paths.size(), r->session_reused ? 1 : 0,
               r->early_data_accepted ? 1 : 0);
  return r->completed == options.paths.size() ? 0 : 1;
}
