// StaticFiles as a handler: path mapping and traversal defence, directories, headers, conditional
// requests and byte ranges, on a real temporary directory tree (parsers:
// static_files_parsers_test). Every test runs without the open-file cache, with it holding
// descriptors and with it holding small files in memory — revalidating on every request, so the
// answers must be exactly those without a cache (the cache's own behaviour over time:
// static_file_cache_test).
#include "petrel/http/static_files.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "http/http_date.h"
#include "http/static/conditional.h"
#include "petrel/http/router.h"
#include "petrel/http/status.h"

namespace petrel {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr int64_t kOldMtime = 1577836800;  // Wed, 01 Jan 2020 00:00:00 GMT
constexpr absl::string_view kOldDate = "Wed, 01 Jan 2020 00:00:00 GMT";

void WriteFile(const std::string& path, absl::string_view bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << path;
}

int64_t NowSeconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void SetMtime(const std::string& path, int64_t seconds, long nanos) {
  struct timespec times[2];
  times[0].tv_sec = seconds;
  times[0].tv_nsec = nanos;
  times[1] = times[0];
  ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), times, 0), 0) << path;
}

// What the handler committed, with the served bytes read back through the FileBody.
struct Result {
  int status = 0;
  bool committed = false;
  HeaderMap headers;
  ResponseBody::Kind kind = ResponseBody::Kind::kBuffer;
  uint64_t offset = 0;
  uint64_t length = 0;
  std::string body;  // Buffer bytes, or the file range's bytes.

  std::string Header(absl::string_view name) const {
    std::optional<absl::string_view> v = headers.Get(name);
    return v ? std::string(*v) : std::string("<none>");
  }
};

Result Collect(Response& res) {
  Result r;
  r.status = res.status();
  r.committed = res.committed();
  r.headers = res.headers();
  r.kind = res.body().kind();
  if (const std::string* b = res.body().buffer()) {
    r.body = *b;
    r.length = b->size();
    // A range served from memory: its offset is what Content-Range says.
    if (std::optional<absl::string_view> range = res.headers().Get("Content-Range");
        range.has_value() && r.status == 206) {
      const size_t start = range->find(' ') + 1;
      EXPECT_TRUE(absl::SimpleAtoi(range->substr(start, range->find('-') - start), &r.offset));
    }
  }
  if (const FileBody* f = res.body().file()) {
    r.offset = f->offset();
    r.length = f->length();
    uint64_t pos = 0;
    while (pos < f->length()) {
      absl::StatusOr<size_t> n = f->ReadAt(pos, 4096, &r.body);
      if (!n.ok() || *n == 0) break;
      pos += *n;
    }
  }
  return r;
}

enum class CacheMode { kOff, kDescriptors, kMemory };

