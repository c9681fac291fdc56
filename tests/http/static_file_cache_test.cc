// StaticFiles' open-file cache over the real handler and a real directory tree: what a cached
// file becomes when it is replaced, truncated, deleted, made unreadable or swapped for a symlink;
// LRU bounds and descriptor counts; running out of descriptors; responses that outlive their
// entry; and descriptors closed with their handler or thread. Revalidation intervals are options,
// so no test waits a second: "stale" tests use an hour, "fresh" tests zero, and the one that
// checks the interval polls a short one until its deadline.
#include <dirent.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "petrel/http/router.h"
#include "petrel/http/static_files.h"
#include "petrel/http/status.h"

namespace petrel {
namespace {

using Clock = std::chrono::steady_clock;

void WriteFile(const std::string& path, absl::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  ASSERT_TRUE(out.good()) << path;
}

// Writes `bytes` beside `path` and renames it over `path`: a new inode, as deploy tools do.
void ReplaceFile(const std::string& path, absl::string_view bytes) {
  const std::string temp = path + ".new";
  WriteFile(temp, bytes);
  ASSERT_EQ(::rename(temp.c_str(), path.c_str()), 0) << path;
}

// Open descriptors of this process (the directory stream's own is the same in every count).
int OpenDescriptors() {
  int n = 0;
  DIR* d = ::opendir("/proc/self/fd");
  if (d == nullptr) return -1;
  while (struct dirent* e = ::readdir(d)) {
    if (e->d_name[0] != '.') ++n;
  }
  ::closedir(d);
  return n;
}

std::string Pattern(char c, size_t n) { return std::string(n, c); }

struct Result {
  int status = 0;
  std::string etag;
  std::vector<std::pair<std::string, std::string>> headers;
  ResponseBody::Kind kind = ResponseBody::Kind::kBuffer;
  uint64_t length = 0;  // What the response announced.
  std::string body;     // What could be read of it.
  bool read_failed = false;
};

// Reads the whole body as an engine would: FileBody::ReadAt in chunks until the announced length
// or an error.
Result Collect(Response& res) {
  Result r;
  r.status = res.status();
  for (const HeaderField& f : res.headers()) r.headers.emplace_back(f.name, f.value);
  if (auto etag = res.headers().Get("ETag")) r.etag = std::string(*etag);
  r.kind = res.body().kind();
  if (const std::string* b = res.body().buffer()) {
    r.body = *b;
    r.length = b->size();
  }
  if (const FileBody* f = res.body().file()) {
    r.length = f->length();
    uint64_t pos = 0;
    while (pos < f->length()) {
      absl::StatusOr<size_t> n = f->ReadAt(pos, 4096, &r.body);
      if (!n.ok() || *n == 0) {
        r.read_failed = true;
        break;
      }
      pos += *n;
    }
  }
  return r;
}

StaticFilesOptions CacheOptions(absl::Duration revalidate, bool in_memory) {
  StaticFilesOptions options;
  options.file_cache_entries = 64;
  options.file_cache_revalidate = revalidate;
  options.file_cache_memory_file_size = in_memory ? 16 * 1024 : 0;
  return options;
}

class StaticFileCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/petrel_file_cache_XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    base_ = tmpl;
    root_ = base_ + "/www";
    ASSERT_EQ(::mkdir(root_.c_str(), 0755), 0);
    ASSERT_EQ(::mkdir((base_ + "/outside").c_str(), 0755), 0);
    WriteFile(base_ + "/outside/secret.txt", "top secret\n");
    WriteFile(root_ + "/small.txt", "hello world\n");
    big_ = Pattern('a', 100 * 1024);
    WriteFile(root_ + "/big.bin", big_);
  }

  void TearDown() override {
    router_.reset();
    std::error_code ec;
    std::filesystem::remove_all(base_, ec);
  }

  void Serve(StaticFilesOptions options) {
    router_ = std::make_unique<Router>();
    ASSERT_TRUE(router_->Get("/*", StaticFiles(root_, std::move(options))).ok());
  }

