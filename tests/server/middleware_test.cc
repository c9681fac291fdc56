// Middleware on HttpServer, over every protocol: curl for HTTP/1.1 (cleartext and TLS) and
// HTTP/2 (h2c and TLS), Http3Client for HTTP/3. The chain's order, prefixes, per-route
// middleware, short-circuits, the response-head and done hooks, and the shipped middleware:
// request id (into the access log too), CORS, the rate limiter and Basic/Bearer auth.
#include <atomic>
#include <condition_variable>
#include <fstream>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "petrel/http/cors.h"
#include "petrel/http/http_auth.h"
#include "petrel/http/http_server.h"
#include "petrel/http/rate_limit.h"
#include "petrel/http/request_id.h"
#include "support/command.h"
#include "support/protocol_fetch.h"

namespace petrel {
namespace {

using testing::ReadFile;
using testing::TempDir;

using testing::FetchOver;
using testing::Got;
using testing::NameOf;
using testing::Protocol;

// What a middleware's done hook saw.
struct DoneRecord {
  std::string path;
  int status;
  uint64_t bytes;
  bool completed;
};

class MiddlewareTest : public ::testing::TestWithParam<Protocol> {
 protected:
  void SetUp() override {
    HttpServerConfig c;
    c.http_port = 0;
    c.https_port = 0;
    c.access_log = AccessLogFormat::kJson;
    c.access_log_file = (dir_ / "access.log").string();
    server_ = std::make_unique<HttpServer>(c);
    Router& r = server_->router();
    r.Use(RequestIdMiddleware());
    // The outermost of the test's own: it sees the final head, and how each request ended.
    r.Use([this](Request& req, Response& res, Next next) {
      res.OnCommit([](Response& s) { s.AddHeader("x-order", "outer"); });
      res.OnDone([this, path = std::string(req.path())](const RequestRecord& record) {
        std::lock_guard lock(mu_);
        done_.push_back({path, record.status, record.body_bytes, record.completed});
        done_changed_.notify_all();
      });
      next();
    });
    r.Use("/api/", [](Request&, Response& res, Next next) {
      res.OnCommit([](Response& s) { s.AddHeader("x-order", "api"); });
      next();
    });
    // Answers by itself: the handler behind it never runs.
    r.Use("/api/closed", [](Request&, Response& res, Next) {
      res.Send(503, "closed for maintenance\n", "text/plain");
    });
    // Sees the handler's status and changes it before anything is sent.
    r.Use("/api/renamed", [](Request&, Response& res, Next next) {
      res.OnCommit([](Response& s) {
        if (s.status() == 200) s.set_status(203);
      });
      next();
    });
    CorsOptions cors;
    cors.allowed_origins = {"https://app.example"};
    cors.allowed_methods = {"GET", "PUT"};
    cors.allowed_headers = {"content-type", "x-token"};
    cors.exposed_headers = {"x-request-id"};
    r.Use("/api/", CorsMiddleware(std::move(cors)));
    r.Use("/limited/", RateLimitMiddleware({.requests_per_second = 0.001, .burst = 3}));
    r.Use("/basic/", BasicAuthMiddleware("petrel test",
                                         [](absl::string_view user, absl::string_view password) {
                                           return user == "ana" && password == "s3cret";
                                         }));
    r.Use("/bearer/", BearerAuthMiddleware("petrel test",
                                           [](absl::string_view token) { return token == "t0k"; }));

    const auto hello = [](Request& req, Response& res) {
      std::string who;
      if (const AuthenticatedUser* u = req.context().Get<AuthenticatedUser>()) who = u->name;
      res.Send(200, absl::StrCat("hello ", who, "\n"), "text/plain");
    };
    ASSERT_TRUE(r.Get("/api/items", hello).ok());
    ASSERT_TRUE(r.Get("/api/closed", hello).ok());
    ASSERT_TRUE(r.Get("/api/renamed", hello).ok());
    ASSERT_TRUE(r.Get("/limited/x", hello).ok());
    ASSERT_TRUE(r.Get("/basic/x", hello).ok());
    ASSERT_TRUE(r.Get("/bearer/x", hello).ok());
    ASSERT_TRUE(r.Get("/id", [](Request& req, Response& res) {
                   res.Send(200, std::string(req.context().Get<RequestId>()->value()));
                 }).ok());
    RouteOptions own;
    own.middleware.push_back([](Request& req, Response& res, Next next) {
      req.context().Emplace<AuthenticatedUser>("route's own");
      res.OnCommit([](Response& s) { s.AddHeader("x-order", "route"); });
      next();
    });
    ASSERT_TRUE(r.Get("/api/own", hello, std::move(own)).ok());
    ASSERT_TRUE(r.Get("/stream", [](Request&, Response& res) {
                   StreamingBody& out = res.Stream(200);
                   out.Write(std::string(100000, 's'));
                   out.Finish();
                 }).ok());
    const absl::Status started = server_->Start();
    ASSERT_TRUE(started.ok()) << started;
  }

