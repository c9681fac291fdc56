// petrel-server's flags. Abseil flags hold the typed values, defaults and help; the command
// line and the config file are read here so that both share one grammar and every error names
// its key.
#include "server/server_flags.h"

#include <sched.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/flags/reflection.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/host_name.h"
#include "server/listen_address.h"
#include "server/service_manager.h"

ABSL_FLAG(std::string, config, "", "read flags from FILE first: 'key = value' lines, '#' comments");
ABSL_FLAG(std::string, listen, "127.0.0.1,::1",
          "address to listen on: IP (every port) or IP:PORT / [IP6]:PORT (that port only); "
          "repeatable or comma-separated; default ::1 is skipped where there is no IPv6");
ABSL_FLAG(bool, ipv6_only, true,
          "IPv6 addresses take IPv6 only (--no-ipv6-only: '::' takes IPv4 too, one socket for "
          "both)");
ABSL_FLAG(int32_t, https_port, 8443, "TLS port: h1/h2 on TCP and h3 on UDP; 0 disables");
ABSL_FLAG(int32_t, http_port, 8080, "cleartext port: HTTP/1.1 and h2c; 0 disables");
ABSL_FLAG(bool, h3, true, "serve HTTP/3 on the https port (--no-h3 to disable)");
ABSL_FLAG(int32_t, workers, -1,
          "TCP loops and QUIC worker threads; -1: one per core this process may run on (its CPU "
          "affinity, as taskset or a container's cpuset set it) less one (0 on one core: a single "
          "loop for everything)");
ABSL_FLAG(std::string, root, "", "serve the files under DIR (default: the built-in demo site)");
ABSL_FLAG(std::string, cert, "", "PEM certificate chain (with --key; default: self-signed)");
ABSL_FLAG(std::string, key, "", "PEM private key (with --cert)");
ABSL_FLAG(std::string, state_dir, "",
          "where the self-signed certificate is kept (default $PETREL_STATE_DIR, else "
          "$XDG_STATE_HOME/petrel, else ~/.local/state/petrel)");
ABSL_FLAG(std::string, log_level, "info", "debug, info, warning, error or off");
ABSL_FLAG(std::string, log_file, "",
          "append log lines to FILE (default: stderr); SIGUSR1 opens it again (log rotation)");
ABSL_FLAG(std::string, access_log, "off", "off, common or json (one JSON object per line)");
ABSL_FLAG(std::string, access_log_file, "", "where access log lines go (default: stdout)");
ABSL_FLAG(std::string, qlog_dir, "", "write one qlog file per QUIC connection into DIR");
ABSL_FLAG(std::string, keylog_file, "",
          "append TLS secrets in SSLKEYLOGFILE format (default: $SSLKEYLOGFILE if set)");
ABSL_FLAG(std::string, retry, "never",
          "QUIC Retry: never, always (every new client proves its address), auto (under "
          "handshake load)");
ABSL_FLAG(std::string, cc, "cubic", "QUIC congestion control: cubic, reno, bbr or bbr2");
ABSL_FLAG(int64_t, max_connections, 10000, "TCP connections per loop");
ABSL_FLAG(int64_t, max_body, 10 << 20, "request body limit in bytes (413 above it)");
ABSL_FLAG(int64_t, max_header_bytes, 64 * 1024, "request head limit in bytes (431 above it)");
ABSL_FLAG(int32_t, header_timeout, 10,
          "seconds a TCP client may take to send a request head, TLS handshake included (h2, "
          "h3: each request's)");
ABSL_FLAG(
    int32_t, body_timeout, 60,
    "seconds a request body may stall while awaited (h1: 408 or close; h2, h3: stream reset); "
    "0: no limit");
ABSL_FLAG(int32_t, send_timeout, 60,
          "seconds a response may wait for a client that does not read (h1, h2: the connection "
          "closes; h2 shut window, h3: the stream is reset); 0: no limit");
ABSL_FLAG(int32_t, idle_timeout, 60,
          "seconds an idle connection is kept open (h2: with no stream open; h3: QUIC idle)");