  // Runs a GET and returns the Response (its body unread).
  std::unique_ptr<Response> Start(absl::string_view target,
                                  std::initializer_list<HeaderField> headers = {}) {
    Request req;
    req.set_method(Method::kGet);
    req.SetTarget(target);
    for (const HeaderField& f : headers) req.headers().Add(f.name, f.value);
    auto res = std::make_unique<Response>();
    router_->Handle(req, *res);
    return res;
  }

  Result Get(absl::string_view target, std::initializer_list<HeaderField> headers = {}) {
    std::unique_ptr<Response> res = Start(target, headers);
    return Collect(*res);
  }

  std::string base_;
  std::string root_;
  std::string big_;
  std::unique_ptr<Router> router_;
};

// ---- SharedFd and FileBody ----

bool IsOpen(int fd) { return ::fcntl(fd, F_GETFD) != -1; }

TEST(SharedFdTest, FileBodiesShareTheDescriptorUntilTheLastReference) {
  char path[] = "/tmp/petrel_shared_fd_XXXXXX";
  const int fd = ::mkstemp(path);
  ASSERT_GE(fd, 0);
  ::unlink(path);
  ASSERT_EQ(::write(fd, "0123456789", 10), 10);

  SharedFd shared = SharedFd::Adopt(fd);
  EXPECT_EQ(shared.get(), fd);
  EXPECT_EQ(shared.use_count(), 1u);
  {
    FileBody body(shared, 2, 5);
    EXPECT_EQ(body.fd(), fd);
    EXPECT_EQ(shared.use_count(), 2u);
    FileBody moved(std::move(body));
    EXPECT_EQ(shared.use_count(), 2u);
    std::string out;
    ASSERT_TRUE(moved.ReadAt(0, 100, &out).ok());
    EXPECT_EQ(out, "23456");
  }
  EXPECT_TRUE(IsOpen(fd));  // The bodies never close a shared descriptor.
  EXPECT_EQ(shared.use_count(), 1u);
  EXPECT_FALSE(shared.suspect());

  // A read that finds the file shorter fails and marks the descriptor for every owner.
  FileBody long_body(shared, 0, 20);
  std::string out;
  ASSERT_TRUE(long_body.ReadAt(0, 100, &out).ok());
  EXPECT_EQ(out, "0123456789");
  EXPECT_FALSE(long_body.ReadAt(10, 100, &out).ok());
  EXPECT_TRUE(shared.suspect());

  shared = SharedFd();  // The body holds the last reference now.
  EXPECT_TRUE(IsOpen(fd));
  long_body = FileBody(-1, 0, 0);
  EXPECT_FALSE(IsOpen(fd));
}

// ---- What the cache saves, and that it changes nothing visible ----

TEST_F(StaticFileCacheTest, HeadersAreThoseWithoutCache) {
  for (bool in_memory : {false, true}) {
    StaticFilesOptions plain;
    plain.file_cache_entries = 0;
    Serve(plain);
    std::vector<Result> expected;
    const std::vector<std::pair<std::string, std::vector<HeaderField>>> requests = {
        {"/small.txt", {}},
        {"/big.bin", {}},
        {"/big.bin", {{"Range", "bytes=10-19"}}},
        {"/big.bin", {{"Range", "bytes=999999-"}}},
        {"/small.txt", {{"If-Modified-Since", "Fri, 01 Jan 2100 00:00:00 GMT"}}},
    };
    auto run = [&](const std::pair<std::string, std::vector<HeaderField>>& r) {
      Request req;
      req.set_method(Method::kGet);
      req.SetTarget(r.first);
      for (const HeaderField& f : r.second) req.headers().Add(f.name, f.value);
      Response res;
      router_->Handle(req, res);
      return Collect(res);
    };
    for (const auto& r : requests) expected.push_back(run(r));
    Serve(CacheOptions(absl::Hours(1), in_memory));
    for (int round = 0; round < 2; ++round) {  // The first fills the cache, the second hits it.
      for (size_t i = 0; i < requests.size(); ++i) {
        Result got = run(requests[i]);
        EXPECT_EQ(got.status, expected[i].status) << requests[i].first << " round " << round;
        EXPECT_EQ(got.headers, expected[i].headers) << requests[i].first << " round " << round;
        EXPECT_EQ(got.body, expected[i].body) << requests[i].first << " round " << round;
      }
    }
  }
}

