// The h3 engine against malformed requests: a small nghttp3 client session over QuicClient sends
// requests that break RFC 9114 §4.2 / §4.3.1 rules (nghttp3's client side encodes whatever it is
// given) and expects each to end in a stream error H3_MESSAGE_ERROR, while a valid request on
// the same connection still gets its 200.
#include <gtest/gtest.h>
#include <nghttp3/nghttp3.h>
#include <ngtcp2/ngtcp2.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "h3_test_server.h"
#include "http/library_nv.h"
#include "petrel/common/timer.h"
#include "petrel/http/request_observer.h"
#include "petrel/quic/quic_client.h"
#include "support/command.h"

namespace petrel::http {
namespace {

using Fields = std::vector<std::pair<std::string, std::string>>;

struct Outcome {
  std::string status;
  std::string body;
  uint64_t reset = 0;  // app error of the peer's RESET_STREAM, 0 if none
  bool closed = false;
};

// A minimal HTTP/3 client on one QuicConnection; loop thread only.
class MiniH3Client {
 public:
  // `bodies[i]`, if present and non-empty, is sent as request i's body (no content-length).
  // Requests in `open_bodies` send theirs without ending it: the stream stays open.
  explicit MiniH3Client(std::vector<Fields> requests, std::vector<std::string> bodies = {},
                        std::set<size_t> open_bodies = {})
      : requests_(std::move(requests)),
        bodies_(std::move(bodies)),
        open_bodies_(std::move(open_bodies)) {
    bodies_.resize(requests_.size());
  }
  ~MiniH3Client() {
    if (h3_ != nullptr) nghttp3_conn_del(h3_);
  }

  void OnConnected(QuicConnection& qc) {
    qc_ = &qc;
    nghttp3_callbacks cb{};
    cb.recv_header = [](nghttp3_conn*, int64_t id, int32_t, nghttp3_rcbuf* name,
                        nghttp3_rcbuf* value, uint8_t, void* user, void*) {
      auto* self = static_cast<MiniH3Client*>(user);
      const nghttp3_vec n = nghttp3_rcbuf_get_buf(name);
      const nghttp3_vec v = nghttp3_rcbuf_get_buf(value);
      if (absl::string_view(reinterpret_cast<const char*>(n.base), n.len) == ":status") {
        self->outcomes_[id].status.assign(reinterpret_cast<const char*>(v.base), v.len);
      }
      return 0;
    };
    cb.recv_data = [](nghttp3_conn*, int64_t id, const uint8_t* data, size_t len, void* user,
                      void*) {
      auto* self = static_cast<MiniH3Client*>(user);
      self->outcomes_[id].body.append(reinterpret_cast<const char*>(data), len);
      if (self->withheld_.count(id) == 0) self->qc_->Consume(id, len);
      return 0;
    };
    cb.shutdown = [](nghttp3_conn*, int64_t id, void* user) {
      static_cast<MiniH3Client*>(user)->goaway_id_ = id;
      return 0;
    };
    cb.deferred_consume = [](nghttp3_conn*, int64_t id, size_t n, void* user, void*) {
      static_cast<MiniH3Client*>(user)->qc_->Consume(id, n);
      return 0;
    };
    nghttp3_settings settings;
    nghttp3_settings_default(&settings);
    ASSERT_EQ(nghttp3_conn_client_new(&h3_, &cb, &settings, nullptr, this), 0);
    const int64_t ctrl = qc.OpenUniStream();
    const int64_t qenc = qc.OpenUniStream();
    const int64_t qdec = qc.OpenUniStream();
    ASSERT_GE(qdec, 0);
    ASSERT_EQ(nghttp3_conn_bind_control_stream(h3_, ctrl), 0);
    ASSERT_EQ(nghttp3_conn_bind_qpack_streams(h3_, qenc, qdec), 0);
    for (size_t r = 0; r < requests_.size(); ++r) {
      const Fields& fields = requests_[r];
      const int64_t id = qc.OpenBidiStream();
      ASSERT_GE(id, 0);
      std::vector<nghttp3_nv> nva;
      for (const auto& [name, value] : fields) {
        nva.push_back(http_internal::MakeLibraryNv<nghttp3_nv>(name, value, NGHTTP3_NV_FLAG_NONE));
      }
      nghttp3_data_reader reader{[](nghttp3_conn*, int64_t, nghttp3_vec* vec, size_t,
                                    uint32_t* flags, void*, void* stream_user) -> nghttp3_ssize {
        auto* body = static_cast<std::string*>(stream_user);
        *flags |= NGHTTP3_DATA_FLAG_EOF;
        vec[0].base = reinterpret_cast<uint8_t*>(body->data());
        vec[0].len = body->size();
        return 1;
      }};
      // An open body never has a byte ready: HEADERS go without FIN and the stream stays
      // blocked in nghttp3.
      nghttp3_data_reader open_reader{
          [](nghttp3_conn*, int64_t, nghttp3_vec*, size_t, uint32_t*, void*,
             void*) -> nghttp3_ssize { return NGHTTP3_ERR_WOULDBLOCK; }};
      std::string* body = &bodies_[r];
      const bool open = open_bodies_.count(r) != 0;
      ASSERT_EQ(nghttp3_conn_submit_request(h3_, id, nva.data(), nva.size(),
                                            open            ? &open_reader
                                            : body->empty() ? nullptr
                                                            : &reader,
                                            body),
                0);
      ids_.push_back(id);
      outcomes_[id];
    }
    Flush();
  }

  void OnStreamData(int64_t id, absl::string_view data, bool fin) {
    const nghttp3_ssize n = nghttp3_conn_read_stream(
        h3_, id, reinterpret_cast<const uint8_t*>(data.data()), data.size(), fin ? 1 : 0);
    ASSERT_GE(n, 0) << nghttp3_strerror(static_cast<int>(n));
    qc_->Consume(id, static_cast<size_t>(n));
    Flush();
    if (on_data_ && outcomes_.count(id) != 0) on_data_(*this, id, outcomes_[id].body.size());
  }
  void OnStreamReset(int64_t id, uint64_t error) {
    if (outcomes_.count(id) != 0) outcomes_[id].reset = error;
    nghttp3_conn_shutdown_stream_read(h3_, id);
  }
  // True once every request stream closed.
  bool OnStreamClosed(int64_t id) {
    nghttp3_conn_close_stream(h3_, id, NGHTTP3_H3_NO_ERROR);
    if (outcomes_.count(id) != 0) outcomes_[id].closed = true;
    if (on_closed_) on_closed_(*this, id);
    for (int64_t r : ids_) {
      if (!outcomes_[r].closed) return false;
    }
    all_closed_ = true;
    return true;
  }