ABSL_FLAG(
    int32_t, handshake_timeout, 10,
    "seconds a QUIC handshake may take (lossy paths need more); 0: no limit but the idle one");
ABSL_FLAG(int32_t, grace, 5, "seconds a graceful stop waits for in-flight requests");
ABSL_FLAG(std::string, metrics_listen, "",
          "serve Prometheus metrics at /metrics on HOST:PORT (an admin address; default off)");
ABSL_FLAG(std::string, user, "",
          "once listening, run as this user (name or uid; needs root): ports below 1024 work, "
          "and --qlog-dir must be writable by the user");
ABSL_FLAG(bool, alt_svc, true, "advertise h3 with Alt-Svc on h1/h2 responses over TLS");
ABSL_FLAG(bool, compress, false,
          "compress text responses (HTML, CSS, JS, JSON, SVG, ...) of 1 KiB or more with br or "
          "gzip for clients that accept them");
ABSL_FLAG(bool, precompressed, false,
          "serve FILE.br or FILE.gz, when present beside FILE, to clients that accept br or gzip "
          "(--root and [host] roots)");
ABSL_FLAG(bool, request_id, false,
          "X-Request-Id on every response — the client's if it is a safe one, else a new one — "
          "and in the access log");
ABSL_FLAG(std::string, websocket_echo, "",
          "a WebSocket echo endpoint at this path (e.g. /ws) on every site, over HTTP/1.1, "
          "HTTP/2 and HTTP/3: each message comes back as it came (permessage-deflate for clients "
          "that offer it)");

namespace petrel::server {
namespace {

// The order --help lists them in.
constexpr const char* kFlagOrder[] = {"config",
                                      "listen",
                                      "ipv6_only",
                                      "https_port",
                                      "http_port",
                                      "h3",
                                      "workers",
                                      "root",
                                      "cert",
                                      "key",
                                      "state_dir",
                                      "log_level",
                                      "log_file",
                                      "access_log",
                                      "access_log_file",
                                      "qlog_dir",
                                      "keylog_file",
                                      "retry",
                                      "cc",
                                      "max_connections",
                                      "max_body",
                                      "max_header_bytes",
                                      "header_timeout",
                                      "body_timeout",
                                      "send_timeout",
                                      "idle_timeout",
                                      "handshake_timeout",
                                      "grace",
                                      "metrics_listen",
                                      "alt_svc",
                                      "compress",
                                      "precompressed",
                                      "request_id",
                                      "websocket_echo",
                                      "user"};

// Old spellings petrel-server accepted before it used flags.
std::string Canonical(absl::string_view name) {
  std::string n = absl::StrReplaceAll(name, {{"-", "_"}});
  if (n == "keylog") return "keylog_file";
  return n;
}

bool IsOurs(absl::string_view name) {
  for (const char* f : kFlagOrder) {
    if (name == f) return true;
  }
  return false;
}

absl::CommandLineFlag* Find(absl::string_view name) {
  return IsOurs(name) ? absl::FindCommandLineFlag(name) : nullptr;
}

// Sets flag `name` from text; `where` prefixes errors ("--x" or "config f:3: x"). `listen`
// repeats, so its values are collected in `listens` instead.
absl::Status Set(absl::string_view name, absl::string_view value, const std::string& where,
                 std::vector<std::string>* listens) {
  if (name == "listen") {
    for (absl::string_view v : absl::StrSplit(value, ',', absl::SkipWhitespace())) {
      listens->push_back(std::string(absl::StripAsciiWhitespace(v)));
    }
    return absl::OkStatus();
  }
  absl::CommandLineFlag* flag = Find(name);
  if (flag == nullptr) return absl::InvalidArgumentError(absl::StrCat(where, ": unknown key"));
  std::string error;
  if (!flag->ParseFrom(value, &error)) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": bad value '", value, "': ", error));
  }
  return absl::OkStatus();
}

