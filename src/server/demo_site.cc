#include "server/demo_site.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "petrel/http/body.h"

namespace petrel::server {
namespace {

std::string FileName(uint64_t size) {
  if (size % (1024 * 1024) == 0) return absl::StrCat(size / (1024 * 1024), "m.bin");
  return absl::StrCat(size / 1024, "k.bin");
}

// A demo file, produced as the stream has room.
class DemoFileProducer final : public BodyProducer {
 public:
  explicit DemoFileProducer(uint64_t size) : size_(size) {}
  std::optional<uint64_t> Length() const override { return size_; }

 private:
  BodyReadResult DoRead(size_t max_bytes, std::string* out) override {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(max_bytes, size_ - position_));
    const size_t start = out->size();
    out->resize(start + n);
    for (size_t k = 0; k < n; ++k) (*out)[start + k] = DemoFileByte(position_ + k);
    position_ += n;
    return position_ == size_ ? BodyReadResult::End() : BodyReadResult::Data();
  }
  const uint64_t size_;
  uint64_t position_ = 0;
};

std::string IndexPage(const Request& req) {
  std::string files;
  for (uint64_t size : kDemoFileSizes) {
    absl::StrAppend(&files, "<li><a href=\"/files/", FileName(size), "\">", FileName(size),
                    "</a> (", size, " bytes)</li>\n");
  }
  return absl::StrCat(
      "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>Petrel</title></head>\n"
      "<body><h1>Petrel</h1>\n<p>This page came over <strong id=\"protocol\">",
      HttpVersionName(req.version()), "</strong>",
      req.alpn().empty() ? std::string() : absl::StrCat(" (ALPN ", req.alpn(), ")"),
      " &mdash; the same handler serves HTTP/1.1, HTTP/2 and HTTP/3.</p>\n",
      "<p><a href=\"/hello\">/hello</a>; POST a body to /echo and it comes back.</p>\n",
      "<p>Files of known sizes (byte i is 'a' + (7i + i/4093) mod 26):</p>\n<ul>\n", files,
      "</ul>\n</body></html>\n");
}

}  // namespace

absl::Status AddDemoSite(Router& router) {
  if (absl::Status s = router.Get("/",
                                  [](Request& req, Response& res) {
                                    res.Send(200, IndexPage(req), "text/html; charset=utf-8");
                                  });
      !s.ok()) {
    return s;
  }
  if (absl::Status s = router.Get("/hello",
                                  [](Request&, Response& res) {
                                    res.Send(200, "hello from petrel\n",
                                             "text/plain; charset=utf-8");
                                  });
      !s.ok()) {
    return s;
  }
  // The request body streamed back as it arrives, with backpressure both ways.
  if (absl::Status s = router.Post("/echo",
                                   [](Request& req, Response& res) {
                                     StreamingBody& out = res.Stream(200);
                                     RequestBody& in = req.body();
                                     out.SetOnWritable([&in] { in.Resume(); });
                                     in.Read(
                                         [&out, &in](absl::string_view chunk, bool last) {
                                           if (!chunk.empty() && !out.Write(chunk)) in.Pause();
                                           if (last) out.Finish();
                                         },
                                         [&out](const absl::Status& status) { out.Fail(status); });
                                   });
      !s.ok()) {
    return s;
  }
  return router.Get("/files/:name", [](Request& req, Response& res) {
    for (uint64_t size : kDemoFileSizes) {
      if (req.Param("name") == FileName(size)) {
        res.SendBody(200, ResponseBody(std::make_unique<DemoFileProducer>(size)));
        return;
      }
    }
    res.SendError(404, "no such demo file");
  });
}

}  // namespace petrel::server