class StaticFilesTest : public ::testing::TestWithParam<CacheMode> {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/petrel_static_XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    base_ = tmpl;
    root_ = base_ + "/www";
    const std::string outside = base_ + "/outside";
    ASSERT_EQ(::mkdir(root_.c_str(), 0755), 0);
    ASSERT_EQ(::mkdir(outside.c_str(), 0755), 0);
    ASSERT_EQ(::mkdir((root_ + "/sub").c_str(), 0755), 0);
    ASSERT_EQ(::mkdir((root_ + "/nodir").c_str(), 0755), 0);
    WriteFile(outside + "/secret.txt", "top secret\n");
    WriteFile(root_ + "/a.txt", "hello world\n");
    WriteFile(root_ + "/empty.txt", "");
    WriteFile(root_ + "/a b.txt", "spaced\n");
    WriteFile(root_ + "/sub/index.html", "<p>index</p>\n");
    WriteFile(root_ + "/sub/page.css", "p{}\n");
    WriteFile(root_ + "/nodir/x.js", "x\n");
    WriteFile(root_ + "/%2e%2e", "literal percent name\n");
    for (int i = 0; i < 1000; ++i) data_.push_back(static_cast<char>('A' + (i * 7) % 26));
    WriteFile(root_ + "/data.bin", data_);
    SetMtime(root_ + "/data.bin", kOldMtime, 123456789);
    ASSERT_EQ(::symlink("../outside/secret.txt", (root_ + "/escape").c_str()), 0);
    ASSERT_EQ(::symlink("../outside", (root_ + "/escdir").c_str()), 0);
    ASSERT_EQ(::symlink(outside.c_str(), (root_ + "/sub/abs").c_str()), 0);
    ASSERT_EQ(::symlink("a.txt", (root_ + "/inlink").c_str()), 0);
    ASSERT_EQ(::mkfifo((root_ + "/fifo").c_str(), 0644), 0);
    Rebuild({});
  }

  void TearDown() override {
    std::error_code ec;
    // Restore permissions a test removed, so removal works when not running as root.
    std::filesystem::permissions(root_ + "/locked.txt", std::filesystem::perms::owner_all, ec);
    std::filesystem::permissions(root_ + "/nodir/index.html", std::filesystem::perms::owner_all,
                                 ec);
    std::filesystem::remove_all(base_, ec);
  }

  void Rebuild(StaticFilesOptions options) {
    options.file_cache_entries = GetParam() == CacheMode::kOff ? 0 : 64;
    options.file_cache_revalidate = absl::ZeroDuration();
    options.file_cache_memory_file_size = GetParam() == CacheMode::kMemory ? 16 * 1024 : 0;
    router_ = Router();
    ASSERT_TRUE(router_.Get("/files/*", StaticFiles(root_, options)).ok());
    ASSERT_TRUE(router_.Any("/any/*", StaticFiles(root_, options)).ok());
    ASSERT_TRUE(router_.Get("/*", StaticFiles(root_, options)).ok());
  }

  Result Run(const Method& method, absl::string_view target,
             std::initializer_list<HeaderField> headers = {}) {
    Request req;
    req.set_method(method);
    req.SetTarget(target);
    for (const HeaderField& f : headers) req.headers().Add(f.name, f.value);
    Response res;
    router_.Handle(req, res);
    return Collect(res);
  }
  Result Get(absl::string_view target, std::initializer_list<HeaderField> headers = {}) {
    return Run(Method::kGet, target, headers);
  }

  std::string EtagOf(absl::string_view target) { return Get(target).Header("ETag"); }

  // How a served file's bytes come: from memory when the cache holds it there.
  static ResponseBody::Kind FileKind() {
    return GetParam() == CacheMode::kMemory ? ResponseBody::Kind::kBuffer
                                            : ResponseBody::Kind::kFile;
  }

  std::string base_;
  std::string root_;
  std::string data_;
  Router router_;
};

// ---- Basic serving ----

TEST_P(StaticFilesTest, ServesFileWithHeaders) {
  Result r = Get("/files/a.txt");
  EXPECT_EQ(r.status, 200);
  ASSERT_EQ(r.kind, FileKind());
  EXPECT_EQ(r.offset, 0u);
  EXPECT_EQ(r.length, 12u);
  EXPECT_EQ(r.body, "hello world\n");
  EXPECT_EQ(r.Header("Content-Type"), "text/plain; charset=utf-8");
  EXPECT_EQ(r.Header("Accept-Ranges"), "bytes");
  EXPECT_EQ(r.Header("Cache-Control"), "<none>");
  const std::string etag = r.Header("ETag");
  // HPACK and QPACK Huffman-code an ETag on every response: eleven digits of a digest.
  ASSERT_EQ(etag.size(), 13u) << etag;
  EXPECT_EQ(etag.front(), '"');
  EXPECT_EQ(etag.back(), '"');
  EXPECT_TRUE(http_internal::ParseEntityTag(etag).has_value());
  EXPECT_EQ(
      etag.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_", 1),
      12u)
      << etag;
  struct stat st;
  ASSERT_EQ(::stat((root_ + "/a.txt").c_str(), &st), 0);
  EXPECT_EQ(r.Header("Last-Modified"), http_internal::FormatHttpDate(st.st_mtim.tv_sec));

  Result d = Get("/files/data.bin");
  EXPECT_EQ(d.status, 200);
  EXPECT_EQ(d.body, data_);
  EXPECT_EQ(d.Header("Content-Type"), "application/octet-stream");
  EXPECT_EQ(d.Header("Last-Modified"), kOldDate);
}

TEST_P(StaticFilesTest, FutureMtimeIsSentAsNow) {
  SetMtime(root_ + "/a.txt", NowSeconds() + 86400, 0);
  const int64_t before = NowSeconds();
  Result r = Get("/files/a.txt");
  const int64_t after = NowSeconds();
  std::optional<int64_t> sent = http_internal::ParseHttpDate(r.Header("Last-Modified"), after);
  ASSERT_TRUE(sent.has_value()) << r.Header("Last-Modified");
  EXPECT_GE(*sent, before);
  EXPECT_LE(*sent, after);
}

