// Response-body kinds and the pull-based producer contract, driven by a test double engine.
#include "petrel/http/body.h"

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <cerrno>
#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "petrel/common/event_loop.h"
#include "petrel/common/timer.h"

namespace petrel {
namespace {

using ::testing::HasSubstr;

// What an engine does with a producer: pull while there is room, park on kWouldBlock, and
// only schedule (never read) from the resume callback.
class FakeEngine {
 public:
  explicit FakeEngine(BodyProducer& producer) : producer_(producer) {
    producer_.SetResumeCallback([this] {
      EXPECT_TRUE(parked_) << "resume without a preceding kWouldBlock";
      parked_ = false;
      ++resumes_;
    });
  }

  // One engine write opportunity of `room` bytes.
  BodyReadStatus Pull(size_t room) {
    BodyReadResult r = producer_.Read(room, &sent_);
    if (r.status == BodyReadStatus::kWouldBlock) parked_ = true;
    if (r.status == BodyReadStatus::kError) error_ = r.error;
    if (r.status == BodyReadStatus::kEnd) trailers_ = producer_.TakeTrailers();
    return r.status;
  }

  // Pulls until the producer blocks, ends or fails.
  BodyReadStatus Drain(size_t room) {
    for (;;) {
      const BodyReadStatus s = Pull(room);
      if (s != BodyReadStatus::kData) return s;
    }
  }

  const std::string& sent() const { return sent_; }
  bool parked() const { return parked_; }
  int resumes() const { return resumes_; }
  const absl::Status& error() const { return error_; }
  const HeaderMap& trailers() const { return trailers_; }

