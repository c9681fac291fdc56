#include "petrel/http/request_context.h"

#include <cstdint>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "petrel/http/request.h"
#include "support/allocation_counter.h"

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

// Values too large for the context's own space, or aligned beyond what it guarantees.
struct Large : Witness {
  using Witness::Witness;
  char bytes[400] = {};
};
struct alignas(64) OverAligned {
  int value = 7;
};

// A request's small values (a few strings' worth) are kept in the context itself: a stream of
// requests that each set them allocates nothing once the strings fit their own storage.
TEST(RequestContextTest, SmallValuesAllocateNothing) {
  ASSERT_TRUE(testing::AllocationCountingWorks());
  Request req;
  testing::CountAllocationsOfThisThread(true);
  const uint64_t before = testing::Allocations();
  for (int i = 0; i < 1000; ++i) {
    req.context().Emplace<User>("ana");
    req.context().Emplace<Tenant>("acme");
    req.context().Emplace<int>(i);
    req.context().Emplace<User>("replaced");  // its first value's room is not reused
    ASSERT_EQ(req.context().Get<User>()->name, "replaced");
    ASSERT_EQ(*req.context().Get<int>(), i);
    req.Reset();
  }
  const uint64_t allocated = testing::Allocations() - before;
  testing::CountAllocationsOfThisThread(false);
  EXPECT_EQ(allocated, 0u);
}

// What does not fit goes to the heap, and still meets the destruction order and alignment.
TEST(RequestContextTest, LargeAndOverAlignedValuesGoToTheHeap) {
  std::vector<std::string> log;
  {
    RequestContext context;
    context.Emplace<FirstWitness>(&log, "inline");
    testing::CountAllocationsOfThisThread(true);
    const uint64_t before = testing::Allocations();
    context.Emplace<Large>(&log, "large");
    OverAligned& aligned = context.Emplace<OverAligned>();
    const uint64_t allocated = testing::Allocations() - before;
    testing::CountAllocationsOfThisThread(false);
    EXPECT_EQ(allocated, 2u);  // Large and OverAligned ("large" fits its string's own storage)
    EXPECT_EQ(reinterpret_cast<uintptr_t>(&aligned) % 64, 0u);
    EXPECT_EQ(aligned.value, 7);
    // Six values of 40 bytes: the first ones inline, the last ones on the heap.
    context.Emplace<SecondWitness>(&log, "second");
    for (int i = 0; i < 6; ++i) context.Emplace<std::string>(std::string(30, 'x'));
    context.Clear();
    EXPECT_EQ(log, std::vector<std::string>({"second", "large", "inline"}));
    EXPECT_TRUE(context.empty());
    context.Emplace<SecondWitness>(&log, "after clear");
    EXPECT_EQ(context.Get<SecondWitness>()->name, "after clear");
  }
  EXPECT_EQ(log.back(), "after clear");
}

}  // namespace
}  // namespace petrel
