// json_api: a small JSON API, an in-memory collection of text items, served over HTTP/1.1,
// HTTP/2 (cleartext and TLS) and HTTP/3 with what a public API usually wants: request ids, CORS
// for a browser origin, a rate limit per client address, a Bearer token on the writes and JSON
// error pages. Same ports, certificate and signals as hello_server.
//
//   json_api [--token T] [--origin O]... [--rate R] [--burst B] [HTTP_PORT [HTTPS_PORT]]
//
//   GET    /api/items      every item, oldest first: [{"id":1,"text":"buy milk"}]
//   GET    /api/items/ID   one item: {"id":1,"text":"buy milk"}
//   POST   /api/items      token; the body is the item's text as is (1 to 1024 bytes of UTF-8,
//                          not JSON): 201, the item, and its Location
//   DELETE /api/items/ID   token; 204
//   Every error (401, 403, 404, 405, 413, 429, ...): {"error":404,"reason":"no such item"}
//
//   curl -H 'Authorization: Bearer secret-token' -d 'buy milk' http://127.0.0.1:8080/api/items
//   curl -k --http2 https://127.0.0.1:8443/api/items
//   h3_client -k 127.0.0.1 8443 /api/items/1
#include <signal.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "petrel/http/cors.h"
#include "petrel/http/http_auth.h"
#include "petrel/http/http_server.h"
#include "petrel/http/rate_limit.h"
#include "petrel/http/request.h"
#include "petrel/http/request_id.h"
#include "petrel/http/response.h"
#include "petrel/http/status.h"

namespace {

constexpr size_t kMaxText = 1024;  // an item's text; a bigger POST body gets 413
constexpr absl::string_view kJson = "application/json";
// RFC 6750 §2.1 b64token: the characters a client can send after "Bearer ".
constexpr char kB64Token[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~+/=";

constexpr char kUsage[] =
    "usage: json_api [--token T] [--origin O]... [--rate R] [--burst B] [HTTP_PORT [HTTPS_PORT]]\n"
    "  --token T   the Bearer token POST and DELETE need (default secret-token)\n"
    "  --origin O  a browser origin CORS allows, repeatable (default https://app.example)\n"
    "  --rate R    requests per second per client address (default 5)\n"
    "  --burst B   requests a client may make at once (default 20)\n"
    "  ports       defaults 8080 (HTTP/1.1, h2c) and 8443 (TLS, HTTP/3); 0 picks a free port\n";

// `text` as the inside of a JSON string (RFC 8259 §7): '"', '\' and the control characters
// escaped. Other bytes pass as they are, so `text` must be UTF-8 for the result to be JSON.
std::string JsonEscape(absl::string_view text) {
  std::string out;
  for (const char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (static_cast<unsigned char>(c) < 0x20) {
      absl::StrAppendFormat(&out, "\\u%04x", static_cast<int>(c));
    } else {
      out += c;
    }
  }
  return out;
}

// Well-formed UTF-8 (RFC 3629: no overlong forms, no surrogates, nothing past U+10FFFF): what a
// JSON text must be, checked once on the way in so every answer is valid JSON.
bool IsUtf8(absl::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const auto lead = static_cast<unsigned char>(s[i++]);
    if (lead < 0x80) continue;
    // The lead byte says how many continuation bytes follow; 0x80..0xBF lead nothing, and
    // 0xF5 up would start values past U+10FFFF.
    int more = lead >= 0xF0 ? 3 : lead >= 0xE0 ? 2 : lead >= 0xC0 ? 1 : 0;
    if (more == 0 || lead > 0xF4) return false;
    uint32_t code = lead & (0x3F >> more);
    const uint32_t least = more == 1 ? 0x80 : more == 2 ? 0x800 : 0x10000;  // else overlong
    for (; more > 0; --more, ++i) {
      if (i == s.size() || (static_cast<unsigned char>(s[i]) & 0xC0) != 0x80) return false;
      code = code << 6 | (static_cast<unsigned char>(s[i]) & 0x3F);
    }
    if (code < least || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) return false;
  }
  return true;
}

std::string ItemJson(uint64_t id, absl::string_view text) {
  return absl::StrCat("{\"id\":", id, ",\"text\":\"", JsonEscape(text), "\"}");
}

// The items. Handlers run on the loop thread that owns their connection, several loops at once
// (TCP loops, QUIC workers), so every access takes the mutex.
class ItemStore {
 public:
  std::string ListJson() const {
    std::lock_guard<std::mutex> lock(mu_);
    std::string out = "[";
    for (const auto& [id, text] : items_) {
      absl::StrAppend(&out, out.size() > 1 ? "," : "", ItemJson(id, text));
    }
    return out + "]\n";
  }
  std::optional<std::string> FindJson(uint64_t id) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = items_.find(id);
    if (it == items_.end()) return std::nullopt;
    return ItemJson(id, it->second) + "\n";
  }
  uint64_t Add(std::string text) {  // returns the new item's id
    std::lock_guard<std::mutex> lock(mu_);
    items_.emplace(next_id_, std::move(text));
    return next_id_++;
  }
  bool Remove(uint64_t id) {
    std::lock_guard<std::mutex> lock(mu_);
    return items_.erase(id) > 0;
  }

