// Error pages: a Router's error handler renders every response the server generates itself —
// the router's 404 and 405, StaticFiles' 404, a throwing handler's 500, a handler's own
// SendError, and the engines' 400, 408, 413 and 431 — on HTTP/1.1 (curl and raw sockets),
// HTTP/2 (curl, cleartext and TLS) and HTTP/3 (Http3Client), byte for byte. An error handler
// that throws or does not commit leaves the built-in page.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "petrel/http/http3_client.h"
#include "petrel/http/http_server.h"
#include "petrel/http/static_files.h"
#include "support/command.h"
#include "support/h3_fetch.h"

namespace petrel {
namespace {

using testing::CommandResult;
using testing::RunCommand;
using testing::TempDir;

constexpr uint64_t kMaxBody = 1000;
constexpr size_t kMaxHead = 4096;

// The site's page: status, reason and path, so each test sees which error and which request
// reached the handler.
std::string Page(int status, absl::string_view reason, absl::string_view path) {
  return absl::StrCat("<p>", status, " [", reason, "] at [", path, "]</p>\n");
}

// What a handler leaves in the request's context for the error page.
struct Visit {
  std::string user;
};

class ErrorPagesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::ofstream(site_ / "present.txt") << "present\n";
    std::ofstream(pages_ / "400.html") << "<p>that was not HTTP</p>\n";
    HttpServerConfig c;
    c.http_port = 0;
    c.https_port = 0;
    c.max_request_body = kMaxBody;
    c.max_header_bytes = kMaxHead;
    c.header_timeout = std::chrono::seconds(1);
    server_ = std::make_unique<HttpServer>(c);
    Router& r = server_->router();
    r.SetErrorHandler([this](const HttpError& error, const Request& req, Response& res) {
      if (req.path() == "/page-throws") throw std::runtime_error("the page is broken");
      if (req.path() == "/page-forgets") return;
      res.SetHeader("x-error-page", "site");
      if (!req.route_pattern().empty()) res.SetHeader("x-route", req.route_pattern());
      if (const Visit* visit = req.context().Get<Visit>()) res.SetHeader("x-visit", visit->user);
      // A page from a file.
      if (error.status == 400 &&
          res.SendFile(400, (pages_ / "400.html").string(), "text/html").ok()) {
        return;
      }
      // A reason that names an exception is the site's to show or not: this one shows its start.
      absl::string_view reason = error.reason;
      if (absl::StartsWith(reason, "handler threw: ")) reason = "handler threw";
      res.Send(error.status, Page(error.status, reason, req.path()), "text/html");
    });
    ASSERT_TRUE(r.Get("/hello", [](Request&, Response& res) {
                   res.Send(200, "hello\n", "text/plain");
                 }).ok());
    ASSERT_TRUE(r.Post("/upload", [](Request& req, Response& res) {
                   req.body().ReadAll(kMaxBody, [&res](absl::StatusOr<std::string> body) {
                     res.Send(200, absl::StrCat(body.ok() ? body->size() : 0, "\n"));
                   });
                 }).ok());
    ASSERT_TRUE(r.Get("/throw", [](Request&, Response& res) {
                   res.SetHeader("etag", "\"widget\"");
                   throw std::runtime_error("no such widget");
                 }).ok());
    ASSERT_TRUE(r.Get("/members", [](Request&, Response& res) {
                   res.SendError(403, "members only");
                 }).ok());
    ASSERT_TRUE(r.Get("/files/*", StaticFiles(site_.path().string())).ok());
    ASSERT_TRUE(r.Get("/users/:id", [](Request& req, Response& res) {
                   req.context().Emplace<Visit>(std::string(req.Param("id")));
                   res.SendError(404, "no such user");
                 }).ok());
    // Routes with their own limits and deadlines.
    const auto count_body = [](Request& req, Response& res) {
      req.body().ReadAll(1 << 20, [&res](absl::StatusOr<std::string> body) {
        if (!body.ok()) return res.Send(500, std::string(body.status().message()));
        res.Send(200, absl::StrCat(body->size(), "\n"));
      });
    };
    ASSERT_TRUE(r.Post("/small", count_body, {.max_request_body = 10}).ok());
    ASSERT_TRUE(r.Post("/big", count_body, {.max_request_body = 5 * kMaxBody}).ok());
    const auto fits = [](Request&, Response& res) { res.Send(200, "fits\n"); };
    ASSERT_TRUE(r.Get("/tight", fits, {.max_header_bytes = 400}).ok());
    constexpr auto kDeadline = std::chrono::milliseconds(200);
    const auto never = [this](Request&, Response& res) {
      res.SetOnCancel([this] { ++handlers_cancelled_; });
    };
    const auto at_once = [](Request&, Response& res) { res.Send(200, "in time\n"); };
    ASSERT_TRUE(r.Get("/never", never, {.handler_deadline = kDeadline}).ok());
    ASSERT_TRUE(r.Get("/at-once", at_once, {.handler_deadline = kDeadline}).ok());
    ASSERT_TRUE(
        r.Get("/never-504", never, {.handler_deadline = kDeadline, .deadline_status = 504}).ok());
    constexpr auto kIdle = std::chrono::milliseconds(200);
    const auto stall = [](Request&, Response& res) { res.Stream(200).Write("part\n"); };
    const auto whole = [](Request&, Response& res) {
      StreamingBody& out = res.Stream(200);
      out.Write("whole\n");
      out.Finish();
    };
    ASSERT_TRUE(r.Get("/stall", stall, {.stream_idle_timeout = kIdle}).ok());
    ASSERT_TRUE(r.Get("/whole", whole, {.stream_idle_timeout = kIdle}).ok());
    ASSERT_TRUE(r.Get("/peek", [](Request& req, Response& res) {
                   res.Send(200, req.context().empty() ? "clean\n" : "stale\n");
                 }).ok());
    const absl::Status started = server_->Start();
    ASSERT_TRUE(started.ok()) << started;
  }

