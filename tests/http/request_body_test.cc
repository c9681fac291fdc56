// RequestBody pacing, driven by a test double engine (the real engines come later).
#include <algorithm>
#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "petrel/http/body.h"

namespace petrel {
namespace {

using ::testing::ElementsAre;

// Records what the body tells the engine. `on_consumed` lets a test act as an engine that
// reacts to credit synchronously (e.g. delivers more data at once).
class FakeSource : public RequestBodySource {
 public:
  void OnFirstRead() override { ++first_reads; }
  void OnConsumed(size_t bytes) override {
    consumed += bytes;
    if (on_consumed) on_consumed(bytes);
  }
  void OnAbandoned() override { ++abandoned; }

  int first_reads = 0;
  size_t consumed = 0;
  int abandoned = 0;
  std::function<void(size_t)> on_consumed;
};

struct Chunk {
  std::string data;
  bool last;
  bool operator==(const Chunk& o) const { return data == o.data && last == o.last; }
};

void PrintTo(const Chunk& c, std::ostream* os) {
  *os << "{\"" << c.data << "\", " << c.last << "}";
}

class RequestBodyTest : public ::testing::Test {
 protected:
  RequestBodyTest() { body_.set_source(&source_); }

  void StartReading() {
    body_.Read([this](absl::string_view chunk, bool last) {
      chunks_.push_back({std::string(chunk), last});
    });
  }