  // One request over the parameter's protocol (a connection of its own).
  Got Fetch(const std::string& method, const std::string& path,
            const std::vector<std::pair<std::string, std::string>>& fields = {}) {
    return FetchOver(GetParam(), {server_->http_port(), server_->https_port()}, method, path,
                     fields);
  }

  // The done hook's record of the `n`-th request to `path` (waits up to 10 s: the hook runs when
  // the server is done with the request, which may be after the client has the response).
  std::optional<DoneRecord> DoneFor(const std::string& path, size_t n = 1) {
    std::unique_lock lock(mu_);
    std::optional<DoneRecord> found;
    done_changed_.wait_for(lock, std::chrono::seconds(10), [&] {
      size_t seen = 0;
      for (const DoneRecord& d : done_) {
        if (d.path == path && ++seen == n) {
          found = d;
          return true;
        }
      }
      return false;
    });
    return found;
  }

  // The server goes first: its loops run the done hook, which writes into done_ (a request
  // may end after the test's last look at it).
  void TearDown() override { server_.reset(); }

  TempDir dir_;
  std::unique_ptr<HttpServer> server_;
  std::mutex mu_;
  std::condition_variable done_changed_;
  std::vector<DoneRecord> done_;  // under mu_
};

// Registration order, outermost first: the innermost hook runs first, so the head shows
// route, then api, then outer. A short-circuit answers without the handler; a hook changes the
// status; the route's own middleware runs last before its handler.
TEST_P(MiddlewareTest, TheChainRunsInOrderAndSeesTheHead) {
  Got got = Fetch("GET", "/api/items");
  ASSERT_EQ(got.error, "");
  EXPECT_EQ(got.status, 200);
  EXPECT_EQ(got.body, "hello \n");
  EXPECT_EQ(got.Field("x-order"), "api, outer");

  got = Fetch("GET", "/api/own");
  EXPECT_EQ(got.body, "hello route's own\n");
  EXPECT_EQ(got.Field("x-order"), "route, api, outer");

  got = Fetch("GET", "/api/closed");
  EXPECT_EQ(got.status, 503);
  EXPECT_EQ(got.body, "closed for maintenance\n");
  EXPECT_EQ(got.Field("x-order"), "api, outer");

  got = Fetch("GET", "/api/renamed");
  EXPECT_EQ(got.status, 203);
  EXPECT_EQ(got.body, "hello \n");

  // A path no route matches still runs the router's middleware.
  got = Fetch("GET", "/nothing-here");
  EXPECT_EQ(got.status, 404);
  EXPECT_EQ(got.Field("x-order"), "outer");

  // The done hook: status, the body's bytes, completed.
  got = Fetch("GET", "/stream");
  EXPECT_EQ(got.body.size(), 100000u);
  const std::optional<DoneRecord> done = DoneFor("/stream");
  ASSERT_TRUE(done.has_value());
  EXPECT_EQ(done->status, 200);
  EXPECT_EQ(done->bytes, 100000u);
  EXPECT_TRUE(done->completed);
}

// X-Request-Id: a good one is kept, a bad one replaced, none made up; the handler and the
// access log see the same id.
TEST_P(MiddlewareTest, RequestIdGoesInAndOut) {
  Got got = Fetch("GET", "/id", {{"x-request-id", "client-id.42"}});
  EXPECT_EQ(got.Field("x-request-id"), "client-id.42");
  EXPECT_EQ(got.body, "client-id.42");
  got = Fetch("GET", "/id", {{"x-request-id", "bad id with spaces"}});
  EXPECT_EQ(got.Field("x-request-id").size(), 32u) << got.Field("x-request-id");
  EXPECT_EQ(got.body, got.Field("x-request-id"));
  const std::string made = Fetch("GET", "/id").Field("x-request-id");
  EXPECT_EQ(made.size(), 32u);
  EXPECT_NE(made, got.body);                   // each request its own
  ASSERT_TRUE(DoneFor("/id", 3).has_value());  // the third is done, so it is logged
  server_->Stop(std::chrono::seconds(1));
  server_->Wait();
  const std::string log = ReadFile((dir_ / "access.log").string());
  EXPECT_TRUE(absl::StrContains(log, "\"request_id\":\"client-id.42\"")) << log;
  EXPECT_TRUE(absl::StrContains(log, absl::StrCat("\"request_id\":\"", made, "\""))) << log;
}

TEST_P(MiddlewareTest, CorsAnswersPreflightsAndMarksAllowedResponses) {
  // An allowed preflight.
  Got got = Fetch("OPTIONS", "/api/items",
                  {{"origin", "https://app.example"},
                   {"access-control-request-method", "PUT"},
                   {"access-control-request-headers", "X-Token, content-type"}});
  EXPECT_EQ(got.status, 204) << got.error;
  EXPECT_EQ(got.Field("access-control-allow-origin"), "https://app.example");
  EXPECT_EQ(got.Field("access-control-allow-methods"), "GET, PUT");
  EXPECT_EQ(got.Field("access-control-allow-headers"), "content-type, x-token");
  EXPECT_EQ(got.Field("access-control-max-age"), "600");
  EXPECT_TRUE(absl::StrContains(got.Field("vary"), "Origin"));
  // Preflights that ask for too much, or come from elsewhere.
  EXPECT_EQ(Fetch("OPTIONS", "/api/items",
                  {{"origin", "https://app.example"}, {"access-control-request-method", "DELETE"}})
                .status,
            403);
  EXPECT_EQ(Fetch("OPTIONS", "/api/items",
                  {{"origin", "https://app.example"},
                   {"access-control-request-method", "GET"},
                   {"access-control-request-headers", "x-other"}})
                .status,
            403);
  EXPECT_EQ(Fetch("OPTIONS", "/api/items",
                  {{"origin", "https://evil.example"}, {"access-control-request-method", "GET"}})
                .status,
            403);
  // An actual request: allowed origin marked, another origin not.
  got = Fetch("GET", "/api/items", {{"origin", "https://app.example"}});
  EXPECT_EQ(got.status, 200);
  EXPECT_EQ(got.Field("access-control-allow-origin"), "https://app.example");
  EXPECT_EQ(got.Field("access-control-expose-headers"), "x-request-id");
  got = Fetch("GET", "/api/items", {{"origin", "https://evil.example"}});
  EXPECT_EQ(got.status, 200);
  EXPECT_EQ(got.Field("access-control-allow-origin"), "");
}

// Three requests make the burst; the fourth waits for a token that comes back in 1000 s.
TEST_P(MiddlewareTest, RateLimiterAnswers429WithRetryAfter) {
  for (int i = 0; i < 3; ++i) EXPECT_EQ(Fetch("GET", "/limited/x").status, 200) << i;
  const Got got = Fetch("GET", "/limited/x");
  EXPECT_EQ(got.status, 429);
  int64_t retry = 0;
  EXPECT_TRUE(absl::SimpleAtoi(got.Field("retry-after"), &retry)) << got.Field("retry-after");
  EXPECT_GT(retry, 900);
  EXPECT_LE(retry, 1000);
  EXPECT_EQ(Fetch("GET", "/api/items").status, 200);  // other paths are not limited
}

TEST_P(MiddlewareTest, BasicAndBearerAuth) {
  Got got = Fetch("GET", "/basic/x");
  EXPECT_EQ(got.status, 401);
  EXPECT_EQ(got.Field("www-authenticate"), "Basic realm=\"petrel test\", charset=\"UTF-8\"");
  got = Fetch("GET", "/basic/x",
              {{"authorization", absl::StrCat("Basic ", absl::Base64Escape("ana:wrong"))}});
  EXPECT_EQ(got.status, 401);
  got = Fetch("GET", "/basic/x",
              {{"authorization", absl::StrCat("basic ", absl::Base64Escape("ana:s3cret"))}});
  EXPECT_EQ(got.status, 200);
  EXPECT_EQ(got.body, "hello ana\n");

  got = Fetch("GET", "/bearer/x");
  EXPECT_EQ(got.status, 401);
  EXPECT_EQ(got.Field("www-authenticate"), "Bearer realm=\"petrel test\"");
  got = Fetch("GET", "/bearer/x", {{"authorization", "Bearer nope"}});
  EXPECT_EQ(got.status, 401);
  EXPECT_EQ(got.Field("www-authenticate"), "Bearer realm=\"petrel test\", error=\"invalid_token\"");
  got = Fetch("GET", "/bearer/x", {{"authorization", "Bearer t0k"}});
  EXPECT_EQ(got.status, 200);
  EXPECT_EQ(got.body, "hello t0k\n");
}

INSTANTIATE_TEST_SUITE_P(Protocols, MiddlewareTest,
                         ::testing::Values(Protocol::kH1, Protocol::kH1Tls, Protocol::kH2c,
                                           Protocol::kH2, Protocol::kH3),
                         [](const ::testing::TestParamInfo<Protocol>& p) {
                           return NameOf(p.param);
                         });

}  // namespace
}  // namespace petrel
