// Request and Response: the shapes handlers see and the engine-facing commit/cancel hooks.
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <utility>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "petrel/http/request.h"
#include "petrel/http/response.h"
#include "petrel/http/status.h"

namespace petrel {
namespace {

using ::testing::Optional;

// An engine's view: counts commits and remembers what it saw at that moment.
class FakeSink : public ResponseSink {
 public:
  void OnResponseStart(Response& response) override {
    ++starts;
    status = response.status();
    kind = response.body().kind();
    committed_when_called = response.committed();
  }
  int starts = 0;
  int status = 0;
  ResponseBody::Kind kind = ResponseBody::Kind::kBuffer;
  bool committed_when_called = false;
};

TEST(RequestTest, SetTargetSplitsPathAndQuery) {
  Request req;
  req.SetTarget("/search?q=a+b&x=%20");
  EXPECT_EQ(req.path(), "/search");
  EXPECT_EQ(req.query(), "q=a+b&x=%20");
  req.SetTarget("/plain");
  EXPECT_EQ(req.path(), "/plain");
  EXPECT_EQ(req.query(), "");
  req.SetTarget("/empty?");
  EXPECT_EQ(req.path(), "/empty");
  EXPECT_EQ(req.query(), "");
  req.SetTarget("/a?b?c");
  EXPECT_EQ(req.path(), "/a");
  EXPECT_EQ(req.query(), "b?c");
  req.SetTarget("*");
  EXPECT_EQ(req.path(), "*");
}

TEST(RequestTest, Fields) {
  Request req;
  EXPECT_EQ(req.method(), Method::kGet);
  EXPECT_EQ(req.version(), HttpVersion::k11);
  EXPECT_FALSE(req.early_data());
  req.set_method(*Method::Parse("PROPFIND"));
  req.set_authority("example.com:8443");
  req.set_scheme("https");
  req.set_version(HttpVersion::k3);
  req.set_alpn("h3");
  req.set_sni("example.com");
  req.set_early_data(true);
  req.headers().Add("Accept", "*/*");
  absl::StatusOr<SocketAddress> peer = SocketAddress::ParseHostPort("192.0.2.1:5555");
  ASSERT_TRUE(peer.ok());
  req.set_peer_address(*peer);
  EXPECT_EQ(req.method().name(), "PROPFIND");
  EXPECT_EQ(req.authority(), "example.com:8443");
  EXPECT_EQ(req.scheme(), "https");
  EXPECT_EQ(req.version(), HttpVersion::k3);
  EXPECT_EQ(req.alpn(), "h3");
  EXPECT_EQ(req.sni(), "example.com");
  EXPECT_TRUE(req.early_data());
  EXPECT_THAT(req.headers().Get("accept"), Optional(absl::string_view("*/*")));
  EXPECT_EQ(req.peer_address().ToString(), "192.0.2.1:5555");
  EXPECT_TRUE(req.local_address().empty());
  EXPECT_FALSE(req.body().read_started());
}

TEST(RequestTest, Params) {
  Request req;
  req.set_path("/users/42/posts/7");
  RouteParams params;
  params.Add("id", req.path().substr(7, 2));
  params.Add("post", req.path().substr(16, 1));
  req.set_params(std::move(params));
  EXPECT_EQ(req.Param("id"), "42");
  EXPECT_EQ(req.Param("post"), "7");
  EXPECT_EQ(req.Param("missing"), "");
  EXPECT_TRUE(req.params().Contains("id"));
  EXPECT_FALSE(req.params().Contains("ID"));
  EXPECT_EQ(req.params().size(), 2u);
}

TEST(RequestTest, ResetKeepsNothingButStorage) {
  Request req;
  req.set_method(Method::kPost);
  req.set_version(HttpVersion::k2);
  req.SetTarget("/a/long/enough/path/to/live/on/the/heap?and=a&query=too");
  req.AssignAuthority("a-long-enough-authority.example:8443");
  req.AssignScheme("https");
  req.headers().Add("x-a", "1");
  req.body().Deliver("abc", false);
  req.set_alpn("h2");
  req.Reset();
  EXPECT_EQ(req.method(), Method::kGet);
  EXPECT_EQ(req.version(), HttpVersion::k11);
  EXPECT_EQ(req.path(), "");
  EXPECT_EQ(req.query(), "");
  EXPECT_EQ(req.authority(), "");
  EXPECT_EQ(req.scheme(), "");
  EXPECT_TRUE(req.headers().empty());
  EXPECT_EQ(req.body().buffered_bytes(), 0u);
  EXPECT_FALSE(req.body().eof());
  EXPECT_EQ(req.alpn(), "");
  req.AssignAuthority("b");
  EXPECT_EQ(req.authority(), "b");
}

TEST(ResponseTest, ResetMakesItNewAgain) {
  Response res;
  bool cancelled = false;
  res.SetOnCancel([&] { cancelled = true; });
  res.SetHeader("X-A", "1");
  res.trailers().Add("x-t", "2");
  res.Send(404, "gone");
  ASSERT_TRUE(res.committed());
  res.Reset();
  EXPECT_FALSE(cancelled);  // dropped unrun
  EXPECT_FALSE(res.committed());
  EXPECT_FALSE(res.cancelled());
  EXPECT_EQ(res.status(), 200);
  EXPECT_TRUE(res.headers().empty());
  EXPECT_TRUE(res.trailers().empty());
  EXPECT_EQ(res.body().length(), 0u);
  res.Send(201, "again");
  EXPECT_EQ(res.status(), 201);
}

TEST(RequestTest, VersionNames) {
  EXPECT_EQ(HttpVersionName(HttpVersion::k10), "HTTP/1.0");
  EXPECT_EQ(HttpVersionName(HttpVersion::k11), "HTTP/1.1");
  EXPECT_EQ(HttpVersionName(HttpVersion::k2), "HTTP/2");
  EXPECT_EQ(HttpVersionName(HttpVersion::k3), "HTTP/3");
}

TEST(ResponseTest, SendCommitsOnce) {
  FakeSink sink;
  Response res;
  res.set_sink(&sink);
  EXPECT_FALSE(res.committed());
  EXPECT_TRUE(res.SetHeader("X-Request-Id", "1"));
  res.Send(201, "created", "text/plain");
  EXPECT_TRUE(res.committed());
  EXPECT_EQ(sink.starts, 1);
  EXPECT_TRUE(sink.committed_when_called);
  EXPECT_EQ(sink.status, 201);
  EXPECT_EQ(res.status(), 201);
  EXPECT_EQ(*res.body().buffer(), "created");
  EXPECT_THAT(res.headers().Get("content-type"), Optional(absl::string_view("text/plain")));

  res.Send(500, "ignored");
  res.set_status(503);
  EXPECT_FALSE(res.SetHeader("X-Late", "1"));
  EXPECT_FALSE(res.AddHeader("X-Late", "1"));
  EXPECT_EQ(sink.starts, 1);
  EXPECT_EQ(res.status(), 201);
  EXPECT_EQ(*res.body().buffer(), "created");
  EXPECT_FALSE(res.headers().Contains("x-late"));
}

TEST(ResponseTest, InvalidFieldsRejected) {
  Response res;
  EXPECT_FALSE(res.SetHeader("X-Evil", "a\r\nSet-Cookie: b"));
  EXPECT_FALSE(res.AddHeader("Bad Name", "v"));
  EXPECT_FALSE(res.AddHeader("X", " padded "));
  EXPECT_TRUE(res.AddHeader("Set-Cookie", "a=1"));
  EXPECT_TRUE(res.AddHeader("Set-Cookie", "b=2"));
  EXPECT_EQ(res.headers().size(), 2u);
  res.Send(200, "x", "text/plain\r\nX: y");  // Invalid content type is not set.
  EXPECT_FALSE(res.headers().Contains("content-type"));
}

TEST(ResponseTest, StatusOutsideFinalRangeBecomes500) {
  for (int bad : {0, 99, 100, 103, 199, 600, -1}) {
    Response res;
    res.Send(bad, "");
    EXPECT_EQ(res.status(), HttpStatus::kInternalServerError) << bad;
  }
  Response ok;
  ok.Send(599, "");
  EXPECT_EQ(ok.status(), 599);
}

TEST(ResponseTest, SinkAttachedAfterCommitIsNotifiedAtOnce) {
  Response res;
  res.Send(204, "");
  FakeSink sink;
  res.set_sink(&sink);
  EXPECT_EQ(sink.starts, 1);
  EXPECT_EQ(sink.status, 204);
  res.set_sink(&sink);
  EXPECT_EQ(sink.starts, 1);
}

TEST(ResponseTest, AsynchronousCommit) {
  // A handler that keeps the Response and answers later (e.g. after posting work away).
  FakeSink sink;
  Response res;
  res.set_sink(&sink);
  Response* kept = nullptr;
  auto handler = [&](Response& r) { kept = &r; };
  handler(res);
  EXPECT_EQ(sink.starts, 0);
  EXPECT_FALSE(res.committed());
  kept->Send(200, "later");
  EXPECT_EQ(sink.starts, 1);
}

TEST(ResponseTest, StreamGivesAProducerBody) {
  FakeSink sink;
  Response res;
  res.set_sink(&sink);
  StreamingBody& stream = res.Stream(200, 1024);
  EXPECT_EQ(sink.starts, 1);
  EXPECT_EQ(sink.kind, ResponseBody::Kind::kProducer);
  EXPECT_EQ(res.body().producer(), &stream);
  EXPECT_EQ(stream.capacity(), 1024u);
  EXPECT_TRUE(stream.Write("chunk"));
  std::string out;
  EXPECT_EQ(res.body().producer()->Read(100, &out).status, BodyReadStatus::kData);
  EXPECT_EQ(out, "chunk");

  // A second Stream (a handler bug) gets a detached body that refuses writes.
  StreamingBody& again = res.Stream(200);
  EXPECT_NE(&again, &stream);
  EXPECT_FALSE(again.Write("x"));
  EXPECT_EQ(sink.starts, 1);
}

TEST(ResponseTest, StreamSurvivesReleaseAsProducer) {
  Response res;
  StreamingBody& stream = res.Stream(200);
  std::unique_ptr<BodyProducer> owned_by_engine = res.body().ReleaseAsProducer();
  EXPECT_EQ(owned_by_engine.get(), &stream);
  stream.Write("still valid");
  stream.Finish();
  std::string out;
  EXPECT_EQ(owned_by_engine->Read(100, &out).status, BodyReadStatus::kEnd);
  EXPECT_EQ(out, "still valid");
}

TEST(ResponseTest, SendBodyWithCustomProducerAndTrailers) {
  Response res;
  res.trailers().Add("Server-Timing", "db;dur=5");
  auto producer = std::make_unique<StreamingBody>();
  producer->Finish(HeaderMap{{"X-Checksum", "1"}});
  res.SendBody(200, ResponseBody(std::move(producer)));
  EXPECT_EQ(res.body().kind(), ResponseBody::Kind::kProducer);
  EXPECT_EQ(res.trailers().size(), 1u);
  EXPECT_EQ(res.body().producer()->TakeTrailers().Get("x-checksum"), "1");
}

class TempFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = "/tmp/petrel_message_test_XXXXXX";
    const int fd = mkstemp(path_.data());
    ASSERT_GE(fd, 0);
    ASSERT_EQ(write(fd, "file!", 5), 5);
    close(fd);
  }
  void TearDown() override { unlink(path_.c_str()); }
  std::string path_;
};

