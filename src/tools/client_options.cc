#include "tools/client_options.h"

#include <algorithm>
#include <limits>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "petrel/quic/quic_connection.h"

namespace petrel::tools {

const char kClientUsage[] =
    "usage: petrel-client [options] URL...\n"
    "\n"
    "Fetches URLs over HTTP/3 (QUIC), all on one connection to the first URL's host:port; every\n"
    "URL must name the same host and port.\n"
    "\n"
    "  --http3              speak HTTP/3 (the default and the only protocol; accepted for\n"
    "                       curl compatibility)\n"
    "  -X, --request METHOD request method (default GET, or POST with -d)\n"
    "  -d, --data STRING    send STRING as the request body; -d @FILE streams FILE (a regular\n"
    "                       file) instead. Implies POST unless -X is given\n"
    "  -H, --header 'NAME: VALUE'  add a request header field (repeatable)\n"
    "  -o, --output FILE    write the body to FILE (only with one URL)\n"
    "  --download DIR       write each body to DIR/<URL path> (query dropped, \"index.html\" for\n"
    "                       a path ending in '/', parent directories created; \".\" and \"..\"\n"
    "                       segments are refused). Without -o or --download the bodies go to\n"
    "                       stdout, in URL order (later ones are buffered in memory meanwhile)\n"
    "  --parallel N         at most N requests in flight (default: all at once)\n"
    "  --limit-rate RATE    read each response body at most RATE bytes per second (suffix k, m\n"
    "                       or g for KiB, MiB, GiB, as curl); the server's flow control holds\n"
    "                       the rest back, so a server sees a slow reader\n"
    "  -k, --insecure       do not verify the server's certificate\n"
    "  --cacert FILE        trust the CA certificates in FILE (PEM) instead of the system's\n"
    "  --session-file F     resume with the TLS session saved in F, if F holds one, and save the\n"
    "                       newest session ticket the server sends to F (written to a temporary\n"
    "                       file, then renamed). Format: the line \"petrel-session 1\", then\n"
    "                       \"session N\" and \"transport-params M\" lines, each followed by\n"
    "                       exactly N (M) raw bytes and a newline\n"
    "  --0rtt               with a resumed session, send the requests as 0-RTT early data\n"
    "  --quic-version v1|v2 version of the first Initial (default v1); the other one is offered\n"
    "                       for compatible version negotiation. v2 is the provisional draft code\n"
    "                       point 0x709a50c4 (what ngtcp2 0.12.1 speaks), not RFC 9369's\n"
    "  --ciphers LIST       colon-separated TLS 1.3 suites the connection may use:\n"
    "                       TLS_AES_128_GCM_SHA256, TLS_AES_256_GCM_SHA384,\n"
    "                       TLS_CHACHA20_POLY1305_SHA256. BoringSSL cannot restrict what it\n"
    "                       offers, so this is enforced after the handshake: a negotiated suite\n"
    "                       outside LIST fails the run (exit 35). When LIST has no AES-GCM suite\n"
    "                       the client re-executes itself with OPENSSL_ia32cap masking AES-NI, so\n"
    "                       BoringSSL offers ChaCha20 first (the server may still pick AES)\n"
    "  --key-update         start a TLS key update as soon as the handshake is confirmed (at\n"
    "                       the first response bytes)\n"
    "  --keylog-file F      append the TLS secrets to F in SSLKEYLOGFILE format (default: the\n"
    "                       file the SSLKEYLOGFILE environment variable names, if any)\n"
    "  --qlog-dir DIR       write a qlog file of the connection into DIR (created if missing)\n"
    "  --keep-alive MS      send a PING after MS milliseconds without a packet from the server\n"
    "                       (default 0: never)\n"
    "  --preferred-address-move probe|immediate  how to move to a preferred_address the\n"
    "                       server offers: validate it first (default, RFC 9000 §9.6.1), or move\n"
    "                       at once from a new local port (what the QUIC interop runner checks;\n"
    "                       no fallback if the address does not answer)\n"
    "  --timeout SECONDS    deadline for the whole run (default 30); on expiry: exit 28\n"
    "  --connect-to ADDR:PORT  send to this IP address and port instead of resolving the URL's\n"
    "                       host (which stays the TLS server name and :authority)\n"
    "  -v, --verbose        print the QUIC version, TLS cipher, ALPN, whether the session was\n"
    "                       resumed and 0-RTT accepted, and each request's status, to stderr\n"
    "  --websocket          open a WebSocket at the one URL (https:// or wss://) by extended\n"
    "                       CONNECT (RFC 9220) instead of fetching it: each line of stdin\n"
    "                       (UTF-8; without its LF or CRLF) goes as a text message, and each\n"
    "                       message received is written to stdout followed by a newline,\n"
    "                       binary ones as they are. At the end of stdin the client closes with\n"
    "                       1000 and waits for the server's close; --timeout bounds the\n"
    "                       opening and that wait, not the time in between. Excludes -d, -X,\n"
    "                       -o, --download, --parallel, --limit-rate and --0rtt\n"
    "  --ws-protocol NAME   with --websocket, offer subprotocol NAME (repeatable, best first;\n"
    "                       -v prints the one chosen)\n"
    "  -h, --help           this text\n"
    "\n"
    "The URL's host is resolved with getaddrinfo (first address) and is the TLS server name.\n"
    "\n"
    "Exit status (a request with HTTP status >= 400 fails, as with curl -f; its body is not\n"
    "written; 1xx-3xx succeed): 0 all requests succeeded; 1 the client could not start (e.g. a\n"
    "bad --cacert); 2 usage error; 6 the host did not\n"
    "resolve; 7 no connection (handshake never completed); 22 some response had status >= 400;\n"
    "23 writing output failed; 26 reading the -d file failed; 28 --timeout expired; 35 the\n"
    "negotiated cipher is not in --ciphers; 56 a request failed after connecting (stream reset,\n"
    "connection lost, malformed response). With several failures, the first one's status.\n"
    "With --websocket: 0 the WebSocket closed with 1000 (whichever side started); 22 the server\n"
    "refused the opening (not 200); 56 any other end (another close code, a reset stream, the\n"
    "connection lost); 7, 23, 28 as above.\n";

namespace {

absl::Status Usage(absl::string_view message) {
  return absl::InvalidArgumentError(std::string(message));
}

absl::Status ParseHeader(absl::string_view text, ClientOptions* out) {
  const size_t colon = text.find(':');
  if (colon == absl::string_view::npos || colon == 0) {
    return Usage(absl::StrCat("-H wants 'name: value', got '", text, "'"));
  }
  const absl::string_view name = text.substr(0, colon);
  for (char c : name) {
    if (c <= ' ' || c >= 0x7f) return Usage(absl::StrCat("bad header name '", name, "'"));
  }
  out->headers.emplace_back(std::string(name),
                            std::string(absl::StripAsciiWhitespace(text.substr(colon + 1))));
  return absl::OkStatus();
}

absl::Status ParseCiphers(absl::string_view list, ClientOptions* out) {
  out->ciphers.clear();
  for (absl::string_view name : absl::StrSplit(list, ':')) {
    if (std::find(std::begin(kTls13Suites), std::end(kTls13Suites), name) ==
        std::end(kTls13Suites)) {
      return Usage(absl::StrCat("unknown TLS 1.3 cipher suite '", name,
                                "' (known: ", absl::StrJoin(kTls13Suites, ", "), ")"));
    }
    out->ciphers.emplace_back(name);
  }
  return absl::OkStatus();
}

// Checks that need every option: conflicts and the one-origin rule.
absl::Status Validate(ClientOptions* o) {
  if (o->help) return absl::OkStatus();
  if (o->urls.empty()) return Usage("no URL given");
  if (!o->output_file.empty() && !o->download_dir.empty()) {
    return Usage("-o and --download exclude each other");
  }
  if (!o->output_file.empty() && o->urls.size() != 1) return Usage("-o takes exactly one URL");
  if (o->early_data && o->session_file.empty()) return Usage("--0rtt needs --session-file");
  if (!o->ws_protocols.empty() && !o->websocket) return Usage("--ws-protocol needs --websocket");
  if (o->websocket) {
    if (o->urls.size() != 1) return Usage("--websocket takes exactly one URL");
    const char* other = o->has_body                ? "-d"
                        : !o->method.empty()       ? "-X"
                        : !o->output_file.empty()  ? "-o"
                        : !o->download_dir.empty() ? "--download"
                        : o->parallel != 0         ? "--parallel"
                        : o->limit_rate != 0       ? "--limit-rate"
                        : o->early_data            ? "--0rtt"
                                                   : nullptr;
    if (other != nullptr) return Usage(absl::StrCat("--websocket excludes ", other));
  }
  const Url& first = o->urls.front();
  for (const Url& url : o->urls) {
    if (url.scheme == "wss" && !o->websocket) return Usage("wss:// URLs need --websocket");
    if (url.scheme != "https" && url.scheme != "wss") {
      return Usage(absl::StrCat("HTTP/3 needs https:// URLs, got ", url.scheme, "://"));
    }
    if (absl::AsciiStrToLower(url.host) != absl::AsciiStrToLower(first.host) ||
        url.port != first.port) {
      return Usage(absl::StrCat("every URL must be on ", first.host, ":", first.port,
                                " (one connection); got ", url.host, ":", url.port));
    }
  }
  if (!o->download_dir.empty()) {
    std::vector<std::string> paths;
    for (const Url& url : o->urls) {
      absl::StatusOr<std::string> path = DownloadPath(o->download_dir, url.path);
      if (!path.ok()) return path.status();
      if (std::find(paths.begin(), paths.end(), *path) != paths.end()) {
        return Usage(absl::StrCat("two URLs would both be saved as ", *path));
      }
      paths.push_back(*std::move(path));
    }
  }
  if (o->method.empty()) o->method = o->has_body ? "POST" : "GET";
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ClientOptions> ParseClientOptions(int argc, const char* const* argv) {
  ClientOptions o;
  o.quic_version = kQuicVersion1;
  bool options_done = false;
  for (int i = 1; i < argc; ++i) {
    absl::string_view arg = argv[i];
    if (options_done || arg.empty() || arg[0] != '-' || arg == "-") {
      // wss:// is https:// for a WebSocket (RFC 6455 §3): same default port, same TLS.
      const bool wss = absl::StartsWithIgnoreCase(arg, "wss://");
      absl::StatusOr<Url> url =
          ParseUrl(wss ? absl::StrCat("https://", arg.substr(6)) : std::string(arg));
      if (!url.ok()) return url.status();
      if (wss) url->scheme = "wss";
      o.urls.push_back(*std::move(url));
      continue;
    }
    if (arg == "--") {
      options_done = true;
      continue;
    }
    // "--name=value" is the same as "--name value".
    std::string inline_value;
    bool has_inline = false;
    if (absl::StartsWith(arg, "--")) {
      if (const size_t eq = arg.find('='); eq != absl::string_view::npos) {
        inline_value = std::string(arg.substr(eq + 1));
        has_inline = true;
        arg = arg.substr(0, eq);
      }
    }
    std::string value;
    auto take = [&]() -> bool {
      if (has_inline) {
        value = inline_value;
        return true;
      }
      if (i + 1 >= argc) return false;
      value = argv[++i];
      return true;
    };
    auto need = [&](absl::string_view what) { return Usage(absl::StrCat(arg, " needs ", what)); };
    auto flag = [&](bool* out) {
      if (has_inline) return Usage(absl::StrCat(arg, " takes no value"));
      *out = true;
      return absl::OkStatus();
    };
    absl::Status s;
    bool ignored = false;
    if (arg == "-h" || arg == "--help") {
      s = flag(&o.help);
    } else if (arg == "-v" || arg == "--verbose") {
      s = flag(&o.verbose);
    } else if (arg == "-k" || arg == "--insecure") {
      s = flag(&o.insecure);
    } else if (arg == "--http3" || arg == "--http3-only") {
      s = flag(&ignored);
    } else if (arg == "--0rtt") {
      s = flag(&o.early_data);
    } else if (arg == "-X" || arg == "--request") {
      if (!take() || value.empty()) return need("a method");
      for (char c : value) {
        if (c <= ' ' || c >= 0x7f) return Usage(absl::StrCat("bad method '", value, "'"));
      }
      o.method = value;
    } else if (arg == "-d" || arg == "--data") {
      if (!take()) return need("a string or @FILE");
      o.has_body = true;
      if (absl::StartsWith(value, "@")) {
        o.body_file = value.substr(1);
        o.body.clear();
        if (o.body_file.empty()) return need("a file name after @");
      } else {
        o.body = value;
        o.body_file.clear();
      }
    } else if (arg == "-H" || arg == "--header") {
      if (!take()) return need("'name: value'");
      s = ParseHeader(value, &o);
    } else if (arg == "-o" || arg == "--output") {
      if (!take() || value.empty()) return need("a file");
      o.output_file = value;
    } else if (arg == "--download") {
      if (!take() || value.empty()) return need("a directory");
      o.download_dir = value;
    } else if (arg == "--parallel") {
      if (!take() || !absl::SimpleAtoi(value, &o.parallel) || o.parallel == 0) {
        return need("a count >= 1");
      }
    } else if (arg == "--limit-rate") {
      if (!take()) return need("a rate such as 500k or 2M");
      absl::StatusOr<uint64_t> rate = ParseByteRate(value);
      if (!rate.ok()) return need("a rate such as 500k or 2M");
      o.limit_rate = *rate;
    } else if (arg == "--cacert") {
      if (!take() || value.empty()) return need("a file");
      o.ca_file = value;
    } else if (arg == "--session-file") {
      if (!take() || value.empty()) return need("a file");
      o.session_file = value;
    } else if (arg == "--quic-version") {
      if (!take()) return need("v1 or v2");
      if (value == "v1" || value == "1") {
        o.quic_version = kQuicVersion1;
      } else if (value == "v2" || value == "2" || value == "v2draft") {
        o.quic_version = kQuicVersion2Draft;
      } else {
        return Usage(absl::StrCat("--quic-version is v1 or v2, not '", value, "'"));
      }
    } else if (arg == "--ciphers") {
      if (!take() || value.empty()) return need("a colon-separated list");
      s = ParseCiphers(value, &o);
    } else if (arg == "--timeout" || arg == "-m" || arg == "--max-time") {
      if (!take() || !absl::SimpleAtod(value, &o.timeout_seconds) || !(o.timeout_seconds > 0) ||
          o.timeout_seconds > 86400) {
        return need("a number of seconds in (0, 86400]");
      }
    } else if (arg == "--key-update") {
      s = flag(&o.key_update);
    } else if (arg == "--keylog-file") {
      if (!take() || value.empty()) return need("a file");
      o.key_log_file = value;
    } else if (arg == "--qlog-dir") {
      if (!take() || value.empty()) return need("a directory");
      o.qlog_dir = value;
    } else if (arg == "--keep-alive") {
      if (!take() || !absl::SimpleAtoi(value, &o.keep_alive_ms) || o.keep_alive_ms > 3'600'000) {
        return need("milliseconds in [0, 3600000]");
      }
    } else if (arg == "--preferred-address-move") {
      if (!take()) return need("probe or immediate");
      if (value == "probe" || value == "immediate") {
        o.preferred_address_at_once = value == "immediate";
      } else {
        return Usage(
            absl::StrCat("--preferred-address-move is probe or immediate, not '", value, "'"));
      }
    } else if (arg == "--websocket") {
      s = flag(&o.websocket);
    } else if (arg == "--ws-protocol") {
      if (!take() || value.empty()) return need("a subprotocol name");
      o.ws_protocols.push_back(value);
    } else if (arg == "--connect-to") {
      if (!take() || value.empty()) return need("ADDR:PORT");
      o.connect_to = value;
    } else {
      return Usage(absl::StrCat("unknown option ", arg));
    }
    if (!s.ok()) return s;
  }
  if (absl::Status s = Validate(&o); !s.ok()) return s;
  return o;
}

bool WantsChaChaPreference(const std::vector<std::string>& ciphers) {
  if (ciphers.empty()) return false;
  return std::none_of(ciphers.begin(), ciphers.end(),
                      [](const std::string& c) { return absl::StrContains(c, "_GCM_"); });
}

absl::StatusOr<uint64_t> ParseByteRate(absl::string_view text) {
  uint64_t unit = 1;
  if (!text.empty()) {
    switch (text.back()) {
      case 'k':
      case 'K':
        unit = uint64_t{1} << 10;
        break;
      case 'm':
      case 'M':
        unit = uint64_t{1} << 20;
        break;
      case 'g':
      case 'G':
        unit = uint64_t{1} << 30;
        break;
      default:
        break;
    }
    if (unit != 1) text.remove_suffix(1);
  }
  uint64_t n = 0;
  if (text.empty() || !absl::SimpleAtoi(text, &n) || n == 0 ||
      n > std::numeric_limits<uint64_t>::max() / unit) {
    return absl::InvalidArgumentError("want a byte rate > 0, such as 500k or 2M");
  }
  return n * unit;
}

absl::StatusOr<std::string> DownloadPath(absl::string_view dir, absl::string_view url_path) {
  url_path = url_path.substr(0, url_path.find('?'));
  std::vector<absl::string_view> segments;
  for (absl::string_view segment : absl::StrSplit(url_path, '/', absl::SkipEmpty())) {
    if (segment == "." || segment == "..") {
      return Usage(
          absl::StrCat("refusing to save ", url_path, ": it has a '", segment, "' segment"));
    }
    segments.push_back(segment);
  }
  std::string path(dir);
  if (path.empty() || path.back() != '/') path.push_back('/');
  absl::StrAppend(&path, absl::StrJoin(segments, "/"));
  if (segments.empty() || absl::EndsWith(url_path, "/")) {
    absl::StrAppend(&path, segments.empty() ? "" : "/", "index.html");
  }
  return path;
}

}  // namespace petrel::tools