TEST_P(StaticFilesTest, EtagChangesWithContentAndMtime) {
  const std::string before = EtagOf("/files/data.bin");
  EXPECT_EQ(EtagOf("/files/data.bin"), before);         // Stable.
  SetMtime(root_ + "/data.bin", kOldMtime, 123456790);  // One nanosecond later.
  const std::string after = EtagOf("/files/data.bin");
  EXPECT_NE(after, before);
  WriteFile(root_ + "/data.bin", data_ + "x");
  SetMtime(root_ + "/data.bin", kOldMtime, 123456790);  // Same mtime, other size.
  EXPECT_NE(EtagOf("/files/data.bin"), after);
  EXPECT_NE(EtagOf("/files/a.txt"), EtagOf("/files/empty.txt"));
}

TEST_P(StaticFilesTest, HeadGetsSameHeadersAndIgnoresRange) {
  Result get = Get("/files/a.txt");
  Result head = Run(Method::kHead, "/files/a.txt", {{"Range", "bytes=0-1"}});
  EXPECT_EQ(head.status, 200);
  EXPECT_EQ(head.Header("ETag"), get.Header("ETag"));
  EXPECT_EQ(head.Header("Content-Type"), get.Header("Content-Type"));
  EXPECT_EQ(head.Header("Content-Range"), "<none>");
  EXPECT_EQ(head.length, 12u);  // The engine sends the length and no bytes.
}

TEST_P(StaticFilesTest, WholePathRouteAndEncodedNames) {
  EXPECT_EQ(Get("/a.txt").body, "hello world\n");
  EXPECT_EQ(Get("/sub/page.css").body, "p{}\n");
  EXPECT_EQ(Get("/files/a%20b.txt").body, "spaced\n");
  // Decoded exactly once: "%252e%252e" names the file literally called "%2e%2e".
  EXPECT_EQ(Get("/files/%252e%252e").body, "literal percent name\n");
  // A handler called without a wildcard serves the request path.
  Handler h = StaticFiles(root_);
  Request req;
  req.SetTarget("/sub/index.html?v=1");
  Response res;
  h(req, res);
  EXPECT_EQ(Collect(res).body, "<p>index</p>\n");
}

TEST_P(StaticFilesTest, EmptyFile) {
  Result r = Get("/files/empty.txt");
  EXPECT_EQ(r.status, 200);
  ASSERT_EQ(r.kind, FileKind());
  EXPECT_EQ(r.length, 0u);
  EXPECT_EQ(Get("/files/empty.txt", {{"Range", "bytes=0-"}}).status, 200);
  EXPECT_EQ(Get("/files/empty.txt", {{"Range", "bytes=-1"}}).status, 200);
}

TEST_P(StaticFilesTest, OnlyGetAndHead) {
  for (MethodKind kind : {MethodKind::kPost, MethodKind::kPut, MethodKind::kDelete,
                          MethodKind::kOptions, MethodKind::kPatch}) {
    Result r = Run(kind, "/any/a.txt");
    EXPECT_EQ(r.status, 405) << MethodKindName(kind);
    EXPECT_EQ(r.Header("Allow"), "GET, HEAD");
    EXPECT_EQ(r.kind, ResponseBody::Kind::kBuffer);
  }
  EXPECT_EQ(Run(*Method::Parse("PROPFIND"), "/any/a.txt").status, 405);
  EXPECT_EQ(Run(Method::kGet, "/any/a.txt").status, 200);
  EXPECT_EQ(Run(Method::kHead, "/any/a.txt").status, 200);
}

TEST_P(StaticFilesTest, MissingAndNonRegular) {
  EXPECT_EQ(Get("/files/nope.txt").status, 404);
  EXPECT_EQ(Get("/files/sub/nope/deeper").status, 404);
  EXPECT_EQ(Get("/files/a.txt/").status, 404);  // A file named as a directory.
  EXPECT_EQ(Get("/files/a.txt/x").status, 404);
  EXPECT_EQ(Get("/files/fifo").status, 404);  // Opened without blocking, then refused.
}

TEST_P(StaticFilesTest, MissingRootAnswers404) {
  Router r;
  ASSERT_TRUE(r.Get("/*", StaticFiles(base_ + "/does-not-exist")).ok());
  Request req;
  req.SetTarget("/a.txt");
  Response res;
  r.Handle(req, res);
  EXPECT_EQ(res.status(), 404);
}

