#include "petrel/http/request_context.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "petrel/http/request.h"

namespace petrel {
namespace {

struct User {
  std::string name;
};
struct Tenant {
  std::string name;
};

// Records its destruction, to check when and in which order values go.
struct Witness {
  Witness(std::vector<std::string>* log, std::string name) : log(log), name(std::move(name)) {}
  ~Witness() { log->push_back(name); }
  std::vector<std::string>* log;
  std::string name;
};
struct FirstWitness : Witness {
  using Witness::Witness;
};
struct SecondWitness : Witness {
  using Witness::Witness;
};

TEST(RequestContextTest, EachTypeHasItsOwnValue) {
  RequestContext context;
  EXPECT_EQ(context.Get<User>(), nullptr);
  context.Emplace<User>("ana");
  context.Emplace<Tenant>("acme");
  ASSERT_NE(context.Get<User>(), nullptr);
  EXPECT_EQ(context.Get<User>()->name, "ana");
  EXPECT_EQ(context.Get<Tenant>()->name, "acme");
  const RequestContext& read_only = context;
  EXPECT_EQ(read_only.Get<User>()->name, "ana");
  EXPECT_EQ(context.Get<const User>(), context.Get<User>());
  EXPECT_EQ(context.size(), 2u);

  context.GetOrEmplace<User>().name += "!";
  EXPECT_EQ(context.Get<User>()->name, "ana!");
  EXPECT_EQ(context.GetOrEmplace<int>(), 0);
  EXPECT_EQ(context.size(), 3u);

  EXPECT_TRUE(context.Erase<User>());
  EXPECT_FALSE(context.Erase<User>());
  EXPECT_EQ(context.Get<User>(), nullptr);
  EXPECT_EQ(context.Get<Tenant>()->name, "acme");
}

TEST(RequestContextTest, ValuesAreDestroyedWhenReplacedErasedOrCleared) {
  std::vector<std::string> log;
  {
    RequestContext context;
    context.Emplace<FirstWitness>(&log, "first");
    context.Emplace<SecondWitness>(&log, "second");
    context.Emplace<FirstWitness>(&log, "first again");  // replaces "first"
    EXPECT_EQ(log, std::vector<std::string>({"first"}));
    context.Clear();  // latest first: "first again" took the place of "first"
    EXPECT_EQ(log, std::vector<std::string>({"first", "second", "first again"}));
    context.Emplace<SecondWitness>(&log, "at the end");
  }
  EXPECT_EQ(log.back(), "at the end");
}

// An engine that recycles a Request (Reset) starts the next request with an empty context and
// no route pattern.
TEST(RequestContextTest, ARecycledRequestStartsEmpty) {
  std::vector<std::string> log;
  Request req;
  req.context().Emplace<FirstWitness>(&log, "first request's");
  req.set_route_pattern("/users/:id");
  req.Reset();
  EXPECT_EQ(log, std::vector<std::string>({"first request's"}));
  EXPECT_TRUE(req.context().empty());
  EXPECT_EQ(req.route_pattern(), "");
}

}  // namespace
}  // namespace petrel
