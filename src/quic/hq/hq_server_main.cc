// petrel-hq-server: the hq-interop file server.
//   petrel-hq-server --listen ADDR:PORT --root DIR [--workers N] [--cert F --key F]
//                    [--retry never|always|auto] [--qlog-dir D] [--keylog F] [--gso 0|1]
#include <pthread.h>
#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "quic/hq/hq_server.h"

namespace {

int Usage() {
  std::fprintf(stderr,
               "usage: petrel-hq-server --listen ADDR:PORT --root DIR [--workers N] "
               "[--cert F --key F] [--retry never|always|auto] [--qlog-dir D] [--keylog F] "
               "[--gso 0|1]\n");
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
    if (a == "--listen" && (v = next())) {
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
