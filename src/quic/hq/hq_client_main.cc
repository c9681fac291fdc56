// petrel-hq-client: the hq-interop client (see kUsage). Every URL must name the same origin; by
// default one connection fetches them all, --multiconnect and --resumption spread them over
// several connections made one after another.
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "quic/hq/hq_client.h"

namespace {

constexpr char kUsage[] =
    "usage: petrel-hq-client [options] --download DIR URL...\n"
    "\n"
    "Fetches each URL (https://HOST:PORT/PATH, IPv6 as https://[::1]:PORT/PATH; all on one\n"
    "origin) over hq-interop (HTTP/0.9 over QUIC) and saves it as DIR/<last path segment>.\n"
    "\n"
    "  --download DIR        where the files go (required)\n"
    "  --insecure            do not verify the server's certificate\n"
    "  --ca FILE             trust the CA certificates in FILE (PEM) instead of the system's\n"
    "  --multiconnect        one connection per URL, one after another\n"
    "  --resumption          two connections: the first URL on the first, the other URLs on a\n"
    "                        second that resumes the first one's TLS session\n"
    "  --0rtt                when resuming (--resumption or --session-file), send the requests\n"
    "                        as 0-RTT early data\n"
    "  --session-file F      resume with the session saved in F if it holds one, and save the\n"
    "                        last session ticket of the run to F\n"
    "  --key-update          start a key update as soon as the handshake is confirmed\n"
    "  --migrate             active migration: after 256 KB of responses, move to a new local\n"
    "                        port at once (skipped if the server's preferred address moved us\n"
    "                        already)\n"
    "  --migrate-probe-first like --migrate, but validate the new path before moving to it\n"
    "  --no-preferred-address  ignore a preferred_address the server offers\n"
    "  --preferred-address-move probe|immediate  how to move to the server's preferred address:\n"
    "                        validate it first (default, RFC 9000 §9.6.1), or move at once from\n"
    "                        a new local port (what the interop runner checks; no fallback)\n"
    "  --keep-alive MS       send a PING after MS milliseconds without a packet from the server\n"
    "                        (default 0: never)\n"
    "  --handshake-timeout MS  give up a handshake after MS milliseconds (default 10000; 0: no\n"
    "                        limit but the idle timeout)\n"
    "  --quic-version v1|v2  version of the first Initial (default v1); v2 is the provisional\n"
    "                        draft code point 0x709a50c4, the one ngtcp2 0.12.1 speaks\n"
    "  --other-versions LIST comma list of versions offered for compatible version negotiation\n"
    "                        (v1, v2; default: every version Petrel speaks)\n"
    "  --ciphers LIST        colon list of the TLS 1.3 suites the connection may use\n"
    "                        (TLS_AES_128_GCM_SHA256, TLS_AES_256_GCM_SHA384,\n"
    "                        TLS_CHACHA20_POLY1305_SHA256). BoringSSL cannot restrict what it\n"
    "                        offers: another negotiated suite fails the run. Without an AES\n"
    "                        suite in LIST the client re-executes itself with OPENSSL_ia32cap\n"
    "                        masking AES-NI, so ChaCha20 is offered first\n"
    "  --chacha20            --ciphers TLS_CHACHA20_POLY1305_SHA256\n"
    "  --qlog-dir D          a qlog file per connection in D\n"
    "  --keylog F            TLS secrets in SSLKEYLOGFILE format (default: $SSLKEYLOGFILE)\n"
    "  -h, --help            this text\n"
    "\n"
    "Exit status: 0 every file downloaded, 1 a connection or a download failed, 2 usage error.\n";

constexpr char kChaCha[] = "TLS_CHACHA20_POLY1305_SHA256";
// Set in the re-executed process so it does not re-execute again.
constexpr char kReexecMarker[] = "PETREL_HQ_CLIENT_CHACHA_REEXEC";
// Clears bit 57 of BoringSSL's capability vector (CPUID.1:ECX bit 25, AES-NI).
constexpr char kNoAesNi[] = "~0x200000000000000";

int Usage() {
  std::fputs(kUsage, stderr);
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

bool ParseVersion(absl::string_view s, uint32_t* out) {
  if (s == "v1" || s == "1") {
    *out = petrel::kQuicVersion1;
  } else if (s == "v2" || s == "2") {
    *out = petrel::kQuicVersion2Draft;
  } else {
    return false;
  }
  return true;
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

// BoringSSL offers ChaCha20 first only when it believes the CPU lacks AES hardware; it reads
// OPENSSL_ia32cap once, before main(), so the process has to start again with it set. Returns
// only when no re-exec is needed or exec failed.
void MaybeReexecForChaCha(const std::vector<std::string>& ciphers, char** argv) {
  if (ciphers.empty() || std::getenv(kReexecMarker) != nullptr) return;
  const bool any_aes = std::any_of(ciphers.begin(), ciphers.end(), [](const std::string& c) {
    return absl::StrContains(c, "AES");
  });
  if (any_aes || std::getenv("OPENSSL_ia32cap") != nullptr) return;  // the user's setting wins
  ::setenv("OPENSSL_ia32cap", kNoAesNi, 1);
  ::setenv(kReexecMarker, "1", 1);
  ::execv("/proc/self/exe", argv);
  std::fprintf(stderr,
               "petrel-hq-client: warning: cannot re-execute (%s); ChaCha20 may not be "
               "offered first\n",
               std::strerror(errno));
}

}  // namespace

int main(int argc, char** argv) {
  petrel::hq::HqClientOptions options;
  options.migrate_after = 256 * 1024;
  std::string session_file;
  bool zero_rtt = false;
  bool multiconnect = false;
  bool resumption = false;
  std::vector<Url> urls;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
    const char* v = nullptr;
    if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (a == "--insecure") {
      options.quic.verify_peer = false;
    } else if (a == "--ca" && (v = next())) {
      options.quic.ca_file = v;
    } else if (a == "--session-file" && (v = next())) {
      session_file = v;
    } else if (a == "--0rtt") {
      zero_rtt = true;
    } else if (a == "--resumption") {
      resumption = true;
    } else if (a == "--multiconnect") {
      multiconnect = true;
    } else if (a == "--key-update") {
      options.key_update = true;
    } else if (a == "--migrate") {
      options.migrate = true;
    } else if (a == "--migrate-probe-first") {
      options.migrate = true;
      options.migrate_probe_first = true;
    } else if (a == "--no-preferred-address") {
      options.quic.use_preferred_address = false;
    } else if (a == "--preferred-address-move" && (v = next())) {
      if (v == absl::string_view("probe")) {
        options.quic.preferred_address_move = petrel::QuicMigration::kProbeFirst;
      } else if (v == absl::string_view("immediate")) {
        options.quic.preferred_address_move = petrel::QuicMigration::kImmediate;
      } else {
        return Usage();
      }
    } else if (a == "--keep-alive" && (v = next())) {
      if (!absl::SimpleAtoi(v, &options.quic.limits.keep_alive_ms)) return Usage();
    } else if (a == "--handshake-timeout" && (v = next())) {
      if (!absl::SimpleAtoi(v, &options.quic.limits.handshake_timeout_ms)) return Usage();
    } else if (a == "--quic-version" && (v = next())) {
      if (!ParseVersion(v, &options.quic.version)) return Usage();
    } else if (a == "--other-versions" && (v = next())) {
      options.quic.other_versions.clear();
      for (absl::string_view s : absl::StrSplit(v, ',', absl::SkipEmpty())) {
        uint32_t ver = 0;
        if (!ParseVersion(s, &ver)) return Usage();
        options.quic.other_versions.push_back(ver);
      }
    } else if (a == "--ciphers" && (v = next())) {
      options.allowed_ciphers = absl::StrSplit(v, ':', absl::SkipEmpty());
      for (const std::string& c : options.allowed_ciphers) {
        if (c != "TLS_AES_128_GCM_SHA256" && c != "TLS_AES_256_GCM_SHA384" && c != kChaCha) {
          return Usage();
        }
      }
    } else if (a == "--chacha20") {
      options.allowed_ciphers = {kChaCha};
    } else if (a == "--download" && (v = next())) {
      options.download_dir = v;
    } else if (a == "--qlog-dir" && (v = next())) {
      options.quic.qlog_dir = v;
    } else if (a == "--keylog" && (v = next())) {
      options.quic.key_log_file = v;
    } else if (!absl::StartsWith(a, "-")) {
      Url u;
      if (!ParseUrl(a, &u)) return Usage();
      urls.push_back(u);
    } else {
      return Usage();
    }
  }
  if (urls.empty() || options.download_dir.empty() || (multiconnect && resumption)) {
    return Usage();
  }
  for (const Url& u : urls) {
    if (u.host != urls[0].host || u.port != urls[0].port) {
      std::fprintf(stderr, "petrel-hq-client: every URL must name the same host and port\n");
      return 2;
    }
  }
  MaybeReexecForChaCha(options.allowed_ciphers, argv);
  if (options.quic.key_log_file.empty()) {
    if (const char* env = std::getenv("SSLKEYLOGFILE")) options.quic.key_log_file = env;
  }
  if (!Resolve(urls[0], &options.quic.server)) {
    std::fprintf(stderr, "petrel-hq-client: cannot resolve %s\n", urls[0].host.c_str());
    return 1;
  }
  options.quic.server_name = urls[0].host;

  // Which URLs each connection fetches, in order.
  std::vector<std::vector<std::string>> groups;
  if (multiconnect) {
    for (const Url& u : urls) groups.push_back({u.path});
  } else if (resumption && urls.size() > 1) {
    groups.push_back({urls[0].path});
    groups.emplace_back();
    for (size_t i = 1; i < urls.size(); ++i) groups.back().push_back(urls[i].path);
  } else {
    groups.emplace_back();
    for (const Url& u : urls) groups.back().push_back(u.path);
  }

  std::string session, params;
  if (!session_file.empty()) ReadSession(session_file, &session, &params);
  size_t completed = 0;
  bool ok = true;
  for (size_t g = 0; g < groups.size(); ++g) {
    petrel::hq::HqClientOptions o = options;
    o.paths = groups[g];
    // Resume whatever an earlier connection (or the session file) left.
    const bool resume = resumption || !session_file.empty();
    o.quic.session = resume ? session : std::string();
    o.quic.transport_params = resume && zero_rtt ? params : std::string();
    o.quic.early_data = zero_rtt;
    // A connection that a later one resumes must not end before its ticket arrived.
    o.wait_for_session =
        (resumption && g + 1 < groups.size()) || (!session_file.empty() && g + 1 == groups.size());
    absl::StatusOr<petrel::hq::HqClientResult> r = petrel::hq::RunHqClient(o);
    if (!r.ok()) {
      std::fprintf(stderr, "petrel-hq-client: %s\n", r.status().ToString().c_str());
      return 1;
    }
    if (!r->session.empty()) {
      session = r->session;
      params = r->transport_params;
    }
    std::fprintf(stderr,
                 "petrel-hq-client: connection %zu: %zu of %zu downloaded (version 0x%08x, %s, "
                 "resumed=%d, 0-RTT=%d, key update=%d, migrated=%d, server %s)\n",
                 g + 1, r->completed, o.paths.size(), r->version, r->cipher.c_str(),
                 r->session_reused ? 1 : 0, r->early_data_accepted ? 1 : 0,
                 r->key_update_initiated ? 1 : 0, r->migrated ? 1 : 0,
                 r->remote.ToString().c_str());
    completed += r->completed;
    if (r->cipher_rejected || r->completed != o.paths.size()) ok = false;
    if (resumption && g > 0 && !r->session_reused) {
      std::fprintf(stderr, "petrel-hq-client: connection %zu did not resume the session\n", g + 1);
      ok = false;
    }
    if (!ok) break;
  }
  if (!session_file.empty() && !session.empty()) WriteSession(session_file, session, params);
  std::fprintf(stderr, "petrel-hq-client: %zu of %zu downloaded\n", completed, urls.size());
  return ok ? 0 : 1;
}