  // curl's view: the status, then the headers that matter here, then the body.
  std::string Curl(const std::string& flags, const std::string& path, bool tls) const {
    const CommandResult r = RunCommand(
        absl::StrCat("curl -sS --max-time 30 -k -D - ", flags, tls ? " https" : " http",
                     "://127.0.0.1:", tls ? server_->https_port() : server_->http_port(), path));
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return r.output;
  }

  absl::StatusOr<Http3Response> H3(Http3Request request) {
    return testing::FetchOverH3(server_->https_port(), std::move(request));
  }
  absl::StatusOr<std::vector<Http3Response>> H3Sequence(std::vector<Http3Request> requests) {
    return testing::FetchOverH3(server_->https_port(), std::move(requests));
  }

  // Sends `bytes` on a new cleartext connection and reads until the server closes it (bounded:
  // 30 s without a byte fails).
  std::string Raw(absl::string_view bytes) const {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    EXPECT_GE(fd, 0);
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(server_->http_port());
    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    timeval timeout{30, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
    std::string got;
    if (connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof(to)) == 0 &&
        send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(bytes.size())) {
      char buf[4096];
      for (ssize_t n; (n = recv(fd, buf, sizeof(buf), 0)) > 0;) got.append(buf, n);
    }
    close(fd);
    return got;
  }

  std::atomic<int> handlers_cancelled_{0};
  TempDir site_;
  TempDir pages_;
  std::unique_ptr<HttpServer> server_;
};

struct TcpCase {
  const char* name;
  const char* flags;
  bool tls;
};

constexpr TcpCase kTcpCases[] = {
    {"h1", "--http1.1", false},
    {"h1 over TLS", "--http1.1", true},
    {"h2c", "--http2-prior-knowledge", false},
    {"h2", "--http2", true},
};

