// PathOrder: which packet goes first on a new path, for both modes and their deadlines.
#include "quic/connection/path_order.h"

#include "gtest/gtest.h"

namespace petrel::quic {
namespace {

using Action = PathOrder::Action;

TEST(PathOrderTest, IdleSendsEverything) {
  PathOrder o;
  EXPECT_FALSE(o.active());
  EXPECT_EQ(o.OnPacket(false, false, 0), Action::kSend);
  EXPECT_EQ(o.OnPacket(true, true, 0), Action::kSend);
  EXPECT_FALSE(o.TakeRelease(0));
}

TEST(PathOrderTest, ChallengeFirstDropsAckOnlyPacketsUntilTheChallenge) {
  PathOrder o;
  o.ExpectChallengeFirst(100);
  EXPECT_TRUE(o.active());
  EXPECT_FALSE(o.holding());
  EXPECT_EQ(o.OnPacket(false, false, 10), Action::kDrop);
  EXPECT_EQ(o.OnPacket(false, false, 20), Action::kDrop);
  EXPECT_EQ(o.OnPacket(true, true, 30), Action::kSend);
  EXPECT_FALSE(o.active());
  EXPECT_EQ(o.OnPacket(false, false, 40), Action::kSend);  // over: ACKs flow again
  EXPECT_FALSE(o.TakeRelease(40));
}

TEST(PathOrderTest, ChallengeFirstNeverWithholdsAckElicitingData) {
  PathOrder o;
  o.ExpectChallengeFirst(100);
  EXPECT_EQ(o.OnPacket(false, true, 10), Action::kSend);
  EXPECT_FALSE(o.active());
}

TEST(PathOrderTest, ChallengeFirstEndsAtTheDeadline) {
  PathOrder o;
  o.ExpectChallengeFirst(100);
  EXPECT_EQ(o.OnPacket(false, false, 99), Action::kDrop);
  EXPECT_EQ(o.OnPacket(false, false, 100), Action::kSend);
  EXPECT_FALSE(o.active());
}

TEST(PathOrderTest, NonProbingFirstHoldsTheChallengeUntilTheNextPacket) {
  PathOrder o;
  o.ExpectNonProbingFirst(100);
  EXPECT_EQ(o.OnPacket(true, true, 10), Action::kHold);
  EXPECT_TRUE(o.holding());
  EXPECT_FALSE(o.TakeRelease(11));  // nothing has announced the move yet
  EXPECT_EQ(o.OnPacket(false, true, 12), Action::kSend);
  EXPECT_FALSE(o.active());
  EXPECT_TRUE(o.TakeRelease(12));  // right behind the non-probing packet
  EXPECT_FALSE(o.holding());
  EXPECT_FALSE(o.TakeRelease(13));  // once
}

TEST(PathOrderTest, NonProbingFirstReleasesTheChallengeAtTheDeadline) {
  PathOrder o;
  o.ExpectNonProbingFirst(100);
  EXPECT_EQ(o.OnPacket(true, true, 10), Action::kHold);
  EXPECT_EQ(o.deadline(), 100u);
  EXPECT_FALSE(o.TakeRelease(99));
  EXPECT_TRUE(o.TakeRelease(100));
  EXPECT_FALSE(o.holding());
  EXPECT_FALSE(o.active());
}

TEST(PathOrderTest, NonProbingFirstWithoutAChallengeSendsInOrder) {
  PathOrder o;
  o.ExpectNonProbingFirst(100);
  EXPECT_EQ(o.OnPacket(false, true, 10), Action::kSend);  // data first: nothing to reorder
  EXPECT_FALSE(o.active());
  EXPECT_FALSE(o.TakeRelease(10));
}

TEST(PathOrderTest, ANewPathChangeReleasesWhatIsHeld) {
  PathOrder o;
  o.ExpectNonProbingFirst(100);
  EXPECT_EQ(o.OnPacket(true, true, 10), Action::kHold);
  o.ExpectNonProbingFirst(200);  // a second migration before the first was announced
  EXPECT_TRUE(o.TakeRelease(20));
  EXPECT_EQ(o.OnPacket(true, true, 21), Action::kHold);
  EXPECT_EQ(o.OnPacket(false, true, 22), Action::kSend);
  EXPECT_TRUE(o.TakeRelease(22));
}

}  // namespace
}  // namespace petrel::quic