  // Runs after response data arrived on a request stream, with the body bytes so far (outside
  // nghttp3's callbacks).
  void set_on_data(std::function<void(MiniH3Client&, int64_t, size_t)> f) {
    on_data_ = std::move(f);
  }
  QuicConnection* connection() const { return qc_; }
  // Runs after each stream closed (e.g. to reset another request).
  void set_on_closed(std::function<void(MiniH3Client&, int64_t)> f) { on_closed_ = std::move(f); }
  // Request stream ids in request order.
  const std::vector<int64_t>& ids() const { return ids_; }
  // Cancels request `i`: RESET_STREAM + STOP_SENDING.
  void Cancel(size_t i) {
    nghttp3_conn_shutdown_stream_write(h3_, ids_[i]);
    qc_->ResetStream(ids_[i], NGHTTP3_H3_REQUEST_CANCELLED);
  }
  // Never gives request `i`'s response body its flow-control credit back: the stream's window
  // stays shut once the server has filled it.
  void WithholdCredit(size_t i) { withheld_.insert(ids_[i]); }
  // Asks the server to stop sending request `i`'s response (STOP_SENDING only).
  void StopReading(size_t i) {
    nghttp3_conn_shutdown_stream_read(h3_, ids_[i]);
    qc_->StopSending(ids_[i], NGHTTP3_H3_REQUEST_CANCELLED);
  }
  // The id of the server's last GOAWAY, -1 if none came.
  int64_t goaway_id() const { return goaway_id_; }

  // Outcomes in request order.
  std::vector<Outcome> outcomes() {
    std::vector<Outcome> v;
    for (int64_t id : ids_) v.push_back(outcomes_[id]);
    return v;
  }

 private:
  void Flush() {
    // Once every request is over the connection closes: what nghttp3 still has (a QPACK
    // decoder stream cancellation for a stream the server reset) stays unsent.
    if (all_closed_) return;
    nghttp3_vec vec[16];
    for (;;) {
      int64_t id = -1;
      int fin = 0;
      const nghttp3_ssize n = nghttp3_conn_writev_stream(h3_, &id, &fin, vec, 16);
      ASSERT_GE(n, 0);
      if (id < 0) return;
      size_t written = 0;
      for (nghttp3_ssize i = 0; i < n; ++i) {
        const absl::string_view b(reinterpret_cast<const char*>(vec[i].base), vec[i].len);
        ASSERT_TRUE(qc_->Write(id, b, fin != 0 && i + 1 == n));  // tiny: always fits
        written += b.size();
      }
      if (n == 0 && fin != 0) {
        ASSERT_TRUE(qc_->Write(id, {}, true));
      }
      nghttp3_conn_add_write_offset(h3_, id, written);
      nghttp3_conn_add_ack_offset(h3_, id, written);
    }
  }