// The errors Router::Handle, StaticFiles and handlers generate, after routing.
TEST_F(ErrorPagesTest, RoutingErrorsGetTheSitesPageOnHttp1AndHttp2) {
  for (const TcpCase& c : kTcpCases) {
    SCOPED_TRACE(c.name);
    std::string out = Curl(c.flags, "/nope", c.tls);
    EXPECT_TRUE(absl::StartsWith(out, "HTTP/")) << out;
    EXPECT_TRUE(absl::StrContains(out, " 404")) << out;
    EXPECT_TRUE(absl::StrContains(absl::AsciiStrToLower(out), "x-error-page: site")) << out;
    EXPECT_TRUE(absl::StrContains(absl::AsciiStrToLower(out), "content-type: text/html")) << out;
    EXPECT_TRUE(absl::EndsWith(out, Page(404, "no route for the path", "/nope"))) << out;

    // 405 keeps its Allow field.
    out = Curl(absl::StrCat(c.flags, " -X DELETE"), "/hello", c.tls);
    EXPECT_TRUE(absl::StrContains(out, " 405")) << out;
    EXPECT_TRUE(absl::StrContains(absl::AsciiStrToLower(out), "allow: get, head")) << out;
    EXPECT_TRUE(absl::EndsWith(out, Page(405, "no route for the method", "/hello"))) << out;

    // A throwing handler: 500 through the page, without the handler's ETag.
    out = Curl(c.flags, "/throw", c.tls);
    EXPECT_TRUE(absl::StrContains(out, " 500")) << out;
    EXPECT_FALSE(absl::StrContains(absl::AsciiStrToLower(out), "etag")) << out;
    EXPECT_TRUE(absl::EndsWith(out, Page(500, "handler threw", "/throw"))) << out;

    // A handler's own SendError, with its reason.
    EXPECT_TRUE(
        absl::EndsWith(Curl(c.flags, "/members", c.tls), Page(403, "members only", "/members")));

    // StaticFiles' 404; a file that is there is served as ever.
    out = Curl(c.flags, "/files/absent.txt", c.tls);
    EXPECT_TRUE(absl::StrContains(out, " 404")) << out;
    EXPECT_TRUE(absl::EndsWith(out, Page(404, "", "/files/absent.txt"))) << out;
    EXPECT_TRUE(absl::EndsWith(Curl(c.flags, "/files/present.txt", c.tls), "\r\n\r\npresent\n"));

    // An error handler that throws, or returns without committing: the built-in page.
    for (const char* path : {"/page-throws", "/page-forgets"}) {
      out = Curl(c.flags, path, c.tls);
      EXPECT_TRUE(absl::StrContains(out, " 404")) << out;
      EXPECT_FALSE(absl::StrContains(absl::AsciiStrToLower(out), "x-error-page")) << out;
      EXPECT_TRUE(absl::EndsWith(out, "\r\n\r\n404 Not Found\n")) << out;
    }
  }
}

// The errors the engines find in a request head: the request (as far as it was read) reaches
// the page; on HTTP/1.1 the connection closes after it.
TEST_F(ErrorPagesTest, HeadErrorsGetTheSitesPageOnHttp1AndHttp2) {
  const std::string big_field = absl::StrCat(" -H 'x-big: ", std::string(kMaxHead + 100, 'b'), "'");
  const std::string body_path = (site_ / "body.bin").string();
  std::ofstream(body_path, std::ios::binary) << std::string(kMaxBody + 1, 'u');
  for (const TcpCase& c : kTcpCases) {
    SCOPED_TRACE(c.name);
    const bool h1 = absl::StartsWith(c.name, "h1");
    std::string out = Curl(absl::StrCat(c.flags, big_field), "/hello", c.tls);
    EXPECT_TRUE(absl::StrContains(out, " 431")) << out;
    EXPECT_TRUE(absl::StrContains(absl::AsciiStrToLower(out), "x-error-page: site")) << out;
    // HTTP/1.1 finds it while parsing, before the head is a request: the page has no path.
    EXPECT_TRUE(absl::StrContains(out, h1 ? "] at []" : "] at [/hello]")) << out;
    if (h1) {
      EXPECT_TRUE(absl::StrContains(absl::AsciiStrToLower(out), "connection: close")) << out;
    }

    out = Curl(absl::StrCat(c.flags, " --data-binary @", body_path), "/upload", c.tls);
    EXPECT_TRUE(absl::StrContains(out, " 413")) << out;
    EXPECT_TRUE(absl::StrContains(absl::AsciiStrToLower(out), "x-error-page: site")) << out;
    // Found once routed, on every protocol.
    EXPECT_TRUE(absl::StrContains(out, "] at [/upload]")) << out;
  }
}

