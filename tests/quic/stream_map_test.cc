// StreamMap: request streams in the ring, everything else (and slot collisions) in the map, the
// same answers as a plain map under any mix of adds and removals.
#include "quic/connection/stream_map.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <random>
#include <vector>

namespace petrel::quic {
namespace {

struct Item {
  explicit Item(int64_t i) : id(i) {}
  int64_t id;
};

std::vector<int64_t> Sorted(std::vector<int64_t> ids) {
  std::sort(ids.begin(), ids.end());
  return ids;
}

TEST(StreamMapTest, FindAddTakeAcrossEveryKindOfStreamId) {
  StreamMap<Item> map;
  EXPECT_TRUE(map.empty());
  EXPECT_EQ(map.Find(0), nullptr);
  EXPECT_EQ(map.Take(0), nullptr);
  // Client bidi (the ring), server bidi, client uni, server uni (the map).
  for (int64_t id : {0, 1, 2, 3, 4, 7, 400}) {
    Item* added = map.Add(id, std::make_unique<Item>(id));
    ASSERT_NE(added, nullptr);
    EXPECT_EQ(map.Find(id), added);
  }
  EXPECT_EQ(map.size(), 7u);
  EXPECT_EQ(map.Find(8), nullptr);
  EXPECT_EQ(map.Find(5), nullptr);
  EXPECT_EQ(Sorted(map.Ids()), (std::vector<int64_t>{0, 1, 2, 3, 4, 7, 400}));
  std::unique_ptr<Item> taken = map.Take(4);
  ASSERT_NE(taken, nullptr);
  EXPECT_EQ(taken->id, 4);
  EXPECT_EQ(map.Find(4), nullptr);
  EXPECT_EQ(map.Take(4), nullptr);
  EXPECT_EQ(map.size(), 6u);
  map.Clear();
  EXPECT_TRUE(map.empty());
  EXPECT_EQ(map.Find(0), nullptr);
  EXPECT_EQ(map.Find(3), nullptr);
}

// A request stream that outlives a ring's worth of successors keeps its slot; the successor that
// maps to the same slot goes to the map, and each is found, taken and replaced on its own.
TEST(StreamMapTest, AnOldStreamStillOpenSharesItsSlotWithANewOne) {
  StreamMap<Item> map;
  constexpr int64_t kOld = 8;
  constexpr int64_t kRing = 128 * 4;  // ids apart that land on the same slot
  map.Add(kOld, std::make_unique<Item>(kOld));
  map.Add(kOld + kRing, std::make_unique<Item>(kOld + kRing));
  map.Add(kOld + 2 * kRing, std::make_unique<Item>(kOld + 2 * kRing));
  for (int64_t id : {kOld, kOld + kRing, kOld + 2 * kRing}) {
    ASSERT_NE(map.Find(id), nullptr) << id;
    EXPECT_EQ(map.Find(id)->id, id);
  }
  EXPECT_EQ(map.Take(kOld)->id, kOld);  // frees the slot; the others are still found
  EXPECT_EQ(map.Find(kOld), nullptr);
  EXPECT_EQ(map.Find(kOld + kRing)->id, kOld + kRing);
  map.Add(kOld + 3 * kRing, std::make_unique<Item>(kOld + 3 * kRing));  // takes the free slot
  EXPECT_EQ(map.Find(kOld + 3 * kRing)->id, kOld + 3 * kRing);
  EXPECT_EQ(map.Take(kOld + kRing)->id, kOld + kRing);
  EXPECT_EQ(map.Find(kOld + 2 * kRing)->id, kOld + 2 * kRing);
  EXPECT_EQ(map.size(), 2u);
  int seen = 0;
  map.ForEach([&seen](int64_t id, const Item& item) {
    EXPECT_EQ(id, item.id);
    ++seen;
  });
  EXPECT_EQ(seen, 2);
}

// Random opens and closes over a sliding window of request streams, plus a few long-lived ones
// and unidirectional streams, checked against std::map after every step.
TEST(StreamMapTest, AgreesWithAPlainMapUnderRandomTraffic) {
  std::mt19937_64 rng(20261207);
  StreamMap<Item> map;
  std::map<int64_t, Item*> reference;
  int64_t next_bidi = 0;
  int64_t next_uni = 2;
  for (int step = 0; step < 200000; ++step) {
    const int action = static_cast<int>(rng() % 10);
    if (action < 5 && reference.size() < 300) {
      const int64_t id = (action == 0) ? (next_uni += 4) : (next_bidi += 4);
      Item* added = map.Add(id, std::make_unique<Item>(id));
      reference[id] = added;
    } else if (!reference.empty()) {
      // Mostly the oldest streams close; now and then a random one (some live long).
      auto it = reference.begin();
      if (rng() % 4 == 0) std::advance(it, static_cast<long>(rng() % reference.size()));
      const int64_t id = it->first;
      std::unique_ptr<Item> taken = map.Take(id);
      ASSERT_NE(taken, nullptr) << id;
      ASSERT_EQ(taken.get(), it->second);
      reference.erase(it);
    }
    ASSERT_EQ(map.size(), reference.size());
    const int64_t probe = static_cast<int64_t>(rng() % static_cast<uint64_t>(next_bidi + 8));
    auto ref = reference.find(probe);
    ASSERT_EQ(map.Find(probe), ref == reference.end() ? nullptr : ref->second) << probe;
  }
  std::vector<int64_t> expected;
  for (const auto& [id, item] : reference) expected.push_back(id);
  EXPECT_EQ(Sorted(map.Ids()), expected);
}

}  // namespace
}  // namespace petrel::quic