  std::vector<Fields> requests_;
  std::vector<std::string> bodies_;
  std::set<size_t> open_bodies_;
  std::vector<int64_t> ids_;
  std::map<int64_t, Outcome> outcomes_;
  QuicConnection* qc_ = nullptr;
  nghttp3_conn* h3_ = nullptr;
  int64_t goaway_id_ = -1;
  std::set<int64_t> withheld_;  // streams whose body credit is never returned
  bool all_closed_ = false;     // every request stream closed: the connection is closing
  std::function<void(MiniH3Client&, int64_t)> on_closed_;
  std::function<void(MiniH3Client&, int64_t, size_t)> on_data_;
};

// Runs the requests on one connection to `server`; bounded by a 20 s timer. `close_error`, if
// given, gets the client's QuicClient::close_error() (NGTCP2_ERR_DRAINING: the server closed).
std::vector<Outcome> RunRequests(const H3TestServer& server, MiniH3Client& h3,
                                 int* close_error = nullptr) {
  QuicClientConfig qc;
  qc.server = *SocketAddress::Parse("127.0.0.1", server.port());
  qc.alpn = {"h3"};
  qc.verify_peer = false;
  QuicClient* client = nullptr;
  QuicClientCallbacks cb;
  cb.on_connected = [&](QuicConnection& c) { h3.OnConnected(c); };
  cb.on_stream_data = [&](QuicConnection&, int64_t s, absl::string_view d, bool fin) {
    h3.OnStreamData(s, d, fin);
  };
  cb.on_stream_reset = [&](QuicConnection&, int64_t s, uint64_t e) { h3.OnStreamReset(s, e); };
  cb.on_stream_closed = [&](QuicConnection& c, int64_t s) {
    if (h3.OnStreamClosed(s)) c.Close(0);
  };
  absl::StatusOr<std::unique_ptr<QuicClient>> made = QuicClient::Create(qc, std::move(cb));
  EXPECT_TRUE(made.ok()) << made.status();
  if (!made.ok()) return {};
  client = made->get();
  Timer deadline(client->loop(), [client] { client->Stop(); });
  deadline.StartAfter(std::chrono::seconds(20));
  EXPECT_TRUE(client->Connect().ok());
  client->Run();
  deadline.Cancel();
  if (close_error != nullptr) *close_error = client->close_error();
  return h3.outcomes();
}

Fields Get(std::string path) {
  return {{":method", "GET"},
          {":scheme", "https"},
          {":authority", "localhost"},
          {":path", std::move(path)}};
}

TEST(H3HostileTest, MalformedRequestsAreStreamErrors) {
  H3TestServer::Options options;
  H3TestServer server(options);
  ASSERT_TRUE(server.ok());
  std::vector<Fields> requests;
  std::vector<std::string> what;
  auto add = [&](std::string name, Fields f) {
    what.push_back(std::move(name));
    requests.push_back(std::move(f));
  };
  add("valid", Get("/hello"));
  add("no :path", {{":method", "GET"}, {":scheme", "https"}, {":authority", "localhost"}});
  add("no :method", {{":scheme", "https"}, {":authority", "localhost"}, {":path", "/hello"}});
  add("relative :path", Get("hello"));
  add("no authority", {{":method", "GET"}, {":scheme", "https"}, {":path", "/hello"}});
  // (Uppercase names cannot be sent this way: nghttp3's encoder lowercases them.)
  Fields conn = Get("/hello");
  conn.emplace_back("connection", "close");
  add("connection-specific field", conn);
  Fields te = Get("/hello");
  te.emplace_back("te", "gzip");
  add("te other than trailers", te);
  Fields te_trailers = Get("/hello");
  te_trailers.emplace_back("te", "trailers");
  add("valid with te: trailers", te_trailers);
  Fields chunked = Get("/hello");
  chunked.emplace_back("transfer-encoding", "chunked");
  add("transfer-encoding", chunked);
  Fields unknown = Get("/hello");
  unknown.emplace_back(":foo", "bar");
  add("unknown pseudo-header", unknown);
  Fields late = {{":method", "GET"},
                 {":scheme", "https"},
                 {"x-a", "1"},
                 {":authority", "localhost"},
                 {":path", "/hello"}};
  add("pseudo-header after a field", late);
  add("CONNECT with :path",
      {{":method", "CONNECT"}, {":authority", "localhost:443"}, {":path", "/"}});
  Fields dup = Get("/hello");
  dup.emplace_back(":path", "/again");
  add("duplicate :path", dup);
  add("duplicate :method",
      {{":method", "GET"}, {":method", "GET"}, {":scheme", "https"}, {":path", "/hello"}});
  Fields protocol = Get("/hello");
  protocol.emplace_back(":protocol", "websocket");
  add(":protocol (extended CONNECT is not enabled)", protocol);
  add("CONNECT with :scheme",
      {{":method", "CONNECT"}, {":scheme", "https"}, {":authority", "localhost:443"}});
  add("CONNECT without :authority", {{":method", "CONNECT"}});
  add("* for GET", Get("*"));
  add("valid: http with Host instead of :authority",
      {{":method", "GET"}, {":scheme", "http"}, {":path", "/hello"}, {"host", "localhost"}});
  add("valid: a query", Get("/hello?a=b"));
  add("valid again", Get("/hello"));

  MiniH3Client h3(requests);
  const std::vector<Outcome> out = RunRequests(server, h3);
  ASSERT_EQ(out.size(), requests.size());
  for (size_t i = 0; i < out.size(); ++i) {
    SCOPED_TRACE(what[i]);
    EXPECT_TRUE(out[i].closed);
    if (what[i].rfind("valid", 0) == 0) {
      EXPECT_EQ(out[i].status, "200");
      EXPECT_EQ(out[i].body, "hello");
      EXPECT_EQ(out[i].reset, 0u);
    } else {
      EXPECT_EQ(out[i].status, "");
      EXPECT_EQ(out[i].reset, uint64_t{NGHTTP3_H3_MESSAGE_ERROR});
    }
  }
}

// Waits (bounded) for a counter the server thread bumps.
bool WaitFor(const std::function<bool()>& done) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

// A body that disagrees with its content-length makes the request malformed (RFC 9114 §4.1.2):
// an error of that stream, H3_MESSAGE_ERROR; the connection and its other requests go on.
TEST(H3HostileTest, BodyThatDisagreesWithContentLengthIsAStreamError) {
  H3TestServer::Options options;
  H3TestServer server(options);
  ASSERT_TRUE(server.ok());
  Fields longer = Get("/sha256");
  longer[0].second = "POST";
  longer.emplace_back("content-length", "3");
  Fields shorter = longer;
  shorter.back().second = "10";
  MiniH3Client h3({longer, Get("/hello"), shorter, Get("/hello")},
                  {"hello", std::string(), "hello", std::string()});
  int close_error = -1;
  const std::vector<Outcome> out = RunRequests(server, h3, &close_error);
  ASSERT_EQ(out.size(), 4u);
  for (size_t i : {0, 2}) {
    SCOPED_TRACE(i);
    EXPECT_EQ(out[i].status, "");
    EXPECT_EQ(out[i].reset, uint64_t{NGHTTP3_H3_MESSAGE_ERROR});
  }
  for (size_t i : {1, 3}) {
    SCOPED_TRACE(i);
    EXPECT_EQ(out[i].status, "200");
    EXPECT_EQ(out[i].body, "hello");
  }
  EXPECT_EQ(close_error, 0);  // the client closed it, after every stream; not the server
  EXPECT_EQ(server.uploads_hashed(), 0);
}

TEST(H3HostileTest, BodyOverTheLimitWithoutContentLengthResetsTheStream) {
  H3TestServer::Options options;
  options.h3.max_request_body = 64 * 1024;
  H3TestServer server(options);
  ASSERT_TRUE(server.ok());
  Fields post = Get("/sha256");
  post[0].second = "POST";
  MiniH3Client h3({post, post, Get("/hello")},
                  {std::string(512 * 1024, 'x'), std::string(1000, 'y'), std::string()});
  const std::vector<Outcome> out = RunRequests(server, h3);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].reset, uint64_t{NGHTTP3_H3_REQUEST_CANCELLED});
  EXPECT_EQ(out[0].status, "");
  // Within the limit: hashed (sha256 of 1000 'y's) and answered.
  EXPECT_EQ(out[1].status, "200");
  EXPECT_EQ(out[1].body.substr(out[1].body.find(' ') + 1), "1000");
  EXPECT_EQ(out[2].status, "200");
  EXPECT_EQ(server.uploads_hashed(), 1);
}

