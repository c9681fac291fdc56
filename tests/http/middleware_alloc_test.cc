// The shipped middlewares on a steady stream of requests allocate nothing: Router::Handle on one
// Request and Response as an engine runs it (the OnDone hooks at the end, both objects reset for
// the next request), with the request id, CORS for an allowed origin, the rate limiter with room
// and a valid Bearer token — each of which keeps something per request — and a done hook.
#include <cstdint>
#include <memory>
#include <string>

#include "gtest/gtest.h"
#include "petrel/common/socket_address.h"
#include "petrel/http/cors.h"
#include "petrel/http/http_auth.h"
#include "petrel/http/rate_limit.h"
#include "petrel/http/request_id.h"
#include "petrel/http/router.h"
#include "support/allocation_counter.h"

namespace petrel {
namespace {

TEST(MiddlewareAllocationTest, TheFourShippedMiddlewaresAllocateNothingPerRequest) {
  ASSERT_TRUE(testing::AllocationCountingWorks());
  Router router;
  router.Use(RequestIdMiddleware());
  CorsOptions cors;
  cors.allowed_origins = {"https://app.example"};
  cors.exposed_headers = {"x-request-id"};
  router.Use(CorsMiddleware(std::move(cors)));
  router.Use(RateLimitMiddleware({.requests_per_second = 1e12, .burst = 1e12}));
  router.Use(BearerAuthMiddleware("test", [](absl::string_view t) { return t == "t0k"; }));
  // And one of the user's that watches each request's end, as a timing or logging one would.
  int done = 0;
  router.Use([&done](Request&, Response& res, Next next) {
    res.OnDone([&done](const RequestRecord& record) { done += record.completed ? 1 : 0; });
    next();
  });
  ASSERT_TRUE(router
                  .Get("/api/items",
                       [](Request& req, Response& res) {
                         const AuthenticatedUser* user = req.context().Get<AuthenticatedUser>();
                         res.Send(200, user != nullptr ? user->name : "nobody");
                       })
                  .ok());

  const SocketAddress peer = *SocketAddress::Parse("192.0.2.7", 40000);
  Request req;
  Response res;
  RequestRecord record;
  record.peer = &peer;
  std::string last_id;
  auto one_request = [&](bool keep_id) {
    req.set_method(Method::kGet);
    req.SetTarget("/api/items");
    req.set_peer_address(peer);
    req.headers().Add("host", "api.example");
    req.headers().Add("origin", "https://app.example");
    req.headers().Add("authorization", "Bearer t0k");
    router.Handle(req, res);
    ASSERT_TRUE(res.committed());
    ASSERT_EQ(res.status(), 200);
    ASSERT_EQ(res.headers().Get("access-control-allow-origin"), "https://app.example");
    const std::optional<absl::string_view> id = res.headers().Get("x-request-id");
    ASSERT_TRUE(id.has_value());
    ASSERT_EQ(id->size(), 32u);
    ASSERT_NE(*id, last_id);  // a fresh id per request
    if (keep_id) last_id.assign(id->data(), id->size());
    record.request = &req;
    record.status = res.status();
    record.completed = true;
    if (res.wants_done()) res.RunDone(record);
    res.Reset();
    req.Reset();
  };
  // The first requests size what is kept for the next ones (hook vectors, the rate limiter's
  // bucket for this client, the header maps).
  for (int i = 0; i < 10; ++i) one_request(true);

  testing::CountAllocationsOfThisThread(true);
  const uint64_t before = testing::Allocations();
  for (int i = 0; i < 1000; ++i) one_request(false);
  const uint64_t allocated = testing::Allocations() - before;
  testing::CountAllocationsOfThisThread(false);
  EXPECT_EQ(allocated, 0u) << "allocations in 1000 requests";
  EXPECT_EQ(done, 1010);
}

}  // namespace
}  // namespace petrel
