#include "petrel/http/router.h"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "petrel/http/status.h"

namespace petrel {
namespace {

using ::testing::ElementsAre;
using ::testing::Optional;

Handler Noop() {
  return [](Request&, Response&) {};
}

// "pattern" of the winner, "404", or "405 <Allow>".
std::string Winner(const Router& router, const Method& method, absl::string_view path) {
  RouteMatch m = router.Match(method, path);
  if (m.found()) return std::string(m.pattern);
  if (m.status == 405) return "405 " + m.allow;
  return std::to_string(m.status);
}

TEST(RouterTest, ExactPaths) {
  Router r;
  ASSERT_TRUE(r.Get("/hello", Noop()).ok());
  ASSERT_TRUE(r.Get("/", Noop()).ok());
  ASSERT_TRUE(r.Get("/hello/", Noop()).ok());
  EXPECT_EQ(Winner(r, Method::kGet, "/hello"), "/hello");
  EXPECT_EQ(Winner(r, Method::kGet, "/"), "/");
  EXPECT_EQ(Winner(r, Method::kGet, "/hello/"), "/hello/");
  EXPECT_EQ(Winner(r, Method::kGet, "/hello/x"), "404");
  EXPECT_EQ(Winner(r, Method::kGet, "/Hello"), "404");  // Paths are case-sensitive.
  EXPECT_EQ(Winner(r, Method::kGet, "//hello"), "404");
  EXPECT_EQ(Winner(r, Method::kGet, ""), "404");
  EXPECT_EQ(Winner(r, Method::kGet, "hello"), "404");
  EXPECT_EQ(Winner(r, Method::kOptions, "*"), "404");
}

TEST(RouterTest, Params) {
  Router r;
  ASSERT_TRUE(r.Get("/users/:id/posts/:post", Noop()).ok());
  const std::string path = "/users/42/posts/hello%20world";
  RouteMatch m = r.Match(Method::kGet, path);
  ASSERT_TRUE(m.found());
  EXPECT_EQ(m.status, 200);
  EXPECT_EQ(m.params.size(), 2u);
  EXPECT_EQ(m.params.Get("id"), "42");
  EXPECT_EQ(m.params.Get("post"), "hello%20world");  // Raw, not decoded.
  // Values are views into the path.
  EXPECT_EQ(m.params.Get("id").data(), path.data() + 7);
  EXPECT_EQ(Winner(r, Method::kGet, "/users//posts/1"), "404");  // Params are non-empty.
  EXPECT_EQ(Winner(r, Method::kGet, "/users/42/posts"), "404");
  EXPECT_EQ(Winner(r, Method::kGet, "/users/42/posts/1/x"), "404");
}

TEST(RouterTest, ParamNamesBelongToTheirPattern) {
  Router r;
  ASSERT_TRUE(r.Get("/u/:id", Noop()).ok());
  ASSERT_TRUE(r.Get("/u/:name/profile", Noop()).ok());
  EXPECT_EQ(r.Match(Method::kGet, "/u/7").params.Get("id"), "7");
  RouteMatch m = r.Match(Method::kGet, "/u/bob/profile");
  EXPECT_EQ(m.params.Get("name"), "bob");
  EXPECT_FALSE(m.params.Contains("id"));
}

TEST(RouterTest, Wildcard) {
  Router r;
  ASSERT_TRUE(r.Get("/files/*", Noop()).ok());
  RouteMatch m = r.Match(Method::kGet, "/files/a/b/c.txt");
  ASSERT_TRUE(m.found());
  EXPECT_EQ(m.params.Get("*"), "a/b/c.txt");
  m = r.Match(Method::kGet, "/files/");
  ASSERT_TRUE(m.found());
  EXPECT_EQ(m.params.Get("*"), "");
  EXPECT_TRUE(m.params.Contains("*"));
  EXPECT_EQ(Winner(r, Method::kGet, "/files"), "404");
  EXPECT_EQ(Winner(r, Method::kGet, "/filesx/a"), "404");
}

TEST(RouterTest, WildcardAfterParam) {
  Router r;
  ASSERT_TRUE(r.Get("/repo/:owner/*", Noop()).ok());
  RouteMatch m = r.Match(Method::kGet, "/repo/alice/src/main.cc");
  ASSERT_TRUE(m.found());
  EXPECT_EQ(m.params.Get("owner"), "alice");
  EXPECT_EQ(m.params.Get("*"), "src/main.cc");
}

TEST(RouterTest, RootWildcardMatchesEverything) {
  Router r;
  ASSERT_TRUE(r.Any("/*", Noop()).ok());
  EXPECT_EQ(Winner(r, Method::kGet, "/"), "/*");
  EXPECT_EQ(Winner(r, *Method::Parse("BREW"), "/pot/1"), "/*");
  EXPECT_EQ(r.Match(Method::kPost, "/a/b").params.Get("*"), "a/b");
}

TEST(RouterTest, PercentEncodedSlashDoesNotSplit) {
  Router r;
  ASSERT_TRUE(r.Get("/a/:x", Noop()).ok());
  ASSERT_TRUE(r.Get("/caf%C3%A9", Noop()).ok());
  EXPECT_EQ(r.Match(Method::kGet, "/a/b%2Fc").params.Get("x"), "b%2Fc");
  EXPECT_EQ(Winner(r, Method::kGet, "/caf%C3%A9"), "/caf%C3%A9");
  EXPECT_EQ(Winner(r, Method::kGet, "/caf%c3%a9"), "404");  // Raw bytes: no normalization.
}

TEST(RouterTest, NotFoundVersusMethodNotAllowed) {
  Router r;
  ASSERT_TRUE(r.Post("/items", Noop()).ok());
  ASSERT_TRUE(r.Get("/items/:id", Noop()).ok());
  ASSERT_TRUE(r.Delete("/items/:id", Noop()).ok());
  ASSERT_TRUE(r.Put("/items/special", Noop()).ok());
  ASSERT_TRUE(r.Add(*Method::Parse("PURGE"), "/items/:id", Noop()).ok());
  ASSERT_TRUE(r.Add(*Method::Parse("LOCK"), "/items/*", Noop()).ok());
  EXPECT_EQ(Winner(r, Method::kGet, "/nothing"), "404");
  EXPECT_EQ(Winner(r, Method::kGet, "/items"), "405 POST");
  // Every matching pattern contributes: GET (+HEAD), DELETE, PURGE from /items/:id, PUT from
  // /items/special, LOCK from /items/*; standard methods first, extensions sorted.
  EXPECT_EQ(Winner(r, Method::kPost, "/items/special"), "405 GET, HEAD, PUT, DELETE, LOCK, PURGE");
  EXPECT_EQ(Winner(r, Method::kPost, "/items/7"), "405 GET, HEAD, DELETE, LOCK, PURGE");
  EXPECT_EQ(Winner(r, Method::kPut, "/items/special"), "/items/special");
  EXPECT_EQ(Winner(r, Method::kPut, "/items/7"), "405 GET, HEAD, DELETE, LOCK, PURGE");
  EXPECT_EQ(Winner(r, *Method::Parse("LOCK"), "/items/7"), "/items/*");
  EXPECT_EQ(Winner(r, Method::kPost, "/items/7/x"), "405 LOCK");
}

TEST(RouterTest, AllowListsHeadOnlyOnce) {
  Router r;
  ASSERT_TRUE(r.Get("/x", Noop()).ok());
  ASSERT_TRUE(r.Add(Method::kHead, "/x", Noop()).ok());
  ASSERT_TRUE(r.Add(Method::kOptions, "/x", Noop()).ok());
  EXPECT_EQ(Winner(r, Method::kPost, "/x"), "405 GET, HEAD, OPTIONS");
}

TEST(RouterTest, HeadFallsBackToGet) {
  Router r;
  ASSERT_TRUE(r.Get("/page", Noop()).ok());
  EXPECT_EQ(Winner(r, Method::kHead, "/page"), "/page");
  EXPECT_EQ(Winner(r, Method::kPost, "/page"), "405 GET, HEAD");
}

TEST(RouterTest, ExplicitHeadBeatsGetAndGetBeatsAnyForHead) {
  int which = 0;
  Router r;
  ASSERT_TRUE(r.Get("/a", [&which](Request&, Response&) { which = 1; }).ok());
  ASSERT_TRUE(r.Add(Method::kHead, "/a", [&which](Request&, Response&) { which = 2; }).ok());
  ASSERT_TRUE(r.Any("/b", [&which](Request&, Response&) { which = 3; }).ok());
  ASSERT_TRUE(r.Get("/b", [&which](Request&, Response&) { which = 4; }).ok());
  Request req;
  Response res;
  (*r.Match(Method::kHead, "/a").handler)(req, res);
  EXPECT_EQ(which, 2);
  (*r.Match(Method::kGet, "/a").handler)(req, res);
  EXPECT_EQ(which, 1);
  (*r.Match(Method::kHead, "/b").handler)(req, res);
  EXPECT_EQ(which, 4);
  (*r.Match(Method::kPost, "/b").handler)(req, res);
  EXPECT_EQ(which, 3);
  (*r.Match(Method::kGet, "/b").handler)(req, res);
  EXPECT_EQ(which, 4);
}

TEST(RouterTest, MethodSpecificSearchFindsLessSpecificPatternWithTheMethod) {
  // The most specific pattern that has a route for the method wins; a more specific pattern
  // without it does not shadow it.
  Router r;
  ASSERT_TRUE(r.Get("/users/me", Noop()).ok());
  ASSERT_TRUE(r.Post("/users/:id", Noop()).ok());
  EXPECT_EQ(Winner(r, Method::kPost, "/users/me"), "/users/:id");
  EXPECT_EQ(Winner(r, Method::kGet, "/users/me"), "/users/me");
  EXPECT_EQ(Winner(r, Method::kGet, "/users/you"), "405 POST");
}

TEST(RouterTest, PrecedenceIndependentOfRegistrationOrder) {
  std::vector<std::string> patterns = {"/a/b/c", "/a/b/:x", "/a/:y/c", "/a/:y/:z",
                                       "/a/*",   "/:p/b/c", "/*",      "/a/b/*"};
  const std::vector<std::pair<std::string, std::string>> expected = {
      {"/a/b/c", "/a/b/c"}, {"/a/b/d", "/a/b/:x"}, {"/a/q/c", "/a/:y/c"},  {"/a/q/r", "/a/:y/:z"},
      {"/a/q", "/a/*"},     {"/a/b", "/a/*"},      {"/a/b/c/d", "/a/b/*"}, {"/x/b/c", "/:p/b/c"},
      {"/x/y", "/*"},       {"/", "/*"},           {"/a/", "/a/*"},        {"/a/b/", "/a/b/*"},
      {"/a/q/c/d", "/a/*"}, {"/x/b/d", "/*"},
  };
  std::sort(patterns.begin(), patterns.end());
  int permutations = 0;
  do {
    Router r;
    for (const std::string& p : patterns) ASSERT_TRUE(r.Get(p, Noop()).ok()) << p;
    for (const auto& [path, winner] : expected) {
      ASSERT_EQ(Winner(r, Method::kGet, path), winner)
          << "path " << path << ", order " << testing::PrintToString(patterns);
    }
    ++permutations;
  } while (std::next_permutation(patterns.begin(), patterns.end()));
  EXPECT_EQ(permutations, 40320);
}

TEST(RouterTest, ExactMethodBeatsAnyAtTheSamePattern) {
  Router r;
  ASSERT_TRUE(r.Any("/x", Noop()).ok());
  ASSERT_TRUE(r.Post("/x", Noop()).ok());
  RouteMatch any = r.Match(Method::kGet, "/x");
  RouteMatch post = r.Match(Method::kPost, "/x");
  ASSERT_TRUE(any.found() && post.found());
  EXPECT_NE(any.handler, post.handler);
}

TEST(RouterTest, InvalidPatternsRejected) {
  Router r;
  for (const char* bad : {"", "hello", "*", "/a*", "/*/x", "/a/*/b", "/:", "/:a-b", "/:a/:a",
                          "/a b", "/a?b", "/a#b", "/caf\xc3\xa9", "/a\tb", "/x/:id/*x"}) {
    SCOPED_TRACE(bad);
    absl::Status s = r.Get(bad, Noop());
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  }
  EXPECT_EQ(r.Get("/ok", Handler()).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Winner(r, Method::kGet, "/a*"), "404");  // Nothing half-registered.
}

TEST(RouterTest, AcceptedPatternShapes) {
  Router r;
  for (const char* good :
       {"/", "//", "/a//b", "/v1/models/m:predict", "/~user/%7E", "/a/:b_2/*", "/:X9"}) {
    EXPECT_TRUE(r.Get(good, Noop()).ok()) << good;
  }
  EXPECT_EQ(r.Match(Method::kGet, "/v1/models/m:predict").pattern, "/v1/models/m:predict");
  EXPECT_EQ(Winner(r, Method::kGet, "//"), "//");
}

TEST(RouterTest, ConflictsRejected) {
  Router r;
  ASSERT_TRUE(r.Get("/users/:id", Noop()).ok());
  EXPECT_EQ(r.Get("/users/:id", Noop()).code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(r.Get("/users/:name", Noop()).code(), absl::StatusCode::kAlreadyExists);
  EXPECT_TRUE(r.Post("/users/:name", Noop()).ok());  // Other method: fine.
  EXPECT_TRUE(r.Any("/users/:id", Noop()).ok());
  EXPECT_EQ(r.Any("/users/:x", Noop()).code(), absl::StatusCode::kAlreadyExists);
  ASSERT_TRUE(r.Add(*Method::Parse("X"), "/e", Noop()).ok());
  EXPECT_EQ(r.Add(*Method::Parse("X"), "/e", Noop()).code(), absl::StatusCode::kAlreadyExists);
  EXPECT_TRUE(r.Add(*Method::Parse("x"), "/e", Noop()).ok());  // Methods are case-sensitive.
  // The original registration still serves.
  EXPECT_EQ(r.Match(Method::kGet, "/users/1").params.Get("id"), "1");
}

TEST(RouterTest, HandleDispatchesWithParams) {
  Router r;
  ASSERT_TRUE(r.Get("/hello/:name", [](Request& req, Response& res) {
                 res.Send(200, "hi " + std::string(req.Param("name")), "text/plain");
               }).ok());
  Request req;
  req.SetTarget("/hello/petrel?x=1");
  Response res;
  r.Handle(req, res);
  EXPECT_TRUE(res.committed());
  EXPECT_EQ(res.status(), 200);
  EXPECT_EQ(*res.body().buffer(), "hi petrel");
  EXPECT_EQ(req.Param("name"), "petrel");
  EXPECT_EQ(req.route_pattern(), "/hello/:name");
}

TEST(RouterTest, HandleAnswers404And405) {
  Router r;
  ASSERT_TRUE(r.Get("/only-get", Noop()).ok());
  {
    Request req;
    req.SetTarget("/missing");
    Response res;
    r.Handle(req, res);
    EXPECT_EQ(res.status(), 404);
    EXPECT_EQ(*res.body().buffer(), "404 Not Found\n");
    EXPECT_FALSE(res.headers().Contains("allow"));
  }
  {
    Request req;
    req.set_method(Method::kDelete);
    req.SetTarget("/only-get");
    Response res;
    r.Handle(req, res);
    EXPECT_EQ(res.status(), 405);
    EXPECT_THAT(res.headers().Get("Allow"), Optional(absl::string_view("GET, HEAD")));
    EXPECT_THAT(res.headers().Get("Content-Type"),
                Optional(absl::string_view("text/plain; charset=utf-8")));
  }
}

TEST(RouterTest, AThrowingHandlerGets500WithoutItsRepresentationFields) {
  Router r;
  ASSERT_TRUE(r.Get("/widget", [](Request&, Response& res) {
                 res.SetHeader("ETag", "\"w1\"");
                 res.SetHeader("Content-Encoding", "gzip");
                 res.SetHeader("Cache-Control", "no-store");
                 throw std::runtime_error("no such widget");
               }).ok());
  ASSERT_TRUE(r.Get("/odd", [](Request&, Response&) { throw 7; }).ok());
  for (const char* path : {"/widget", "/odd"}) {
    Request req;
    req.SetTarget(path);
    Response res;
    r.Handle(req, res);  // caught: does not propagate
    EXPECT_TRUE(res.committed()) << path;
    EXPECT_EQ(res.status(), 500) << path;
    EXPECT_EQ(*res.body().buffer(), "500 Internal Server Error\n") << path;
    EXPECT_FALSE(res.headers().Contains("etag")) << path;
    EXPECT_FALSE(res.headers().Contains("content-encoding")) << path;
  }
}

// The error handler sees every error Handle and its handlers generate: status, reason and
// request; what it commits is the response.
TEST(RouterTest, TheErrorHandlerRendersEveryErrorOfItsRoutes) {
  Router r;
  std::vector<std::string> seen;
  r.SetErrorHandler([&seen](const HttpError& error, const Request& req, Response& res) {
    seen.push_back(absl::StrCat(error.status, " ", error.reason, " ", req.path()));
    res.Send(error.status, absl::StrCat("page ", error.status), "text/html");
  });
  ASSERT_TRUE(r.Get("/only-get", Noop()).ok());
  ASSERT_TRUE(
      r.Get("/members", [](Request&, Response& res) { res.SendError(403, "members only"); }).ok());
  ASSERT_TRUE(
      r.Get("/throws", [](Request&, Response&) { throw std::runtime_error("no widget"); }).ok());
  struct Case {
    Method method;
    const char* path;
    int status;
  };
  for (const Case& c : {Case{Method::kGet, "/missing", 404}, Case{Method::kPost, "/only-get", 405},
                        Case{Method::kGet, "/members", 403}, Case{Method::kGet, "/throws", 500}}) {
    Request req;
    req.set_method(c.method);
    req.SetTarget(c.path);
    Response res;
    r.Handle(req, res);
    EXPECT_EQ(res.status(), c.status) << c.path;
    EXPECT_EQ(*res.body().buffer(), absl::StrCat("page ", c.status)) << c.path;
    EXPECT_THAT(res.headers().Get("content-type"), Optional(absl::string_view("text/html")));
    if (c.status == 405) {
      EXPECT_THAT(res.headers().Get("allow"), Optional(absl::string_view("GET, HEAD")));
    }
  }
  EXPECT_THAT(
      seen,
      ElementsAre("404 no route for the path /missing", "405 no route for the method /only-get",
                  "403 members only /members", "500 handler threw: no widget /throws"));
}

// An error handler that throws, does not commit, or asks for an error page itself: the
// built-in page, once; without an error handler SendError gives the built-in page too.
TEST(RouterTest, AFailingErrorHandlerLeavesTheBuiltInPage) {
  for (const char* kind : {"throws", "throws-int", "forgets", "recurses", "none"}) {
    Router r;
    int calls = 0;
    if (absl::string_view(kind) != "none") {
      r.SetErrorHandler([kind, &calls](const HttpError&, const Request&, Response& res) {
        ++calls;
        res.SetHeader("x-tried", "yes");
        const absl::string_view k = kind;
        if (k == "throws") throw std::runtime_error("broken page");
        if (k == "throws-int") throw 3;
        if (k == "recurses") res.SendError(502, "from the page");
      });
    }
    ASSERT_TRUE(r.Get("/forbidden", [](Request&, Response& res) { res.SendError(403); }).ok());
    Request req;
    req.SetTarget("/forbidden");
    Response res;
    r.Handle(req, res);
    const bool recurses = absl::string_view(kind) == "recurses";
    EXPECT_EQ(res.status(), recurses ? 502 : 403) << kind;
    EXPECT_EQ(*res.body().buffer(), recurses ? "502 Bad Gateway\n" : "403 Forbidden\n") << kind;
    EXPECT_THAT(res.headers().Get("content-type"),
                Optional(absl::string_view("text/plain; charset=utf-8")));
    EXPECT_EQ(calls, absl::string_view(kind) == "none" ? 0 : 1) << kind;
  }
}

// A request the engine rejected never reaches a handler: Handle answers it with the page, and
// no other commit takes effect before SendError.
TEST(RouterTest, ARejectedRequestGetsItsErrorInsteadOfTheHandler) {
  Router r;
  bool handler_ran = false;
  ASSERT_TRUE(r.Post("/upload", [&handler_ran](Request&, Response& res) {
                 handler_ran = true;
                 res.Send(200, "stored");
               }).ok());
  r.SetErrorHandler([](const HttpError& error, const Request& req, Response& res) {
    res.Send(error.status, absl::StrCat(error.reason, " at ", req.path()));
  });
  Request req;
  req.set_method(Method::kPost);
  req.SetTarget("/upload");
  Response res;
  res.Reject(413, "request body too large");
  res.Send(200, "too soon");  // ignored: the rejection comes first
  EXPECT_FALSE(res.committed());
  StreamingBody& detached = res.Stream(200);
  EXPECT_FALSE(detached.Write("x"));
  EXPECT_FALSE(res.committed());
  r.Handle(req, res);
  EXPECT_FALSE(handler_ran);
  EXPECT_EQ(res.status(), 413);
  EXPECT_EQ(*res.body().buffer(), "request body too large at /upload");
  EXPECT_EQ(res.rejected_status(), 0);
}

TEST(RouterTest, AThrowingHandlerFailsTheBodyItWasStreaming) {
  Router r;
  ASSERT_TRUE(r.Get("/stream", [](Request&, Response& res) {
                 res.Stream(200).Write("part of it");
                 throw std::runtime_error("midway");
               }).ok());
  ASSERT_TRUE(r.Get("/sent", [](Request&, Response& res) {
                 res.Send(200, "whole", "text/plain");
                 throw std::runtime_error("after");
               }).ok());
  {
    Request req;
    req.SetTarget("/stream");
    Response res;
    r.Handle(req, res);
    EXPECT_EQ(res.status(), 200);
    BodyProducer* body = res.body().producer();
    ASSERT_NE(body, nullptr);
    std::string out;
    BodyReadResult got = body->Read(1024, &out);
    while (got.status == BodyReadStatus::kData) got = body->Read(1024, &out);
    EXPECT_EQ(got.status, BodyReadStatus::kError);  // the engine resets the stream on this
  }
  {
    Request req;
    req.SetTarget("/sent");
    Response res;
    r.Handle(req, res);
    EXPECT_EQ(res.status(), 200);
    EXPECT_EQ(*res.body().buffer(), "whole");  // a complete response is left alone
  }
}

TEST(RouterTest, MovedRouterKeepsRoutes) {
  Router a;
  ASSERT_TRUE(a.Get("/x", Noop()).ok());
  Router b = std::move(a);
  EXPECT_EQ(Winner(b, Method::kGet, "/x"), "/x");
}

}  // namespace
}  // namespace petrel
