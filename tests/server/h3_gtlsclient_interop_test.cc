// HTTP/3 interop of the petrel-server binary with ngtcp2's example client gtlsclient (ngtcp2
// 0.12.1 + GnuTLS, written by others): the server runs as a child process with --root over a
// directory of 1 KB, 10 MB and 100 MB files, and gtlsclient downloads them byte for byte
// (SHA-256) — plain, with simulated 2 % loss each way, with ChaCha20-Poly1305 only, resumed with
// its GET in 0-RTT (and, as the control, not resumed by a new server process), in QUIC v2 from
// the start or after Version Negotiation, and several files at once on one connection. Parametrized
// on
// --workers 0 (one QUIC loop) and --workers 2 (two QUIC worker threads behind the dispatcher).
//
// What each case asserts about the handshake comes from gtlsclient's own log (without -q):
//   "Negotiated cipher suite is X"          the TLS 1.3 suite
//   "con the negotiated version is 0xV"     the QUIC version
//   "frm tx N 0RTT STREAM(..) id=0x0 ..."   the request went out in 0-RTT
//   "Early data was rejected by server"     printed only when the server refused that 0-RTT
//   "frm rx N Handshake CRYPTO(..) len=L"   the server's Handshake flight; it carries the
//                                           certificate only in a full (not resumed) handshake
// The server's path comes from the PETREL_SERVER environment variable (set by CMake).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "support/command.h"
#include "support/server_port.h"

extern char** environ;

namespace petrel::testing {
namespace {

constexpr char kClient[] = "/usr/bin/gtlsclient";
// gtlsclient's --ciphers takes a GnuTLS priority string (it rejects the IANA name
// TLS_CHACHA20_POLY1305_SHA256 with "gnutls_priority_set_direct failed"): TLS 1.3, ChaCha20 only.
constexpr char kChaChaOnly[] = "NORMAL:-VERS-ALL:+VERS-TLS1.3:-CIPHER-ALL:+CHACHA20-POLY1305";
// The provisional QUIC v2 code point ngtcp2 0.12.1 speaks ("v2draft" in gtlsclient's flags).
constexpr char kV2Draft[] = "0x709a50c4";

// Deterministic, incompressible content: splitmix64, eight bytes per step.
std::string RandomBytes(size_t size, uint64_t seed) {
  std::string s(size, '\0');
  uint64_t x = seed;
  for (size_t i = 0; i < size; i += 8) {
    uint64_t z = (x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    for (size_t j = 0; j < 8 && i + j < size; ++j) s[i + j] = static_cast<char>(z >> (8 * j));
  }
  return s;
}

// petrel-server as a child process. Its stdout is a pipe: the "listening" line there means
// Start() returned, so TCP and UDP are bound; EOF on it means the process is gone. Its stderr
// (the server's log) goes to a file that failures print.
class ServerProcess {
 public:
  ServerProcess() = default;
  ~ServerProcess() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    if (out_fd_ >= 0) ::close(out_fd_);
  }
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  absl::Status Start(const std::string& binary, const std::vector<std::string>& args,
                     const std::string& log_path) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) return absl::InternalError("pipe2");
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
    posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, log_path.c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC, 0644);
    std::vector<char*> argv;
    argv.push_back(const_cast<char*>(binary.c_str()));
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    const int rc = ::posix_spawn(&pid_, binary.c_str(), &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    ::close(fds[1]);
    out_fd_ = fds[0];
    if (rc != 0) {
      pid_ = -1;
      return absl::InternalError(absl::StrCat("posix_spawn ", binary, ": ", rc));
    }
    if (!ReadStdoutUntil("petrel-server: listening", std::chrono::seconds(15))) {
      return absl::UnavailableError(absl::StrCat("no listening line; stdout: ", stdout_));
    }
    return absl::OkStatus();
  }

