// petrel-client: its option parser and session file directly, then the binary against real
// servers on loopback — gtlsserver (ngtcp2 0.12.1's example server on GnuTLS, package
// ngtcp2-server) and petrel-server — checking every body byte for byte (SHA-256), resumption
// and 0-RTT, QUIC v2, the --ciphers policy and the exit statuses. The binaries come from the
// PETREL_CLIENT and PETREL_SERVER environment variables (set by ctest).
#include <fcntl.h>
#include <netinet/in.h>
#include <openssl/sha.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "petrel/quic/quic_connection.h"
#include "support/command.h"
#include "support/server_port.h"
#include "tools/client_options.h"
#include "tools/session_file.h"

namespace petrel::tools {
namespace {

using petrel::testing::CommandResult;
using petrel::testing::PickServerPort;
using petrel::testing::ReadFile;
using petrel::testing::RunCommand;
using petrel::testing::TempDir;

// ---------------------------------------------------------------------------------------------
// The parser and the session file
// ---------------------------------------------------------------------------------------------

absl::StatusOr<ClientOptions> Parse(std::vector<const char*> args) {
  args.insert(args.begin(), "petrel-client");
  return ParseClientOptions(static_cast<int>(args.size()), args.data());
}

TEST(ClientOptionsTest, ParsesTheCurlLikeFlags) {
  absl::StatusOr<ClientOptions> o = Parse({"--http3",
                                           "-k",
                                           "-v",
                                           "-X",
                                           "PUT",
                                           "-d",
                                           "@/tmp/x",
                                           "-H",
                                           "x-a:  b ",
                                           "--parallel",
                                           "3",
                                           "--download",
                                           "/tmp/d",
                                           "--session-file",
                                           "/tmp/s",
                                           "--0rtt",
                                           "--ciphers=TLS_CHACHA20_POLY1305_SHA256",
                                           "--quic-version",
                                           "v2",
                                           "--timeout",
                                           "2.5",
                                           "--preferred-address-move",
                                           "immediate",
                                           "--keep-alive",
                                           "1000",
                                           "--limit-rate",
                                           "2M",
                                           "https://h:4433/a",
                                           "https://h:4433/b?q"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_TRUE(o->insecure);
  EXPECT_TRUE(o->verbose);
  EXPECT_EQ(o->method, "PUT");
  EXPECT_EQ(o->body_file, "/tmp/x");
  ASSERT_EQ(o->headers.size(), 1u);
  EXPECT_EQ(o->headers[0].first, "x-a");
  EXPECT_EQ(o->headers[0].second, "b");
  EXPECT_EQ(o->parallel, 3u);
  EXPECT_TRUE(o->early_data);
  EXPECT_EQ(o->quic_version, kQuicVersion2Draft);
  EXPECT_DOUBLE_EQ(o->timeout_seconds, 2.5);
  EXPECT_TRUE(o->preferred_address_at_once);
  EXPECT_EQ(o->keep_alive_ms, 1000u);
  EXPECT_EQ(o->limit_rate, 2u << 20);
  ASSERT_EQ(o->urls.size(), 2u);
  EXPECT_EQ(o->urls[1].path, "/b?q");
  EXPECT_TRUE(WantsChaChaPreference(o->ciphers));

  absl::StatusOr<ClientOptions> post = Parse({"-d", "abc", "https://h/"});
  ASSERT_TRUE(post.ok()) << post.status();
  EXPECT_EQ(post->method, "POST");
  EXPECT_EQ(post->body, "abc");
  EXPECT_EQ(post->quic_version, kQuicVersion1);
  EXPECT_FALSE(post->preferred_address_at_once);
  EXPECT_FALSE(WantsChaChaPreference({"TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256"}));
  EXPECT_FALSE(WantsChaChaPreference({}));
}

TEST(ClientOptionsTest, RejectsBadCommandLines) {
  const std::vector<std::vector<const char*>> bad = {
      {},
      {"--bogus", "https://h/"},
      {"-X"},
      {"--parallel", "0", "https://h/"},
      {"--parallel", "x", "https://h/"},
      {"--timeout", "-1", "https://h/"},
      {"--ciphers", "TLS_AES_128_CCM_SHA256", "https://h/"},
      {"--quic-version", "v3", "https://h/"},
      {"--preferred-address-move", "later", "https://h/"},
      {"--keep-alive", "soon", "https://h/"},
      {"--limit-rate", "0", "https://h/"},
      {"--limit-rate", "5q", "https://h/"},
      {"--limit-rate", "k", "https://h/"},
      {"--limit-rate", "-1", "https://h/"},
      {"-o", "f", "https://h/a", "https://h/b"},
      {"-o", "f", "--download", "d", "https://h/a"},
      {"https://h:1/a", "https://h:2/b"},
      {"https://a/x", "https://b/x"},
      {"http://h/"},
      {"--0rtt", "https://h/"},
      {"-H", "novalue", "https://h/"},
      {"--download", "d", "https://h/a/../b"},
      {"--download", "d", "https://h/a", "https://h//a"},
      {"-k=1", "https://h/"},
      {"wss://h/"},
      {"--ws-protocol", "chat", "https://h/"},
      {"--websocket", "https://h/a", "https://h/b"},
      {"--websocket", "-d", "x", "https://h/"},
      {"--websocket", "-X", "GET", "https://h/"},
      {"--websocket", "-o", "f", "https://h/"},
      {"--websocket", "--parallel", "2", "https://h/"},
      {"--websocket", "--ws-protocol", "", "https://h/"},
  };
  for (const auto& args : bad) {
    absl::StatusOr<ClientOptions> o = Parse(args);
    EXPECT_FALSE(o.ok()) << "accepted: " << (args.empty() ? "(nothing)" : args[0]);
  }
}

TEST(ClientOptionsTest, ParsesWebSocketOptions) {
  absl::StatusOr<ClientOptions> o = Parse(
      {"--websocket", "--ws-protocol", "chat.v2", "--ws-protocol=chat", "wss://h:4433/ws?x=1"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_TRUE(o->websocket);
  EXPECT_EQ(o->ws_protocols, (std::vector<std::string>{"chat.v2", "chat"}));
  ASSERT_EQ(o->urls.size(), 1u);
  EXPECT_EQ(o->urls[0].scheme, "wss");
  EXPECT_EQ(o->urls[0].port, 4433);
  EXPECT_EQ(o->urls[0].path, "/ws?x=1");
  absl::StatusOr<ClientOptions> https = Parse({"--websocket", "https://h/echo"});
  ASSERT_TRUE(https.ok()) << https.status();
  EXPECT_EQ(https->urls[0].port, 443);
  absl::StatusOr<ClientOptions> wss = Parse({"--websocket", "WSS://h/"});
  ASSERT_TRUE(wss.ok()) << wss.status();
  EXPECT_EQ(wss->urls[0].port, 443);  // wss:// defaults to https's port
}

TEST(ClientOptionsTest, ParsesByteRatesAsCurlDoes) {
  EXPECT_EQ(*ParseByteRate("1"), 1u);
  EXPECT_EQ(*ParseByteRate("500k"), 500u << 10);
  EXPECT_EQ(*ParseByteRate("2M"), 2u << 20);
  EXPECT_EQ(*ParseByteRate("1g"), 1u << 30);
  for (const char* bad : {"", "0", "M", "1.5M", "1T", "-3", "99999999999999999999"}) {
    EXPECT_FALSE(ParseByteRate(bad).ok()) << bad;
  }
}

TEST(DownloadPathTest, MapsUrlPathsUnderTheDirectory) {
  EXPECT_EQ(*DownloadPath("d", "/a/b.txt?x=1"), "d/a/b.txt");
  EXPECT_EQ(*DownloadPath("d/", "//a//b"), "d/a/b");
  EXPECT_EQ(*DownloadPath("d", "/"), "d/index.html");
  EXPECT_EQ(*DownloadPath("d", "/dir/"), "d/dir/index.html");
  EXPECT_EQ(*DownloadPath("d", "/%2e%2e/x"), "d/%2e%2e/x");  // not decoded: a literal name
  EXPECT_FALSE(DownloadPath("d", "/../x").ok());
  EXPECT_FALSE(DownloadPath("d", "/a/./x").ok());
  EXPECT_FALSE(DownloadPath("d", "/a/..").ok());
}

TEST(SessionFileTest, RoundTripsAndRejectsDamage) {
  TempDir dir;
  const std::string path = dir / "s";
  EXPECT_TRUE(absl::IsNotFound(LoadSessionFile(path).status()));
  const SavedSession saved{std::string("tick\0et\n\n", 9), "params\n"};
  ASSERT_TRUE(SaveSessionFile(path, saved).ok());
  absl::StatusOr<SavedSession> loaded = LoadSessionFile(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->session, saved.session);
  EXPECT_EQ(loaded->transport_params, saved.transport_params);
  // No temporary file left behind.
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir.path()),
                          std::filesystem::directory_iterator()),
            1);

  const std::string good = EncodeSession(saved);
  EXPECT_TRUE(DecodeSession(good).ok());
  EXPECT_FALSE(DecodeSession(good.substr(0, good.size() - 1)).ok());
  EXPECT_FALSE(DecodeSession(good + "x").ok());
  EXPECT_FALSE(DecodeSession("petrel-session 2\n").ok());
  EXPECT_FALSE(DecodeSession("").ok());
  EXPECT_FALSE(DecodeSession("petrel-session 1\nsession 99999999999\n").ok());
  EXPECT_FALSE(DecodeSession("petrel-session 1\nsession 0\n\ntransport-params 1\nx\n").ok());
}

// ---------------------------------------------------------------------------------------------
// The binary against real servers
// ---------------------------------------------------------------------------------------------

constexpr int kClientTimeout = 120;  // seconds for one client run, a hang fails the test

std::string EnvOr(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? std::string() : std::string(v);
}

std::string FindGtlsServer() {
  for (const char* path : {"/usr/sbin/gtlsserver", "/usr/bin/gtlsserver"}) {
    if (::access(path, X_OK) == 0) return path;
  }
  return {};
}

sockaddr_in Loopback(uint16_t port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return addr;
}

bool UdpPortBound(uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_DGRAM, 0);
  sockaddr_in addr = Loopback(port);
  const bool bound =
      ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 && errno == EADDRINUSE;
  ::close(fd);
  return bound;
}

// A server in a child process, its output in `log`; killed (and reaped) on destruction.
class ServerProcess {
 public:
  ServerProcess(std::vector<std::string> args, std::string log) : log_(std::move(log)) {
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    pid_ = ::fork();
    if (pid_ == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // dies with the test, even if the test aborts
      const int fd = ::open(log_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      ::dup2(fd, STDOUT_FILENO);
      ::dup2(fd, STDERR_FILENO);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
  }
  ~ServerProcess() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  // Polls until `port` is bound on UDP (the server is up) or the child exited or 10 s passed.
  bool WaitReady(uint16_t port) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (std::chrono::steady_clock::now() < deadline) {
      if (::waitpid(pid_, nullptr, WNOHANG) == pid_) {
        pid_ = -1;
        return false;
      }
      if (UdpPortBound(port)) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }
  std::string log() const { return ReadFile(log_); }
  bool running() const { return pid_ > 0; }

 private:
  std::string log_;
  pid_t pid_ = -1;
};

// SHA-256 of a file, streamed (the large test files are not read whole).
std::string FileSha256(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return "(missing " + path.string() + ")";
  SHA256_CTX ctx;
  SHA256_Init(&ctx);
  std::vector<char> buf(1 << 20);
  ssize_t n;
  while ((n = ::read(fd, buf.data(), buf.size())) > 0) {
    SHA256_Update(&ctx, buf.data(), static_cast<size_t>(n));
  }
  ::close(fd);
  uint8_t md[SHA256_DIGEST_LENGTH];
  SHA256_Final(md, &ctx);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  for (uint8_t b : md) {
    hex.push_back(kHex[b >> 4]);
    hex.push_back(kHex[b & 15]);
  }
  return hex;
}

// `size` pseudo-random bytes (splitmix64 from `seed`), written in 1 MiB pieces.
void WriteRandomFile(const std::filesystem::path& path, uint64_t size, uint64_t seed) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  ASSERT_GE(fd, 0) << path;
  std::string chunk;
  uint64_t x = seed;
  while (size > 0) {
    chunk.clear();
    while (chunk.size() < (1u << 20) && chunk.size() < size) {
      x += 0x9e3779b97f4a7c15ULL;
      uint64_t z = x;
      z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
      z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
      z ^= z >> 31;
      chunk.append(reinterpret_cast<const char*>(&z), 8);
    }
    if (chunk.size() > size) chunk.resize(size);
    ASSERT_EQ(::write(fd, chunk.data(), chunk.size()), static_cast<ssize_t>(chunk.size()));
    size -= chunk.size();
  }
  ::close(fd);
}

constexpr int kManyFiles = 20;

class PetrelClientTest : public ::testing::Test {
 protected:
  // Files, certificate and key shared by every test: generating 110 MB once is enough.
  static void SetUpTestSuite() {
    shared_ = new TempDir();
    const std::filesystem::path& d = shared_->path();
    std::filesystem::create_directories(d / "www" / "many");
    WriteRandomFile(d / "www" / "1k", 1024, 1);
    WriteRandomFile(d / "www" / "10m", 10 << 20, 2);
    WriteRandomFile(d / "www" / "100m", 100 << 20, 3);
    for (int i = 0; i < kManyFiles; ++i) {
      WriteRandomFile(d / "www" / "many" / absl::StrCat("f", i), 100000 + i * 7919, 100 + i);
    }
    cert_ok_ =
        RunCommand(absl::StrCat("openssl req -x509 -newkey ec -pkeyopt "
                                "ec_paramgen_curve:P-256 -nodes -keyout ",
                                (d / "key.pem").string(), " -out ", (d / "cert.pem").string(),
                                " -days 2 -subj /CN=localhost -addext "
                                "subjectAltName=DNS:localhost,IP:127.0.0.1"),
                   60)
            .exit_code == 0;
  }
  static void TearDownTestSuite() {
    delete shared_;
    shared_ = nullptr;
  }