TEST_F(StaticFileCacheTest, SmallFilesComeFromMemoryLargeOnesFromTheDescriptor) {
  Serve(CacheOptions(absl::Hours(1), /*in_memory=*/true));
  const int before = OpenDescriptors();
  Result small = Get("/small.txt");
  EXPECT_EQ(small.kind, ResponseBody::Kind::kBuffer);
  EXPECT_EQ(small.body, "hello world\n");
  EXPECT_EQ(OpenDescriptors(), before);  // Read into memory, descriptor closed.
  Result big = Get("/big.bin");
  EXPECT_EQ(big.kind, ResponseBody::Kind::kFile);
  EXPECT_EQ(big.body, big_);
  EXPECT_EQ(OpenDescriptors(), before + 1);  // Kept open by the cache.
  EXPECT_EQ(Get("/big.bin").body, big_);
  EXPECT_EQ(OpenDescriptors(), before + 1);
}

// Responses for an in-memory file send the cache's bytes themselves, not a copy each; a response
// still holding them when its entry is evicted (more files than entries) or the whole cache goes
// keeps them intact.
TEST_F(StaticFileCacheTest, InMemoryResponsesShareTheCachedBytesAndOutliveTheirEntry) {
  const std::string content = Pattern('m', 5000);
  WriteFile(root_ + "/m.bin", content);
  StaticFilesOptions options = CacheOptions(absl::Hours(1), /*in_memory=*/true);
  options.file_cache_entries = 4;
  Serve(options);
  std::unique_ptr<Response> first = Start("/m.bin");
  std::unique_ptr<Response> second = Start("/m.bin");
  ASSERT_NE(first->body().buffer(), nullptr);
  EXPECT_EQ(first->body().buffer(), second->body().buffer());  // the same bytes
  for (int i = 0; i < 8; ++i) {
    WriteFile(absl::StrCat(root_, "/other", i), absl::StrCat("other ", i));
    EXPECT_EQ(Get(absl::StrCat("/other", i)).status, 200);
  }
  std::unique_ptr<Response> third = Start("/m.bin");  // a new entry: new bytes
  EXPECT_NE(third->body().buffer(), first->body().buffer());
  router_.reset();  // the handler and its caches go
  EXPECT_EQ(*first->body().buffer(), content);
  EXPECT_EQ(*second->body().buffer(), content);
  EXPECT_EQ(*third->body().buffer(), content);
}

// ---- Files that change ----