TEST_P(StaticFilesTest, UnreadableFileIs403) {
  WriteFile(root_ + "/locked.txt", "no");
  ASSERT_EQ(::chmod((root_ + "/locked.txt").c_str(), 0), 0);
  WriteFile(root_ + "/nodir/index.html", "no");
  ASSERT_EQ(::chmod((root_ + "/nodir/index.html").c_str(), 0), 0);
  if (::geteuid() != 0) {
    EXPECT_EQ(Get("/files/locked.txt").status, 403);
    EXPECT_EQ(Get("/files/nodir/").status, 403);
    return;
  }
  // Root reads anything: check in a child that gives up root (uid/gid "nobody"). The tree must
  // be searchable for it, or the 403 would come from the directory instead.
  ASSERT_EQ(::chmod(base_.c_str(), 0755), 0);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    if (::setgid(65534) != 0 || ::setuid(65534) != 0) ::_exit(10);
    int code = 0;
    if (Get("/files/locked.txt").status != 403) code |= 1;
    if (Get("/files/nodir/").status != 403) code |= 2;
    if (Get("/files/a.txt").status != 200) code |= 4;  // Readable files still are.
    ::_exit(code);
  }
  int wstatus = 0;
  ASSERT_EQ(::waitpid(pid, &wstatus, 0), pid);
  ASSERT_TRUE(WIFEXITED(wstatus));
  EXPECT_EQ(WEXITSTATUS(wstatus), 0) << "1: file not 403, 2: index not 403, 4: a.txt not 200, "
                                        "10: could not drop privileges";
}

// ---- Directories ----

TEST_P(StaticFilesTest, DirectoryRedirectsAndIndex) {
  Result r = Get("/files/sub");
  EXPECT_EQ(r.status, 301);
  EXPECT_EQ(r.Header("Location"), "/files/sub/");
  EXPECT_EQ(Get("/files/sub?a=1&b=%20").Header("Location"), "/files/sub/?a=1&b=%20");
  EXPECT_EQ(Get("/sub").Header("Location"), "/sub/");

  Result index = Get("/files/sub/");
  EXPECT_EQ(index.status, 200);
  EXPECT_EQ(index.body, "<p>index</p>\n");
  EXPECT_EQ(index.Header("Content-Type"), "text/html; charset=utf-8");
  EXPECT_NE(index.Header("ETag"), "<none>");

  EXPECT_EQ(Get("/files/nodir/").status, 404);  // No index, no listing.
  EXPECT_EQ(Get("/files/").status, 404);        // The root has no index either.
  EXPECT_EQ(Get("/").status, 404);
}

TEST_P(StaticFilesTest, CustomIndexAndNoIndex) {
  StaticFilesOptions options;
  options.index_file = "x.js";
  Rebuild(options);
  EXPECT_EQ(Get("/files/nodir/").body, "x\n");
  EXPECT_EQ(Get("/files/nodir/").Header("Content-Type"), "text/javascript; charset=utf-8");
  EXPECT_EQ(Get("/files/sub/").status, 404);
  options.index_file = "";
  Rebuild(options);
  EXPECT_EQ(Get("/files/sub/").status, 404);
}

TEST_P(StaticFilesTest, IndexSymlinkOutsideRootIsNotServed) {
  ASSERT_EQ(::symlink("../../outside/secret.txt", (root_ + "/nodir/index.html").c_str()), 0);
  Result r = Get("/files/nodir/");
  EXPECT_EQ(r.status, 404);
  EXPECT_THAT(r.body, Not(HasSubstr("secret")));
}

TEST_P(StaticFilesTest, DirectoryListing) {
  WriteFile(root_ + "/nodir/<script>.txt", "s");
  WriteFile(root_ + "/nodir/a:b", "c");
  ASSERT_EQ(::symlink("../../outside/secret.txt", (root_ + "/nodir/leak").c_str()), 0);
  ASSERT_EQ(::mkdir((root_ + "/nodir/child").c_str(), 0755), 0);
  StaticFilesOptions options;
  options.list_directories = true;
  Rebuild(options);
  Result r = Get("/files/nodir/");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.Header("Content-Type"), "text/html; charset=utf-8");
  EXPECT_THAT(r.body, HasSubstr("href=\"./x.js\""));
  EXPECT_THAT(r.body, HasSubstr("href=\"./child/\""));
  EXPECT_THAT(r.body, HasSubstr("href=\"./a%3Ab\""));
  EXPECT_THAT(r.body, HasSubstr("&lt;script&gt;.txt"));
  EXPECT_THAT(r.body, Not(HasSubstr("<script>")));
  EXPECT_THAT(r.body, Not(HasSubstr("leak")));  // Resolves outside the root.
  EXPECT_THAT(r.body, HasSubstr("href=\"../\""));
  // Index files still win; the root lists without a parent link and without escaping links.
  EXPECT_EQ(Get("/files/sub/").body, "<p>index</p>\n");
  Result top = Get("/files/");
  EXPECT_EQ(top.status, 200);
  EXPECT_THAT(top.body, Not(HasSubstr("href=\"../\"")));
  EXPECT_THAT(top.body, Not(HasSubstr("escape")));
  EXPECT_THAT(top.body, Not(HasSubstr("escdir")));
  EXPECT_THAT(top.body, HasSubstr("inlink"));
  EXPECT_EQ(Get("/files/nodir").status, 301);  // Still redirected first.
}