  void SetUp() override {
    client_ = EnvOr("PETREL_CLIENT");
    ASSERT_FALSE(client_.empty()) << "PETREL_CLIENT is not set (run through ctest)";
    ASSERT_TRUE(cert_ok_) << "openssl could not make the test certificate";
  }

  static std::filesystem::path www() { return shared_->path() / "www"; }
  static std::string Www(absl::string_view name) { return (www() / std::string(name)).string(); }
  static std::string KeyFile() { return (shared_->path() / "key.pem").string(); }
  static std::string CertFile() { return (shared_->path() / "cert.pem").string(); }

  // Starts gtlsserver on a free port serving www(), with `extra` options; skips without it.
  std::unique_ptr<ServerProcess> StartGtls(uint16_t* port, std::vector<std::string> extra = {}) {
    const std::string bin = FindGtlsServer();
    if (bin.empty()) return nullptr;
    return StartOnFreePort(
        [&](uint16_t p) {
          std::vector<std::string> args = {bin, "-q", "-d", www().string()};
          args.insert(args.end(), extra.begin(), extra.end());
          args.insert(args.end(), {"127.0.0.1", std::to_string(p), KeyFile(), CertFile()});
          return args;
        },
        "gtlsserver", port);
  }

  // Starts the server `args_for(port)` describes on a freshly picked port, logging to
  // tmp_/NAME.log. The port is named before the server binds it, so someone else may take it in
  // between: a server that exits at start is started again on another port (a few times).
  template <typename ArgsFor>
  std::unique_ptr<ServerProcess> StartOnFreePort(ArgsFor args_for, const std::string& name,
                                                 uint16_t* port) {
    const std::string log = (tmp_ / (name + ".log")).string();
    for (int attempt = 0; attempt < 5; ++attempt) {
      *port = PickServerPort();
      if (*port == 0) break;
      auto server = std::make_unique<ServerProcess>(args_for(*port), log);
      if (server->WaitReady(*port)) return server;
      if (server->running()) break;  // neither up nor gone within the limit: a real failure
    }
    ADD_FAILURE() << name << " did not start:\n" << ReadFile(log);
    return nullptr;
  }