 private:
  BodyProducer& producer_;
  std::string sent_;
  bool parked_ = false;
  int resumes_ = 0;
  absl::Status error_;
  HeaderMap trailers_;
};

class TempFile {
 public:
  explicit TempFile(const std::string& contents) {
    const char* dir = getenv("TEST_TMPDIR");
    path_ = std::string(dir != nullptr ? dir : "/tmp") + "/petrel_body_test_XXXXXX";
    const int fd = mkstemp(path_.data());
    EXPECT_GE(fd, 0);
    EXPECT_EQ(write(fd, contents.data(), contents.size()), static_cast<ssize_t>(contents.size()));
    close(fd);
  }
  ~TempFile() { unlink(path_.c_str()); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

bool FdIsOpen(int fd) { return fcntl(fd, F_GETFD) != -1 || errno != EBADF; }

// ---- ResponseBody kinds ----

TEST(ResponseBodyTest, DefaultIsAnEmptyBuffer) {
  ResponseBody body;
  EXPECT_EQ(body.kind(), ResponseBody::Kind::kBuffer);
  ASSERT_NE(body.buffer(), nullptr);
  EXPECT_EQ(*body.buffer(), "");
  EXPECT_EQ(body.file(), nullptr);
  EXPECT_EQ(body.producer(), nullptr);
  EXPECT_EQ(body.length(), 0u);
}

TEST(ResponseBodyTest, Buffer) {
  ResponseBody body(std::string("hello"));
  EXPECT_EQ(body.kind(), ResponseBody::Kind::kBuffer);
  EXPECT_EQ(*body.buffer(), "hello");
  EXPECT_EQ(body.length(), 5u);
}

TEST(ResponseBodyTest, BufferAsProducerInChunks) {
  ResponseBody body(std::string("abcdefghij"));
  std::unique_ptr<BodyProducer> p = body.ReleaseAsProducer();
  EXPECT_EQ(body.kind(), ResponseBody::Kind::kBuffer);
  EXPECT_EQ(*body.buffer(), "");
  EXPECT_EQ(p->Length(), 10u);
  FakeEngine engine(*p);
  EXPECT_EQ(engine.Pull(4), BodyReadStatus::kData);
  EXPECT_EQ(engine.Pull(4), BodyReadStatus::kData);
  EXPECT_EQ(engine.Pull(4), BodyReadStatus::kEnd);  // Last bytes arrive with the end.
  EXPECT_EQ(engine.sent(), "abcdefghij");
}

TEST(ResponseBodyTest, BufferAsProducerInOneRead) {
  ResponseBody body(std::string(1000, 'x'));
  std::unique_ptr<BodyProducer> p = body.ReleaseAsProducer();
  FakeEngine engine(*p);
  EXPECT_EQ(engine.Pull(1 << 20), BodyReadStatus::kEnd);
  EXPECT_EQ(engine.sent(), std::string(1000, 'x'));
}

TEST(ResponseBodyTest, SharedBytesAreTheBufferWithoutACopy) {
  SharedBytes shared = SharedBytes::Adopt(std::string(100, 's'));
  const std::string* const cached = &shared.bytes();
  {
    ResponseBody a(shared);
    ResponseBody b(shared);
    EXPECT_EQ(shared.use_count(), 3u);
    EXPECT_EQ(a.kind(), ResponseBody::Kind::kBuffer);
    EXPECT_EQ(a.buffer(), cached);  // the very bytes, not a copy
    EXPECT_EQ(b.buffer(), cached);
    EXPECT_EQ(a.length(), 100u);
    ResponseBody moved(std::move(a));
    EXPECT_EQ(moved.buffer(), cached);
    EXPECT_EQ(shared.use_count(), 3u);
  }
  EXPECT_EQ(shared.use_count(), 1u);
  // The last owner frees them: the body outlives the cache's reference.
  ResponseBody last(std::move(shared));
  EXPECT_EQ(*last.buffer(), std::string(100, 's'));
  EXPECT_EQ(SharedBytes().bytes(), "");
  EXPECT_EQ(SharedBytes().use_count(), 0u);
}

TEST(ResponseBodyTest, SharedBytesAsProducerLeaveTheSharedCopyAlone) {
  SharedBytes shared = SharedBytes::Adopt("abcdefghij");
  ResponseBody body(shared);
  std::unique_ptr<BodyProducer> p = body.ReleaseAsProducer();
  EXPECT_EQ(*body.buffer(), "");
  EXPECT_EQ(p->Length(), 10u);
  FakeEngine engine(*p);
  EXPECT_EQ(engine.Pull(4), BodyReadStatus::kData);
  EXPECT_EQ(engine.Pull(4), BodyReadStatus::kData);
  EXPECT_EQ(engine.Pull(4), BodyReadStatus::kEnd);
  EXPECT_EQ(engine.sent(), "abcdefghij");
  ResponseBody whole(shared);
  std::string out;
  EXPECT_EQ(whole.ReleaseAsProducer()->Read(1 << 20, &out).status, BodyReadStatus::kEnd);
  EXPECT_EQ(out, "abcdefghij");
  EXPECT_EQ(shared.bytes(), "abcdefghij");  // copied out, never handed over
}

TEST(ResponseBodyTest, TakeBufferMovesOwnBytesAndCopiesSharedOnes) {
  ResponseBody own(std::string("mine"));
  EXPECT_EQ(own.TakeBuffer(), "mine");
  EXPECT_EQ(*own.buffer(), "");
  SharedBytes shared = SharedBytes::Adopt("ours");
  ResponseBody body(shared);
  EXPECT_EQ(body.TakeBuffer(), "ours");
  EXPECT_EQ(*body.buffer(), "");
  EXPECT_EQ(shared.bytes(), "ours");
  EXPECT_EQ(shared.use_count(), 1u);
  ResponseBody producer(std::make_unique<StreamingBody>());
  EXPECT_EQ(producer.TakeBuffer(), "");
  EXPECT_EQ(producer.kind(), ResponseBody::Kind::kProducer);
}

TEST(ResponseBodyTest, EmptyBufferAsProducerEndsAtOnce) {
  ResponseBody body;
  std::unique_ptr<BodyProducer> p = body.ReleaseAsProducer();
  FakeEngine engine(*p);
  EXPECT_EQ(engine.Pull(16), BodyReadStatus::kEnd);
  EXPECT_EQ(engine.sent(), "");
}

TEST(ResponseBodyTest, NullProducerIsAnEmptyBuffer) {
  ResponseBody body(std::unique_ptr<BodyProducer>{});
  EXPECT_EQ(body.kind(), ResponseBody::Kind::kBuffer);
}

TEST(ResponseBodyTest, ProducerKindAndReleaseReturnsSameObject) {
  auto owned = std::make_unique<StreamingBody>();
  StreamingBody* raw = owned.get();
  ResponseBody body(std::move(owned));
  EXPECT_EQ(body.kind(), ResponseBody::Kind::kProducer);
  EXPECT_EQ(body.producer(), raw);
  EXPECT_EQ(body.length(), std::nullopt);
  std::unique_ptr<BodyProducer> released = body.ReleaseAsProducer();
  EXPECT_EQ(released.get(), raw);
  EXPECT_EQ(body.kind(), ResponseBody::Kind::kBuffer);
}

// Clear() (engines recycling Responses) leaves what a new ResponseBody is, whatever the body held,
// and lets go of it: shared bytes, the file's descriptor, the producer.
TEST(ResponseBodyTest, ClearLeavesAnEmptyBufferAndReleasesWhatTheBodyHeld) {
  const auto expect_new = [](const ResponseBody& body) {
    EXPECT_EQ(body.kind(), ResponseBody::Kind::kBuffer);
    ASSERT_NE(body.buffer(), nullptr);
    EXPECT_EQ(*body.buffer(), "");
    EXPECT_EQ(body.length(), 0u);
  };
  ResponseBody small(std::string("abc"));
  small.Clear();
  expect_new(small);

  ResponseBody large(std::string(4096, 'x'));
  large.Clear();
  expect_new(large);
  EXPECT_LE(large.buffer()->capacity(), std::string().capacity()) << "heap bytes kept";

  SharedBytes shared = SharedBytes::Adopt(std::string(100, 's'));
  ResponseBody sharing(shared);
  EXPECT_EQ(shared.use_count(), 2u);
  sharing.Clear();
  expect_new(sharing);
  EXPECT_EQ(shared.use_count(), 1u);

  TempFile f("file bytes");
  absl::StatusOr<FileBody> file = FileBody::Open(f.path());
  ASSERT_TRUE(file.ok());
  const int fd = file->fd();
  ResponseBody with_file(*std::move(file));
  with_file.Clear();
  expect_new(with_file);
  EXPECT_FALSE(FdIsOpen(fd));

  auto producer = std::make_unique<StreamingBody>();
  ResponseBody streaming(std::move(producer));
  streaming.Clear();
  expect_new(streaming);
}

// ---- FileBody ----

TEST(FileBodyTest, WholeFileAndRange) {
  TempFile f("0123456789");
  absl::StatusOr<FileBody> whole = FileBody::Open(f.path());
  ASSERT_TRUE(whole.ok()) << whole.status();
  EXPECT_EQ(whole->offset(), 0u);
  EXPECT_EQ(whole->length(), 10u);

  absl::StatusOr<FileBody> range = FileBody::Open(f.path(), 2, 5);
  ASSERT_TRUE(range.ok()) << range.status();
  std::string out;
  EXPECT_EQ(*range->ReadAt(0, 3, &out), 3u);
  EXPECT_EQ(*range->ReadAt(3, 100, &out), 2u);
  EXPECT_EQ(*range->ReadAt(5, 100, &out), 0u);
  EXPECT_EQ(out, "23456");

  absl::StatusOr<FileBody> tail = FileBody::Open(f.path(), 7, std::nullopt);
  ASSERT_TRUE(tail.ok());
  EXPECT_EQ(tail->length(), 3u);
  absl::StatusOr<FileBody> empty_at_end = FileBody::Open(f.path(), 10, 0);
  ASSERT_TRUE(empty_at_end.ok());
  EXPECT_EQ(empty_at_end->length(), 0u);
}

TEST(FileBodyTest, Errors) {
  TempFile f("0123456789");
  EXPECT_EQ(FileBody::Open(f.path(), 11, std::nullopt).status().code(),
            absl::StatusCode::kOutOfRange);
  EXPECT_EQ(FileBody::Open(f.path(), 5, 6).status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(FileBody::Open(f.path() + ".missing").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(FileBody::Open("/").status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(FileBodyTest, OwnsAndClosesTheFd) {
  TempFile f("abc");
  int fd = -1;
  {
    absl::StatusOr<FileBody> body = FileBody::Open(f.path());
    ASSERT_TRUE(body.ok());
    fd = body->fd();
    EXPECT_TRUE(FdIsOpen(fd));
    FileBody moved = *std::move(body);
    EXPECT_EQ(moved.fd(), fd);
    EXPECT_TRUE(FdIsOpen(fd));
  }
  EXPECT_FALSE(FdIsOpen(fd));
}

TEST(FileBodyTest, FileShrinkingUnderTheRangeIsDataLoss) {
  TempFile f("0123456789");
  absl::StatusOr<FileBody> body = FileBody::Open(f.path());
  ASSERT_TRUE(body.ok());
  ASSERT_EQ(truncate(f.path().c_str(), 4), 0);
  std::string out;
  EXPECT_EQ(*body->ReadAt(0, 100, &out), 4u);
  absl::StatusOr<size_t> r = body->ReadAt(4, 100, &out);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(out, "0123");
}

TEST(FileBodyTest, FileKindAsProducer) {
  TempFile f("abcdefghijklmnopqrstuvwxyz");
  absl::StatusOr<FileBody> file = FileBody::Open(f.path(), 3, 20);
  ASSERT_TRUE(file.ok());
  const int fd = file->fd();
  ResponseBody body(*std::move(file));
  EXPECT_EQ(body.kind(), ResponseBody::Kind::kFile);
  ASSERT_NE(body.file(), nullptr);
  EXPECT_EQ(body.length(), 20u);
  std::unique_ptr<BodyProducer> p = body.ReleaseAsProducer();
  EXPECT_EQ(p->Length(), 20u);
  FakeEngine engine(*p);
  EXPECT_EQ(engine.Drain(7), BodyReadStatus::kEnd);
  EXPECT_EQ(engine.sent(), "defghijklmnopqrstuvw");
  p.reset();
  EXPECT_FALSE(FdIsOpen(fd));
}

// ---- StreamingBody ----

TEST(StreamingBodyTest, WriteUntilFullThenWritableAfterDrain) {
  StreamingBody body(100);
  FakeEngine engine(body);
  int writable = 0;
  body.SetOnWritable([&] { ++writable; });

  EXPECT_TRUE(body.Write(std::string(60, 'a')));
  EXPECT_FALSE(body.Write(std::string(60, 'b')));  // 120 >= 100: full, but accepted.
  EXPECT_EQ(body.buffered(), 120u);

  EXPECT_EQ(engine.Pull(30), BodyReadStatus::kData);  // 90 left: above half.
  EXPECT_EQ(writable, 0);
  EXPECT_EQ(engine.Pull(40), BodyReadStatus::kData);  // 50 left: at half.
  EXPECT_EQ(writable, 1);
  EXPECT_EQ(engine.Pull(1000), BodyReadStatus::kData);
  EXPECT_EQ(writable, 1);  // Once per false Write.
  EXPECT_EQ(engine.sent(), std::string(60, 'a') + std::string(60, 'b'));
}

TEST(StreamingBodyTest, WouldBlockThenResumeOnWrite) {
  StreamingBody body;
  FakeEngine engine(body);
  EXPECT_EQ(engine.Pull(16), BodyReadStatus::kWouldBlock);
  EXPECT_TRUE(body.parked());
  EXPECT_EQ(engine.resumes(), 0);
  EXPECT_TRUE(body.Write("hi"));
  EXPECT_EQ(engine.resumes(), 1);
  EXPECT_TRUE(body.Write(" there"));
  EXPECT_EQ(engine.resumes(), 1);  // Not parked any more: no second resume.
  EXPECT_EQ(engine.Pull(16), BodyReadStatus::kData);
  EXPECT_EQ(engine.sent(), "hi there");
  EXPECT_TRUE(body.Write(""));  // Empty writes do not wake anyone.
  EXPECT_EQ(engine.Pull(16), BodyReadStatus::kWouldBlock);
  EXPECT_TRUE(body.Write(""));
  EXPECT_EQ(engine.resumes(), 1);
}

TEST(StreamingBodyTest, FinishWithTrailers) {
  StreamingBody body;
  FakeEngine engine(body);
  EXPECT_TRUE(body.Write("data"));
  EXPECT_EQ(engine.Pull(2), BodyReadStatus::kData);
  EXPECT_EQ(engine.Pull(16), BodyReadStatus::kData);
  EXPECT_EQ(engine.Pull(16), BodyReadStatus::kWouldBlock);
  body.Finish(HeaderMap{{"Grpc-Status", "0"}});
  EXPECT_EQ(engine.resumes(), 1);
  EXPECT_TRUE(body.closed());
  EXPECT_FALSE(body.Write("late"));
  EXPECT_EQ(engine.Pull(16), BodyReadStatus::kEnd);
  EXPECT_EQ(engine.sent(), "data");
  EXPECT_EQ(engine.trailers().Get("grpc-status"), "0");
}

TEST(StreamingBodyTest, FinishDrainsBufferedBytesFirst) {
  StreamingBody body;
  FakeEngine engine(body);
  body.Write("abcdef");
  body.Finish();
  EXPECT_EQ(engine.Pull(4), BodyReadStatus::kData);
  EXPECT_EQ(engine.Pull(4), BodyReadStatus::kEnd);
  EXPECT_EQ(engine.sent(), "abcdef");
  EXPECT_TRUE(engine.trailers().empty());
}

TEST(StreamingBodyTest, FailDropsBufferAndReportsError) {
  StreamingBody body;
  FakeEngine engine(body);
  EXPECT_EQ(engine.Pull(16), BodyReadStatus::kWouldBlock);
  body.Write("x");
  EXPECT_EQ(engine.resumes(), 1);
  body.Fail(absl::UnavailableError("upstream gone"));
  EXPECT_EQ(engine.Pull(16), BodyReadStatus::kError);
  EXPECT_EQ(engine.error().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(engine.sent(), "");
  EXPECT_FALSE(body.Write("y"));
  body.Finish();  // Ignored after Fail.
  EXPECT_EQ(engine.Pull(16), BodyReadStatus::kError);
}

TEST(StreamingBodyTest, FailWhileParkedResumes) {
  StreamingBody body;
  FakeEngine engine(body);
  EXPECT_EQ(engine.Pull(16), BodyReadStatus::kWouldBlock);
  body.Fail(absl::OkStatus());  // OK is not an error: replaced by Unknown.
  EXPECT_EQ(engine.resumes(), 1);
  EXPECT_EQ(engine.Pull(16), BodyReadStatus::kError);
  EXPECT_EQ(engine.error().code(), absl::StatusCode::kUnknown);
}

TEST(StreamingBodyTest, HandlerStreamsFromOnWritable) {
  // A handler producing 1 MiB in 10 KiB writes, paced only by on_writable.
  StreamingBody body(32 * 1024);
  FakeEngine engine(body);
  const size_t total = 1 << 20;
  size_t written = 0;
  auto produce = [&] {
    while (written < total) {
      const std::string chunk(std::min<size_t>(10 * 1024, total - written),
                              static_cast<char>('a' + (written / 10240) % 26));
      written += chunk.size();
      if (!body.Write(chunk)) return;
    }
    body.Finish();
  };
  body.SetOnWritable(produce);
  produce();
  size_t max_buffered = 0;
  BodyReadStatus s;
  do {
    max_buffered = std::max(max_buffered, body.buffered());
    s = engine.Pull(16 * 1024);
  } while (s == BodyReadStatus::kData);
  EXPECT_EQ(s, BodyReadStatus::kEnd);
  EXPECT_EQ(engine.sent().size(), total);
  EXPECT_LT(max_buffered, 32u * 1024 + 10 * 1024);  // Capacity plus one chunk.
  for (size_t i = 0; i < total; i += 10240) {
    ASSERT_EQ(engine.sent()[i], static_cast<char>('a' + (i / 10240) % 26)) << i;
  }
}

TEST(StreamingBodyTest, OnWritableSetAfterDrainRunsAtOnce) {
  StreamingBody body(10);
  FakeEngine engine(body);
  EXPECT_FALSE(body.Write(std::string(10, 'x')));
  EXPECT_EQ(engine.Pull(100), BodyReadStatus::kData);
  int writable = 0;
  body.SetOnWritable([&] { ++writable; });
  EXPECT_EQ(writable, 1);
}

TEST(StreamingBodyTest, OnWritableMayReplaceItself) {
  StreamingBody body(10);
  FakeEngine engine(body);
  int first = 0;
  int second = 0;
  body.SetOnWritable([&] {
    ++first;
    body.SetOnWritable([&] { ++second; });
  });
  EXPECT_FALSE(body.Write(std::string(10, 'x')));
  EXPECT_EQ(engine.Pull(100), BodyReadStatus::kData);
  EXPECT_FALSE(body.Write(std::string(10, 'y')));
  EXPECT_EQ(engine.Pull(100), BodyReadStatus::kData);
  EXPECT_EQ(first, 1);
  EXPECT_EQ(second, 1);
}

// A custom producer: delivers a fixed script of chunks with blocking gaps in between.
class ScriptedProducer final : public BodyProducer {
 public:
  void Supply(std::string chunk) {
    pending_ += chunk;
    NotifyResume();
  }
  void End() {
    ended_ = true;
    NotifyResume();
  }
  std::optional<uint64_t> Length() const override { return 6; }

 private:
  BodyReadResult DoRead(size_t max_bytes, std::string* out) override {
    if (pending_.empty()) return ended_ ? BodyReadResult::End() : BodyReadResult::WouldBlock();
    const size_t n = std::min(max_bytes, pending_.size());
    out->append(pending_, 0, n);
    pending_.erase(0, n);
    return BodyReadResult::Data();
  }
  std::string pending_;
  bool ended_ = false;
};

TEST(BodyProducerTest, ResumeOnlyWhenParked) {
  ScriptedProducer p;
  FakeEngine engine(p);
  p.Supply("abc");  // Not parked: no resume.
  EXPECT_EQ(engine.resumes(), 0);
  EXPECT_EQ(engine.Drain(2), BodyReadStatus::kWouldBlock);
  p.Supply("def");
  p.End();
  EXPECT_EQ(engine.resumes(), 1);
  EXPECT_EQ(engine.Drain(2), BodyReadStatus::kEnd);
  EXPECT_EQ(engine.sent(), "abcdef");
  ResponseBody body(std::make_unique<ScriptedProducer>());
  EXPECT_EQ(body.length(), 6u);
}

TEST(BodyReadResultTest, Factories) {
  EXPECT_EQ(BodyReadResult::Data().status, BodyReadStatus::kData);
  EXPECT_EQ(BodyReadResult::End().status, BodyReadStatus::kEnd);
  EXPECT_EQ(BodyReadResult::WouldBlock().status, BodyReadStatus::kWouldBlock);
  BodyReadResult e = BodyReadResult::Error(absl::InternalError("boom"));
  EXPECT_EQ(e.status, BodyReadStatus::kError);
  EXPECT_THAT(std::string(e.error.message()), HasSubstr("boom"));
}

// The idle limit fails a body whose handler stopped writing, and wakes the engine; it leaves
// alone a body whose bytes wait for the engine (a peer that does not read: the engine's send
// timeout) and one whose handler keeps writing. Phases are counted in ticks of a timer on the
// same loop, so a loaded machine only makes them slower.
TEST(StreamingBodyTest, IdleLimitFailsAStalledHandlerOnly) {
  EventLoop loop;
  StreamingBody body;
  FakeEngine engine(body);
  constexpr auto kIdle = std::chrono::milliseconds(20);
  body.SetIdleLimit(&loop, kIdle);
  EXPECT_TRUE(body.Write("waiting for the engine"));
  int tick = 0;
  Timer ticker(&loop, [&] {
    ++tick;
    if (tick <= 40) {
      // 40 ticks of 5 ms (ten limits): the bytes wait unsent, so the body is not idle.
      EXPECT_FALSE(body.closed()) << "tick " << tick;
    } else if (tick <= 80) {
      // Ten more limits: the handler writes and the engine sends at every tick.
      EXPECT_FALSE(body.closed()) << "tick " << tick;
      body.Write("x");
      engine.Drain(1024);
    } else if (!body.closed()) {
      engine.Drain(1024);  // nothing waits now; the handler has stopped writing
    } else {
      loop.Stop();
      return;
    }
    ticker.StartAt(loop.now() + std::chrono::milliseconds(5));
  });
  ticker.StartAt(loop.now());
  Timer watchdog(&loop, [&] {
    ADD_FAILURE() << "the idle body was not failed within 10 s";
    loop.Stop();
  });
  watchdog.StartAfter(std::chrono::seconds(10));
  loop.Run();
  EXPECT_GT(tick, 80);
  EXPECT_TRUE(body.closed());
  EXPECT_EQ(engine.Pull(16), BodyReadStatus::kError);
  EXPECT_EQ(engine.error().code(), absl::StatusCode::kDeadlineExceeded) << engine.error();
  EXPECT_EQ(engine.sent(), absl::StrCat("waiting for the engine", std::string(40, 'x')));
}

}  // namespace
}  // namespace petrel