// ---- Traversal ----

TEST_P(StaticFilesTest, TraversalAttemptsNeverReachOutside) {
  // The file exists: each 404 below is the defence, not a missing file.
  ASSERT_EQ(::access((base_ + "/outside/secret.txt").c_str(), R_OK), 0);
  const struct {
    const char* target;
    int status;
  } kCases[] = {
      {"/files/../outside/secret.txt", 404},
      {"/files/sub/../../outside/secret.txt", 404},
      {"/files/%2e%2e/outside/secret.txt", 404},
      {"/files/%2E%2E/outside/secret.txt", 404},
      {"/files/.%2e/outside/secret.txt", 404},
      {"/files/sub/%2e%2e/%2e%2e/outside/secret.txt", 404},
      {"/files/..%2Foutside%2Fsecret.txt", 404},
      {"/files/..%2foutside/secret.txt", 404},
      {"/files/%2Fetc%2Fpasswd", 404},
      {"/files//etc/passwd", 404},
      {"/files/./a.txt", 404},
      {"/files/sub//index.html", 404},
      {"/files/%252e%252e/outside/secret.txt", 404},
      {"/files/%25%32%65%25%32%65/outside/secret.txt", 404},
      {"/files/escape", 404},
      {"/files/escdir/secret.txt", 404},
      {"/files/escdir/", 404},
      {"/files/sub/abs/secret.txt", 404},
      {"/files/a.txt%00.html", 400},
      {"/files/%00", 400},
      {"/files/%", 400},
      {"/files/%4", 400},
      {"/files/%zz", 400},
      {"/files/%%32%65", 400},
      {"/../outside/secret.txt", 404},
      {"/%2e%2e/outside/secret.txt", 404},
  };
  for (const auto& c : kCases) {
    Result r = Get(c.target);
    EXPECT_EQ(r.status, c.status) << c.target;
    EXPECT_THAT(r.body, Not(HasSubstr("top secret"))) << c.target;
    EXPECT_EQ(r.kind, ResponseBody::Kind::kBuffer) << c.target;
  }
  // A symlink that stays inside the root is fine.
  EXPECT_EQ(Get("/files/inlink").body, "hello world\n");
}

// ---- Content types, Cache-Control ----

TEST_P(StaticFilesTest, ContentTypes) {
  for (const auto& [name, type] : std::initializer_list<std::pair<const char*, const char*>>{
           {"p.html", "text/html; charset=utf-8"},
           {"p.css", "text/css; charset=utf-8"},
           {"p.mjs", "text/javascript; charset=utf-8"},
           {"p.json", "application/json"},
           {"p.svg", "image/svg+xml"},
           {"p.PNG", "image/png"},
           {"p.jpeg", "image/jpeg"},
           {"p.wasm", "application/wasm"},
           {"p.tar.gz", "application/gzip"},
           {"p.woff2", "font/woff2"},
           {"p.unknownext", "application/octet-stream"},
           {"noext", "application/octet-stream"},
           {".hidden", "application/octet-stream"},
       }) {
    WriteFile(root_ + "/" + name, "z");
    EXPECT_EQ(Get(absl::StrCat("/files/", name)).Header("Content-Type"), type) << name;
  }
  StaticFilesOptions options;
  options.mime_types["TXT"] = "text/x-custom";
  options.mime_types["unknownext"] = "application/x-mine";
  options.default_mime_type = "application/x-default";
  Rebuild(options);
  EXPECT_EQ(Get("/files/a.txt").Header("Content-Type"), "text/x-custom");
  EXPECT_EQ(Get("/files/p.unknownext").Header("Content-Type"), "application/x-mine");
  EXPECT_EQ(Get("/files/noext").Header("Content-Type"), "application/x-default");
  EXPECT_EQ(Get("/files/p.css").Header("Content-Type"), "text/css; charset=utf-8");
}

TEST_P(StaticFilesTest, CacheControl) {
  StaticFilesOptions options;
  options.cache_control = "max-age=3600";
  Rebuild(options);
  Result r = Get("/files/data.bin");
  EXPECT_EQ(r.Header("Cache-Control"), "max-age=3600");
  EXPECT_EQ(Get("/files/data.bin", {{"If-None-Match", r.Header("ETag")}}).Header("Cache-Control"),
            "max-age=3600");
  EXPECT_EQ(Get("/files/data.bin", {{"Range", "bytes=0-0"}}).Header("Cache-Control"),
            "max-age=3600");
  EXPECT_EQ(Get("/files/nope").Header("Cache-Control"), "<none>");
}

