// petrel-server: serves a directory (or, without --root, a small built-in demo site) over
// HTTP/1.1 and HTTP/2 on TCP and HTTP/3 on UDP from one process, until SIGINT or SIGTERM,
// which stop it gracefully.
#include <signal.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "petrel/http/http_server.h"
#include "petrel/http/static_files.h"
#include "petrel/version.h"

namespace {

constexpr char kUsage[] =
    "usage: petrel-server [options]\n"
    "\n"
    "Serves HTTP/1.1 and HTTP/2 over TCP (cleartext and TLS) and HTTP/3 over UDP from one\n"
    "process. Without --root it serves a built-in demo site. SIGINT/SIGTERM stop it gracefully.\n"
    "\n"
    "  --listen ADDR       address to bind (default 127.0.0.1)\n"
    "  --http-port N       cleartext HTTP/1.1 + h2c port (default 8080; 0 disables)\n"
    "  --https-port N      TLS port for h1/h2 on TCP and h3 on UDP (default 8443; 0 disables)\n"
    "  --no-h3             do not serve HTTP/3\n"
    "  --root DIR          serve the files under DIR\n"
    "  --workers N         TCP loops and QUIC worker threads (default 0: one of each)\n"
    "  --cert FILE --key FILE   PEM certificate chain and key (default: self-signed for\n"
    "                      localhost and 127.0.0.1)\n"
    "  --max-body BYTES    request body limit (default 10485760)\n"
    "  --grace SECONDS     how long a graceful stop waits for in-flight requests (default 5)\n"
    "  --qlog-dir DIR      write a qlog file per QUIC connection\n"
    "  --keylog FILE       append TLS secrets (SSLKEYLOGFILE format)\n"
    "  --version           print the versions Petrel was built with\n"
    "  --help              this text\n";

constexpr char kDemoPage[] =
    "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>Petrel</title></head>\n"
    "<body><h1>Petrel</h1>\n"
    "<p>This page came over HTTP/1.1, HTTP/2 or HTTP/3 &mdash; the same handler serves all "
    "three.</p>\n<p><a href=\"/hello\">/hello</a>; POST to /echo returns the body.</p>\n"
    "</body></html>\n";

bool ParsePort(const char* text, std::optional<uint16_t>* out) {
  uint32_t v = 0;
  if (!absl::SimpleAtoi(text, &v) || v > 65535) return false;
  if (v == 0) {
    out->reset();
  } else {
    *out = static_cast<uint16_t>(v);
  }
  return true;
}

int Fail(const std::string& message) {
  std::fprintf(stderr, "petrel-server: %s\n(see --help)\n", message.c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  petrel::HttpServerConfig config;
  std::string root;
  uint32_t grace_seconds = 5;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&](const char** out) {
      if (i + 1 >= argc) return false;
      *out = argv[++i];
      return true;
    };
    const char* v = nullptr;
    if (arg == "--help" || arg == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (arg == "--version") {
      std::printf("%s\n", petrel::VersionLine().c_str());
      return 0;
    } else if (arg == "--listen") {
      if (!value(&v)) return Fail("--listen needs an address");
      config.host = v;
    } else if (arg == "--http-port") {
      if (!value(&v) || !ParsePort(v, &config.http_port)) return Fail("bad --http-port");
    } else if (arg == "--https-port") {
      if (!value(&v) || !ParsePort(v, &config.https_port)) return Fail("bad --https-port");
    } else if (arg == "--no-h3") {
      config.h3 = false;
    } else if (arg == "--root") {
      if (!value(&v)) return Fail("--root needs a directory");
      root = v;
    } else if (arg == "--workers") {
      uint32_t n = 0;
      if (!value(&v) || !absl::SimpleAtoi(v, &n) || n > 128) return Fail("bad --workers");
      config.tcp_loops = n == 0 ? 1 : n;
      config.quic_workers = n;
    } else if (arg == "--cert") {
      if (!value(&v)) return Fail("--cert needs a file");
      config.certificate_file = v;
    } else if (arg == "--key") {
      if (!value(&v)) return Fail("--key needs a file");
      config.key_file = v;
    } else if (arg == "--max-body") {
      if (!value(&v) || !absl::SimpleAtoi(v, &config.max_request_body)) {
        return Fail("bad --max-body");
      }
    } else if (arg == "--grace") {
      if (!value(&v) || !absl::SimpleAtoi(v, &grace_seconds)) return Fail("bad --grace");
    } else if (arg == "--qlog-dir") {
      if (!value(&v)) return Fail("--qlog-dir needs a directory");
      config.qlog_dir = v;
    } else if (arg == "--keylog") {
      if (!value(&v)) return Fail("--keylog needs a file");
      config.key_log_file = v;
    } else {
      return Fail(absl::StrCat("unknown option ", arg));
    }
  }
  if (config.certificate_file.empty() != config.key_file.empty()) {
    return Fail("--cert and --key go together");
  }
  if (!config.http_port.has_value() && !config.https_port.has_value()) {
    return Fail("both ports are disabled: nothing to serve");
  }

  petrel::HttpServer server(config);
  petrel::Router& router = server.router();
  if (root.empty()) {
    (void)router.Get("/", [](petrel::Request&, petrel::Response& res) {
      res.Send(200, kDemoPage, "text/html; charset=utf-8");
    });
    (void)router.Get("/hello", [](petrel::Request&, petrel::Response& res) {
      res.Send(200, "hello from petrel\n", "text/plain; charset=utf-8");
    });
    // The request body streamed back as it arrives, with backpressure both ways.
    (void)router.Post("/echo", [](petrel::Request& req, petrel::Response& res) {
      petrel::StreamingBody& out = res.Stream(200);
      petrel::RequestBody& in = req.body();
      out.SetOnWritable([&in] { in.Resume(); });
      in.Read(
          [&out, &in](absl::string_view chunk, bool last) {
            if (!chunk.empty() && !out.Write(chunk)) in.Pause();
            if (last) out.Finish();
          },
          [&out](const absl::Status& status) { out.Fail(status); });
    });
  } else {
    (void)router.Get("/*", petrel::StaticFiles(root));
  }

  // Every thread the server starts inherits this mask; only sigwait below sees the signals.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  if (absl::Status s = server.Start(); !s.ok()) {
    return Fail(absl::StrCat("cannot start: ", s.ToString()));
  }
  std::printf("petrel-server: listening on %s: http %u (h1, h2c), https %u (h1, h2%s)%s\n",
              config.host.c_str(), server.http_port(), server.https_port(),
              config.h3 && server.https_port() != 0 ? ", h3 on UDP" : "",
              root.empty() ? ", demo site" : absl::StrCat(", root ", root).c_str());
  std::fflush(stdout);
  int sig = 0;
  sigwait(&stop_signals, &sig);
  std::printf("petrel-server: %s, stopping (grace %u s)\n", strsignal(sig), grace_seconds);
  std::fflush(stdout);
  server.Stop(std::chrono::seconds(grace_seconds));
  server.Wait();
  std::printf("petrel-server: stopped\n");
  return 0;
}
