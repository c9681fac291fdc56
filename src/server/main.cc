// petrel-server: serves a directory (or, without --root, the built-in demo site) over HTTP/1.1
// and HTTP/2 on TCP and HTTP/3 on UDP from one process, until SIGINT or SIGTERM, which stop it
// gracefully (a second one stops it at once).
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "petrel/common/log.h"
#include "petrel/http/compression.h"
#include "petrel/http/http_server.h"
#include "petrel/http/request_id.h"
#include "petrel/http/static_files.h"
#include "petrel/version.h"
#include "server/demo_site.h"
#include "server/inherited_sockets.h"
#include "server/log_file.h"
#include "server/self_signed_store.h"
#include "server/server_flags.h"
#include "server/service_manager.h"
#include "server/websocket_echo.h"

namespace {

uint64_t MonotonicMicros() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000u + static_cast<uint64_t>(ts.tv_nsec) / 1000u;
}

int Fail(const std::string& message) {
  std::fprintf(stderr, "petrel-server: %s\n(see --help)\n", message.c_str());
  return 2;
}

// With no --cert: the self-signed certificate kept in the state directory (made once).
absl::Status UseStoredCertificate(petrel::server::ServerOptions& options, bool announce) {
  petrel::HttpServerConfig& config = options.http;
  if (!config.certificate_file.empty() || !config.https_port.has_value()) return absl::OkStatus();
  const std::vector<std::string> names = {"localhost", "127.0.0.1", "::1"};
  absl::StatusOr<petrel::server::StoredCertificate> stored =
      petrel::server::LoadOrCreateSelfSigned(options.state_dir, names);
  if (!stored.ok()) {
    return absl::Status(stored.status().code(),
                        absl::StrCat("--state-dir: ", stored.status().message()));
  }
  config.certificate_file = stored->certificate_file;
  config.key_file = stored->key_file;
  if (announce) {
    std::printf(
        "petrel-server: %s self-signed certificate %s (for %s)\n"
        "petrel-server: trust it with e.g. curl --cacert %s https://localhost:%u/\n",
        stored->created ? "created" : "using the", stored->certificate_file.c_str(),
        absl::StrJoin(names, ", ").c_str(), stored->certificate_file.c_str(),
        static_cast<unsigned>(*config.https_port));
  }
  return absl::OkStatus();
}

// Sockets a service manager handed over (LISTEN_FDS) serve in place of binding; with no
// --listen, the server listens on exactly their addresses.
void UseInheritedSockets(const std::vector<petrel::server::InheritedSocket>& sockets,
                         petrel::server::ServerOptions& options) {
  if (sockets.empty()) return;
  petrel::HttpServerConfig& config = options.http;
  config.listen_fds.clear();
  for (const petrel::server::InheritedSocket& s : sockets) config.listen_fds.push_back(s.fd);
  if (!config.listen.empty()) return;
  for (const petrel::server::InheritedSocket& s : sockets) {
    std::string entry = s.address.ToString();
    if (std::find(config.listen.begin(), config.listen.end(), entry) == config.listen.end()) {
      config.listen.push_back(std::move(entry));
    }
  }
}

// The middleware the flags ask for, on a site's router, outermost first: the request id, so
// every response and log line has one; compression inside it.
void UseMiddleware(const petrel::server::ServerOptions& options, petrel::Router& router) {
  if (options.request_id) router.Use(petrel::RequestIdMiddleware());
  if (options.compress) router.Use(petrel::CompressionMiddleware());
}

// The demo site (or --root) for every host no [host] section names, and each section's root;
// the WebSocket echo (before the files' catch-all) on each.
absl::Status AddRoutes(const petrel::server::ServerOptions& options, petrel::HttpRoutes& routes) {
  petrel::StaticFilesOptions files;
  files.precompressed = options.precompressed;
  UseMiddleware(options, routes.router());
  if (!options.websocket_echo.empty()) {
    if (absl::Status s = petrel::server::AddWebSocketEcho(routes.router(), options.websocket_echo);
        !s.ok()) {
      return s;
    }
  }
  if (options.root.empty()) {
    if (absl::Status s = petrel::server::AddDemoSite(routes.router()); !s.ok()) {
      return absl::Status(s.code(), absl::StrCat("demo site: ", s.message()));
    }
  } else if (absl::Status s = routes.router().Get("/*", petrel::StaticFiles(options.root, files));
             !s.ok()) {
    return absl::Status(s.code(), absl::StrCat("--root: ", s.message()));
  }
  for (const petrel::server::SiteOptions& site : options.sites) {
    petrel::Router& router = routes.Host(site.names[0]);
    UseMiddleware(options, router);
    if (!options.websocket_echo.empty()) {
      if (absl::Status s = petrel::server::AddWebSocketEcho(router, options.websocket_echo);
          !s.ok()) {
        return s;
      }
    }
    if (absl::Status s = router.Get("/*", petrel::StaticFiles(site.root, files)); !s.ok()) {
      return absl::Status(
          s.code(), absl::StrCat(site.where, ": [host ", site.names[0], "] root: ", s.message()));
    }
  }
  return absl::OkStatus();
}