TEST(H3HostileTest, OversizedFieldSectionGets431) {
  H3TestServer::Options options;
  H3TestServer server(options);
  ASSERT_TRUE(server.ok());
  Fields big = Get("/hello");
  big.emplace_back("x-big", std::string(70 * 1024, 'b'));
  MiniH3Client h3({big, Get("/hello")});
  const std::vector<Outcome> out = RunRequests(server, h3);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].status, "431");
  EXPECT_EQ(out[1].status, "200");
}

TEST(H3HostileTest, ClientCancelAbandonsTheHandlersResponse) {
  H3TestServer::Options options;
  H3TestServer server(options);
  ASSERT_TRUE(server.ok());
  // /hold is dispatched and never answered; once /hello (sent after it) is done, the client
  // cancels /hold. The engine must cancel the Response (on_cancel runs once) and keep the
  // connection usable.
  MiniH3Client h3({Get("/hold"), Get("/hello")});
  h3.set_on_closed([](MiniH3Client& c, int64_t id) {
    if (id == c.ids()[1]) c.Cancel(0);
  });
  const std::vector<Outcome> out = RunRequests(server, h3);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[1].status, "200");
  EXPECT_EQ(out[1].body, "hello");
  EXPECT_TRUE(out[0].closed);
  EXPECT_EQ(out[0].status, "");
  EXPECT_TRUE(WaitFor([&] { return server.holds_cancelled() == 1; }));
}

TEST(H3HostileTest, StopSendingCancelsTheHandlersResponse) {
  H3TestServer::Options options;
  H3TestServer server(options);
  ASSERT_TRUE(server.ok());
  // Only the receiving side of /hold is ended (its request is complete): the server must give
  // up the response — the handler is cancelled and the stream reset with the client's code —
  // and go on serving the connection.
  MiniH3Client h3({Get("/hold"), Get("/hello"), Get("/hello")});
  h3.set_on_closed([](MiniH3Client& c, int64_t id) {
    if (id == c.ids()[1]) c.StopReading(0);
  });
  const std::vector<Outcome> out = RunRequests(server, h3);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_TRUE(out[0].closed);
  EXPECT_EQ(out[0].status, "");
  EXPECT_EQ(out[0].reset, uint64_t{NGHTTP3_H3_REQUEST_CANCELLED});
  EXPECT_EQ(out[1].body, "hello");
  EXPECT_EQ(out[2].body, "hello");
  EXPECT_TRUE(WaitFor([&] { return server.holds_cancelled() == 1; }));
}

// A large file for the mid-response tests: the server has much of it written by reference and
// unacknowledged when the response is cut.
class MidResponseTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(files_.path().empty());
    std::string big(8 << 20, '\0');
    for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 131 + (i >> 9));
    std::ofstream(files_.path() / "big", std::ios::binary).write(big.data(), big.size());
    H3TestServer::Options options;
    options.files_dir = files_.path().string();
    server_ = std::make_unique<H3TestServer>(options);
    ASSERT_TRUE(server_->ok());
  }
  // The server still answers on a fresh connection.
  void ExpectServerHealthy() {
    MiniH3Client again({Get("/hello")});
    const std::vector<Outcome> out = RunRequests(*server_, again);
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].body, "hello");
  }

  ::petrel::testing::TempDir files_;
  std::unique_ptr<H3TestServer> server_;
};

TEST_F(MidResponseTest, ClientResetMidResponseEndsOnlyThatStream) {
  MiniH3Client h3({Get("/files/big"), Get("/hello"), Get("/files/big")});
  bool cancelled = false;
  h3.set_on_data([&cancelled](MiniH3Client& c, int64_t id, size_t bytes) {
    if (!cancelled && id == c.ids()[0] && bytes >= 256 * 1024) {
      cancelled = true;
      c.Cancel(0);
    }
  });
  const std::vector<Outcome> out = RunRequests(*server_, h3);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_TRUE(cancelled);
  EXPECT_TRUE(out[0].closed);
  EXPECT_LT(out[0].body.size(), size_t{8} << 20);
  EXPECT_EQ(out[1].body, "hello");
  EXPECT_EQ(out[2].status, "200");
  EXPECT_EQ(out[2].body.size(), size_t{8} << 20);
  ExpectServerHealthy();
}

TEST_F(MidResponseTest, ClientStopSendingMidResponseResetsThatStream) {
  MiniH3Client h3({Get("/files/big"), Get("/hello")});
  bool stopped = false;
  h3.set_on_data([&stopped](MiniH3Client& c, int64_t id, size_t bytes) {
    if (!stopped && id == c.ids()[0] && bytes >= 256 * 1024) {
      stopped = true;
      c.StopReading(0);
    }
  });
  const std::vector<Outcome> out = RunRequests(*server_, h3);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_TRUE(stopped);
  EXPECT_TRUE(out[0].closed);
  EXPECT_EQ(out[0].reset, uint64_t{NGHTTP3_H3_REQUEST_CANCELLED});
  EXPECT_EQ(out[1].body, "hello");
  ExpectServerHealthy();
}

TEST_F(MidResponseTest, ConnectionCloseMidResponse) {
  MiniH3Client h3({Get("/files/big"), Get("/files/big")});
  bool closed = false;
  h3.set_on_data([&closed](MiniH3Client& c, int64_t id, size_t bytes) {
    if (!closed && id == c.ids()[1] && bytes >= 256 * 1024) {
      closed = true;
      c.connection()->Close(0);
    }
  });
  const std::vector<Outcome> out = RunRequests(*server_, h3);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_TRUE(closed);
  EXPECT_LT(out[1].body.size(), size_t{8} << 20);
  ExpectServerHealthy();
}

// Counts the protection limits the engine reports (any thread).
class PeerLimitCounter final : public RequestObserver {
 public:
  void OnRequestDone(const RequestRecord&) override {}
  void OnPeerLimit(HttpProtocol protocol, PeerLimit limit) override {
    if (protocol != HttpProtocol::kHttp3) return;
    if (limit == PeerLimit::kRapidReset) ++rapid_resets;
    if (limit == PeerLimit::kBodyTimeout) ++body_timeouts;
    if (limit == PeerLimit::kSendTimeout) ++send_timeouts;
    if (limit == PeerLimit::kHeaderTimeout) ++header_timeouts;
    if (limit == PeerLimit::kProtocolError) ++protocol_errors;
  }
  std::atomic<int> header_timeouts{0};
  std::atomic<int> protocol_errors{0};
  std::atomic<int> rapid_resets{0};
  std::atomic<int> body_timeouts{0};
  std::atomic<int> send_timeouts{0};
};

