// Public: Http3Client, an HTTP/3 client on one QUIC connection (nghttp3 over QuicClient): any
// method, request and response bodies streamed both ways with flow control, many parallel
// requests, session resumption and 0-RTT, certificate verification on by default.
//
// Threading: a client lives on one loop thread — its own (Run()) or a loop shared by many
// clients (config.loop). Every call except Stop() and every callback happen on that thread.
#ifndef PETREL_HTTP_HTTP3_CLIENT_H_
#define PETREL_HTTP_HTTP3_CLIENT_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "petrel/common/event_loop.h"
#include "petrel/common/socket_address.h"
#include "petrel/http/body.h"
#include "petrel/http/header_map.h"
#include "petrel/quic/quic_connection.h"

namespace petrel {

struct Http3ClientConfig {
  SocketAddress server;
  std::string server_name = "localhost";  // SNI and the name the certificate must match
  // :authority of requests that name none; empty: server_name, with ":port" unless 443.
  std::string authority;
  bool verify_peer = true;  // off: accept any certificate (testing only)
  std::string ca_file;      // trust these CAs (PEM); empty: the system's store
  // Resumption: what on_session gave on an earlier connection. With both and early_data,
  // requests submitted before the handshake completes go out in 0-RTT.
  std::string session;
  std::string transport_params;
  bool early_data = true;
  // First Initial's version and the others offered (compatible version negotiation).
  uint32_t version = kQuicVersion1;
  std::vector<uint32_t> other_versions;
  QuicTransportLimits limits;
  CongestionControl cc = CongestionControl::kCubic;
  // How to move to a preferred_address the server offers (QuicClientConfig).
  QuicMigration preferred_address_move = QuicMigration::kProbeFirst;
  std::string qlog_dir;
  std::string key_log_file;
  // Share this loop (not owned, must outlive the client) instead of owning one; see QuicClient.
  EventLoop* loop = nullptr;
  // Largest response head (and trailer section) accepted; bigger ones fail the request.
  uint64_t max_field_section_size = 64 * 1024;
  // Bytes pulled from a request body per read.
  size_t body_chunk = 64 * 1024;
  // Testing only: drop this fraction of the datagrams received and of those sent.
  double test_loss = 0;
};

struct Http3Request {
  std::string method = "GET";
  std::string path = "/";  // origin form, query included: "/a?b=c"
  std::string authority;   // empty: the client's
  std::string scheme = "https";
  // Extended CONNECT (RFC 9220): with method "CONNECT", the :protocol to open ("websocket");
  // the request body and the response body are then the tunnel's two directions.
  std::string protocol;
  HeaderMap headers;  // regular fields; names are sent lowercased
  // The request body: bytes, a file or a producer (the body type responses use too). A
  // producer is pulled as the stream has room, so an upload is paced by the server.
  ResponseBody body;
  HeaderMap trailers;  // sent after the body
};

// What the submitter of a request hears, in this order: on_head once (not for a request that
// fails first), on_data zero or more times, on_complete exactly once. Interim (1xx) heads are
// skipped. After on_complete the handler is destroyed.
struct Http3ResponseHandler {
  absl::AnyInvocable<void(int status, const HeaderMap& headers)> on_head;
  // A piece of the body. Its flow-control credit goes back to the server when this returns,
  // unless reading is paused (SetReadingPaused), in which case later pieces wait in the client.
  absl::AnyInvocable<void(absl::string_view data)> on_data;
  // OK with the trailers (often empty) once the whole response arrived; otherwise why the
  // request failed: reset by the server (Unavailable; the message names the HTTP/3 error code),
  // refused by GOAWAY or H3_REQUEST_REJECTED (Unavailable, and Http3Client::IsRefused: the
  // server did not process it, safe to retry), cancelled (Cancelled), connection lost,
  // malformed response (DataLoss) or 0-RTT declined with a body that cannot be replayed.
  absl::AnyInvocable<void(absl::Status status, const HeaderMap& trailers)> on_complete;
};

// A whole buffered response (Fetch).
struct Http3Response {
  int status = 0;
  HeaderMap headers;
  std::string body;
  HeaderMap trailers;
};

struct Http3ClientCallbacks {
  // The handshake completed.
  absl::AnyInvocable<void()> on_connected;
  // A session ticket and the server's transport parameters: keep both for resumption.
  absl::AnyInvocable<void(std::string session, std::string transport_params)> on_session;
  // The server sent GOAWAY: requests on streams from `stream_id` on are refused.
  absl::AnyInvocable<void(int64_t stream_id)> on_goaway;
  // The connection is over; every request still pending has failed before this runs. With a
  // shared loop the client may be destroyed from here.
  absl::AnyInvocable<void()> on_closed;
};

class Http3Client {
 public:
  // True for a request the server did not process (RFC 9114 §5.2 and §8.1): refused by its
  // GOAWAY, never sent because of it, or reset with H3_REQUEST_REJECTED. Such a request is safe
  // to retry on a new connection; other failures may have been processed.
  static bool IsRefused(const absl::Status& status);