// A plain GET of a cached file gets its fields prepared in one piece; any other request builds
// them one by one. Both must send the same fields in the same order, with and without options,
// and a handler that set a field of its own before keeps it (the prepared block is skipped).
TEST_P(StaticFilesTest, PreparedFieldsMatchTheOnesBuiltPerRequest) {
  const auto fields = [](const Result& r) {
    std::vector<std::pair<std::string, std::string>> out;
    for (const HeaderField f : r.headers) out.emplace_back(f.name, f.value);
    return out;
  };
  for (const bool cache_control : {false, true}) {
    StaticFilesOptions options;
    if (cache_control) options.cache_control = "no-cache";
    Rebuild(options);
    for (const char* target : {"/files/a.txt", "/files/data.bin", "/files/sub/"}) {
      SCOPED_TRACE(absl::StrCat(target, cache_control ? " with Cache-Control" : ""));
      Get(target);  // fills the cache (when there is one)
      const Result plain = Get(target);
      // A precondition that does not hold takes the per-request way to the same 200.
      const Result conditional = Get(target, {{"If-None-Match", "\"other\""}});
      ASSERT_EQ(plain.status, 200);
      ASSERT_EQ(conditional.status, 200);
      EXPECT_EQ(fields(plain), fields(conditional));
      EXPECT_EQ(plain.body, conditional.body);
      ASSERT_GE(plain.headers.size(), 4u);
      EXPECT_EQ(plain.headers[0].name, "etag");
      EXPECT_EQ(plain.headers[plain.headers.size() - 1].name, "content-type");
      EXPECT_EQ(plain.Header("Cache-Control"), cache_control ? "no-cache" : "<none>");
    }
  }
  Request req;
  req.set_method(Method::kGet);
  req.SetTarget("/files/a.txt");
  Response res;
  res.headers().Add("ETag", "\"set-by-the-handler\"");
  res.headers().Add("X-Before", "1");
  router_.Handle(req, res);
  const Result r = Collect(res);
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.headers.GetAll("ETag").size(), 1u);  // replaced, not repeated
  EXPECT_EQ(r.Header("X-Before"), "1");
  EXPECT_EQ(r.Header("Accept-Ranges"), "bytes");
}

// Option values are checked once, when the handler is made: a CR or LF in them never reaches a
// response (the handler sets its fields without Response::SetHeader's check).
TEST_P(StaticFilesTest, InvalidOptionValuesAreDropped) {
  StaticFilesOptions options;
  options.cache_control = "max-age=1\r\nSet-Cookie: a=b";
  options.mime_types["txt"] = "text/plain\r\nX-Injected: 1";
  options.default_mime_type = "application/x-bad\n";
  Rebuild(options);
  WriteFile(root_ + "/notes.TXT", "n");
  Result r = Get("/files/data.bin");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.Header("Cache-Control"), "<none>");
  EXPECT_EQ(r.Header("Content-Type"), "application/octet-stream");
  Result t = Get("/files/notes.TXT");
  EXPECT_EQ(t.status, 200);
  EXPECT_EQ(t.Header("Content-Type"), "text/plain; charset=utf-8");
  EXPECT_EQ(t.Header("X-Injected"), "<none>");
}

// ---- Conditional requests ----

TEST_P(StaticFilesTest, IfNoneMatch) {
  const std::string etag = EtagOf("/files/data.bin");
  Result r = Get("/files/data.bin", {{"If-None-Match", etag}});
  EXPECT_EQ(r.status, 304);
  EXPECT_EQ(r.kind, ResponseBody::Kind::kBuffer);
  EXPECT_EQ(r.body, "");
  EXPECT_EQ(r.Header("ETag"), etag);
  EXPECT_EQ(r.Header("Last-Modified"), kOldDate);
  EXPECT_EQ(r.Header("Content-Type"), "<none>");
  EXPECT_EQ(Run(Method::kHead, "/files/data.bin", {{"If-None-Match", etag}}).status, 304);
  EXPECT_EQ(Get("/files/data.bin", {{"If-None-Match", "W/" + etag}}).status, 304);  // Weak.
  EXPECT_EQ(Get("/files/data.bin", {{"If-None-Match", "\"x\", " + etag}}).status, 304);
  EXPECT_EQ(Get("/files/data.bin", {{"If-None-Match", "\"x\""}, {"If-None-Match", etag}}).status,
            304);  // Repeated fields combine.
  EXPECT_EQ(Get("/files/data.bin", {{"If-None-Match", "*"}}).status, 304);
  EXPECT_EQ(Get("/files/data.bin", {{"If-None-Match", "\"other\""}}).status, 200);
  EXPECT_EQ(Get("/files/data.bin", {{"If-None-Match", "garbage"}}).status, 200);
  // If-None-Match present: If-Modified-Since is not looked at.
  EXPECT_EQ(
      Get("/files/data.bin", {{"If-None-Match", "\"other\""}, {"If-Modified-Since", kOldDate}})
          .status,
      200);
}