// One key of a [host ...] section.
absl::Status SetSiteKey(SiteOptions* site, absl::string_view key, absl::string_view value,
                        const std::string& where) {
  if (key == "root") {
    site->root = std::string(value);
  } else if (key == "cert") {
    site->cert = std::string(value);
  } else if (key == "key") {
    site->key = std::string(value);
  } else if (key == "alt_svc") {
    if (!absl::SimpleAtob(value, &site->alt_svc)) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": bad value '", value, "'"));
    }
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": unknown key in a host section (root, cert, key, alt-svc)"));
  }
  return absl::OkStatus();
}

// Checks a finished [host] section: names, root, the certificate pair.
absl::Status CheckSite(const SiteOptions& site, HostTable* all_names) {
  const std::string where =
      absl::StrCat(site.where, ": [host ", absl::StrJoin(site.names, " "), "]");
  if (site.names.empty()) return absl::InvalidArgumentError(absl::StrCat(where, ": no host name"));
  for (const std::string& name : site.names) {
    if (absl::Status s = all_names->Add(name, 0); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": ", s.message()));
    }
  }
  if (site.root.empty()) return absl::InvalidArgumentError(absl::StrCat(where, ": needs root"));
  struct stat st {};
  if (stat(site.root.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": root ", site.root, " is not a directory"));
  }
  if (site.cert.empty() != site.key.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": cert and key go together"));
  }
  for (const std::string* file : {&site.cert, &site.key}) {
    if (!file->empty() && access(file->c_str(), R_OK) != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": cannot read ", *file, ": ", strerror(errno)));
    }
  }
  return absl::OkStatus();
}