// HTTP/1.1 errors that close the connection: a head that does not parse (400, a page from a
// file), one that does not arrive in time (408), and HEAD's page length without its bytes.
TEST_F(ErrorPagesTest, Http1ConnectionErrorsSendThePageAndClose) {
  std::string out = Raw("NOT A REQUEST LINE\r\n\r\n");
  EXPECT_TRUE(absl::StartsWith(out, "HTTP/1.1 400 Bad Request\r\n")) << out;
  EXPECT_TRUE(absl::StrContains(absl::AsciiStrToLower(out), "connection: close")) << out;
  EXPECT_TRUE(absl::StrContains(absl::AsciiStrToLower(out), "x-error-page: site")) << out;
  EXPECT_TRUE(absl::EndsWith(out, "\r\n\r\n<p>that was not HTTP</p>\n")) << out;

  // Half a head, then nothing: the head timeout (1 s) answers with the page.
  out = Raw("GET /hello HTTP/1.1\r\nHost: x\r\n");
  EXPECT_TRUE(absl::StartsWith(out, "HTTP/1.1 408 Request Timeout\r\n")) << out;
  EXPECT_TRUE(absl::StrContains(out, "<p>408 [")) << out;

  // HEAD: the page's length, no page.
  out = Raw("HEAD /nope HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  const std::string page = Page(404, "no route for the path", "/nope");
  EXPECT_TRUE(absl::StartsWith(out, "HTTP/1.1 404 Not Found\r\n")) << out;
  EXPECT_TRUE(absl::StrContains(absl::AsciiStrToLower(out),
                                absl::StrCat("content-length: ", page.size(), "\r\n")))
      << out;
  EXPECT_TRUE(absl::EndsWith(out, "\r\n\r\n")) << out;
}

TEST_F(ErrorPagesTest, Http3ErrorsGetTheSitesPage) {
  struct Case {
    const char* method;
    const char* path;
    size_t big_field = 0;
    size_t body = 0;
    int status;
    const char* reason;
  };
  for (const Case& c : {
           Case{"GET", "/nope", 0, 0, 404, "no route for the path"},
           Case{"DELETE", "/hello", 0, 0, 405, "no route for the method"},
           Case{"GET", "/throw", 0, 0, 500, "handler threw"},
           Case{"GET", "/members", 0, 0, 403, "members only"},
           Case{"GET", "/files/absent.txt", 0, 0, 404, ""},
           Case{"GET", "/hello", kMaxHead + 100, 0, 431, "request header fields too large"},
           Case{"POST", "/upload", 0, kMaxBody + 1, 413, "request body too large"},
       }) {
    SCOPED_TRACE(c.path);
    Http3Request request;
    request.method = c.method;
    request.path = c.path;
    if (c.big_field > 0) request.headers.Add("x-big", std::string(c.big_field, 'b'));
    if (c.body > 0) request.body = ResponseBody(std::string(c.body, 'u'));
    const absl::StatusOr<Http3Response> got = H3(std::move(request));
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(got->status, c.status);
    EXPECT_EQ(got->headers.Get("x-error-page").value_or(""), "site");
    EXPECT_EQ(got->body, Page(c.status, c.reason, c.path));
  }
  Http3Request request;
  request.path = "/page-throws";
  const absl::StatusOr<Http3Response> got = H3(std::move(request));
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->status, 404);
  EXPECT_EQ(got->body, "404 Not Found\n");
}