TEST_P(StaticFilesTest, IfModifiedSince) {
  EXPECT_EQ(Get("/files/data.bin", {{"If-Modified-Since", kOldDate}}).status, 304);
  EXPECT_EQ(
      Get("/files/data.bin", {{"If-Modified-Since", "Wednesday, 01-Jan-20 00:00:00 GMT"}}).status,
      304);
  EXPECT_EQ(Get("/files/data.bin", {{"If-Modified-Since", "Wed Jan  1 00:00:00 2020"}}).status,
            304);
  EXPECT_EQ(Get("/files/data.bin", {{"If-Modified-Since", "Thu, 02 Jan 2020 00:00:00 GMT"}}).status,
            304);
  EXPECT_EQ(Get("/files/data.bin", {{"If-Modified-Since", "Tue, 31 Dec 2019 23:59:59 GMT"}}).status,
            200);
  // Invalid dates and dates in the future are ignored.
  EXPECT_EQ(Get("/files/data.bin", {{"If-Modified-Since", "yesterday"}}).status, 200);
  EXPECT_EQ(Get("/files/data.bin", {{"If-Modified-Since", "Fri, 31 Dec 9999 23:59:59 GMT"}}).status,
            200);
  EXPECT_EQ(
      Get("/files/data.bin", {{"If-Modified-Since", kOldDate}, {"If-Modified-Since", kOldDate}})
          .status,
      200);  // Repeated: invalid.
  EXPECT_EQ(Run(Method::kHead, "/files/data.bin", {{"If-Modified-Since", kOldDate}}).status, 304);
}

TEST_P(StaticFilesTest, IfMatchAndIfUnmodifiedSince) {
  const std::string etag = EtagOf("/files/data.bin");
  EXPECT_EQ(Get("/files/data.bin", {{"If-Match", etag}}).status, 200);
  EXPECT_EQ(Get("/files/data.bin", {{"If-Match", "*"}}).status, 200);
  EXPECT_EQ(Get("/files/data.bin", {{"If-Match", "\"a\", " + etag}}).status, 200);
  Result failed = Get("/files/data.bin", {{"If-Match", "\"other\""}});
  EXPECT_EQ(failed.status, 412);
  EXPECT_EQ(failed.kind, ResponseBody::Kind::kBuffer);
  EXPECT_EQ(Get("/files/data.bin", {{"If-Match", "W/" + etag}}).status, 412);  // Strong only.
  EXPECT_EQ(Get("/files/data.bin", {{"If-Match", "bad"}}).status, 412);
  EXPECT_EQ(Get("/files/data.bin", {{"If-Unmodified-Since", kOldDate}}).status, 200);
  EXPECT_EQ(
      Get("/files/data.bin", {{"If-Unmodified-Since", "Tue, 31 Dec 2019 23:59:59 GMT"}}).status,
      412);
  EXPECT_EQ(Get("/files/data.bin", {{"If-Unmodified-Since", "nonsense"}}).status, 200);
  // If-Match present: If-Unmodified-Since is not looked at.
  EXPECT_EQ(Get("/files/data.bin",
                {{"If-Match", etag}, {"If-Unmodified-Since", "Tue, 31 Dec 2019 23:59:59 GMT"}})
                .status,
            200);
  // Step order: a failed If-Match beats a matching If-None-Match.
  EXPECT_EQ(Get("/files/data.bin", {{"If-Match", "\"other\""}, {"If-None-Match", etag}}).status,
            412);
  EXPECT_EQ(Get("/files/data.bin", {{"If-Match", etag}, {"If-None-Match", etag}}).status, 304);
}

// ---- Ranges ----