  // SIGTERM, then waits (bounded) for the graceful stop; returns the wait status, or -1 when
  // the server did not exit in time (it is then killed).
  int Stop(std::chrono::seconds deadline) {
    if (pid_ <= 0) return -1;
    ::kill(pid_, SIGTERM);
    const bool eof = ReadStdoutUntil("", deadline);
    if (!eof) ::kill(pid_, SIGKILL);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    return eof ? status : -1;
  }

  const std::string& stdout_text() const { return stdout_; }

 private:
  // Reads the server's stdout until it contains `needle` (true), or until EOF (true only for an
  // empty needle, which means "until the process exits"), or until the deadline (false).
  bool ReadStdoutUntil(absl::string_view needle, std::chrono::milliseconds deadline) {
    const auto end = std::chrono::steady_clock::now() + deadline;
    while (needle.empty() || !absl::StrContains(stdout_, needle)) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          end - std::chrono::steady_clock::now());
      if (left.count() <= 0) return false;
      pollfd p{out_fd_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
      char buf[1024];
      const ssize_t n = ::read(out_fd_, buf, sizeof(buf));
      if (n <= 0) return needle.empty();
      stdout_.append(buf, static_cast<size_t>(n));
    }
    return true;
  }

  pid_t pid_ = -1;
  int out_fd_ = -1;
  std::string stdout_;
};

// The site every test serves, made once for the suite: name → SHA-256 of its content.
struct Site {
  TempDir dir;
  std::map<std::string, std::string> sha256;
};

class H3GtlsClientInteropTest : public ::testing::TestWithParam<int> {
 protected:
  static void SetUpTestSuite() {
    site_ = new Site;
    struct File {
      const char* name;
      size_t size;
    };
    uint64_t seed = 1;
    for (const File& f :
         {File{"1k.bin", 1024}, File{"10m.bin", 10 << 20}, File{"100m.bin", 100 << 20},
          File{"a-300k.bin", 300 << 10}, File{"b-300k.bin", 300 << 10}, File{"c-1m.bin", 1 << 20},
          File{"d-3m.bin", 3 << 20}}) {
      const std::string bytes = RandomBytes(f.size, seed++);
      std::ofstream out(site_->dir / f.name, std::ios::binary);
      out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
      site_->sha256[f.name] = Sha256Hex(bytes);
    }
  }
  static void TearDownTestSuite() {
    delete site_;
    site_ = nullptr;
  }

  void SetUp() override {
    if (::access(kClient, X_OK) != 0) GTEST_SKIP() << "gtlsclient (ngtcp2-client) not installed";
    const char* binary = std::getenv("PETREL_SERVER");
    ASSERT_NE(binary, nullptr) << "set PETREL_SERVER to the petrel-server binary";
    ASSERT_EQ(::access(binary, X_OK), 0) << binary;
    ASSERT_FALSE(site_->dir.path().empty());
    ASSERT_FALSE(work_.path().empty());
    std::filesystem::create_directory(downloads());
    binary_ = binary;
    log_path_ = (work_ / "server.log").string();
    StartServer();
  }

  void TearDown() override { StopServer(); }

  // A fresh petrel-server process (so fresh session ticket keys) on a newly picked port.
  void StartServer() {
    // A port picked here can be taken by someone else before the server binds it: retry.
    absl::Status started;
    for (int attempt = 0; attempt < 3; ++attempt) {
      port_ = petrel::testing::PickServerPort();
      ASSERT_NE(port_, 0);
      server_ = std::make_unique<ServerProcess>();
      started = server_->Start(
          binary_,
          {"--listen", "127.0.0.1", "--http-port", "0", "--https-port", absl::StrCat(port_),
           "--root", site_->dir.path().string(), "--workers", absl::StrCat(GetParam())},
          log_path_);
      if (started.ok()) break;
      server_.reset();
    }
    ASSERT_TRUE(started.ok()) << started << "\n" << ReadFile(log_path_);
  }