  // Binds the UDP socket and prepares TLS; nothing is sent before Connect().
  static absl::StatusOr<std::unique_ptr<Http3Client>> Create(Http3ClientConfig config,
                                                             Http3ClientCallbacks callbacks = {});
  ~Http3Client();
  Http3Client(const Http3Client&) = delete;
  Http3Client& operator=(const Http3Client&) = delete;

  // Sends the first flight (with 0-RTT requests if resuming). Loop thread or before Run().
  absl::Status Connect();
  // Own loop only: runs until the connection is over.
  void Run();
  // Closes the connection at once (pending requests fail). Safe from any thread with an own
  // loop; on the loop thread with a shared one.
  void Stop();
  // Closes the connection once every request submitted so far has completed; Submit fails
  // from now on.
  void CloseWhenDone();

  // Starts a request; returns its id (> 0) for Cancel / SetReadingPaused. Requests beyond the
  // server's stream limit wait, in order, for a stream. Before the handshake they wait for it,
  // or go out in 0-RTT when resuming. FailedPrecondition once the client is closing.
  absl::StatusOr<uint64_t> Submit(Http3Request request, Http3ResponseHandler handler);
  // Submit that collects the response; a body over `max_body` fails it (ResourceExhausted).
  absl::StatusOr<uint64_t> Fetch(Http3Request request,
                                 absl::AnyInvocable<void(absl::StatusOr<Http3Response>)> done,
                                 size_t max_body = 64 << 20);
  // Abandons a request: RESET_STREAM + STOP_SENDING (H3_REQUEST_CANCELLED); its on_complete
  // runs with Cancelled. Unknown or finished ids are ignored.
  void Cancel(uint64_t request);
  // While paused, response data is held (and not credited), so the server's flow control
  // stops it after at most one stream window. A response that has arrived whole stays the
  // reader's: if the connection closes while it is paused, it is handed over at once and
  // completes OK.
  void SetReadingPaused(uint64_t request, bool paused);

  // Starts a key update (RFC 9001 §6). False when not allowed now: before the handshake is
  // confirmed, or while the previous update is unconfirmed.
  bool InitiateKeyUpdate();

  // Requests submitted and not yet completed.
  size_t pending_requests() const;
  bool connected() const;
  bool closed() const;
  bool session_reused() const;
  bool early_data_accepted() const;
  // Response heads and trailer sections that could not be decoded when they arrived: they
  // refer to QPACK dynamic-table entries (RFC 9204 §2.1.2) whose inserts had not come yet on
  // the server's encoder stream, so they waited for them. Expected under loss; otherwise a sign
  // that the server sends its encoder stream behind response data.
  size_t qpack_blocked_sections() const;
  // QUIC version and TLS cipher in use ("" / 0 before the handshake).
  uint32_t version() const;
  std::string cipher() const;
  SocketAddress local_address() const;
  EventLoop* loop();

  class Impl;

 private:
  explicit Http3Client(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace petrel

#endif  // PETREL_HTTP_HTTP3_CLIENT_H_