TEST_P(StaticFilesTest, SingleRanges) {
  const struct {
    const char* range;
    uint64_t first;
    uint64_t length;
  } kCases[] = {
      {"bytes=0-9", 0, 10},     {"bytes=990-", 990, 10},      {"bytes=-10", 990, 10},
      {"bytes=-5000", 0, 1000}, {"bytes=500-5000", 500, 500}, {"bytes=999-999", 999, 1},
      {"BYTES=1-1", 1, 1},      {"bytes=0-4,5-9", 0, 10},     {"bytes=0-5, 3-9", 0, 10},
      {"bytes=8-9,0-7", 0, 10}, {"bytes=0-1,2000-", 0, 2},    {"bytes=,0-1,", 0, 2},
      {"bytes=0-0,-0", 0, 1},   {"bytes=-1,999-", 999, 1},
  };
  for (const auto& c : kCases) {
    Result r = Get("/files/data.bin", {{"Range", c.range}});
    EXPECT_EQ(r.status, 206) << c.range;
    ASSERT_EQ(r.kind, FileKind()) << c.range;
    EXPECT_EQ(r.offset, c.first) << c.range;
    EXPECT_EQ(r.length, c.length) << c.range;
    EXPECT_EQ(r.body, data_.substr(c.first, c.length)) << c.range;
    EXPECT_EQ(r.Header("Content-Range"),
              absl::StrCat("bytes ", c.first, "-", c.first + c.length - 1, "/1000"))
        << c.range;
    EXPECT_EQ(r.Header("Content-Type"), "application/octet-stream");
    EXPECT_EQ(r.Header("ETag"), EtagOf("/files/data.bin"));
  }
}

TEST_P(StaticFilesTest, UnsatisfiableAndIgnoredRanges) {
  for (const char* range : {"bytes=1000-", "bytes=5000-6000", "bytes=-0", "bytes=1000-1001,-0",
                            "bytes=99999999999999999999999-"}) {
    Result r = Get("/files/data.bin", {{"Range", range}});
    EXPECT_EQ(r.status, 416) << range;
    EXPECT_EQ(r.Header("Content-Range"), "bytes */1000") << range;
    EXPECT_EQ(r.kind, ResponseBody::Kind::kBuffer) << range;
  }
  for (const char* range :
       {"bytes=abc", "bytes=5-1", "items=0-1", "bytes 0-1", "bytes=", "bytes", "bytes=0-1;x",
        "bytes=--1", "bytes=1-2-3", "bytes=0x1-2", "=0-1", "bytes=0-1,5-6", "bytes=0-1,3-4,9-"}) {
    Result r = Get("/files/data.bin", {{"Range", range}});
    EXPECT_EQ(r.status, 200) << range;
    EXPECT_EQ(r.length, 1000u) << range;
    EXPECT_EQ(r.Header("Content-Range"), "<none>") << range;
  }
  // Two Range fields: ignored.
  EXPECT_EQ(Get("/files/data.bin", {{"Range", "bytes=0-1"}, {"Range", "bytes=0-1"}}).status, 200);
}

TEST_P(StaticFilesTest, IfRange) {
  const std::string etag = EtagOf("/files/data.bin");
  auto get = [&](std::string if_range) {
    return Get("/files/data.bin", {{"Range", "bytes=10-19"}, {"If-Range", if_range}});
  };
  EXPECT_EQ(get(etag).status, 206);
  EXPECT_EQ(get(etag).offset, 10u);
  EXPECT_EQ(get("\"stale\"").status, 200);
  EXPECT_EQ(get("W/" + etag).status, 200);  // Weak tags never match If-Range.
  EXPECT_EQ(get(std::string(kOldDate)).status, 206);
  EXPECT_EQ(get("Wed, 01 Jan 2020 00:00:01 GMT").status, 200);
  EXPECT_EQ(get("garbage").status, 200);
  // A file modified in the future counts as modified now, and a date equal to now is a weak
  // validator: no range, whichever second the handler reads the clock in.
  const int64_t now = NowSeconds();
  SetMtime(root_ + "/data.bin", now + 5, 0);
  EXPECT_EQ(get(http_internal::FormatHttpDate(now + 5)).status, 200);
  EXPECT_EQ(get(http_internal::FormatHttpDate(now)).status, 200);
  // Preconditions come first: a matching If-None-Match gives 304 even with a Range.
  const std::string fresh = EtagOf("/files/data.bin");
  EXPECT_EQ(Get("/files/data.bin", {{"Range", "bytes=0-1"}, {"If-None-Match", fresh}}).status, 304);
}

INSTANTIATE_TEST_SUITE_P(CacheModes, StaticFilesTest,
                         ::testing::Values(CacheMode::kOff, CacheMode::kDescriptors,
                                           CacheMode::kMemory),
                         [](const ::testing::TestParamInfo<CacheMode>& mode) {
                           switch (mode.param) {
                             case CacheMode::kOff:
                               return "NoCache";
                             case CacheMode::kDescriptors:
                               return "Descriptors";
                             case CacheMode::kMemory:
                               return "Memory";
                           }
                           return "Unknown";
                         });

}  // namespace
}  // namespace petrel