// The error page sees what the handler left in the request's context and the route's pattern;
// the next request on the same connection starts with an empty context.
TEST_F(ErrorPagesTest, TheContextAndTheRouteReachTheErrorPage) {
  for (const TcpCase& c : kTcpCases) {
    if (absl::string_view(c.name) == "h2c") continue;  // curl reuses no h2c connection
    SCOPED_TRACE(c.name);
    const std::string base =
        absl::StrCat(c.tls ? "https" : "http",
                     "://127.0.0.1:", c.tls ? server_->https_port() : server_->http_port());
    const CommandResult r =
        RunCommand(absl::StrCat("curl -sS --max-time 30 -k -D - ", c.flags,
                                " -w '|%{num_connects}\n' ", base, "/users/7 ", base, "/peek"));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const std::string out = absl::AsciiStrToLower(r.output);
    EXPECT_TRUE(absl::StrContains(out, "x-route: /users/:id\r\n")) << r.output;
    EXPECT_TRUE(absl::StrContains(out, "x-visit: 7\r\n")) << r.output;
    EXPECT_TRUE(absl::StrContains(out, Page(404, "no such user", "/users/7"))) << r.output;
    EXPECT_TRUE(absl::EndsWith(out, "clean\n|0\n")) << r.output;  // same connection
  }
  std::vector<Http3Request> requests(2);
  requests[0].path = "/users/8";
  requests[1].path = "/peek";
  const absl::StatusOr<std::vector<Http3Response>> got = H3Sequence(std::move(requests));
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ((*got)[0].status, 404);
  EXPECT_EQ((*got)[0].headers.Get("x-route").value_or(""), "/users/:id");
  EXPECT_EQ((*got)[0].headers.Get("x-visit").value_or(""), "8");
  EXPECT_EQ((*got)[1].body, "clean\n");
}

// RouteOptions: a route's body limit below and above the server's, known from Content-Length
// (413 through the page, before the handler) or found as the body streams in (HTTP/1.1: 413;
// HTTP/2 and HTTP/3: the stream is reset); a route's head limit (431).
TEST_F(ErrorPagesTest, RouteLimitsOnEveryProtocol) {
  const std::string eleven = (site_ / "eleven").string();
  std::ofstream(eleven, std::ios::binary) << std::string(11, 'e');
  const std::string three_k = (site_ / "three_k").string();
  std::ofstream(three_k, std::ios::binary) << std::string(3 * kMaxBody, 't');
  const std::string tight_field = absl::StrCat(" -H 'x-pad: ", std::string(600, 'p'), "'");
  for (const TcpCase& c : kTcpCases) {
    SCOPED_TRACE(c.name);
    std::string out = Curl(absl::StrCat(c.flags, " --data-binary @", eleven), "/small", c.tls);
    EXPECT_TRUE(absl::EndsWith(out, Page(413, "request body too large", "/small"))) << out;
    out = Curl(absl::StrCat(c.flags, " --data-binary 0123456789"), "/small", c.tls);
    EXPECT_TRUE(absl::EndsWith(out, "\r\n\r\n10\n")) << out;
    // Above the server's limit (which /upload keeps).
    out = Curl(absl::StrCat(c.flags, " --data-binary @", three_k), "/big", c.tls);
    EXPECT_TRUE(absl::EndsWith(out, "\r\n\r\n3000\n")) << out;
    out = Curl(absl::StrCat(c.flags, " --data-binary @", three_k), "/upload", c.tls);
    EXPECT_TRUE(absl::EndsWith(out, Page(413, "request body too large", "/upload"))) << out;
    // No Content-Length (stdin of unknown size): cut off as it passes the route's limit.
    const CommandResult streamed = RunCommand(absl::StrCat(
        "cat ", eleven, " | curl -sS --max-time 30 -k -D - -X POST -T - ", c.flags,
        c.tls ? " https" : " http",
        "://127.0.0.1:", c.tls ? server_->https_port() : server_->http_port(), "/small"));
    if (absl::StartsWith(c.name, "h1")) {
      EXPECT_TRUE(absl::StrContains(streamed.output, "chunked")) << "sent without a length";
      EXPECT_TRUE(absl::StrContains(streamed.output, " 413")) << streamed.output;
    } else {
      EXPECT_NE(streamed.exit_code, 0) << streamed.output;  // the stream was reset
      EXPECT_FALSE(absl::StrContains(streamed.output, "\r\n\r\n11\n")) << streamed.output;
    }
    // The route's head limit.
    out = Curl(absl::StrCat(c.flags, tight_field), "/tight", c.tls);
    EXPECT_TRUE(
        absl::EndsWith(out, Page(431, "request header fields too large for the route", "/tight")))
        << out;
    EXPECT_TRUE(absl::EndsWith(Curl(c.flags, "/tight", c.tls), "\r\n\r\nfits\n"));
  }
  struct Case {
    const char* method;
    const char* path;
    size_t body;
    bool big_field;
    int status;
  };
  for (const Case& c :
       {Case{"POST", "/small", 11, false, 413}, Case{"POST", "/small", 10, false, 200},
        Case{"POST", "/big", 3 * kMaxBody, false, 200}, Case{"GET", "/tight", 0, true, 431},
        Case{"GET", "/tight", 0, false, 200}}) {
    SCOPED_TRACE(absl::StrCat("h3 ", c.method, " ", c.path, " ", c.body));
    Http3Request request;
    request.method = c.method;
    request.path = c.path;
    if (c.body > 0) request.body = ResponseBody(std::string(c.body, 'u'));
    if (c.big_field) request.headers.Add("x-pad", std::string(600, 'p'));
    const absl::StatusOr<Http3Response> got = H3(std::move(request));
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(got->status, c.status);
  }
  // h3 without a length: a producer whose size is not known in advance.
  auto producer = std::make_unique<StreamingBody>();
  producer->Write(std::string(11, 'e'));
  producer->Finish();
  Http3Request streamed;
  streamed.method = "POST";
  streamed.path = "/small";
  streamed.body = ResponseBody(std::move(producer));
  const absl::StatusOr<Http3Response> got = H3(std::move(streamed));
  EXPECT_FALSE(got.ok() && got->status == 200) << "the body passed the route's limit";
}