// Within the interval the cached version is served — whole; past it, the new one. A file
// renamed over the old one never yields a mix of both, and each body comes with its own ETag.
TEST_F(StaticFileCacheTest, ReplacedFileIsNoticedAfterTheIntervalNeverMixed) {
  for (bool in_memory : {false, true}) {
    const size_t size = in_memory ? 5000 : 50000;
    const std::string old_bytes = Pattern('o', size);
    const std::string new_bytes = Pattern('n', size + 10);
    WriteFile(root_ + "/f.bin", old_bytes);

    Serve(CacheOptions(absl::Hours(1), in_memory));
    const std::string old_etag = Get("/f.bin").etag;
    ReplaceFile(root_ + "/f.bin", new_bytes);
    Result stale = Get("/f.bin");
    EXPECT_EQ(stale.body, old_bytes) << "in_memory " << in_memory;
    EXPECT_EQ(stale.etag, old_etag);

    // A short interval: the new file shows up once it passes, and only whole versions appear.
    WriteFile(root_ + "/f.bin", old_bytes);
    Serve(CacheOptions(absl::Milliseconds(20), in_memory));
    ASSERT_EQ(Get("/f.bin").body, old_bytes);
    ReplaceFile(root_ + "/f.bin", new_bytes);
    const auto deadline = Clock::now() + std::chrono::seconds(10);
    std::string new_etag;
    while (Clock::now() < deadline) {
      Result r = Get("/f.bin");
      ASSERT_EQ(r.status, 200);
      ASSERT_FALSE(r.read_failed);
      ASSERT_TRUE(r.body == old_bytes || r.body == new_bytes) << "a mix of versions";
      if (r.body == new_bytes) {
        new_etag = r.etag;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    ASSERT_FALSE(new_etag.empty()) << "the replaced file was never noticed";
    EXPECT_NE(new_etag, old_etag);
    EXPECT_EQ(Get("/f.bin").body, new_bytes);  // And stays.
  }
}

// A file truncated in place under a cached descriptor: a response announced with the old size
// fails when it reaches the new end (nothing past it is sent), and the next request looks again.
TEST_F(StaticFileCacheTest, TruncatedFileFailsTheResponseAndIsLookedUpAgain) {
  Serve(CacheOptions(absl::Hours(1), /*in_memory=*/false));
  ASSERT_EQ(Get("/big.bin").body, big_);
  ASSERT_EQ(::truncate((root_ + "/big.bin").c_str(), 1000), 0);
  Result cut = Get("/big.bin");
  EXPECT_EQ(cut.length, big_.size());         // Still the cached size...
  EXPECT_TRUE(cut.read_failed);               // ...but the read fails at the new end,
  EXPECT_EQ(cut.body, big_.substr(0, 1000));  // never past it.
  // The failed read marked the entry: looked up again now, despite the hour.
  Result fresh = Get("/big.bin");
  EXPECT_EQ(fresh.status, 200);
  EXPECT_EQ(fresh.length, 1000u);
  EXPECT_FALSE(fresh.read_failed);
  EXPECT_EQ(fresh.body, big_.substr(0, 1000));
}

TEST_F(StaticFileCacheTest, TruncatedSmallFileIsServedWholeFromMemoryUntilRevalidated) {
  Serve(CacheOptions(absl::Hours(1), /*in_memory=*/true));
  ASSERT_EQ(Get("/small.txt").body, "hello world\n");
  ASSERT_EQ(::truncate((root_ + "/small.txt").c_str(), 5), 0);
  EXPECT_EQ(Get("/small.txt").body, "hello world\n");  // The version cached, complete.
  Serve(CacheOptions(absl::ZeroDuration(), /*in_memory=*/true));
  ASSERT_EQ(Get("/small.txt").body, "hello");
  ASSERT_EQ(::truncate((root_ + "/small.txt").c_str(), 2), 0);
  EXPECT_EQ(Get("/small.txt").body, "he");
}

TEST_F(StaticFileCacheTest, DeletedAndRecreatedFiles) {
  for (bool in_memory : {false, true}) {
    Serve(CacheOptions(absl::ZeroDuration(), in_memory));
    WriteFile(root_ + "/d.txt", "first\n");
    EXPECT_EQ(Get("/d.txt").body, "first\n");
    ASSERT_EQ(::unlink((root_ + "/d.txt").c_str()), 0);
    EXPECT_EQ(Get("/d.txt").status, 404);
    WriteFile(root_ + "/d.txt", "second version\n");
    EXPECT_EQ(Get("/d.txt").body, "second version\n");

    // Stale for the interval: still the cached version after deletion.
    Serve(CacheOptions(absl::Hours(1), in_memory));
    EXPECT_EQ(Get("/d.txt").body, "second version\n");
    ASSERT_EQ(::unlink((root_ + "/d.txt").c_str()), 0);
    Result stale = Get("/d.txt");
    EXPECT_EQ(stale.status, 200);
    EXPECT_EQ(stale.body, "second version\n");
  }
}

TEST_F(StaticFileCacheTest, PermissionChangeGives403AfterRevalidation) {
  // Run as an unprivileged user in a child: root reads files whatever their mode.
  ASSERT_EQ(::chmod(base_.c_str(), 0755), 0);
  WriteFile(root_ + "/p.txt", "private\n");
  const bool root = ::geteuid() == 0;
  if (root) {
    ASSERT_EQ(::chown((root_ + "/p.txt").c_str(), 65534, 65534), 0);
  }
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    if (root && (::setgid(65534) != 0 || ::setuid(65534) != 0)) ::_exit(10);
    int code = 0;
    Serve(CacheOptions(absl::ZeroDuration(), /*in_memory=*/true));
    if (Get("/p.txt").status != 200) code |= 1;
    if (::chmod((root_ + "/p.txt").c_str(), 0) != 0) ::_exit(11);
    if (Get("/p.txt").status != 403) code |= 2;
    if (::chmod((root_ + "/p.txt").c_str(), 0644) != 0) ::_exit(11);
    if (Get("/p.txt").body != "private\n") code |= 4;
    router_.reset();
    ::_exit(code);
  }
  int wstatus = 0;
  ASSERT_EQ(::waitpid(pid, &wstatus, 0), pid);
  ASSERT_TRUE(WIFEXITED(wstatus));
  EXPECT_EQ(WEXITSTATUS(wstatus), 0) << "1: not served, 2: not 403 after chmod 000, 4: not "
                                        "served again, 10: could not drop root, 11: chmod failed";
}

TEST_F(StaticFileCacheTest, SymlinksFollowTheRulesWhenSwapped) {
  ASSERT_EQ(::symlink("small.txt", (root_ + "/link").c_str()), 0);
  ASSERT_EQ(::symlink("../outside/secret.txt", (root_ + "/escape").c_str()), 0);
  for (bool in_memory : {false, true}) {
    Serve(CacheOptions(absl::ZeroDuration(), in_memory));
    EXPECT_EQ(Get("/link").body, "hello world\n");
    EXPECT_EQ(Get("/escape").status, 404);
    EXPECT_EQ(Get("/escape").status, 404);  // Errors are not cached as files either.

    // The cached link now points outside: never served once looked at again.
    ASSERT_EQ(::symlink("../outside/secret.txt", (root_ + "/link.new").c_str()), 0);
    ASSERT_EQ(::rename((root_ + "/link.new").c_str(), (root_ + "/link").c_str()), 0);
    EXPECT_EQ(Get("/link").status, 404);
    // And to another file inside: that file.
    ASSERT_EQ(::symlink("big.bin", (root_ + "/link.new").c_str()), 0);
    ASSERT_EQ(::rename((root_ + "/link.new").c_str(), (root_ + "/link").c_str()), 0);
    EXPECT_EQ(Get("/link").body, big_);
    ASSERT_EQ(::unlink((root_ + "/link").c_str()), 0);
    ASSERT_EQ(::symlink("small.txt", (root_ + "/link").c_str()), 0);
  }
}

TEST_F(StaticFileCacheTest, IndexFilesAreCachedWithTheirChecks) {
  ASSERT_EQ(::mkdir((root_ + "/dir").c_str(), 0755), 0);
  WriteFile(root_ + "/dir/index.html", "<p>one</p>\n");
  Serve(CacheOptions(absl::ZeroDuration(), /*in_memory=*/true));
  EXPECT_EQ(Get("/dir/").body, "<p>one</p>\n");
  EXPECT_EQ(Get("/dir").status, 301);
  ReplaceFile(root_ + "/dir/index.html", "<p>two</p>\n");
  EXPECT_EQ(Get("/dir/").body, "<p>two</p>\n");
  ASSERT_EQ(::unlink((root_ + "/dir/index.html").c_str()), 0);
  EXPECT_EQ(Get("/dir/").status, 404);
}

// ---- Bounds ----

TEST_F(StaticFileCacheTest, MoreFilesThanEntriesEvictsAndBoundsDescriptors) {
  for (int i = 0; i < 100; ++i) {
    WriteFile(absl::StrCat(root_, "/f", i, ".txt"), absl::StrCat("file ", i, "\n"));
  }
  StaticFilesOptions options = CacheOptions(absl::Hours(1), /*in_memory=*/false);
  options.file_cache_entries = 10;
  Serve(options);
  const int before = OpenDescriptors();
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < 100; ++i) {
      Result r = Get(absl::StrCat("/f", i, ".txt"));
      ASSERT_EQ(r.body, absl::StrCat("file ", i, "\n")) << i;
      ASSERT_LE(OpenDescriptors(), before + 10) << i;
    }
  }
  EXPECT_EQ(OpenDescriptors(), before + 10);

  // In memory, bounded by bytes: 100 files of 1000 bytes in 4000 bytes of cache.
  options = CacheOptions(absl::Hours(1), /*in_memory=*/true);
  options.file_cache_memory_bytes = 4000;
  for (int i = 0; i < 100; ++i) {
    WriteFile(absl::StrCat(root_, "/f", i, ".txt"), Pattern(static_cast<char>('A' + i % 26), 1000));
  }
  Serve(options);
  EXPECT_EQ(OpenDescriptors(), before);  // The previous handler's descriptors went with it.
  for (int round = 0; round < 2; ++round) {
    for (int i = 0; i < 100; ++i) {
      ASSERT_EQ(Get(absl::StrCat("/f", i, ".txt")).body,
                Pattern(static_cast<char>('A' + i % 26), 1000));
    }
  }
  EXPECT_EQ(OpenDescriptors(), before);
}

