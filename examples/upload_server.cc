// upload_server: a streaming upload handler. POST or PUT /upload reads the request body piece
// by piece as it arrives — the whole body is never held in memory — hashes it with SHA-256 and
// answers with the byte count, the number of pieces and the digest. Same protocols, ports and
// signals as hello_server.
//
//   upload_server [HTTP_PORT [HTTPS_PORT]]
//
//   curl --data-binary @big.bin http://127.0.0.1:8080/upload
//   curl -k --http2 --data-binary @big.bin https://127.0.0.1:8443/upload
//   sha256sum big.bin                                     # the same digest
#include <openssl/sha.h>  // BoringSSL, which Petrel links already
#include <signal.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "petrel/http/http_server.h"
#include "petrel/http/request.h"
#include "petrel/http/response.h"

namespace {

std::optional<uint16_t> ParsePort(const char* text) {
  uint32_t value = 0;
  if (!absl::SimpleAtoi(text, &value) || value > 65535) return std::nullopt;
  return static_cast<uint16_t>(value);
}

// What one upload has seen so far.
struct Upload {
  SHA256_CTX sha;
  uint64_t bytes = 0;
  uint64_t pieces = 0;
};

void HandleUpload(petrel::Request& req, petrel::Response& res) {
  auto upload = std::make_unique<Upload>();
  SHA256_Init(&upload->sha);

  // Read() hands the body over in pieces, in order, as the engine receives them (bytes that
  // arrived before this call come first, possibly before Read() returns). Each piece is valid
  // only during the call. Flow-control credit goes back to the client when the callback returns
  // (HTTP/2 WINDOW_UPDATE, QUIC MAX_STREAM_DATA; HTTP/1.1 reads more of the socket), so a slow
  // handler slows the client down instead of making the server buffer. For HTTP/1.1 this first
  // read is also what sends "100 Continue" to a client that asked for it.
  //
  // The callback owns the Upload; the RequestBody owns the callback and lives inside the
  // Request, so the state goes away with the request, finished or not. `res` lives next to the
  // Request, so the reference stays valid for every call.
  req.body().Read(
      [upload = std::move(upload), &res](absl::string_view piece, bool last) {
        SHA256_Update(&upload->sha, piece.data(), piece.size());
        upload->bytes += piece.size();
        if (!piece.empty()) ++upload->pieces;
        if (!last) return;
        uint8_t digest[SHA256_DIGEST_LENGTH];
        SHA256_Final(digest, &upload->sha);
        const std::string hex = absl::BytesToHexString(
            absl::string_view(reinterpret_cast<const char*>(digest), sizeof(digest)));
        res.Send(200,
                 absl::StrFormat("%d bytes in %d pieces, sha256 %s\n", upload->bytes,
                                 upload->pieces, hex),
                 "text/plain");
      },
      // The body cannot complete: the client reset the stream, a timeout, or an engine limit.
      // If the stream is already gone the response is cancelled and Send() does nothing.
      [&res](const absl::Status& status) {
        res.Send(400, absl::StrCat("upload failed: ", status.message(), "\n"), "text/plain");
      });
  // Returning without a response is fine: the data callback sends it once the body has ended,
  // on this same loop thread.
}

}  // namespace

int main(int argc, char** argv) {
  petrel::HttpServerConfig config;
  if (argc > 1) config.http_port = ParsePort(argv[1]);
  if (argc > 2) config.https_port = ParsePort(argv[2]);
  if (argc > 3 || !config.http_port || !config.https_port) {
    std::fprintf(stderr, "usage: %s [HTTP_PORT [HTTPS_PORT]]\n", argv[0]);
    return 2;
  }
  // A body is refused (413) beyond this size. Streaming keeps only one piece in memory at a
  // time, so the limit is about how much a client may send, not about memory.
  config.max_request_body = uint64_t{4} << 30;

  petrel::HttpServer server(config);
  petrel::Router& router = server.router();
  absl::Status routed = router.Post("/upload", HandleUpload);
  if (routed.ok()) routed = router.Put("/upload", HandleUpload);
  if (!routed.ok()) {
    std::fprintf(stderr, "upload_server: %s\n", routed.ToString().c_str());
    return 1;
  }

  // Stop signals as in hello_server: blocked everywhere, taken by sigwait() on this thread.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  if (absl::Status s = server.Start(); !s.ok()) {
    std::fprintf(stderr, "upload_server: cannot start: %s\n", s.ToString().c_str());
    return 1;
  }
  std::printf("upload_server: http %u (HTTP/1.1, h2c), https %u (HTTP/1.1, HTTP/2, HTTP/3), on",
              server.http_port(), server.https_port());
  for (const petrel::SocketAddress& a : server.local_addresses()) {
    std::printf(" %s", a.ToString().c_str());
  }
  std::printf("\n");
  std::fflush(stdout);

  int sig = 0;
  sigwait(&stop_signals, &sig);
  std::printf("upload_server: signal %d, stopping\n", sig);
  std::fflush(stdout);
  pthread_sigmask(SIG_UNBLOCK, &stop_signals, nullptr);
  server.Stop(std::chrono::seconds(5));
  server.Wait();
  std::printf("upload_server: stopped\n");
  return 0;
}