absl::Status ReadConfigFile(const std::string& path, std::vector<std::string>* listens,
                            std::vector<SiteOptions>* sites) {
  std::ifstream in(path);
  if (!in) return absl::InvalidArgumentError(absl::StrCat("--config: cannot read ", path));
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    absl::string_view text = absl::StripAsciiWhitespace(line);
    if (text.empty() || text[0] == '#') continue;
    const size_t eq = text.find('=');
    const std::string where = absl::StrCat("config ", path, ":", number);
    if (text.front() == '[') {
      absl::string_view section = text;
      if (!absl::ConsumePrefix(&section, "[") || !absl::ConsumeSuffix(&section, "]") ||
          !absl::ConsumePrefix(&section, "host") ||
          (!section.empty() && !absl::ascii_isspace(section.front()))) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": expected a section '[host NAME...]'"));
      }
      SiteOptions& site = sites->emplace_back();
      site.where = where;
      for (absl::string_view name :
           absl::StrSplit(section, absl::ByAnyChar(" \t,"), absl::SkipWhitespace())) {
        site.names.push_back(std::string(name));
      }
      continue;
    }
    if (eq == absl::string_view::npos) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": expected 'key = value'"));
    }
    const std::string key = Canonical(absl::StripAsciiWhitespace(text.substr(0, eq)));
    absl::string_view value = absl::StripAsciiWhitespace(text.substr(eq + 1));
    if (value.size() >= 2 && value.front() == '"' && value.back() == '"') {
      value = value.substr(1, value.size() - 2);
    }
    if (key == "config") {
      return absl::InvalidArgumentError(absl::StrCat(where, ": config files do not nest"));
    }
    if (!sites->empty()) {
      if (absl::Status s = SetSiteKey(&sites->back(), key, value, absl::StrCat(where, ": ", key));
          !s.ok()) {
        return s;
      }
      continue;
    }
    if (absl::Status s = Set(key, value, absl::StrCat(where, ": ", key), listens); !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

std::string HelpText() {
  std::string out =
      "usage: petrel-server [--flag=value | --flag value]...\n"
      "\n"
      "Serves HTTP/1.1 and HTTP/2 over TCP (cleartext and TLS) and HTTP/3 over UDP from one\n"
      "process. With no flags: the built-in demo site on loopback (127.0.0.1 and ::1), TLS\n"
      "(h1, h2, h3) on 8443 and cleartext (h1, h2c) on 8080, with a self-signed certificate made\n"
      "once in the state directory. SIGINT/SIGTERM stop it gracefully; a second signal stops it\n"
      "at once. SIGHUP reads the config file and every certificate and key file again and\n"
      "applies them to new connections: listen addresses (opened and closed; connections on\n"
      "a closed one go on), certificates, virtual hosts, roots, alt-svc, limits, timeouts, log\n"
      "level, grace; connections already open finish on the settings they began with. The\n"
      "other settings (ports, workers, h3, logs, qlog, retry, cc, metrics) need a restart\n"
      "and keep their values, with a warning. A config, certificate or address that does not\n"
      "load or bind is refused, naming the file, line and key, and the running one stays.\n"
      "SIGUSR1 reopens the log file and the access log file (log rotation).\n"
      "Flag names take '-' or '_' alike; a config file (--config) takes the same keys, and\n"
      "flags on the command line override it.\n"
      "\n"
      "Virtual hosts: sections at the end of the config file, each a site of its own, chosen by\n"
      "the request's Host / :authority (other hosts get the default site); its certificate, if\n"
      "given, goes to TLS clients that ask for one of its names (SNI), over TCP and QUIC:\n"
      "  [host a.example www.a.example *.cdn.a.example]\n"
      "  root = /srv/a             # required\n"
      "  cert = /etc/petrel/a.pem  # optional, with key; default: the server's certificate\n"
      "  key = /etc/petrel/a.key\n"
      "  alt-svc = false           # optional: do not advertise h3\n"
      "A request on a TLS connection whose server name chose another site, for a host that\n"
      "connection's certificate does not cover, gets 421 Misdirected Request.\n\n";
  for (const char* name : kFlagOrder) {
    const absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
    if (flag == nullptr) continue;
    std::string dashed = absl::StrReplaceAll(name, {{"_", "-"}});
    absl::StrAppend(&out, "  --", dashed,
                    "  (default: ", flag->DefaultValue().empty() ? "none" : flag->DefaultValue(),
                    ")\n      ", flag->Help(), "\n");
  }
  absl::StrAppend(&out, "  --version\n      print the versions Petrel was built with\n",
                  "  --help\n      this text\n");
  return out;
}

std::string DefaultStateDir() {
  if (const char* d = std::getenv("PETREL_STATE_DIR"); d != nullptr && *d != '\0') return d;
  if (const char* d = std::getenv("XDG_STATE_HOME"); d != nullptr && *d != '\0') {
    return absl::StrCat(d, "/petrel");
  }
  if (const char* h = std::getenv("HOME"); h != nullptr && *h != '\0') {
    return absl::StrCat(h, "/.local/state/petrel");
  }
  return ".petrel-state";
}

absl::Status Invalid(absl::string_view key, absl::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat("--", absl::StrReplaceAll(key, {{"_", "-"}}), ": ", why));
}

absl::StatusOr<std::optional<uint16_t>> Port(absl::string_view key, int32_t v) {
  if (v < 0 || v > 65535) return Invalid(key, absl::StrCat(v, " is not a port (0..65535)"));
  if (v == 0) return std::optional<uint16_t>();
  return std::optional<uint16_t>(static_cast<uint16_t>(v));
}