  FakeSource source_;
  RequestBody body_;
  std::vector<Chunk> chunks_;
};

TEST_F(RequestBodyTest, DeliverBeforeReadIsBufferedAndNotCredited) {
  body_.Deliver("hello ", false);
  body_.Deliver("world", false);
  EXPECT_EQ(body_.buffered_bytes(), 11u);
  EXPECT_EQ(source_.consumed, 0u);
  EXPECT_EQ(source_.first_reads, 0);
  EXPECT_FALSE(body_.read_started());

  StartReading();
  EXPECT_TRUE(body_.read_started());
  EXPECT_EQ(source_.first_reads, 1);
  EXPECT_THAT(chunks_, ElementsAre(Chunk{"hello world", false}));
  EXPECT_EQ(source_.consumed, 11u);
  EXPECT_EQ(body_.buffered_bytes(), 0u);

  body_.Deliver("!", true);
  EXPECT_THAT(chunks_, ElementsAre(Chunk{"hello world", false}, Chunk{"!", true}));
  EXPECT_EQ(source_.consumed, 12u);
  EXPECT_TRUE(body_.finished());
  EXPECT_EQ(source_.first_reads, 1);
}

TEST_F(RequestBodyTest, CreditOnlyAfterTheHandlerConsumed) {
  std::vector<size_t> consumed_during_callback;
  body_.Read(
      [&](absl::string_view, bool) { consumed_during_callback.push_back(source_.consumed); });
  body_.Deliver("abc", false);
  body_.Deliver("de", false);
  EXPECT_THAT(consumed_during_callback, ElementsAre(0u, 3u));
  EXPECT_EQ(source_.consumed, 5u);
}

TEST_F(RequestBodyTest, PauseStopsDeliveriesResumeFlushes) {
  body_.Read([&](absl::string_view chunk, bool last) {
    chunks_.push_back({std::string(chunk), last});
    body_.Pause();  // A handler that processes one chunk at a time.
  });
  body_.Deliver("one", false);
  EXPECT_TRUE(body_.paused());
  body_.Deliver("two", false);
  body_.Deliver("three", true);
  EXPECT_THAT(chunks_, ElementsAre(Chunk{"one", false}));
  EXPECT_EQ(source_.consumed, 3u);  // Buffered bytes earn no credit.
  EXPECT_EQ(body_.buffered_bytes(), 8u);

  body_.Resume();
  EXPECT_THAT(chunks_, ElementsAre(Chunk{"one", false}, Chunk{"twothree", true}));
  EXPECT_EQ(source_.consumed, 11u);
  EXPECT_TRUE(body_.finished());
}

TEST_F(RequestBodyTest, PauseBeforeReading) {
  body_.Pause();
  StartReading();
  EXPECT_EQ(source_.first_reads, 1);
  body_.Deliver("x", true);
  EXPECT_TRUE(chunks_.empty());
  body_.Resume();
  EXPECT_THAT(chunks_, ElementsAre(Chunk{"x", true}));
}

TEST_F(RequestBodyTest, EmptyBody) {
  body_.Deliver({}, true);
  EXPECT_TRUE(body_.eof());
  StartReading();
  EXPECT_THAT(chunks_, ElementsAre(Chunk{"", true}));
  EXPECT_EQ(source_.consumed, 0u);
  EXPECT_TRUE(body_.finished());
}

TEST_F(RequestBodyTest, EndAfterDataWithoutBytes) {
  StartReading();
  body_.Deliver("a", false);
  body_.Deliver({}, false);  // Nothing to hand over.
  body_.Deliver({}, true);
  EXPECT_THAT(chunks_, ElementsAre(Chunk{"a", false}, Chunk{"", true}));
  body_.Deliver("late", false);  // After the end: ignored.
  EXPECT_EQ(chunks_.size(), 2u);
}

TEST_F(RequestBodyTest, TrailersAvailableWithTheLastChunk) {
  std::string seen;
  body_.Read([&](absl::string_view, bool last) {
    if (last) seen = std::string(body_.trailers().Get("checksum").value_or("none"));
  });
  body_.Deliver("data", false);
  body_.DeliverTrailers(HeaderMap{{"Checksum", "abc"}});
  EXPECT_EQ(seen, "abc");
  EXPECT_TRUE(body_.finished());
}

TEST_F(RequestBodyTest, ReadAllCollects) {
  absl::StatusOr<std::string> result = absl::UnknownError("not called");
  body_.Deliver("part1-", false);
  body_.ReadAll(100, [&](absl::StatusOr<std::string> r) { result = std::move(r); });
  EXPECT_EQ(source_.first_reads, 1);
  EXPECT_EQ(result.status().code(), absl::StatusCode::kUnknown);
  body_.Deliver("part2", true);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(*result, "part1-part2");
  EXPECT_EQ(source_.consumed, 11u);
}

TEST_F(RequestBodyTest, ReadAllExactlyAtLimit) {
  absl::StatusOr<std::string> result = absl::UnknownError("not called");
  body_.ReadAll(4, [&](absl::StatusOr<std::string> r) { result = std::move(r); });
  body_.Deliver("ab", false);
  body_.Deliver("cd", true);
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(*result, "abcd");
}

TEST_F(RequestBodyTest, ReadAllOverLimitFailsAndAbandons) {
  absl::StatusOr<std::string> result = std::string("not called");
  int calls = 0;
  body_.ReadAll(5, [&](absl::StatusOr<std::string> r) {
    ++calls;
    result = std::move(r);
  });
  body_.Deliver("abc", false);
  EXPECT_EQ(source_.consumed, 3u);
  body_.Deliver("def", false);
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(result.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(body_.abandoned());
  EXPECT_EQ(source_.abandoned, 1);
  EXPECT_EQ(source_.consumed, 3u);  // The chunk over the limit is never credited.
  body_.Deliver("more", true);      // Dropped.
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(source_.consumed, 3u);
  EXPECT_EQ(body_.buffered_bytes(), 0u);
}

TEST_F(RequestBodyTest, ReadAllRejectsAnnouncedLengthWithoutReading) {
  body_.set_expected_length(1000);
  absl::StatusOr<std::string> result = std::string("not called");
  body_.ReadAll(999, [&](absl::StatusOr<std::string> r) { result = std::move(r); });
  EXPECT_EQ(result.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(source_.first_reads, 0);  // h1 sends no 100 Continue.
  EXPECT_FALSE(body_.read_started());
  EXPECT_EQ(source_.abandoned, 1);
}

TEST_F(RequestBodyTest, ReadAllWithAnnouncedLengthWithinLimit) {
  body_.set_expected_length(3);
  EXPECT_EQ(body_.expected_length(), 3u);
  absl::StatusOr<std::string> result = absl::UnknownError("not called");
  body_.ReadAll(3, [&](absl::StatusOr<std::string> r) { result = std::move(r); });
  body_.Deliver("xyz", true);
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(*result, "xyz");
}

TEST_F(RequestBodyTest, ReadAllReportsFailure) {
  absl::StatusOr<std::string> result = std::string("not called");
  body_.ReadAll(100, [&](absl::StatusOr<std::string> r) { result = std::move(r); });
  body_.Deliver("abc", false);
  body_.Fail(absl::AbortedError("stream reset"));
  EXPECT_EQ(result.status().code(), absl::StatusCode::kAborted);
}

TEST_F(RequestBodyTest, FailReportsErrorOnce) {
  std::vector<absl::Status> errors;
  body_.Read(
      [&](absl::string_view chunk, bool last) {
        chunks_.push_back({std::string(chunk), last});
      },
      [&](const absl::Status& s) { errors.push_back(s); });
  body_.Deliver("a", false);
  body_.Fail(absl::DeadlineExceededError("body read timeout"));
  body_.Fail(absl::InternalError("again"));
  body_.Deliver("b", true);
  EXPECT_THAT(chunks_, ElementsAre(Chunk{"a", false}));
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_TRUE(body_.failed());
  EXPECT_EQ(source_.abandoned, 0);
}

TEST_F(RequestBodyTest, FailBeforeReadIsReportedWhenReadingStarts) {
  body_.Deliver("buffered", false);
  body_.Fail(absl::UnavailableError("connection lost"));
  EXPECT_EQ(body_.buffered_bytes(), 0u);
  absl::Status error;
  body_.Read([&](absl::string_view, bool) { ADD_FAILURE() << "no data after failure"; },
             [&](const absl::Status& s) { error = s; });
  EXPECT_EQ(error.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(source_.consumed, 0u);
}

TEST_F(RequestBodyTest, FailWithoutErrorCallbackJustStops) {
  StartReading();
  body_.Fail(absl::OkStatus());  // Turned into an error status.
  EXPECT_TRUE(body_.failed());
  EXPECT_EQ(body_.error().code(), absl::StatusCode::kUnknown);
  body_.Deliver("x", true);
  EXPECT_TRUE(chunks_.empty());
}

TEST_F(RequestBodyTest, DiscardTellsTheEngine) {
  body_.Deliver("unwanted", false);
  body_.Discard();
  EXPECT_TRUE(body_.abandoned());
  EXPECT_EQ(source_.abandoned, 1);
  EXPECT_EQ(body_.buffered_bytes(), 0u);
  body_.Deliver("more", true);
  StartReading();  // Ignored after Discard.
  EXPECT_TRUE(chunks_.empty());
  EXPECT_EQ(source_.first_reads, 0);
  EXPECT_EQ(source_.consumed, 0u);
  body_.Discard();
  EXPECT_EQ(source_.abandoned, 1);
}

TEST_F(RequestBodyTest, DiscardInsideCallback) {
  int calls = 0;
  body_.Read([&](absl::string_view, bool) {
    ++calls;
    body_.Discard();
  });
  body_.Deliver("a", false);
  body_.Deliver("b", false);
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(source_.abandoned, 1);
  EXPECT_EQ(source_.consumed, 0u);  // No credit after OnAbandoned.
}

TEST_F(RequestBodyTest, EngineDeliveringFromOnConsumedKeepsOrderWithoutRecursion) {
  // An engine that, on credit, immediately delivers the next piece (as h1 might from its
  // socket buffer). Deliveries nest inside Deliver; chunks must stay in order and the stack
  // flat.
  int depth = 0;
  int max_depth = 0;
  int next = 1;
  source_.on_consumed = [&](size_t) {
    if (next < 100) {
      const int n = next++;
      body_.Deliver(std::to_string(n) + ",", n == 99);
    }
  };
  body_.Read([&](absl::string_view chunk, bool last) {
    ++depth;
    max_depth = std::max(max_depth, depth);
    chunks_.push_back({std::string(chunk), last});
    --depth;
  });
  body_.Deliver("0,", false);
  std::string all;
  for (const Chunk& c : chunks_) all += c.data;
  std::string expected;
  for (int i = 0; i < 100; ++i) expected += std::to_string(i) + ",";
  EXPECT_EQ(all, expected);
  EXPECT_TRUE(chunks_.back().last);
  EXPECT_EQ(max_depth, 1);
  EXPECT_EQ(source_.consumed, expected.size());
}

TEST_F(RequestBodyTest, ResumeInsideCallbackDoesNotRecurse) {
  int depth = 0;
  int max_depth = 0;
  body_.Pause();
  body_.Read([&](absl::string_view chunk, bool last) {
    ++depth;
    max_depth = std::max(max_depth, depth);
    chunks_.push_back({std::string(chunk), last});
    body_.Pause();
    body_.Resume();
    --depth;
  });
  body_.Deliver("a", false);
  body_.Resume();
  body_.Deliver("b", false);
  body_.Deliver("c", true);
  EXPECT_THAT(chunks_, ElementsAre(Chunk{"a", false}, Chunk{"b", false}, Chunk{"c", true}));
  EXPECT_EQ(max_depth, 1);
}

TEST_F(RequestBodyTest, SecondReadIsIgnored) {
  StartReading();
  int other = 0;
  body_.Read([&](absl::string_view, bool) { ++other; });
  body_.Deliver("x", true);
  EXPECT_EQ(other, 0);
  EXPECT_THAT(chunks_, ElementsAre(Chunk{"x", true}));
  EXPECT_EQ(source_.first_reads, 1);
}

TEST(RequestBodyNoSourceTest, WorksWithoutAnEngine) {
  RequestBody body;
  std::string got;
  body.Deliver("abc", true);
  body.ReadAll(10, [&](absl::StatusOr<std::string> r) { got = *r; });
  EXPECT_EQ(got, "abc");
}

// What a body shows of its state, then what a scripted use of it does: the same for a new body
// and a Reset one, whatever the Reset one went through before.
std::string Observe(RequestBody& body) {
  std::string out = absl::StrCat(
      "read=", body.read_started(), " paused=", body.paused(), " finished=", body.finished(),
      " abandoned=", body.abandoned(), " failed=", body.failed(),
      " buffered=", body.buffered_bytes(), " eof=", body.eof(), " limit=", body.limit(),
      " expected=", body.expected_length().has_value(), " over=", body.KnownOverLimit(),
      " trailers=", body.trailers().size());
  FakeSource source;
  body.set_source(&source);
  std::string got;
  body.Deliver("ab", false);
  body.Read(
      [&](absl::string_view chunk, bool last) { absl::StrAppend(&got, chunk, last ? "|end" : ""); },
      [&](const absl::Status& status) { absl::StrAppend(&got, "|error:", status.message()); });
  body.Deliver("cd", false);
  HeaderMap trailers;
  trailers.Add("x-t", "1");
  body.DeliverTrailers(std::move(trailers));
  absl::StrAppend(&out, " got=", got, " first_reads=", source.first_reads,
                  " consumed=", source.consumed, " abandoned_calls=", source.abandoned,
                  " trailers_after=", body.trailers().size());
  body.set_source(nullptr);
  return out;
}

// Reset() restores every member by hand (engines recycle Requests, once per request); a member
// it forgets shows up as a body behaving differently after some use than a new one. The
// callbacks of the earlier use are dropped unrun, and what they hold is released.
TEST(RequestBodyResetTest, AResetBodyBehavesAsANewOneAfterAnyUse) {
  auto token = std::make_shared<int>(0);
  int stale_calls = 0;
  const std::vector<std::pair<std::string, std::function<void(RequestBody&, FakeSource&)>>> uses = {
      {"nothing", [](RequestBody&, FakeSource&) {}},
      {"reading, partway",
       [&](RequestBody& b, FakeSource&) {
         b.Read([&, token](absl::string_view, bool) { ++stale_calls; },
                [&, token](const absl::Status&) { ++stale_calls; });
         b.Deliver("xy", false);
       }},
      {"paused with 100 KiB buffered",
       [&](RequestBody& b, FakeSource&) {
         b.Pause();
         b.Deliver(std::string(100 << 10, 'z'), false);
       }},
      {"ReadAll over its limit",
       [&](RequestBody& b, FakeSource&) {
         b.ReadAll(4, [&, token](absl::StatusOr<std::string>) { ++stale_calls; });
         b.Deliver("too long", false);
       }},
      {"ReadAll partway",
       [&](RequestBody& b, FakeSource&) {
         b.ReadAll(1 << 20, [&, token](absl::StatusOr<std::string>) { ++stale_calls; });
         b.Deliver(std::string(1000, 'r'), false);
       }},
      {"failed before reading",
       [](RequestBody& b, FakeSource&) { b.Fail(absl::CancelledError("reset")); }},
      {"finished with trailers",
       [](RequestBody& b, FakeSource&) {
         b.Read([](absl::string_view, bool) {});
         HeaderMap t;
         t.Add("x-done", "yes");
         b.DeliverTrailers(std::move(t));
       }},
      {"limits set",
       [](RequestBody& b, FakeSource&) {
         b.set_limit(10);
         b.set_expected_length(100);
       }},
      {"discarded", [](RequestBody& b, FakeSource&) { b.Discard(); }},
  };
  RequestBody fresh;
  const std::string want = Observe(fresh);
  for (const auto& [name, use] : uses) {
    SCOPED_TRACE(name);
    RequestBody body;
    FakeSource source;
    body.set_source(&source);
    use(body, source);
    body.Reset();
    const int calls_before = stale_calls;
    EXPECT_EQ(Observe(body), want);
    EXPECT_EQ(stale_calls, calls_before) << "a callback of the earlier use ran";
    EXPECT_EQ(token.use_count(), 1) << "a callback of the earlier use is still held";
  }
}

}  // namespace
}  // namespace petrel