// A request body that stops while the client keeps the connection (so QUIC's idle timeout
// never comes): after the body timeout the stream is reset with H3_REQUEST_CANCELLED, and the
// connection goes on serving.
TEST(H3HostileTest, StalledRequestBodyIsReset) {
  PeerLimitCounter observer;
  H3TestServer::Options options;
  options.h3.body_timeout = std::chrono::seconds(1);
  options.h3.observer = &observer;
  H3TestServer server(options);
  ASSERT_TRUE(server.ok());
  Fields post = Get("/sha256");
  post[0].second = "POST";
  MiniH3Client h3({post, Get("/hello")}, {}, {0});
  const std::vector<Outcome> out = RunRequests(server, h3);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].reset, uint64_t{NGHTTP3_H3_REQUEST_CANCELLED});
  EXPECT_TRUE(out[0].closed);
  EXPECT_EQ(out[1].body, "hello");
  EXPECT_EQ(observer.body_timeouts.load(), 1);
}

// A client that keeps a response's window shut (never returns its credit) while it keeps the
// connection: after the send timeout the stream is reset with H3_REQUEST_CANCELLED and counted;
// the connection goes on serving. (QUIC acknowledges what arrived; nothing moves, so the bytes
// the server queued beyond the window wait unacknowledged.)
TEST(H3HostileTest, ResponseHeldBackByAShutWindowIsReset) {
  ::petrel::testing::TempDir files;
  ASSERT_FALSE(files.path().empty());
  std::ofstream(files.path() / "big", std::ios::binary) << std::string(8 << 20, 'b');
  PeerLimitCounter observer;
  H3TestServer::Options options;
  options.files_dir = files.path().string();
  options.h3.send_timeout = std::chrono::seconds(1);
  options.h3.observer = &observer;
  H3TestServer server(options);
  ASSERT_TRUE(server.ok());
  MiniH3Client h3({Get("/files/big"), Get("/hello")});
  bool withheld = false;
  h3.set_on_data([&withheld](MiniH3Client& c, int64_t, size_t) {
    if (!withheld) c.WithholdCredit(0);
    withheld = true;
  });
  const std::vector<Outcome> out = RunRequests(server, h3);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].status, "200");
  EXPECT_EQ(out[0].reset, uint64_t{NGHTTP3_H3_REQUEST_CANCELLED});
  EXPECT_LT(out[0].body.size(), size_t{8} << 20);
  EXPECT_TRUE(out[0].closed);
  EXPECT_EQ(out[1].body, "hello");
  EXPECT_EQ(observer.send_timeouts.load(), 1);
}

// Rapid reset, the HTTP/3 form of CVE-2023-44487: a client cancelling request after request
// before they are answered is closed once it goes over H3Options::max_resets in a window. A
// well-behaved client on another connection meanwhile gets every answer.
TEST(H3HostileTest, RapidResetClosesTheConnection) {
  PeerLimitCounter observer;
  H3TestServer::Options options;
  options.h3.max_resets = 10;
  options.h3.reset_window = std::chrono::seconds(60);
  options.h3.observer = &observer;
  H3TestServer server(options);
  ASSERT_TRUE(server.ok());

  // 30 /gate requests (each response sends "gate:", then waits); the client cancels each as
  // its first bytes arrive, but the last, which stays open so that only the server can end the
  // connection (a client whose streams all closed would close it, perhaps before its resets
  // left).
  MiniH3Client attacker(std::vector<Fields>(30, Get("/gate")));
  std::set<int64_t> cancelled;
  attacker.set_on_data([&cancelled](MiniH3Client& c, int64_t id, size_t bytes) {
    for (size_t i = 0; i + 1 < c.ids().size(); ++i) {
      if (c.ids()[i] == id && bytes > 0 && cancelled.insert(id).second) c.Cancel(i);
    }
  });
  std::vector<Fields> polite_requests(50, Get("/hello"));
  MiniH3Client polite(polite_requests);
  std::vector<Outcome> polite_out;
  std::thread polite_thread([&] { polite_out = RunRequests(server, polite); });
  int close_error = 0;
  const std::vector<Outcome> out = RunRequests(server, attacker, &close_error);
  polite_thread.join();

  EXPECT_GT(cancelled.size(), 10u);
  EXPECT_EQ(close_error, NGTCP2_ERR_DRAINING) << "the server did not close the connection";
  EXPECT_EQ(observer.rapid_resets.load(), 1);
  ASSERT_EQ(polite_out.size(), 50u);
  for (const Outcome& o : polite_out) EXPECT_EQ(o.body, "hello");
}