  // SIGTERM: the server stops gracefully and exits with status 0.
  void StopServer() {
    if (server_ == nullptr) return;
    const int status = server_->Stop(std::chrono::seconds(20));
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << "wait status " << status << "\nstdout: " << server_->stdout_text() << "\nlog:\n"
        << ReadFile(log_path_);
    EXPECT_TRUE(absl::StrContains(server_->stdout_text(), "petrel-server: stopped"))
        << server_->stdout_text();
    server_.reset();
  }

  std::filesystem::path downloads() const { return work_ / "downloads"; }

  // One gtlsclient run (one QUIC connection) requesting `names` from the site, saved under
  // downloads(). `verbose` keeps gtlsclient's handshake and packet log (without STREAM/CRYPTO
  // hex dumps and bodies) in the output; otherwise -q.
  CommandResult Fetch(const std::vector<std::string>& names, const std::string& flags, bool verbose,
                      int timeout_s = 120) {
    std::string urls;
    for (const std::string& n : names) {
      std::filesystem::remove(downloads() / n);
      absl::StrAppend(&urls, " https://127.0.0.1:", port_, "/", n);
    }
    return RunCommand(absl::StrCat(kClient, verbose ? " --no-quic-dump --no-http-dump" : " -q",
                                   " --exit-on-all-streams-close --download ", downloads().string(),
                                   " ", flags, " 127.0.0.1 ", port_, urls),
                      timeout_s);
  }

  // Byte-exact check of a downloaded file against the site's copy.
  void ExpectDownloaded(const std::string& name) const {
    const std::filesystem::path got = downloads() / name;
    ASSERT_TRUE(std::filesystem::exists(got)) << name << " was not downloaded";
    EXPECT_EQ(Sha256Hex(ReadFile(got)), site_->sha256.at(name))
        << name << ": " << std::filesystem::file_size(got) << " bytes differ from the site's";
  }

  std::string ServerLog() const { return ReadFile(log_path_); }

  static Site* site_;
  TempDir work_;
  std::string binary_;
  std::string log_path_;
  uint16_t port_ = 0;
  std::unique_ptr<ServerProcess> server_;
};

Site* H3GtlsClientInteropTest::site_ = nullptr;

// Lines of gtlsclient's log that contain every one of `parts`.
std::vector<absl::string_view> LinesWith(absl::string_view log,
                                         std::initializer_list<absl::string_view> parts) {
  std::vector<absl::string_view> out;
  for (absl::string_view line : absl::StrSplit(log, '\n')) {
    bool all = true;
    for (absl::string_view p : parts) all = all && absl::StrContains(line, p);
    if (all) out.push_back(line);
  }
  return out;
}

// Bytes of CRYPTO data the client received in Handshake packets: the server's
// EncryptedExtensions..Finished flight, Certificate and CertificateVerify included unless the
// handshake resumed a session.
uint64_t HandshakeCryptoBytesReceived(absl::string_view log) {
  uint64_t total = 0;
  for (absl::string_view line : LinesWith(log, {" frm rx ", " Handshake CRYPTO(", " len="})) {
    uint64_t len = 0;
    if (absl::SimpleAtoi(line.substr(line.rfind(" len=") + 5), &len)) total += len;
  }
  return total;
}

// "con the negotiated version is 0x...", the version ngtcp2 settled on for the connection.
std::string NegotiatedVersion(absl::string_view log) {
  constexpr absl::string_view kTag = "con the negotiated version is ";
  const std::vector<absl::string_view> lines = LinesWith(log, {kTag});
  if (lines.empty()) return "";
  absl::string_view line = lines.front();
  return std::string(line.substr(line.find(kTag) + kTag.size()));
}

TEST_P(H3GtlsClientInteropTest, DownloadsEachSizeByteExact) {
  for (const char* name : {"1k.bin", "10m.bin", "100m.bin"}) {
    const CommandResult r = Fetch({name}, "", /*verbose=*/false);
    ASSERT_EQ(r.exit_code, 0) << name << "\n" << r.output << "\n" << ServerLog();
    ExpectDownloaded(name);
  }
}