// A handler that does not answer within its route's deadline gets its cancel callback, and the
// client the deadline's status through the page; one that answers in time is not touched.
TEST_F(ErrorPagesTest, HandlerDeadlineOnEveryProtocol) {
  int expected_cancels = 0;
  for (const TcpCase& c : kTcpCases) {
    SCOPED_TRACE(c.name);
    std::string out = Curl(c.flags, "/never", c.tls);
    EXPECT_TRUE(absl::EndsWith(out, Page(503, "the handler did not answer in time", "/never")))
        << out;
    out = Curl(c.flags, "/never-504", c.tls);
    EXPECT_TRUE(absl::StrContains(out, " 504")) << out;
    EXPECT_TRUE(absl::EndsWith(Curl(c.flags, "/at-once", c.tls), "\r\n\r\nin time\n"));
    expected_cancels += 2;
  }
  for (const char* path : {"/never", "/never-504"}) {
    Http3Request request;
    request.path = path;
    const absl::StatusOr<Http3Response> got = H3(std::move(request));
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(got->status, absl::string_view(path) == "/never" ? 503 : 504);
    ++expected_cancels;
  }
  EXPECT_EQ(handlers_cancelled_.load(), expected_cancels);
}

// A streamed response whose handler stops writing is cut off after the route's idle limit —
// the client sees the transfer fail, not end — and the connection (h2, h3) serves on.
TEST_F(ErrorPagesTest, AStalledStreamIsResetOnEveryProtocol) {
  for (const TcpCase& c : kTcpCases) {
    SCOPED_TRACE(c.name);
    const std::string base =
        absl::StrCat(c.tls ? "https" : "http",
                     "://127.0.0.1:", c.tls ? server_->https_port() : server_->http_port());
    const CommandResult r =
        RunCommand(absl::StrCat("curl -sS --max-time 30 -k ", c.flags, " ", base, "/stall"));
    EXPECT_NE(r.exit_code, 0) << r.output;
    EXPECT_TRUE(absl::StrContains(r.output, "part\n")) << r.output;
    // Cut off (h1: closed before the last chunk; h2: RST_STREAM), not waited out.
    EXPECT_TRUE(
        absl::StrContains(r.output, absl::StartsWith(c.name, "h1") ? "curl: (18)" : "curl: (92)"))
        << r.output;
    EXPECT_TRUE(absl::EndsWith(Curl(c.flags, "/whole", c.tls), "\r\n\r\nwhole\n"));
  }
  std::vector<Http3Request> requests(2);
  requests[0].path = "/stall";
  requests[1].path = "/whole";
  EXPECT_FALSE(H3Sequence(std::move(requests)).ok());
  Http3Request whole;
  whole.path = "/whole";
  const absl::StatusOr<Http3Response> got = H3(std::move(whole));
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->body, "whole\n");
}

}  // namespace
}  // namespace petrel