// A child with a small descriptor limit: once the table is full, each open closes a cached
// descriptor and retries, so requests keep succeeding.
TEST_F(StaticFileCacheTest, DescriptorExhaustionShrinksTheCache) {
  for (int i = 0; i < 200; ++i) {
    WriteFile(absl::StrCat(root_, "/f", i, ".txt"), absl::StrCat("file ", i, "\n"));
  }
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    StaticFilesOptions options = CacheOptions(absl::Hours(1), /*in_memory=*/false);
    options.file_cache_entries = 1000;
    Serve(options);  // The cache is made (and sizes itself) under the normal limit.
    if (Get("/f0.txt").status != 200) ::_exit(1);
    const int open = OpenDescriptors();
    struct rlimit limit;
    ::getrlimit(RLIMIT_NOFILE, &limit);
    limit.rlim_cur = static_cast<rlim_t>(open + 30);
    if (::setrlimit(RLIMIT_NOFILE, &limit) != 0) ::_exit(2);
    for (int round = 0; round < 2; ++round) {
      for (int i = 0; i < 200; ++i) {
        if (Get(absl::StrCat("/f", i, ".txt")).body != absl::StrCat("file ", i, "\n")) ::_exit(3);
      }
    }
    // Take every descriptor left: the next open can only succeed by closing a cached one.
    std::vector<int> hogs;
    for (int fd; (fd = ::dup(0)) >= 0;) hogs.push_back(fd);
    if (errno != EMFILE) ::_exit(4);
    if (Get("/f7.txt").body != "file 7\n") ::_exit(5);
    if (Get("/f150.txt").body != "file 150\n") ::_exit(6);
    for (int fd : hogs) ::close(fd);
    ::_exit(0);
  }
  int wstatus = 0;
  ASSERT_EQ(::waitpid(pid, &wstatus, 0), pid);
  ASSERT_TRUE(WIFEXITED(wstatus));
  EXPECT_EQ(WEXITSTATUS(wstatus), 0)
      << "1: first request, 2: setrlimit, 3: a request failed under the low limit, 4: dup, 5/6: "
         "a request failed with the table full";
}