// All URIs of one gtlsclient run are requests on its one connection, opened together (bidi
// streams 0, 4, 8, ... in URI order) and dispatched as they arrive.
TEST_P(H3GtlsClientInteropTest, SeveralFilesInParallelOnOneConnection) {
  const std::vector<std::string> names = {"1k.bin",   "a-300k.bin", "b-300k.bin",
                                          "c-1m.bin", "d-3m.bin",   "10m.bin"};
  CommandResult r = Fetch(names, "", /*verbose=*/true);
  ASSERT_EQ(r.exit_code, 0) << r.output.substr(0, 20000) << "\n" << ServerLog();
  EXPECT_EQ(LinesWith(r.output, {"QUIC handshake has completed"}).size(), 1u);
  EXPECT_EQ(LinesWith(r.output, {"submit request headers"}).size(), names.size());
  EXPECT_EQ(LinesWith(r.output, {"[:status: 200]"}).size(), names.size());
  for (const std::string& n : names) ExpectDownloaded(n);
  // Requests of equal priority (gtlsclient sends none: urgency 3, not incremental) are answered
  // one after another in the order they came, as RFC 9218 asks of non-incremental responses and
  // nghttp3 schedules them: the 10 MB body (stream 0x14) starts once the 3 MB one (stream 0x10) is
  // out. (Both stay within gtlsclient's windows — 6 MB a stream, 15 MB the connection — until then,
  // so no stream waits for credit and lets the next one go first.) Resent frames of the 3 MB body
  // may still arrive after the 10 MB one began (a loaded machine drops datagrams on loopback);
  // taking turns instead, about half of its frames would.
  std::vector<size_t> frames_3m;
  std::vector<size_t> frames_10m;
  size_t index = 0;
  for (absl::string_view line : LinesWith(r.output, {" frm rx ", " STREAM("})) {
    if (absl::StrContains(line, " id=0x10 ")) frames_3m.push_back(index);
    if (absl::StrContains(line, " id=0x14 ")) frames_10m.push_back(index);
    ++index;
  }
  ASSERT_FALSE(frames_3m.empty() || frames_10m.empty()) << r.output.substr(0, 20000);
  const size_t late = static_cast<size_t>(std::count_if(
      frames_3m.begin(), frames_3m.end(), [&](size_t i) { return i > frames_10m.front(); }));
  EXPECT_LT(late * 20, frames_3m.size()) << late << " of the 3 MB response's " << frames_3m.size()
                                         << " frames came after the 10 MB response began";

  // The big one too, alongside the others (quiet: its packet log would be ~50 MB).
  const std::vector<std::string> with_big = {"100m.bin", "10m.bin", "1k.bin", "d-3m.bin"};
  r = Fetch(with_big, "", /*verbose=*/false);
  ASSERT_EQ(r.exit_code, 0) << r.output << "\n" << ServerLog();
  for (const std::string& n : with_big) ExpectDownloaded(n);
}

// gtlsclient drops 2 % of the packets it sends and of those it receives; loss recovery on both
// sides must still deliver every byte.
TEST_P(H3GtlsClientInteropTest, DownloadsByteExactWithTwoPercentLossEachWay) {
  const std::string loss = "--rx-loss 0.02 --tx-loss 0.02";
  CommandResult r = Fetch({"1k.bin"}, loss, /*verbose=*/false);
  ASSERT_EQ(r.exit_code, 0) << r.output << "\n" << ServerLog();
  ExpectDownloaded("1k.bin");

  r = Fetch({"10m.bin"}, loss, /*verbose=*/true, 180);
  ASSERT_EQ(r.exit_code, 0) << r.output.substr(0, 20000) << "\n" << ServerLog();
  ExpectDownloaded("10m.bin");
  // ~8,000 packets each way at 2 %: the loss really was simulated in both directions.
  EXPECT_GT(LinesWith(r.output, {"Simulated incoming packet loss"}).size(), 10u);
  EXPECT_GT(LinesWith(r.output, {"Simulated outgoing packet loss"}).size(), 1u);
}

