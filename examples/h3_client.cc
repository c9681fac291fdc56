// h3_client: fetches one URL over HTTP/3 with petrel::Http3Client and prints the response as
// it arrives: the status line and header fields (like `curl -i`), then the body.
//
//   h3_client [-k] [-X METHOD] [-H 'NAME: VALUE']... [-d DATA] HOST PORT PATH
//     -k  accept any certificate (a self-signed one, say)
//     -X, -H, -d  as curl's: the method, a header field (repeatable), a request body (then the
//                 method defaults to POST)
//   h3_client -k 127.0.0.1 8443 /hello
//   h3_client -k -H 'authorization: Bearer secret-token' -d 'buy milk' 127.0.0.1 8443 /api/items
//
// Exit status: 0 when a whole response arrived (whatever its status code), 1 otherwise.
#include <netdb.h>
#include <sys/socket.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "petrel/common/socket_address.h"
#include "petrel/common/timer.h"
#include "petrel/http/header_map.h"
#include "petrel/http/http3_client.h"

namespace {

// The whole exchange, handshake included, must finish within this.
constexpr std::chrono::seconds kTimeout(30);

// HOST may be a name or an address; the first UDP address it resolves to is used.
absl::StatusOr<petrel::SocketAddress> Resolve(const std::string& host, uint16_t port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  if (int rc = getaddrinfo(host.c_str(), nullptr, &hints, &found); rc != 0) {
    return absl::NotFoundError(absl::StrCat(host, ": ", gai_strerror(rc)));
  }
  petrel::SocketAddress address(found->ai_addr, found->ai_addrlen);
  freeaddrinfo(found);
  address.set_port(port);
  return address;
}

int Fail(absl::string_view message) {
  std::fprintf(stderr, "h3_client: %.*s\n", static_cast<int>(message.size()), message.data());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  bool insecure = false;
  bool usage_error = false;
  bool method_given = false;
  petrel::Http3Request request;  // GET, https, the client's authority
  int arg = 1;
  for (; arg < argc && argv[arg][0] == '-'; ++arg) {
    const absl::string_view option = argv[arg];
    if (option == "-k") {
      insecure = true;
      continue;
    }
    if (arg + 1 == argc) {
      usage_error = true;
      break;
    }
    const absl::string_view value = argv[++arg];
    if (option == "-X") {
      request.method = std::string(value);
      method_given = true;
    } else if (option == "-H" && value.find(':') != absl::string_view::npos && value[0] != ':') {
      const size_t colon = value.find(':');
      request.headers.Add(value.substr(0, colon),
                          absl::StripLeadingAsciiWhitespace(value.substr(colon + 1)));
    } else if (option == "-d") {
      request.body = petrel::ResponseBody(std::string(value));  // sent with its content-length
      if (!method_given) request.method = "POST";
    } else {
      usage_error = true;
      break;
    }
  }
  uint32_t port = 0;
  if (usage_error || argc - arg != 3 || !absl::SimpleAtoi(argv[arg + 1], &port) || port == 0 ||
      port > 65535) {
    std::fprintf(stderr,
                 "usage: %s [-k] [-X METHOD] [-H 'NAME: VALUE']... [-d DATA] HOST PORT PATH\n",
                 argv[0]);
    return 2;
  }
  const std::string host = argv[arg];
  const std::string path = argv[arg + 2];

  absl::StatusOr<petrel::SocketAddress> server = Resolve(host, static_cast<uint16_t>(port));
  if (!server.ok()) return Fail(server.status().message());

  petrel::Http3ClientConfig config;
  config.server = *server;
  config.server_name = host;  // sent as SNI; the certificate must be for this name
  config.verify_peer = !insecure;
  // Create() binds a UDP socket and gives the client its own event loop (Run() below drives it).
  absl::StatusOr<std::unique_ptr<petrel::Http3Client>> created =
      petrel::Http3Client::Create(std::move(config));
  if (!created.ok()) return Fail(created.status().ToString());
  petrel::Http3Client& client = **created;

  request.path = path;

  // The three callbacks of one request, in the order they run, all on the client's loop thread.
  bool complete = false;
  petrel::Http3ResponseHandler handler;
  handler.on_head = [](int status, const petrel::HeaderMap& headers) {
    std::printf("HTTP/3 %d\n", status);
    for (const petrel::HeaderField field : headers) {
      std::printf("%.*s: %.*s\n", static_cast<int>(field.name.size()), field.name.data(),
                  static_cast<int>(field.value.size()), field.value.data());
    }
    std::printf("\n");
  };
  // Body bytes as they arrive; the server gets flow-control credit back when this returns.
  handler.on_data = [](absl::string_view data) {
    std::fwrite(data.data(), 1, data.size(), stdout);
  };
  // Exactly once: OK when the whole response arrived, otherwise why the request failed (a bad
  // certificate, a reset stream, the connection lost, the timeout below...).
  handler.on_complete = [&](absl::Status status, const petrel::HeaderMap& /*trailers*/) {
    if (status.ok()) {
      complete = true;
    } else {
      std::fprintf(stderr, "h3_client: %s\n", status.ToString().c_str());
    }
    // No more requests: close the connection (politely), which makes Run() return.
    client.CloseWhenDone();
  };
  // Submitted before Connect(): the request waits for the handshake (or, on a resumed session,
  // would go out as 0-RTT early data).
  if (absl::StatusOr<uint64_t> id = client.Submit(std::move(request), std::move(handler));
      !id.ok()) {
    return Fail(id.status().ToString());
  }
  if (absl::Status s = client.Connect(); !s.ok()) return Fail(s.ToString());

  // A timer on the client's loop bounds the whole exchange: Stop() closes the connection and
  // fails the request. Timers are loop-thread objects; before Run() this thread is the loop's.
  bool timed_out = false;
  petrel::Timer deadline(client.loop(), [&] {
    timed_out = true;
    client.Stop();
  });
  deadline.StartAfter(kTimeout);
  client.Run();  // until the connection is over
  deadline.Cancel();
  std::fflush(stdout);

  if (timed_out) return Fail(absl::StrCat("timed out after ", kTimeout.count(), " s"));
  return complete ? 0 : 1;
}