// ---- Lifetimes ----

// A response still reading from a descriptor whose entry is evicted (or whose file is replaced)
// completes byte for byte from that descriptor, which closes only when the response is gone.
TEST_F(StaticFileCacheTest, StreamingResponseOutlivesItsEntry) {
  StaticFilesOptions options = CacheOptions(absl::ZeroDuration(), /*in_memory=*/false);
  options.file_cache_entries = 1;
  Serve(options);
  const int before = OpenDescriptors();
  std::unique_ptr<Response> res = Start("/big.bin");
  const FileBody* file = res->body().file();
  ASSERT_NE(file, nullptr);
  std::string got;
  ASSERT_TRUE(file->ReadAt(0, 4096, &got).ok());

  ReplaceFile(root_ + "/big.bin", Pattern('z', 3000));  // New inode: the entry is replaced,
  EXPECT_EQ(Get("/big.bin").body, Pattern('z', 3000));
  EXPECT_EQ(Get("/small.txt").body, "hello world\n");  // and that one evicted.

  uint64_t pos = got.size();
  while (pos < file->length()) {
    absl::StatusOr<size_t> n = file->ReadAt(pos, 4096, &got);
    ASSERT_TRUE(n.ok()) << n.status();
    ASSERT_GT(*n, 0u);
    pos += *n;
  }
  EXPECT_EQ(got, big_);
  EXPECT_EQ(OpenDescriptors(), before + 2);  // The cached small.txt and the streaming one.
  res.reset();
  EXPECT_EQ(OpenDescriptors(), before + 1);
}