TEST_P(H3GtlsClientInteropTest, ChaCha20OnlyNegotiatesChaCha20) {
  const CommandResult r =
      Fetch({"10m.bin", "1k.bin"}, absl::StrCat("--ciphers '", kChaChaOnly, "'"), true);
  ASSERT_EQ(r.exit_code, 0) << r.output.substr(0, 20000) << "\n" << ServerLog();
  const std::vector<absl::string_view> suite = LinesWith(r.output, {"Negotiated cipher suite is"});
  ASSERT_EQ(suite.size(), 1u) << r.output.substr(0, 20000);
  EXPECT_EQ(suite.front(), "Negotiated cipher suite is CHACHA20-POLY1305");
  ExpectDownloaded("10m.bin");
  ExpectDownloaded("1k.bin");
}

// First run: a full handshake; gtlsclient stores the session ticket and the server's transport
// parameters. Second run: it resumes, sends its GET in 0-RTT, and the server accepts it.
TEST_P(H3GtlsClientInteropTest, ResumedSessionGetsItsZeroRttGetAnswered) {
  const std::string session = (work_ / "session.pem").string();
  const std::string tp = (work_ / "tp.txt").string();
  const std::string resume = absl::StrCat("--session-file ", session, " --tp-file ", tp);

  CommandResult r = Fetch({"1k.bin"}, resume, /*verbose=*/true);
  ASSERT_EQ(r.exit_code, 0) << r.output << "\n" << ServerLog();
  ExpectDownloaded("1k.bin");
  ASSERT_TRUE(std::filesystem::exists(session) && std::filesystem::exists(tp)) << r.output;
  EXPECT_TRUE(LinesWith(r.output, {" 0RTT "}).empty()) << "a first connection has no 0-RTT";
  const uint64_t full_flight = HandshakeCryptoBytesReceived(r.output);

  r = Fetch({"10m.bin"}, resume, /*verbose=*/true);
  ASSERT_EQ(r.exit_code, 0) << r.output.substr(0, 20000) << "\n" << ServerLog();
  ExpectDownloaded("10m.bin");
  // The request (HEADERS with FIN on bidi stream 0) left in a 0-RTT packet...
  EXPECT_EQ(LinesWith(r.output, {" frm tx ", " 0RTT STREAM(", " id=0x0 ", " fin=1 "}).size(), 1u)
      << r.output.substr(0, 20000);
  // ...and the server kept it: gtlsclient says so when early data is refused (and then
  // retransmits the request in 1-RTT).
  EXPECT_FALSE(absl::StrContains(r.output, "Early data was rejected by server"))
      << r.output.substr(0, 20000);
  // Resumed: no Certificate/CertificateVerify in the server's Handshake flight (TLS 1.3 only
  // accepts early data on a PSK handshake anyway; this checks the resumption independently).
  const uint64_t resumed_flight = HandshakeCryptoBytesReceived(r.output);
  EXPECT_GT(full_flight, 0u);
  EXPECT_GT(resumed_flight, 0u);
  EXPECT_LT(resumed_flight * 2, full_flight)
      << "full " << full_flight << " bytes, resumed " << resumed_flight;
}