std::string SitesSummary(const petrel::server::ServerOptions& options) {
  const size_t n = options.sites.size();
  return n == 0 ? std::string() : absl::StrCat(", ", n, " virtual host", n == 1 ? "" : "s");
}

// "listening on ADDRESSES: PORTS, SITE": the line the server prints when it starts, and again
// when a reload changes it.
std::string Listening(const petrel::HttpServer& server,
                      const petrel::server::ServerOptions& options) {
  // Port 0 means the listener is off; say so rather than print a port nobody can reach.
  const std::string http = server.http_port() == 0
                               ? std::string("http off")
                               : absl::StrCat("http ", server.http_port(), " (h1, h2c)");
  const std::string https = server.https_port() == 0
                                ? std::string("https off")
                                : absl::StrCat("https ", server.https_port(), " (h1, h2",
                                               options.http.h3 ? ", h3 on UDP" : "", ")");
  std::vector<std::string> hosts;
  for (const petrel::SocketAddress& a : server.local_addresses()) {
    const std::string host = a.is_v6() ? absl::StrCat("[", a.HostString(), "]") : a.HostString();
    if (std::find(hosts.begin(), hosts.end(), host) == hosts.end()) hosts.push_back(host);
  }
  return absl::StrCat("listening on ", absl::StrJoin(hosts, ", "), ": ", http, ", ", https,
                      options.root.empty() ? ", demo site" : absl::StrCat(", root ", options.root),
                      SitesSummary(options),
                      options.user.empty() ? "" : absl::StrCat(", as ", options.user));
}

// The threads that serve, as --workers chose them: "1 TCP loop, QUIC master + 1 worker (2 usable
// cores)"; "QUIC on one loop" when the master also serves (--workers 0); nothing about QUIC
// when it does not run.
std::string Threads(const petrel::HttpServer& server,
                    const petrel::server::ServerOptions& options) {
  const petrel::HttpServerConfig& config = options.http;
  const auto count = [](size_t n, absl::string_view what) {
    return absl::StrCat(n, " ", what, n == 1 ? "" : "s");
  };
  std::string quic;
  if (config.h3 && server.https_port() != 0) {
    quic = config.quic_workers == 0
               ? ", QUIC on one loop"
               : absl::StrCat(", QUIC master + ", count(config.quic_workers, "worker"));
  }
  return absl::StrCat("threads: ", count(config.tcp_loops, "TCP loop"), quic, " (",
                      count(static_cast<size_t>(options.usable_cores), "usable core"), ")");
}

// SIGHUP: reads the config file and every certificate again and applies them; what only a
// restart can change keeps its running value, with a warning. `running` becomes the new options
// when they take.
void Reload(int argc, char** argv, const std::vector<petrel::server::InheritedSocket>& inherited,
            petrel::HttpServer& server, petrel::server::ServerOptions& running) {
  absl::StatusOr<petrel::server::ServerOptions> next = petrel::server::ParseServerFlags(argc, argv);
  absl::Status s = next.ok() ? UseStoredCertificate(*next, /*announce=*/false) : next.status();
  if (s.ok()) UseInheritedSockets(inherited, *next);
  std::vector<std::string> fixed;
  if (s.ok()) {
    fixed = petrel::RestartOnlyChanges(running.http, next->http);
    if (next->state_dir != running.state_dir) fixed.push_back("state_dir");
    if (next->user != running.user) fixed.push_back("user");
    if (next->log_file != running.log_file) fixed.push_back("log_file");
    next->http = petrel::KeepRestartOnly(running.http, std::move(next->http));
    petrel::HttpRoutes routes;
    s = AddRoutes(*next, routes);
    if (s.ok()) s = server.Reload(next->http, std::move(routes));
  }
  if (!s.ok()) {
    std::printf(
        "petrel-server: SIGHUP, NOT reloaded, the running configuration and certificates "
        "stay: %s\n",
        std::string(s.message()).c_str());
    return;
  }
  next->state_dir = running.state_dir;
  next->user = running.user;
  next->log_file = running.log_file;
  petrel::SetLogLevel(next->log_level);
  running = *std::move(next);
  std::printf(
      "petrel-server: SIGHUP, reloaded: certificates read again%s; new connections and "
      "requests use them\n",
      SitesSummary(running).c_str());
  if (!fixed.empty()) {
    std::printf(
        "petrel-server: SIGHUP: changed settings that need a restart keep their running "
        "values: %s\n",
        absl::StrJoin(fixed, ", ").c_str());
  }
}

}  // namespace