TEST_F(TempFileTest, SendFileByPath) {
  FakeSink sink;
  Response res;
  res.set_sink(&sink);
  EXPECT_EQ(res.SendFile(200, path_ + ".missing").code(), absl::StatusCode::kNotFound);
  EXPECT_FALSE(res.committed());
  EXPECT_EQ(sink.starts, 0);
  ASSERT_TRUE(res.SendFile(200, path_, "text/plain").ok());
  EXPECT_EQ(sink.starts, 1);
  EXPECT_EQ(sink.kind, ResponseBody::Kind::kFile);
  EXPECT_EQ(res.body().length(), 5u);
  EXPECT_THAT(res.headers().Get("Content-Type"), Optional(absl::string_view("text/plain")));
  EXPECT_EQ(res.SendFile(200, path_).code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(TempFileTest, SendFileBody) {
  Response res;
  absl::StatusOr<FileBody> file = FileBody::Open(path_, 1, 3);
  ASSERT_TRUE(file.ok());
  res.SendFile(206, *std::move(file));
  EXPECT_EQ(res.status(), 206);
  ASSERT_NE(res.body().file(), nullptr);
  EXPECT_EQ(res.body().file()->offset(), 1u);
  EXPECT_EQ(res.body().length(), 3u);
  EXPECT_FALSE(res.headers().Contains("content-type"));
}

TEST(ResponseTest, CancelRunsOnCancelOnceAndBlocksCommits) {
  FakeSink sink;
  Response res;
  res.set_sink(&sink);
  int cancels = 0;
  res.SetOnCancel([&] { ++cancels; });
  res.Cancel();
  res.Cancel();
  EXPECT_EQ(cancels, 1);
  EXPECT_TRUE(res.cancelled());
  res.Send(200, "too late");
  EXPECT_FALSE(res.committed());
  EXPECT_EQ(sink.starts, 0);
  EXPECT_FALSE(res.Stream(200).Write("x"));
}

TEST(ResponseTest, CancelAfterCommitStillNotifiesHandler) {
  // A streaming handler learns of a reset mid-body through on_cancel.
  Response res;
  StreamingBody* stream = &res.Stream(200);
  res.SetOnCancel([&] { stream = nullptr; });
  res.Cancel();
  EXPECT_EQ(stream, nullptr);
}

}  // namespace
}  // namespace petrel