// Unknown frame and stream types must be ignored (RFC 9114 §9): a client that opens 90
// unidirectional streams of a reserved type, each carrying junk and FIN, then sends a request
// whose HEADERS come after 20 000 reserved frames, gets its answer; the bytes are credited back
// as they are read. (90: the server never closes a client's unidirectional stream, so their
// credit, 100 per connection, is not given back; see docs/limits.md.)
TEST(H3HostileTest, UnknownFrameAndStreamTypesAreIgnored) {
  H3TestServer server(H3TestServer::Options{});
  ASSERT_TRUE(server.ok());
  constexpr int kUniStreams = 90;
  // A reserved stream type (0x1f * N + 0x21, N = 0), then junk.
  const std::string uni_junk = "\x21" + std::string(1000, 'j');
  // 20 000 reserved frames (type 0x21, length 1), then HEADERS for GET /hello with static-table
  // references and literals only (a client without a control stream gets no dynamic table):
  // required insert count 0, base 0, :method GET (17), :scheme https (23), :path "/hello" and
  // :authority "localhost" as literals with static name references (1 and 0).
  std::string request;
  for (int i = 0; i < 20000; ++i) request += std::string("\x21\x01z", 3);
  const std::string fields =
      std::string("\x00\x00\xd1\xd7", 4) + "\x51\x06/hello" + "\x50\x09localhost";
  request += "\x01" + std::string(1, static_cast<char>(fields.size())) + fields;

  int uni_opened = 0;
  int64_t request_stream = -1;
  std::string response;
  bool response_done = false;
  QuicClientConfig qc;
  qc.server = *SocketAddress::Parse("127.0.0.1", server.port());
  qc.alpn = {"h3"};
  qc.verify_peer = false;
  QuicClient* client = nullptr;
  auto open_more = [&](QuicConnection& c) {
    while (uni_opened < kUniStreams) {
      const int64_t id = c.OpenUniStream();
      ASSERT_GE(id, 0);
      ASSERT_TRUE(c.Write(id, uni_junk, true));
      ++uni_opened;
    }
    if (request_stream >= 0) return;
    request_stream = c.OpenBidiStream();
    ASSERT_GE(request_stream, 0);
    ASSERT_TRUE(c.Write(request_stream, request, true));
  };
  QuicClientCallbacks cb;
  cb.on_connected = [&](QuicConnection& c) { open_more(c); };
  cb.on_stream_data = [&](QuicConnection& c, int64_t s, absl::string_view d, bool fin) {
    c.Consume(s, d.size());
    if (s != request_stream) return;  // the server's control and QPACK streams
    response.append(d.data(), d.size());
    if (fin) {
      response_done = true;
      c.Close(0);
    }
  };
  absl::StatusOr<std::unique_ptr<QuicClient>> made = QuicClient::Create(qc, std::move(cb));
  ASSERT_TRUE(made.ok()) << made.status();
  client = made->get();
  Timer deadline(client->loop(), [client] { client->Stop(); });
  deadline.StartAfter(std::chrono::seconds(20));
  ASSERT_TRUE(client->Connect().ok());
  client->Run();
  deadline.Cancel();
  EXPECT_EQ(uni_opened, kUniStreams);
  EXPECT_TRUE(response_done) << "no complete response";
  EXPECT_NE(response.find("hello"), std::string::npos) << response.size() << " octets";
}

TEST(H3HostileTest, GoawayLetsInFlightRequestsFinish) {
  H3TestServer::Options options;
  options.h3.max_requests = 1;  // GOAWAY after the first request
  options.files_dir = "/nonexistent";
  H3TestServer server(options);
  ASSERT_TRUE(server.ok());
  // The first request triggers GOAWAY, sent with that request's response at the end of the
  // read that dispatched it: the GOAWAY id admits the requests the server had seen. Those are
  // answered; a later one is refused with H3_REQUEST_REJECTED (the client may retry it).
  MiniH3Client h3({Get("/hello"), Get("/hello"), Get("/hello")});
  const std::vector<Outcome> out = RunRequests(server, h3);
  ASSERT_EQ(out.size(), 3u);
  ASSERT_GT(h3.goaway_id(), h3.ids()[0]);
  for (size_t i = 0; i < out.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_TRUE(out[i].closed);
    if (h3.ids()[i] < h3.goaway_id()) {
      EXPECT_EQ(out[i].status, "200");
      EXPECT_EQ(out[i].body, "hello");
    } else {
      EXPECT_EQ(out[i].status, "");
      EXPECT_EQ(out[i].reset, uint64_t{NGHTTP3_H3_REQUEST_REJECTED});
    }
  }
}

// ---- QPACK abuse: a client that writes raw HTTP/3 and QPACK bytes ----

// A QPACK prefixed integer (RFC 9204 §4.1.1): `flags` in the first byte's high bits, `bits` of
// prefix.
std::string QpackInt(uint8_t flags, int bits, uint64_t value) {
  const uint64_t max = (uint64_t{1} << bits) - 1;
  std::string out;
  if (value < max) return std::string(1, static_cast<char>(flags | value));
  out += static_cast<char>(flags | max);
  value -= max;
  while (value >= 128) {
    out += static_cast<char>(0x80 | (value & 0x7f));
    value >>= 7;
  }
  out += static_cast<char>(value);
  return out;
}

// A HEADERS frame for GET /hello: the field section prefix `prefix` (Required Insert Count and
// Base), the pseudo-headers from the static table and literals, then `more` field lines.
std::string HelloHeaders(const std::string& prefix, const std::string& more = "") {
  const std::string fields = prefix + "\xd1\xd7" + "\x51\x06/hello" + "\x50\x09localhost" + more;
  return "\x01" + QpackInt(0, 8, fields.size()) + fields;  // (a length < 64 is one varint byte)
}
// The prefix of a field section that needs the peer's first dynamic-table insert (Required
// Insert Count 1 with the server's 4096-byte table: encoded 2; Base 1) and, as its last field
// line, that entry (indexed, dynamic, relative index 0).
const std::string kNeedsFirstInsert = std::string("\x02\x00", 2);
const std::string kFirstInsertField = "\x80";

struct RawOutcome {
  std::vector<std::string> responses;  // per request stream: the bytes received
  std::vector<bool> finished;
  std::vector<uint64_t> resets;  // app error of the server's RESET_STREAM, 0 if none
  bool server_closed = false;
  uint64_t close_code = 0;  // of the server's CONNECTION_CLOSE
};