int main(int argc, char** argv) {
  // Blocked first of all: a stop that arrives while the server is still starting (a slow
  // config file, a service manager that gives up waiting) waits for sigwait below and stops
  // the server gracefully instead of killing it half-started. Every thread the server starts
  // inherits this mask; only sigwait sees the signals.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  sigset_t all_signals = stop_signals;
  sigaddset(&all_signals, SIGHUP);   // read the config file and the certificates again
  sigaddset(&all_signals, SIGUSR1);  // reopen the log files (log rotation)
  pthread_sigmask(SIG_BLOCK, &all_signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  // Before anything else opens a descriptor or reads the environment.
  const std::vector<int> listen_fds = petrel::server::TakeListenFds();
  absl::StatusOr<petrel::server::ServerOptions> parsed =
      petrel::server::ParseServerFlags(argc, argv);
  if (!parsed.ok()) return Fail(std::string(parsed.status().message()));
  petrel::server::ServerOptions& options = *parsed;
  if (options.help) {
    std::fputs(options.help_text.c_str(), stdout);
    return 0;
  }
  if (options.version) {
    std::printf("%s\n", petrel::VersionLine().c_str());
    return 0;
  }
  petrel::SetLogLevel(options.log_level);
  if (!options.log_file.empty()) {
    if (absl::Status s = petrel::server::OpenLogFile(options.log_file); !s.ok()) {
      return Fail(absl::StrCat("--log-file: ", s.message()));
    }
  }
  const petrel::server::ServiceNotifier notifier =
      petrel::server::ServiceNotifier::FromEnvironment();
  petrel::HttpServerConfig& config = options.http;

  if (absl::Status s = UseStoredCertificate(options, /*announce=*/true); !s.ok()) {
    return Fail(std::string(s.message()));
  }
  std::vector<petrel::server::InheritedSocket> inherited;
  for (int fd : listen_fds) {
    absl::StatusOr<petrel::server::InheritedSocket> s = petrel::server::DescribeSocket(fd);
    if (!s.ok()) return Fail(absl::StrCat("LISTEN_FDS: ", s.status().message()));
    inherited.push_back(*s);
  }
  UseInheritedSockets(inherited, options);

  petrel::HttpServer server(config);
  if (absl::Status s = AddRoutes(options, server.routes()); !s.ok()) {
    return Fail(std::string(s.message()));
  }

  if (absl::Status s = server.Start(); !s.ok()) {
    return Fail(absl::StrCat("cannot start: ", s.ToString()));
  }
  // Everything that needs root (ports below 1024, the key, the log files) is open by now.
  if (!options.user.empty()) {
    absl::StatusOr<petrel::server::UserIds> ids = petrel::server::LookUpUser(options.user);
    absl::Status s = ids.ok() ? petrel::server::RunAs(*ids) : ids.status();
    if (s.ok() && !config.qlog_dir.empty() && access(config.qlog_dir.c_str(), W_OK) != 0) {
      s = absl::PermissionDeniedError(
          absl::StrCat("--qlog-dir ", config.qlog_dir, " is not writable by ", options.user));
    }
    if (!s.ok()) {
      server.Stop(petrel::Duration::zero());
      server.Wait();
      return Fail(absl::StrCat("--user: ", s.message()));
    }
  }
  std::string listening = Listening(server, options);
  std::printf("petrel-server: %s\n", listening.c_str());
  std::printf("petrel-server: %s\n", Threads(server, options).c_str());
  std::fflush(stdout);
  if (absl::Status s =
          notifier.Notify(absl::StrCat("READY=1\nMAINPID=", getpid(), "\nSTATUS=", listening));
      !s.ok()) {
    PETREL_LOG(kWarning, "petrel-server: cannot tell the service manager: %s", s.ToString());
  }
  int sig = 0;
  while (sigwait(&all_signals, &sig) == 0 && (sig == SIGHUP || sig == SIGUSR1)) {
    if (sig == SIGUSR1) {
      absl::Status s = server.ReopenLogs();
      if (s.ok() && !options.log_file.empty()) {
        s = petrel::server::OpenLogFile(options.log_file);
        if (s.ok()) PETREL_LOG(kInfo, "petrel-server: log file reopened (SIGUSR1)");
      }
      std::printf("petrel-server: SIGUSR1, logs reopened%s\n",
                  s.ok() ? "" : absl::StrCat(": FAILED, ", s.message()).c_str());
    } else {
      (void)notifier.Notify(absl::StrCat("RELOADING=1\nMONOTONIC_USEC=", MonotonicMicros()));
      Reload(argc, argv, inherited, server, options);
      if (std::string now = Listening(server, options); now != listening) {
        listening = std::move(now);
        std::printf("petrel-server: SIGHUP: now %s\n", listening.c_str());
      }
      (void)notifier.Notify(absl::StrCat("READY=1\nSTATUS=", listening));
    }
    std::fflush(stdout);
  }
  const auto grace_s = std::chrono::duration_cast<std::chrono::seconds>(options.grace).count();
  std::printf("petrel-server: %s, stopping (grace %lld s; signal again to stop at once)\n",
              strsignal(sig), static_cast<long long>(grace_s));
  std::fflush(stdout);
  (void)notifier.Notify(absl::StrCat("STOPPING=1\nSTATUS=stopping on ", strsignal(sig)));
  std::thread([stop_signals] {
    int again = 0;
    sigwait(&stop_signals, &again);
    std::fprintf(stderr, "petrel-server: %s again, exiting now\n", strsignal(again));
    _exit(1);
  }).detach();
  server.Stop(options.grace);
  server.Wait();
  std::printf("petrel-server: stopped\n");
  return 0;
}