TEST_F(StaticFileCacheTest, DestroyedHandlerClosesItsDescriptors) {
  for (int i = 0; i < 20; ++i) WriteFile(absl::StrCat(root_, "/f", i, ".bin"), big_);
  const int before = OpenDescriptors();
  Serve(CacheOptions(absl::Hours(1), /*in_memory=*/false));
  for (int i = 0; i < 20; ++i) ASSERT_EQ(Get(absl::StrCat("/f", i, ".bin")).status, 200);
  EXPECT_EQ(OpenDescriptors(), before + 1 + 20);  // The root's O_PATH descriptor, the files.
  router_.reset();
  EXPECT_EQ(OpenDescriptors(), before);
}

TEST_F(StaticFileCacheTest, ThreadEndClosesItsCache) {
  for (int i = 0; i < 20; ++i) WriteFile(absl::StrCat(root_, "/f", i, ".bin"), big_);
  Serve(CacheOptions(absl::Hours(1), /*in_memory=*/false));
  const int before = OpenDescriptors();
  std::thread worker([&] {
    for (int i = 0; i < 20; ++i) EXPECT_EQ(Get(absl::StrCat("/f", i, ".bin")).status, 200);
    EXPECT_EQ(OpenDescriptors(), before + 20);
  });
  worker.join();
  EXPECT_EQ(OpenDescriptors(), before);  // The handler lives on; the thread's cache went.
}

// A handler destroyed on one thread while another loop thread lives on: that thread drops its
// cache at its next static-file request.
TEST_F(StaticFileCacheTest, OtherThreadsDropARetiredHandlersCache) {
  for (int i = 0; i < 20; ++i) WriteFile(absl::StrCat(root_, "/f", i, ".bin"), big_);
  Serve(CacheOptions(absl::Hours(1), /*in_memory=*/false));
  auto other = std::make_unique<Router>();
  ASSERT_TRUE(other->Get("/*", StaticFiles(root_, CacheOptions(absl::Hours(1), true))).ok());

  // A tiny loop thread: runs posted tasks until told to stop.
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::function<void()>> tasks;
  int done = 0;
  bool stop = false;
  std::thread loop([&] {
    std::unique_lock<std::mutex> lock(mu);
    for (;;) {
      cv.wait(lock, [&] { return stop || !tasks.empty(); });
      if (tasks.empty()) return;
      auto task = std::move(tasks.front());
      tasks.erase(tasks.begin());
      lock.unlock();
      task();
      lock.lock();
      ++done;
      cv.notify_all();
    }
  });
  auto run_on_loop = [&](std::function<void()> task) {
    std::unique_lock<std::mutex> lock(mu);
    const int target = done + 1;
    tasks.push_back(std::move(task));
    cv.notify_all();
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(30), [&] { return done >= target; }));
  };

  const int before = OpenDescriptors();
  run_on_loop([&] {
    for (int i = 0; i < 20; ++i) EXPECT_EQ(Get(absl::StrCat("/f", i, ".bin")).status, 200);
  });
  EXPECT_EQ(OpenDescriptors(), before + 20);
  router_.reset();  // On this thread: the loop thread's cache is only marked.
  const int after_reset = OpenDescriptors();
  EXPECT_EQ(after_reset, before + 20 - 1);  // Only the root's descriptor went.
  run_on_loop([&] {
    Request req;
    req.set_method(Method::kGet);
    req.SetTarget("/small.txt");
    Response res;
    other->Handle(req, res);
    EXPECT_EQ(res.status(), 200);
  });
  EXPECT_EQ(OpenDescriptors(), before - 1);  // The retired cache closed; small.txt in memory.
  {
    std::lock_guard<std::mutex> lock(mu);
    stop = true;
    cv.notify_all();
  }
  loop.join();
}

}  // namespace
}  // namespace petrel