// Connects to `server`, writes each of `uni` on a unidirectional stream of its own (type byte
// included, no FIN: QPACK streams are critical) and each of `requests` on a request stream
// (with FIN), and collects what comes back until every request stream finished or was reset,
// or the server closed the connection; bounded by 20 s. With `inserts_first` the requests wait
// until the server's QPACK decoder stream has acknowledged that many inserts (Insert Count
// Increment): a request whose Required Insert Count is far ahead of what the server has read
// decodes to another count (RFC 9204 §4.5.1.1), and the inserts of a large encoder stream can
// reach the server after a request sent with them.
RawOutcome RunRaw(const H3TestServer& server, const std::vector<std::string>& uni,
                  const std::vector<std::string>& requests, uint64_t inserts_first = 0) {
  RawOutcome out;
  out.responses.resize(requests.size());
  out.finished.resize(requests.size());
  out.resets.resize(requests.size());
  std::map<int64_t, size_t> index;
  size_t ended = 0;
  QuicClientConfig qc;
  qc.server = *SocketAddress::Parse("127.0.0.1", server.port());
  qc.alpn = {"h3"};
  qc.verify_peer = false;
  QuicClient* client = nullptr;
  QuicClientCallbacks cb;
  auto send_requests = [&](QuicConnection& c) {
    for (size_t i = 0; i < requests.size(); ++i) {
      const int64_t id = c.OpenBidiStream();
      ASSERT_GE(id, 0);
      index[id] = i;
      ASSERT_TRUE(c.Write(id, requests[i], /*fin=*/true));
    }
  };
  cb.on_connected = [&](QuicConnection& c) {
    for (const std::string& bytes : uni) {
      const int64_t id = c.OpenUniStream();
      ASSERT_GE(id, 0);
      ASSERT_TRUE(c.Write(id, bytes, /*fin=*/false));
    }
    if (inserts_first == 0) send_requests(c);
  };
  auto end_one = [&](QuicConnection& c) {
    if (++ended == requests.size()) c.Close(0);
  };
  // The server's unidirectional streams: their type, then (decoder stream, 0x03) instructions.
  std::map<int64_t, std::string> server_uni;
  uint64_t acknowledged_inserts = 0;
  auto read_decoder_stream = [&](QuicConnection& c, int64_t s, absl::string_view d) {
    std::string& bytes = server_uni[s];
    bytes.append(d.data(), d.size());
    if (bytes.empty() || bytes[0] != 0x03 || acknowledged_inserts >= inserts_first) return;
    size_t at = 1;
    while (at < bytes.size()) {
      const uint8_t first = static_cast<uint8_t>(bytes[at]);
      // Section Acknowledgment 1xxxxxxx (7-bit prefix); Stream Cancellation 01xxxxxx and
      // Insert Count Increment 00xxxxxx (6-bit prefix).
      const int prefix = (first & 0x80) != 0 ? 7 : 6;
      const uint64_t mask = (uint64_t{1} << prefix) - 1;
      uint64_t value = first & mask;
      size_t next = at + 1;
      if (value == mask) {
        int shift = 0;
        bool complete = false;
        while (next < bytes.size()) {
          const uint8_t b = static_cast<uint8_t>(bytes[next++]);
          value += uint64_t{b & 0x7fu} << shift;
          shift += 7;
          if ((b & 0x80) == 0) {
            complete = true;
            break;
          }
        }
        if (!complete) break;  // the rest of this instruction has not come yet
      }
      if ((first & 0xc0) == 0) acknowledged_inserts += value;
      at = next;
    }
    bytes.erase(1, at - 1);
    if (acknowledged_inserts >= inserts_first) send_requests(c);
  };
  cb.on_stream_data = [&](QuicConnection& c, int64_t s, absl::string_view d, bool fin) {
    c.Consume(s, d.size());
    auto it = index.find(s);
    if (it == index.end()) {  // the server's control and QPACK streams
      if (inserts_first != 0 && (s & 0x3) == 0x3) read_decoder_stream(c, s, d);
      return;
    }
    out.responses[it->second].append(d.data(), d.size());
    if (fin) {
      out.finished[it->second] = true;
      end_one(c);
    }
  };
  cb.on_stream_reset = [&](QuicConnection& c, int64_t s, uint64_t error) {
    auto it = index.find(s);
    if (it == index.end() || out.resets[it->second] != 0) return;
    out.resets[it->second] = error;
    end_one(c);
  };
  absl::StatusOr<std::unique_ptr<QuicClient>> made = QuicClient::Create(qc, std::move(cb));
  EXPECT_TRUE(made.ok()) << made.status();
  if (!made.ok()) return out;
  client = made->get();
  Timer deadline(client->loop(), [client] { client->Stop(); });
  deadline.StartAfter(std::chrono::seconds(20));
  EXPECT_TRUE(client->Connect().ok());
  client->Run();
  deadline.Cancel();
  out.server_closed = client->close_error() == NGTCP2_ERR_DRAINING;
  out.close_code = client->peer_close_code();
  return out;
}

// 50 requests on another connection while an attack runs: all answered.
void ExpectPoliteClientServed(const H3TestServer& server) {
  MiniH3Client polite(std::vector<Fields>(50, Get("/hello")));
  const std::vector<Outcome> out = RunRequests(server, polite);
  ASSERT_EQ(out.size(), 50u);
  for (const Outcome& o : out) EXPECT_EQ(o.body, "hello");
}

// Abuses on the peer's unidirectional streams that must close the connection with `code`.
struct ClosingAbuse {
  std::string name;
  std::vector<std::string> uni;
  uint64_t code;
};

// Each abuse on a server of its own, with a polite client on another connection meanwhile: the
// connection is closed with the abuse's code and counted as a protocol error.
void ExpectEachClosesTheConnection(const std::vector<ClosingAbuse>& abuses) {
  for (const ClosingAbuse& a : abuses) {
    SCOPED_TRACE(a.name);
    PeerLimitCounter observer;
    H3TestServer::Options options;
    options.h3.observer = &observer;
    H3TestServer server(options);
    ASSERT_TRUE(server.ok());
    std::thread polite([&server] { ExpectPoliteClientServed(server); });
    const RawOutcome out = RunRaw(server, a.uni, {HelloHeaders(std::string("\x00\x00", 2))});
    polite.join();
    EXPECT_TRUE(out.server_closed);
    EXPECT_EQ(out.close_code, a.code);
    EXPECT_EQ(observer.protocol_errors.load(), 1);
  }
}