 private:
  mutable std::mutex mu_;
  uint64_t next_id_ = 1;                   // guarded by mu_
  std::map<uint64_t, std::string> items_;  // guarded by mu_
};

// Every error the site answers — the router's 404 and 405, the engines' 413, the middleware's
// 401, 403 and 429, the handlers' SendError — as JSON. Fields set before the error (Allow,
// WWW-Authenticate, Retry-After) stay: Send sets only the status, the body and its type.
void RenderJsonError(const petrel::HttpError& error, const petrel::Request&,
                     petrel::Response& res) {
  // A 5xx reason may name internals ("handler threw: ..."): clients get the status phrase.
  const absl::string_view reason = error.status >= 500 || error.reason.empty()
                                       ? petrel::ReasonPhrase(error.status)
                                       : error.reason;
  res.Send(error.status,
           absl::StrCat("{\"error\":", error.status, ",\"reason\":\"", JsonEscape(reason), "\"}\n"),
           kJson);
}

// Compares without an early exit, so the time taken does not tell how much of a guess was right.
bool SameToken(absl::string_view a, absl::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

struct Flags {
  std::string token = "secret-token";
  std::vector<std::string> origins;
  double rate = 5;
  double burst = 20;
  std::optional<uint16_t> http_port = 8080;
  std::optional<uint16_t> https_port = 8443;
};

std::optional<uint16_t> ParsePort(const char* text) {
  uint32_t value = 0;
  if (!absl::SimpleAtoi(text, &value) || value > 65535) return std::nullopt;
  return static_cast<uint16_t>(value);
}

// The flags, or the first thing wrong with them.
absl::StatusOr<Flags> ParseFlags(int argc, char** argv) {
  Flags flags;
  std::vector<const char*> ports;
  for (int i = 1; i < argc; ++i) {
    const absl::string_view flag = argv[i];
    if (flag.substr(0, 2) != "--") {
      ports.push_back(argv[i]);
      continue;
    }
    if (i + 1 == argc) return absl::InvalidArgumentError(absl::StrCat(flag, " needs a value"));
    const char* value = argv[++i];
    bool ok = true;
    if (flag == "--token") {
      flags.token = value;
      ok = !flags.token.empty() && flags.token.find_first_not_of(kB64Token) == std::string::npos;
    } else if (flag == "--origin") {
      flags.origins.push_back(value);
    } else if (flag == "--rate") {
      ok = absl::SimpleAtod(value, &flags.rate) && std::isfinite(flags.rate) && flags.rate > 0;
    } else if (flag == "--burst") {
      ok = absl::SimpleAtod(value, &flags.burst) && std::isfinite(flags.burst) && flags.burst >= 1;
    } else {
      return absl::InvalidArgumentError(absl::StrCat("unknown flag ", flag));
    }
    if (!ok) return absl::InvalidArgumentError(absl::StrCat("bad value for ", flag, ": ", value));
  }
  if (ports.size() > 2) return absl::InvalidArgumentError("more than two ports");
  if (ports.size() > 0) flags.http_port = ParsePort(ports[0]);
  if (ports.size() > 1) flags.https_port = ParsePort(ports[1]);
  if (!flags.http_port || !flags.https_port) return absl::InvalidArgumentError("bad port");
  if (flags.origins.empty()) flags.origins.push_back("https://app.example");
  return flags;
}

// The site: the error page, the middleware and the routes. `store` must outlive the router.
absl::Status AddRoutes(const Flags& flags, ItemStore& store, petrel::Router& router) {
  router.SetErrorHandler(RenderJsonError);

  // Outermost first. The request id, so that every answer, a 429 too, has X-Request-Id. CORS
  // next: preflights are answered without spending the client's tokens, and the errors below
  // (401, 429) still carry Access-Control-Allow-Origin, so the page's script can read them.
  router.Use(petrel::RequestIdMiddleware());
  petrel::CorsOptions cors;
  cors.allowed_origins = flags.origins;
  cors.allowed_methods = {"GET", "HEAD", "POST", "DELETE"};
  cors.allowed_headers = {"authorization", "content-type", "x-request-id"};
  cors.exposed_headers = {"location", "retry-after", "x-request-id"};
  router.Use("/api/", petrel::CorsMiddleware(std::move(cors)));
  // Every request counts, routed or not: a client scanning for paths is limited too.
  router.Use(
      petrel::RateLimitMiddleware({.requests_per_second = flags.rate, .burst = flags.burst}));

  // The token guards the writes only, as route middleware: reads and preflights (which never
  // carry credentials) pass without it. Each route gets its own instance (they are move-only).
  auto writes = [token = flags.token] {
    petrel::RouteOptions options;
    options.middleware.push_back(petrel::BearerAuthMiddleware(
        "json_api", [token](absl::string_view got) { return SameToken(got, token); }));
    return options;
  };
  petrel::RouteOptions create = writes();
  create.max_request_body = kMaxText;  // a larger Content-Length: 413 before the handler runs

  const absl::Status routed[] = {
      router.Get("/api/items",
                 [&store](petrel::Request&, petrel::Response& res) {
                   res.Send(200, store.ListJson(), kJson);
                 }),
      router.Get("/api/items/:id",
                 [&store](petrel::Request& req, petrel::Response& res) {
                   uint64_t id = 0;
                   std::optional<std::string> item;
                   if (absl::SimpleAtoi(req.Param("id"), &id)) item = store.FindJson(id);
                   if (!item) return res.SendError(404, "no such item");
                   res.Send(200, *std::move(item), kJson);
                 }),
      router.Post(
          "/api/items",
          [&store](petrel::Request& req, petrel::Response& res) {
            // The whole body, then the callback, on this loop thread (maybe before ReadAll
            // returns). The limit catches a body sent without Content-Length. `res` lives as
            // long as the request, which owns the callback: capturing it is safe.
            req.body().ReadAll(kMaxText, [&store, &res](absl::StatusOr<std::string> text) {
              if (absl::IsResourceExhausted(text.status())) {
                return res.SendError(413, "an item's text is at most 1024 bytes");
              }
              if (!text.ok()) return res.SendError(400, "the body did not arrive");
              if (text->empty() || !IsUtf8(*text)) {
                return res.SendError(400, "an item's text is 1 to 1024 bytes of UTF-8");
              }
              const uint64_t id = store.Add(*text);
              res.SetHeader("location", absl::StrCat("/api/items/", id));
              res.Send(201, ItemJson(id, *text) + "\n", kJson);
            });
          },
          std::move(create)),
      router.Delete(
          "/api/items/:id",
          [&store](petrel::Request& req, petrel::Response& res) {
            uint64_t id = 0;
            if (!absl::SimpleAtoi(req.Param("id"), &id) || !store.Remove(id)) {
              return res.SendError(404, "no such item");
            }
            res.Send(204, std::string());
          },
          writes()),
  };
  for (const absl::Status& s : routed) {
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) {
      std::fputs(kUsage, stdout);
      return 0;
    }
  }
  absl::StatusOr<Flags> flags = ParseFlags(argc, argv);
  if (!flags.ok()) {
    std::fprintf(stderr, "json_api: %s\n%s", std::string(flags.status().message()).c_str(), kUsage);
    return 2;
  }

  petrel::HttpServerConfig config;
  config.http_port = flags->http_port;
  config.https_port = flags->https_port;
  ItemStore store;  // before the server, so it outlives every handler call
  petrel::HttpServer server(config);
  if (absl::Status s = AddRoutes(flags.value(), store, server.router()); !s.ok()) {
    std::fprintf(stderr, "json_api: %s\n", s.ToString().c_str());
    return 1;
  }

  // Signals as in hello_server: blocked before Start() so only sigwait() below sees them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  if (absl::Status s = server.Start(); !s.ok()) {
    std::fprintf(stderr, "json_api: cannot start: %s\n", s.ToString().c_str());
    return 1;
  }
  std::printf("json_api: http %u (HTTP/1.1, h2c), https %u (HTTP/1.1, HTTP/2, HTTP/3)\n",
              server.http_port(), server.https_port());
  std::fflush(stdout);

  int sig = 0;
  sigwait(&stop_signals, &sig);
  std::printf("json_api: signal %d, stopping\n", sig);
  std::fflush(stdout);
  pthread_sigmask(SIG_UNBLOCK, &stop_signals, nullptr);  // a second signal exits at once
  server.Stop(std::chrono::seconds(5));
  server.Wait();
  std::printf("json_api: stopped\n");
  return 0;
}