// Turns the flags into options, checking each.
absl::StatusOr<ServerOptions> Collect(std::vector<std::string> listens,
                                      std::vector<SiteOptions> sites) {
  ServerOptions o;
  HostTable all_names;
  for (const SiteOptions& site : sites) {
    if (absl::Status s = CheckSite(site, &all_names); !s.ok()) return s;
    VirtualHostConfig host;
    host.names = site.names;
    host.certificate_file = site.cert;
    host.key_file = site.key;
    host.alt_svc = site.alt_svc;
    o.http.hosts.push_back(std::move(host));
  }
  o.sites = std::move(sites);
  HttpServerConfig& c = o.http;
  c.listen = std::move(listens);
  c.ipv6_only = absl::GetFlag(FLAGS_ipv6_only);
  absl::StatusOr<std::optional<uint16_t>> https =
      Port("https_port", absl::GetFlag(FLAGS_https_port));
  if (!https.ok()) return https.status();
  absl::StatusOr<std::optional<uint16_t>> http = Port("http_port", absl::GetFlag(FLAGS_http_port));
  if (!http.ok()) return http.status();
  c.https_port = *https;
  c.http_port = *http;
  if (!c.https_port.has_value() && !c.http_port.has_value()) {
    return Invalid("https_port", "both --https-port and --http-port are 0: nothing to serve");
  }
  if (c.https_port.has_value() && c.http_port == c.https_port) {
    return Invalid("http_port", "must differ from --https-port");
  }
  if (absl::StatusOr<std::vector<ListenAddress>> l =
          ParseListenAddresses(c.listen, c.http_port, c.https_port);
      !l.ok()) {
    return Invalid("listen", l.status().message());
  }
  c.h3 = absl::GetFlag(FLAGS_h3);

  int32_t workers = absl::GetFlag(FLAGS_workers);
  if (workers < -1 || workers > 256) return Invalid("workers", "must be -1 or 0..256");
  o.usable_cores = UsableCores();
  if (workers == -1) workers = o.usable_cores > 1 ? o.usable_cores - 1 : 0;
  c.tcp_loops = workers == 0 ? 1 : static_cast<size_t>(workers);
  c.quic_workers = static_cast<size_t>(workers);

  o.root = absl::GetFlag(FLAGS_root);
  o.compress = absl::GetFlag(FLAGS_compress);
  o.precompressed = absl::GetFlag(FLAGS_precompressed);
  o.request_id = absl::GetFlag(FLAGS_request_id);
  o.websocket_echo = absl::GetFlag(FLAGS_websocket_echo);
  if (!o.websocket_echo.empty() && o.websocket_echo[0] != '/') {
    return Invalid("websocket_echo", "must be a path starting with '/'");
  }
  c.certificate_file = absl::GetFlag(FLAGS_cert);
  c.key_file = absl::GetFlag(FLAGS_key);
  if (c.certificate_file.empty() != c.key_file.empty()) {
    return Invalid(c.certificate_file.empty() ? "cert" : "key", "--cert and --key go together");
  }
  o.state_dir = absl::GetFlag(FLAGS_state_dir);
  if (o.state_dir.empty()) o.state_dir = DefaultStateDir();

  absl::StatusOr<LogLevel> level = ParseLogLevel(absl::GetFlag(FLAGS_log_level));
  if (!level.ok()) return Invalid("log_level", "must be debug, info, warning, error or off");
  o.log_level = *level;
  o.log_file = absl::GetFlag(FLAGS_log_file);

  const std::string access = absl::AsciiStrToLower(absl::GetFlag(FLAGS_access_log));
  if (access == "off") {
    c.access_log = AccessLogFormat::kOff;
  } else if (access == "common") {
    c.access_log = AccessLogFormat::kCommon;
  } else if (access == "json") {
    c.access_log = AccessLogFormat::kJson;
  } else {
    return Invalid("access_log", "must be off, common or json");
  }
  c.access_log_file = absl::GetFlag(FLAGS_access_log_file);

  c.qlog_dir = absl::GetFlag(FLAGS_qlog_dir);
  c.key_log_file = absl::GetFlag(FLAGS_keylog_file);
  if (c.key_log_file.empty()) {
    if (const char* env = std::getenv("SSLKEYLOGFILE"); env != nullptr) c.key_log_file = env;
  }

  const std::string retry = absl::AsciiStrToLower(absl::GetFlag(FLAGS_retry));
  if (retry == "never") {
    c.retry = QuicRetryPolicy::kNever;
  } else if (retry == "always") {
    c.retry = QuicRetryPolicy::kAlways;
  } else if (retry == "auto") {
    c.retry = QuicRetryPolicy::kAuto;
  } else {
    return Invalid("retry", "must be never, always or auto");
  }
  const std::string cc = absl::AsciiStrToLower(absl::GetFlag(FLAGS_cc));
  if (cc == "cubic") {
    c.cc = CongestionControl::kCubic;
  } else if (cc == "reno") {
    c.cc = CongestionControl::kReno;
  } else if (cc == "bbr") {
    c.cc = CongestionControl::kBbr;
  } else if (cc == "bbr2") {
    c.cc = CongestionControl::kBbr2;
  } else {
    return Invalid("cc", "must be cubic, reno, bbr or bbr2");
  }

  const int64_t max_connections = absl::GetFlag(FLAGS_max_connections);
  if (max_connections < 1) return Invalid("max_connections", "must be at least 1");
  c.max_tcp_connections = static_cast<size_t>(max_connections);
  const int64_t max_body = absl::GetFlag(FLAGS_max_body);
  if (max_body < 0) return Invalid("max_body", "must not be negative");
  c.max_request_body = static_cast<uint64_t>(max_body);
  const int64_t max_header = absl::GetFlag(FLAGS_max_header_bytes);
  if (max_header < 1024 || max_header > (16 << 20)) {
    return Invalid("max_header_bytes", "must be between 1024 and 16777216");
  }
  c.max_header_bytes = static_cast<size_t>(max_header);
  const int32_t header_timeout = absl::GetFlag(FLAGS_header_timeout);
  if (header_timeout < 1) return Invalid("header_timeout", "must be at least 1 second");
  c.header_timeout = std::chrono::seconds(header_timeout);
  const int32_t body_timeout = absl::GetFlag(FLAGS_body_timeout);
  if (body_timeout < 0) return Invalid("body_timeout", "must not be negative");
  c.body_timeout = std::chrono::seconds(body_timeout);
  const int32_t send_timeout = absl::GetFlag(FLAGS_send_timeout);
  if (send_timeout < 0) return Invalid("send_timeout", "must not be negative");
  c.send_timeout = std::chrono::seconds(send_timeout);
  const int32_t idle_timeout = absl::GetFlag(FLAGS_idle_timeout);
  if (idle_timeout < 1) return Invalid("idle_timeout", "must be at least 1 second");
  c.idle_timeout = std::chrono::seconds(idle_timeout);
  const int32_t handshake_timeout = absl::GetFlag(FLAGS_handshake_timeout);
  if (handshake_timeout < 0) return Invalid("handshake_timeout", "must not be negative");
  c.quic_handshake_timeout = std::chrono::seconds(handshake_timeout);
  const int32_t grace = absl::GetFlag(FLAGS_grace);
  if (grace < 0) return Invalid("grace", "must not be negative");
  o.grace = std::chrono::seconds(grace);

  c.metrics_listen = absl::GetFlag(FLAGS_metrics_listen);
  if (!c.metrics_listen.empty()) {
    const size_t colon = c.metrics_listen.rfind(':');
    uint32_t port = 0;
    if (colon == std::string::npos ||
        !absl::SimpleAtoi(absl::string_view(c.metrics_listen).substr(colon + 1), &port) ||
        port > 65535) {
      return Invalid("metrics_listen", "expected HOST:PORT, e.g. 127.0.0.1:9100");
    }
    std::string host = c.metrics_listen.substr(0, colon);
    if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
      host = host.substr(1, host.size() - 2);
    }
    if (!SocketAddress::Parse(host, 0).ok()) {
      return Invalid("metrics_listen", absl::StrCat("'", host, "' is not an IP address"));
    }
  }
  c.alt_svc = absl::GetFlag(FLAGS_alt_svc);
  o.user = absl::GetFlag(FLAGS_user);
  if (!o.user.empty()) {
    absl::StatusOr<UserIds> ids = LookUpUser(o.user);
    if (!ids.ok()) return Invalid("user", ids.status().message());
    if (geteuid() != 0 && geteuid() != ids->uid) {
      return Invalid("user", absl::StrCat("only root can switch to user '", o.user, "'"));
    }
  }
  return o;
}

}  // namespace