// A request whose field section waits for a dynamic-table insert that never comes stays blocked
// in the QPACK decoder; the header timeout resets it (H3_REQUEST_INCOMPLETE) and counts it,
// while a request on the same connection that needs no insert is answered.
TEST(H3HostileTest, QpackBlockedRequestIsResetByTheHeaderTimeout) {
  PeerLimitCounter observer;
  H3TestServer::Options options;
  options.h3.header_timeout = std::chrono::seconds(1);
  options.h3.observer = &observer;
  H3TestServer server(options);
  ASSERT_TRUE(server.ok());
  std::thread polite([&server] { ExpectPoliteClientServed(server); });
  const RawOutcome out = RunRaw(server, {},
                                {HelloHeaders(kNeedsFirstInsert, kFirstInsertField),
                                 HelloHeaders(std::string("\x00\x00", 2))});
  polite.join();
  EXPECT_EQ(out.resets[0], uint64_t{NGHTTP3_H3_REQUEST_INCOMPLETE});
  EXPECT_TRUE(out.finished[1]);
  EXPECT_NE(out.responses[1].find("hello"), std::string::npos);
  EXPECT_FALSE(out.server_closed);
  EXPECT_EQ(observer.header_timeouts.load(), 1);
}

// SETTINGS_QPACK_BLOCKED_STREAMS is a limit: one blocked stream more than it allows closes the
// connection with QPACK_DECOMPRESSION_FAILED (RFC 9204 §2.1.2), counted as a protocol error; a
// client on another connection is served meanwhile.
TEST(H3HostileTest, MoreQpackBlockedStreamsThanAllowedClosesTheConnection) {
  PeerLimitCounter observer;
  H3TestServer::Options options;
  options.h3.qpack_blocked_streams = 2;
  options.h3.observer = &observer;
  H3TestServer server(options);
  ASSERT_TRUE(server.ok());
  std::thread polite([&server] { ExpectPoliteClientServed(server); });
  const std::string blocked = HelloHeaders(kNeedsFirstInsert, kFirstInsertField);
  const RawOutcome out = RunRaw(server, {}, {blocked, blocked, blocked});
  polite.join();
  EXPECT_TRUE(out.server_closed);
  EXPECT_EQ(out.close_code, uint64_t{NGHTTP3_QPACK_DECOMPRESSION_FAILED});
  EXPECT_EQ(observer.protocol_errors.load(), 1);
}

// An encoder stream flood within the table's capacity costs the server that capacity and no
// more: 20 000 inserts (300 KB; the 4096-byte table holds the last 91), then a request that
// refers to the newest entry is answered, and the connection stays up.
TEST(H3HostileTest, EncoderStreamFloodIsBoundedByTheTableCapacity) {
  PeerLimitCounter observer;
  H3TestServer::Options options;
  options.h3.observer = &observer;
  H3TestServer server(options);
  ASSERT_TRUE(server.ok());
  constexpr int kInserts = 20000;
  std::string encoder = "\x02" + QpackInt(0x20, 5, 4096);  // stream type, Set Capacity
  for (int i = 0; i < kInserts; ++i) {
    encoder += "\x43x-f\x0a" + absl::StrFormat("%010d", i);  // Insert With Literal Name
  }
  // Required Insert Count 20 000: encoded (20 000 mod 2·128) + 1 = 33; Base = 20 000.
  const RawOutcome out = RunRaw(
      server, {encoder}, {HelloHeaders(std::string("\x21\x00", 2), kFirstInsertField)}, kInserts);
  EXPECT_TRUE(out.finished[0]);
  EXPECT_NE(out.responses[0].find("hello"), std::string::npos);
  EXPECT_FALSE(out.server_closed);
  EXPECT_EQ(observer.protocol_errors.load(), 0);
}

// Bad QPACK stream instructions close the connection with the stream's error code (RFC 9204
// §4.3, §4.4), counted: a table capacity beyond what the server allowed, and acknowledgements
// of inserts the server never made.
TEST(H3HostileTest, BadQpackInstructionsCloseTheConnection) {
  ExpectEachClosesTheConnection({
      {"capacity over the limit",
       {"\x02" + QpackInt(0x20, 5, 1 << 20)},
       NGHTTP3_QPACK_ENCODER_STREAM_ERROR},
      {"insert count increment past the inserts",
       {"\x03" + QpackInt(0x00, 6, 1000)},
       NGHTTP3_QPACK_DECODER_STREAM_ERROR},
  });
}

// The control stream (RFC 9114 §6.2.1, §7.2): frames of reserved types after SETTINGS are
// ignored (§9) however many come — 10 000 here, and a request on the connection is answered —
// while frames that may not appear there, or a second control stream, close the connection
// with the error RFC 9114 names, counted as a protocol error; a client on another connection is
// served meanwhile.
TEST(H3HostileTest, ControlStreamAbuse) {
  const std::string settings = std::string("\x00\x04\x00", 3);  // stream type, empty SETTINGS
  {
    SCOPED_TRACE("10 000 reserved frames");
    PeerLimitCounter observer;
    H3TestServer::Options options;
    options.h3.observer = &observer;
    H3TestServer server(options);
    ASSERT_TRUE(server.ok());
    std::string control = settings;
    for (int i = 0; i < 10000; ++i) control += std::string("\x21\x01z", 3);
    const RawOutcome out = RunRaw(server, {control}, {HelloHeaders(std::string("\x00\x00", 2))});
    EXPECT_TRUE(out.finished[0]);
    EXPECT_NE(out.responses[0].find("hello"), std::string::npos);
    EXPECT_FALSE(out.server_closed);
    EXPECT_EQ(observer.protocol_errors.load(), 0);
  }
  ExpectEachClosesTheConnection({
      {"DATA on the control stream",
       {settings + std::string("\x00\x01z", 3)},
       NGHTTP3_H3_FRAME_UNEXPECTED},
      {"HEADERS on the control stream",
       {settings + std::string("\x01\x02\x00\x00", 4)},
       NGHTTP3_H3_FRAME_UNEXPECTED},
      {"a second SETTINGS", {settings + std::string("\x04\x00", 2)}, NGHTTP3_H3_FRAME_UNEXPECTED},
      {"no SETTINGS first",
       {std::string("\x00\x07\x01\x00", 4)},  // GOAWAY first
       NGHTTP3_H3_MISSING_SETTINGS},
      {"a second control stream", {settings, settings}, NGHTTP3_H3_STREAM_CREATION_ERROR},
  });
}

}  // namespace
}  // namespace petrel::http
