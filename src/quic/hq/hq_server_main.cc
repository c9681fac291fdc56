// petrel-hq-server: the hq-interop file server (see kUsage).
#include <pthread.h>
#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "quic/hq/hq_server.h"

namespace {

constexpr char kUsage[] =
    "usage: petrel-hq-server --listen ADDR:PORT [--listen ADDR:PORT]... --root DIR [options]\n"
    "\n"
    "Serves the files under DIR over hq-interop (HTTP/0.9 over QUIC) until SIGINT/SIGTERM.\n"
    "\n"
    "  --listen ADDR:PORT    a UDP socket (repeatable; IPv6 as [::]:443); port 0 picks one\n"
    "  --root DIR            the files served (required)\n"
    "  --workers N           worker threads (default 0: everything on one thread)\n"
    "  --cert F --key F      certificate chain (PEM, leaf first) and key; default: self-signed\n"
    "  --retry never|always|auto  send a Retry to new connections (default never)\n"
    "  --preferred-address ADDR:PORT  offer this preferred_address to clients (RFC 9000\n"
    "                        section 9.6); the server listens there too. Port 0 picks one\n"
    "  --versions LIST       comma list of QUIC versions in order of preference (v1, v2; v2 is\n"
    "                        the provisional draft code point 0x709a50c4); a client offering a\n"
    "                        preferred one is moved to it by compatible version negotiation.\n"
    "                        Default: v1,v2\n"
    "  --qlog-dir D          a qlog file per connection in D\n"
    "  --keylog F            TLS secrets in SSLKEYLOGFILE format (default: $SSLKEYLOGFILE)\n"
    "  --gso 0|1             segmentation offload for sends (default 1)\n"
    "  --handshake-timeout MS  close a connection whose handshake takes longer (default\n"
    "                        10000; 0: no limit but the idle timeout)\n"
    "  -h, --help            this text\n";

int Usage() {
  std::fputs(kUsage, stderr);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  petrel::QuicServerConfig config;
  std::string root;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
    const char* v = nullptr;
    if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (a == "--listen" && (v = next())) {
      auto addr = petrel::SocketAddress::ParseHostPort(v);
      if (!addr.ok()) return Usage();
      config.listen.push_back(*addr);
    } else if (a == "--root" && (v = next())) {
      root = v;
    } else if (a == "--workers" && (v = next())) {
      config.workers = static_cast<size_t>(std::atoi(v));
    } else if (a == "--cert" && (v = next())) {
      config.certificate_file = v;
    } else if (a == "--key" && (v = next())) {
      config.key_file = v;
    } else if (a == "--qlog-dir" && (v = next())) {
      config.qlog_dir = v;
    } else if (a == "--keylog" && (v = next())) {
      config.key_log_file = v;
    } else if (a == "--preferred-address" && (v = next())) {
      auto addr = petrel::SocketAddress::ParseHostPort(v);
      if (!addr.ok()) return Usage();
      config.preferred_address = *addr;
    } else if (a == "--versions" && (v = next())) {
      for (absl::string_view s : absl::StrSplit(v, ',', absl::SkipEmpty())) {
        if (s == "v1" || s == "1") {
          config.versions.push_back(petrel::kQuicVersion1);
        } else if (s == "v2" || s == "2") {
          config.versions.push_back(petrel::kQuicVersion2Draft);
        } else {
          return Usage();
        }
      }
    } else if (a == "--handshake-timeout" && (v = next())) {
      if (!absl::SimpleAtoi(v, &config.limits.handshake_timeout_ms)) return Usage();
    } else if (a == "--gso" && (v = next())) {
      config.gso = std::string(v) != "0";
    } else if (a == "--retry" && (v = next())) {
      const std::string r = v;
      if (r == "never") {
        config.retry = petrel::QuicRetryPolicy::kNever;
      } else if (r == "always") {
        config.retry = petrel::QuicRetryPolicy::kAlways;
      } else if (r == "auto") {
        config.retry = petrel::QuicRetryPolicy::kAuto;
      } else {
        return Usage();
      }
    } else {
      return Usage();
    }
  }
  if (config.listen.empty() || root.empty()) return Usage();
  if (config.key_log_file.empty()) {
    if (const char* env = std::getenv("SSLKEYLOGFILE")) config.key_log_file = env;
  }

  // SIGINT/SIGTERM stop the server gracefully, from a thread that waits for them.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);

  auto hq = petrel::hq::HqServer::Create(std::move(config), root);
  if (!hq.ok()) {
    std::fprintf(stderr, "petrel-hq-server: %s\n", hq.status().ToString().c_str());
    return 1;
  }
  petrel::QuicServer& server = (*hq)->server();
  std::thread signals([&server, set] {
    int sig = 0;
    sigwait(&set, &sig);
    server.Stop();
  });
  signals.detach();
  for (const auto& a : server.local_addresses()) {
    std::fprintf(stderr, "petrel-hq-server: listening on %s\n", a.ToString().c_str());
  }
  const absl::Status st = server.Run();
  if (!st.ok()) {
    std::fprintf(stderr, "petrel-hq-server: %s\n", st.ToString().c_str());
    return 1;
  }
  return 0;
}