// A server started under taskset, or in a container limited to a cpuset, that sized its workers
// by the machine's cores would put a master and workers that cannot run at once on one core:
// each datagram handed over would cost a context switch instead of a loop turn.
int UsableCores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    if (const int n = CPU_COUNT(&set); n > 0) return n;
  }
  // A mask wider than cpu_set_t (more than 1024 CPUs) or no affinity support: the machine's.
  return static_cast<int>(std::thread::hardware_concurrency());
}

absl::StatusOr<ServerOptions> ParseServerFlags(int argc, char** argv) {
  // Every flag back to its default, so that a second parse (SIGHUP) sees only what the config
  // file and the command line say now.
  for (const char* name : kFlagOrder) {
    if (absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name); flag != nullptr) {
      std::string error;
      (void)flag->ParseFrom(flag->DefaultValue(), &error);
    }
  }
  std::vector<std::string> file_listens;
  std::vector<std::string> listens;
  std::vector<SiteOptions> sites;
  // The config file first, so that the command line overrides it.
  for (int i = 1; i < argc; ++i) {
    absl::string_view arg = argv[i];
    std::string file;
    if (absl::ConsumePrefix(&arg, "--config=") || absl::ConsumePrefix(&arg, "-config=")) {
      file = std::string(arg);
    } else if ((arg == "--config" || arg == "-config") && i + 1 < argc) {
      file = argv[i + 1];
    } else {
      continue;
    }
    if (absl::Status s = ReadConfigFile(file, &file_listens, &sites); !s.ok()) return s;
  }
  ServerOptions help_or_version;
  for (int i = 1; i < argc; ++i) {
    absl::string_view arg = argv[i];
    if (arg == "--help" || arg == "-h" || arg == "--helpfull" || arg == "-help") {
      help_or_version.help = true;
      help_or_version.help_text = HelpText();
      return help_or_version;
    }
    if (arg == "--version" || arg == "-version") {
      help_or_version.version = true;
      return help_or_version;
    }
    if (!absl::ConsumePrefix(&arg, "--") && !absl::ConsumePrefix(&arg, "-")) {
      return absl::InvalidArgumentError(
          absl::StrCat("unexpected argument '", arg, "' (flags start with --)"));
    }
    std::string name;
    std::optional<std::string> value;
    if (const size_t eq = arg.find('='); eq != absl::string_view::npos) {
      name = Canonical(arg.substr(0, eq));
      value = std::string(arg.substr(eq + 1));
    } else {
      name = Canonical(arg);
    }
    // Booleans: --h3, --no-h3 / --noh3, --h3=false.
    const absl::CommandLineFlag* flag = Find(name);
    if (flag == nullptr && !value.has_value()) {
      absl::string_view negated = name;
      if (absl::ConsumePrefix(&negated, "no_") || absl::ConsumePrefix(&negated, "no")) {
        const absl::CommandLineFlag* b = Find(negated);
        if (b != nullptr && b->IsOfType<bool>()) {
          if (absl::Status s = Set(negated, "false", absl::StrCat("--", argv[i] + 2), &listens);
              !s.ok()) {
            return s;
          }
          continue;
        }
      }
    }
    if (flag == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("--", arg, ": unknown flag"));
    }
    if (!value.has_value()) {
      if (flag->IsOfType<bool>()) {
        value = "true";
      } else if (i + 1 < argc) {
        value = std::string(argv[++i]);
      } else {
        return absl::InvalidArgumentError(absl::StrCat("--", arg, ": needs a value"));
      }
    }
    const std::string where = absl::StrCat("--", absl::StrReplaceAll(name, {{"_", "-"}}));
    if (absl::Status s = Set(name, *value, where, &listens); !s.ok()) return s;
  }
  return Collect(listens.empty() ? std::move(file_listens) : std::move(listens), std::move(sites));
}

}  // namespace petrel::server