  CommandResult Client(const std::string& args, int timeout = kClientTimeout) {
    return RunCommand(absl::StrCat(client_, " ", args), timeout);
  }
  std::string Url(uint16_t port, absl::string_view path) {
    return absl::StrCat("https://127.0.0.1:", port, path);
  }

  static TempDir* shared_;
  static bool cert_ok_;
  std::string client_;
  TempDir tmp_;  // this test's outputs
};

TempDir* PetrelClientTest::shared_ = nullptr;
bool PetrelClientTest::cert_ok_ = false;

// Skips the test without gtlsserver; otherwise starts it (see StartGtls) as `server` on `port`.
#define START_GTLS(server, port, ...)                                                  \
  if (FindGtlsServer().empty()) {                                                      \
    GTEST_SKIP() << "gtlsserver (package ngtcp2-server) not installed";                \
  }                                                                                    \
  uint16_t port = 0;                                                                   \
  std::unique_ptr<ServerProcess> server = StartGtls(&port __VA_OPT__(, ) __VA_ARGS__); \
  ASSERT_NE(server, nullptr)

TEST_F(PetrelClientTest, HelpAndUsageErrors) {
  CommandResult help = Client("--help");
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_TRUE(absl::StrContains(help.output, "--session-file")) << help.output;
  EXPECT_TRUE(absl::StrContains(help.output, "Exit status")) << help.output;
  for (const char* bad :
       {"--bogus https://127.0.0.1:1/", "", "-o a https://h/1 https://h/2", "https://a/ https://b/",
        "--ciphers TLS_NULL https://h/", "--quic-version v9 https://h/"}) {
    CommandResult r = Client(bad);
    EXPECT_EQ(r.exit_code, 2) << bad << "\n" << r.output;
    EXPECT_TRUE(absl::StrContains(r.output, "see --help")) << bad << "\n" << r.output;
  }
}

TEST_F(PetrelClientTest, DownloadsFromGtlsServerByteExact) {
  START_GTLS(server, port);
  for (const char* name : {"1k", "10m", "100m"}) {
    const std::string out = (tmp_ / name).string();
    CommandResult r = Client(absl::StrCat("--http3 -k -o ", out, " ", Url(port, "/") + name));
    EXPECT_EQ(r.exit_code, 0) << name << "\n" << r.output;
    EXPECT_EQ(FileSha256(out), FileSha256(Www(name))) << name;
  }
  // To stdout.
  const std::string out = (tmp_ / "stdout").string();
  CommandResult r = Client(absl::StrCat("-k ", Url(port, "/10m"), " > ", out));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(FileSha256(out), FileSha256(Www("10m")));
}

// --limit-rate paces the body by holding flow-control credit back: 10 MB at 4 MiB/s cannot
// arrive sooner than the rate allows (a lower bound that holds on any machine), and arrives whole.
TEST_F(PetrelClientTest, LimitRatePacesTheDownload) {
  START_GTLS(server, port);
  const std::string out = (tmp_ / "paced").string();
  const auto begin = std::chrono::steady_clock::now();
  CommandResult r = Client(absl::StrCat("-k --limit-rate 4M -o ", out, " ", Url(port, "/10m")));
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(FileSha256(out), FileSha256(Www("10m")));
  const double floor_s = 0.8 * static_cast<double>(std::filesystem::file_size(Www("10m"))) /
                         static_cast<double>(4 << 20);
  EXPECT_GE(seconds, floor_s);
}

TEST_F(PetrelClientTest, ManyUrlsOnOneConnectionWithParallelLimit) {
  START_GTLS(server, port);
  std::string urls;
  std::string concatenated;
  for (int i = 0; i < kManyFiles; ++i) {
    absl::StrAppend(&urls, " ", Url(port, absl::StrCat("/many/f", i)));
    concatenated += ReadFile(www() / "many" / absl::StrCat("f", i));
  }
  const std::filesystem::path dir = tmp_ / "dl";
  CommandResult r = Client(absl::StrCat("-k -v --parallel 8 --download ", dir.string(), urls));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (int i = 0; i < kManyFiles; ++i) {
    const std::string name = absl::StrCat("f", i);
    EXPECT_EQ(FileSha256(dir / "many" / name), FileSha256(www() / "many" / name)) << name;
  }
  // One connection: one handshake line for the 20 requests.
  size_t handshakes = 0;
  for (size_t at = 0; (at = r.output.find("* connected:", at)) != std::string::npos; ++at) {
    ++handshakes;
  }
  EXPECT_EQ(handshakes, 1u) << r.output;

  // To stdout the bodies come in URL order, whatever order they complete in.
  const std::string out = (tmp_ / "all").string();
  r = Client(absl::StrCat("-k --parallel 8", urls, " > ", out));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(FileSha256(out), petrel::testing::Sha256Hex(concatenated));
}

TEST_F(PetrelClientTest, SessionFileResumesAndSendsZeroRtt) {
  START_GTLS(server, port);
  const std::string session = (tmp_ / "session").string();
  const std::string url = Url(port, "/1k");
  CommandResult first = Client(
      absl::StrCat("-k -v --session-file ", session, " -o ", (tmp_ / "a").string(), " ", url));
  ASSERT_EQ(first.exit_code, 0) << first.output;
  EXPECT_TRUE(absl::StrContains(first.output, "session resumed: no")) << first.output;
  ASSERT_TRUE(std::filesystem::exists(session)) << first.output;
  EXPECT_TRUE(LoadSessionFile(session).ok());

  CommandResult second = Client(
      absl::StrCat("-k -v --session-file ", session, " -o ", (tmp_ / "b").string(), " ", url));
  ASSERT_EQ(second.exit_code, 0) << second.output;
  EXPECT_TRUE(absl::StrContains(second.output, "session resumed: yes")) << second.output;
  EXPECT_TRUE(absl::StrContains(second.output, "0-RTT: not attempted")) << second.output;
  EXPECT_EQ(FileSha256(tmp_ / "b"), FileSha256(Www("1k")));

  // 0-RTT. The client reports a ticket's age in whole seconds of wall-clock time (the session
  // time has one-second granularity) while gtlsserver's anti-replay check declines early data
  // when the client's age exceeds the age it measures in milliseconds: a ticket received just
  // before a second boundary and used just after it is declined (a third of quick runs here).
  // So 0-RTT runs are chained — each uses the ticket the previous one saved — and the session
  // file's modification time (written when the ticket arrives) tells, for each run, whether the
  // ticket it used and its own new one (which comes after its ClientHello) fall in one
  // wall-clock second. Every such run must have 0-RTT accepted.
  const auto mtime_second = [&session] {
    struct stat st {};
    ::stat(session.c_str(), &st);
    return static_cast<int64_t>(st.st_mtim.tv_sec);
  };
  int judged = 0;
  int accepted = 0;
  int64_t ticket_second = mtime_second();
  for (int run = 0; run < 10 && judged < 3; ++run) {
    CommandResult third = Client(absl::StrCat("-k -v --0rtt --session-file ", session, " -o ",
                                              (tmp_ / "c").string(), " ", url));
    ASSERT_EQ(third.exit_code, 0) << third.output;
    EXPECT_TRUE(absl::StrContains(third.output, "session resumed: yes")) << third.output;
    EXPECT_EQ(FileSha256(tmp_ / "c"), FileSha256(Www("1k")));
    const bool was_accepted = absl::StrContains(third.output, "0-RTT: accepted");
    accepted += was_accepted;
    const int64_t new_ticket_second = mtime_second();
    if (new_ticket_second == ticket_second) {
      ++judged;
      EXPECT_TRUE(was_accepted) << third.output;
    }
    ticket_second = new_ticket_second;
  }
  EXPECT_GT(judged, 0) << "no 0-RTT run used its ticket within the second it arrived";
  EXPECT_GT(accepted, 0);

  // A damaged file is ignored with a warning: a full handshake, and a fresh ticket saved.
  {
    std::FILE* f = std::fopen(session.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs("garbage\n", f);
    std::fclose(f);
  }
  CommandResult damaged = Client(absl::StrCat("-k -v --0rtt --session-file ", session, " -o ",
                                              (tmp_ / "d").string(), " ", url));
  ASSERT_EQ(damaged.exit_code, 0) << damaged.output;
  EXPECT_TRUE(absl::StrContains(damaged.output, "warning: ignoring")) << damaged.output;
  EXPECT_TRUE(absl::StrContains(damaged.output, "session resumed: no")) << damaged.output;
  EXPECT_TRUE(LoadSessionFile(session).ok());
}

TEST_F(PetrelClientTest, QuicVersions) {
  START_GTLS(server, port);
  CommandResult v1 = Client(absl::StrCat("-k -v -o /dev/null ", Url(port, "/1k")));
  ASSERT_EQ(v1.exit_code, 0) << v1.output;
  EXPECT_TRUE(absl::StrContains(v1.output, "QUIC version v1 (0x00000001), cipher")) << v1.output;

  const std::string out = (tmp_ / "v2").string();
  CommandResult v2 =
      Client(absl::StrCat("-k -v --quic-version v2 -o ", out, " ", Url(port, "/10m")));
  ASSERT_EQ(v2.exit_code, 0) << v2.output;
  EXPECT_TRUE(absl::StrContains(v2.output, "QUIC version v2 (draft) (0x709a50c4), cipher"))
      << v2.output;
  EXPECT_EQ(FileSha256(out), FileSha256(Www("10m")));
}

TEST_F(PetrelClientTest, ServerPreferringV2UpgradesAV1Client) {
  START_GTLS(server, port, {"--preferred-versions=v2draft,v1"});
  CommandResult r = Client(absl::StrCat("-k -v -o /dev/null ", Url(port, "/1k")));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(absl::StrContains(r.output, "QUIC version v2 (draft) (0x709a50c4), cipher"))
      << r.output;
}

TEST_F(PetrelClientTest, CiphersChaCha20) {
  START_GTLS(server, port);
  const std::string out = (tmp_ / "chacha").string();
  CommandResult r = Client(absl::StrCat("-k -v --ciphers TLS_CHACHA20_POLY1305_SHA256 -o ", out,
                                        " ", Url(port, "/10m")));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(absl::StrContains(r.output, "cipher TLS_CHACHA20_POLY1305_SHA256")) << r.output;
  EXPECT_EQ(FileSha256(out), FileSha256(Www("10m")));

  // An AES-GCM list never re-executes; AES-128 is what BoringSSL offers first on AES hardware.
  CommandResult aes = Client(
      absl::StrCat("-k -v --ciphers TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384 -o /dev/null ",
                   Url(port, "/1k")));
  ASSERT_EQ(aes.exit_code, 0) << aes.output;
  EXPECT_TRUE(absl::StrContains(aes.output, "cipher TLS_AES_")) << aes.output;
}

TEST_F(PetrelClientTest, CipherOutsideTheListFailsTheRun) {
  // This server allows AES-128-GCM only, so a ChaCha20-only client must refuse the connection.
  START_GTLS(server, port, {"--ciphers=NORMAL:-VERS-ALL:+VERS-TLS1.3:-CIPHER-ALL:+AES-128-GCM"});
  const std::string out = (tmp_ / "never").string();
  CommandResult r = Client(
      absl::StrCat("-k --ciphers TLS_CHACHA20_POLY1305_SHA256 -o ", out, " ", Url(port, "/1k")));
  EXPECT_EQ(r.exit_code, 35) << r.output;
  EXPECT_TRUE(absl::StrContains(r.output, "TLS_AES_128_GCM_SHA256, which --ciphers does not allow"))
      << r.output;
  EXPECT_FALSE(std::filesystem::exists(out) && std::filesystem::file_size(out) > 0);
}

TEST_F(PetrelClientTest, VerifiesTheCertificateUnlessToldNotTo) {
  START_GTLS(server, port);
  // The name "localhost" is in the certificate; --connect-to keeps the test off IPv6 "::1".
  const std::string url = absl::StrCat("https://localhost:", port, "/1k");
  const std::string to = absl::StrCat(" --connect-to 127.0.0.1:", port, " ");
  const std::string out = (tmp_ / "verified").string();
  CommandResult r = Client(absl::StrCat("--cacert ", CertFile(), to, "-o ", out, " ", url));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(FileSha256(out), FileSha256(Www("1k")));
  // Without the CA the self-signed certificate is refused: no connection.
  r = Client(absl::StrCat("--timeout 20", to, "-o /dev/null ", url));
  EXPECT_EQ(r.exit_code, 7) << r.output;
}

TEST_F(PetrelClientTest, NotFoundFailsLikeCurlF) {
  START_GTLS(server, port);
  const std::string out = (tmp_ / "missing").string();
  CommandResult r = Client(absl::StrCat("-k -v -o ", out, " ", Url(port, "/no-such-file")));
  EXPECT_EQ(r.exit_code, 22) << r.output;
  EXPECT_TRUE(absl::StrContains(r.output, "answered 404")) << r.output;
  // One bad URL among good ones fails the run, the good ones are still fetched.
  const std::filesystem::path dir = tmp_ / "mixed";
  r = Client(absl::StrCat("-k --download ", dir.string(), " ", Url(port, "/1k"), " ",
                          Url(port, "/nope"), " ", Url(port, "/many/f3")));
  EXPECT_EQ(r.exit_code, 22) << r.output;
  EXPECT_EQ(FileSha256(dir / "1k"), FileSha256(Www("1k")));
  EXPECT_EQ(FileSha256(dir / "many" / "f3"), FileSha256(www() / "many" / "f3"));
}

TEST_F(PetrelClientTest, UnreachableServerFailsWithinTheTimeout) {
  const uint16_t port = PickServerPort();  // nothing listens there
  const auto start = std::chrono::steady_clock::now();
  CommandResult r = Client(absl::StrCat("-k --timeout 2 ", Url(port, "/x")), 30);
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.exit_code, -1) << "killed by the test's own limit";
  EXPECT_LT(elapsed, 4.5) << r.output;
}

TEST_F(PetrelClientTest, AgainstPetrelServer) {
  const std::string bin = EnvOr("PETREL_SERVER");
  ASSERT_FALSE(bin.empty()) << "PETREL_SERVER is not set (run through ctest)";
  // A file server, and the demo site for /echo (which exists only without --root).
  const auto petrel_server = [&](std::vector<std::string> extra) {
    return [&bin, extra](uint16_t port) {
      std::vector<std::string> args = {
          bin,     "--https-port", std::to_string(port), "--cert", CertFile(),
          "--key", KeyFile(),      "--http-port",        "0",      "--workers",
          "0"};
      args.insert(args.end(), extra.begin(), extra.end());
      return args;
    };
  };
  uint16_t files_port = 0;
  std::unique_ptr<ServerProcess> files =
      StartOnFreePort(petrel_server({"--root", www().string()}), "files", &files_port);
  ASSERT_NE(files, nullptr);
  uint16_t demo_port = 0;
  std::unique_ptr<ServerProcess> demo =
      StartOnFreePort(petrel_server({"--max-body", "104857600"}), "demo", &demo_port);
  ASSERT_NE(demo, nullptr);

  const std::string out = (tmp_ / "10m").string();
  CommandResult r = Client(absl::StrCat("-k -v -o ", out, " ", Url(files_port, "/10m")));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(FileSha256(out), FileSha256(Www("10m")));

  // -d @FILE streams the file up; /echo streams it back.
  const std::string echoed = (tmp_ / "echoed").string();
  r = Client(absl::StrCat("-k -v -d @", Www("10m"), " -o ", echoed, " ", Url(demo_port, "/echo")));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(absl::StrContains(r.output, "POST https://127.0.0.1")) << r.output;
  EXPECT_EQ(FileSha256(echoed), FileSha256(Www("10m")));

  // -d STRING sends the literal.
  r = Client(absl::StrCat("-k -d 'hello petrel' ", Url(demo_port, "/echo")));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output, "hello petrel");
}

}  // namespace
}  // namespace petrel::tools