// The control for the signals above: a ticket from a server process that has since been
// replaced cannot be decrypted by the new one, so the handshake is full, gtlsclient reports its
// 0-RTT request rejected, and sends it again in 1-RTT — answered byte for byte all the same.
TEST_P(H3GtlsClientInteropTest, TicketFromAnotherServerProcessIsNotResumed) {
  const std::string session = (work_ / "session.pem").string();
  const std::string tp = (work_ / "tp.txt").string();
  const std::string resume = absl::StrCat("--session-file ", session, " --tp-file ", tp);
  CommandResult r = Fetch({"1k.bin"}, resume, /*verbose=*/true);
  ASSERT_EQ(r.exit_code, 0) << r.output << "\n" << ServerLog();
  ASSERT_TRUE(std::filesystem::exists(session) && std::filesystem::exists(tp)) << r.output;
  const uint64_t first_flight = HandshakeCryptoBytesReceived(r.output);

  StopServer();
  StartServer();
  ASSERT_NE(server_, nullptr);
  r = Fetch({"1k.bin"}, resume, /*verbose=*/true);
  ASSERT_EQ(r.exit_code, 0) << r.output << "\n" << ServerLog();
  EXPECT_EQ(LinesWith(r.output, {" frm tx ", " 0RTT STREAM(", " id=0x0 ", " fin=1 "}).size(), 1u)
      << r.output;
  EXPECT_TRUE(absl::StrContains(r.output, "Early data was rejected by server")) << r.output;
  // Full handshake again: the certificate is back in the server's flight.
  EXPECT_GT(HandshakeCryptoBytesReceived(r.output) * 2, first_flight) << r.output;
  ExpectDownloaded("1k.bin");
}

// gtlsclient starts directly in provisional QUIC v2.
TEST_P(H3GtlsClientInteropTest, ClientStartingInQuicV2GetsV2) {
  const CommandResult r = Fetch({"10m.bin", "1k.bin"}, "-v v2draft", /*verbose=*/true);
  ASSERT_EQ(r.exit_code, 0) << r.output.substr(0, 20000) << "\n" << ServerLog();
  EXPECT_EQ(NegotiatedVersion(r.output), kV2Draft) << r.output.substr(0, 20000);
  EXPECT_FALSE(LinesWith(r.output, {" pkt rx ", absl::StrCat("version=", kV2Draft), "type=Initial"})
                   .empty());
  EXPECT_FALSE(LinesWith(r.output, {"version_information.chosen_version=", kV2Draft}).empty());
  ExpectDownloaded("10m.bin");
  ExpectDownloaded("1k.bin");
}

// A version petrel does not speak gets a Version Negotiation packet listing v1 and v2;
// gtlsclient, preferring v2, reconnects in v2.
TEST_P(H3GtlsClientInteropTest, VersionNegotiationLeadsToQuicV2) {
  const CommandResult r =
      Fetch({"1k.bin"}, "-v 0x1a2a3a4a --preferred-versions v2draft", /*verbose=*/true);
  ASSERT_EQ(r.exit_code, 0) << r.output << "\n" << ServerLog();
  EXPECT_EQ(LinesWith(r.output, {" pkt rx ", "type=VN"}).size(), 1u) << r.output;
  EXPECT_EQ(NegotiatedVersion(r.output), kV2Draft) << r.output;
  ExpectDownloaded("1k.bin");
}

// A v1 client offering v2 in version_information (compatible version negotiation, RFC 9368):
// petrel lists v1 first among its versions and has no option to prefer v2, so it keeps v1,
// while advertising v2 in its own version_information.
TEST_P(H3GtlsClientInteropTest, V1ClientOfferingV2KeepsServerPreferredV1) {
  const CommandResult r = Fetch({"1k.bin"}, "--other-versions v2draft,v1", /*verbose=*/true);
  ASSERT_EQ(r.exit_code, 0) << r.output << "\n" << ServerLog();
  EXPECT_EQ(NegotiatedVersion(r.output), "0x00000001") << r.output;
  EXPECT_FALSE(LinesWith(r.output, {"version_information.other_versions", kV2Draft}).empty())
      << r.output;
  ExpectDownloaded("1k.bin");
}

INSTANTIATE_TEST_SUITE_P(Workers, H3GtlsClientInteropTest, ::testing::Values(0, 2),
                         [](const ::testing::TestParamInfo<int>& p) {
                           return absl::StrCat("Workers", p.param);
                         });

}  // namespace
}  // namespace petrel::testing
