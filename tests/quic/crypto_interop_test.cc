// Petrel's crypto glue as a QUIC client of gtlsserver — ngtcp2 0.12.1's example server built on
// GnuTLS and libngtcp2_crypto_gnutls (Debian package ngtcp2-server) — over loopback UDP. The
// peer shares only the ngtcp2 core with Petrel, so a completed handshake and key update prove
// the key schedule against an independent crypto helper: the provisional v2 (0x709a50c4)
// constants of version_params.cc (salt, labels, "quic ku", Retry key), compatible version
// negotiation, Retry, and AES-256-GCM, which two BoringSSL (API 17) endpoints never negotiate.
// Skipped when gtlsserver is not installed.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <openssl/bio.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "quic/crypto/cipher_suite.h"
#include "quic/crypto/tls_session.h"
#include "quic/quic_pair_harness.h"
#include "support/server_port.h"

namespace petrel::quic::crypto {
namespace {

using testing::Endpoint;
using testing::MakeClientCtx;
using testing::MakeSelfSignedP256;
using testing::NewClientSsl;
using testing::TestCallbacks;
using testing::TestCertificate;
using testing::TestTransportParams;

constexpr auto kCaseDeadline = std::chrono::seconds(20);

ngtcp2_tstamp Now() {
  return static_cast<ngtcp2_tstamp>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                        std::chrono::steady_clock::now().time_since_epoch())
                                        .count());
}

std::string FindGtlsServer() {
  for (const char* path : {"/usr/sbin/gtlsserver", "/usr/bin/gtlsserver"}) {
    if (access(path, X_OK) == 0) return path;
  }
  return {};
}

sockaddr_in LoopbackAddr(uint16_t port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return addr;
}

// A UDP port that was free a moment ago.
bool PortIsBound(uint16_t port) {
  const int fd = socket(AF_INET, SOCK_DGRAM, 0);
  sockaddr_in addr = LoopbackAddr(port);
  const bool in_use =
      bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 && errno == EADDRINUSE;
  close(fd);
  return in_use;
}

// gtlsserver in a child process, with the test's certificate in a temporary directory.
class GtlsServer {
 public:
  GtlsServer(const TestCertificate& cert, std::vector<std::string> extra_args)
      : port_(petrel::testing::PickServerPort()) {
    char dir_template[] = "/tmp/petrel-interop-XXXXXX";
    dir_ = mkdtemp(dir_template);
    key_path_ = dir_ + "/key.pem";
    cert_path_ = dir_ + "/cert.pem";
    bssl::UniquePtr<BIO> key_bio(BIO_new_file(key_path_.c_str(), "w"));
    bssl::UniquePtr<BIO> cert_bio(BIO_new_file(cert_path_.c_str(), "w"));
    EXPECT_EQ(PEM_write_bio_PrivateKey(key_bio.get(), cert.key.get(), nullptr, nullptr, 0, nullptr,
                                       nullptr),
              1);
    EXPECT_EQ(PEM_write_bio_X509(cert_bio.get(), cert.cert.get()), 1);
    key_bio.reset();
    cert_bio.reset();

    std::vector<std::string> args = {FindGtlsServer(), "--quiet", "-d", dir_};
    args.insert(args.end(), extra_args.begin(), extra_args.end());
    args.insert(args.end(), {"127.0.0.1", std::to_string(port_), key_path_, cert_path_});
    std::vector<char*> argv;
    for (std::string& arg : args) argv.push_back(arg.data());
    argv.push_back(nullptr);
    pid_ = fork();
    if (pid_ == 0) {
      // The child dies with the test, even if the test aborts.
      prctl(PR_SET_PDEATHSIG, SIGTERM);
      const int devnull = open("/dev/null", O_WRONLY);
      dup2(devnull, STDOUT_FILENO);
      dup2(devnull, STDERR_FILENO);
      execv(argv[0], argv.data());
      _exit(127);
    }
    EXPECT_GT(pid_, 0);
  }

  ~GtlsServer() {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      waitpid(pid_, nullptr, 0);
    }
    unlink(key_path_.c_str());
    unlink(cert_path_.c_str());
    rmdir(dir_.c_str());
  }

  // Waits (bounded) until the server has bound its port.
  bool WaitReady() {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (std::chrono::steady_clock::now() < deadline) {
      if (PortIsBound(port_)) return true;
      if (waitpid(pid_, nullptr, WNOHANG) == pid_) {
        pid_ = -1;
        return false;  // exited: bad arguments?
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }

  uint16_t port() const { return port_; }

 private:
  uint16_t port_;
  pid_t pid_ = -1;
  std::string dir_;
  std::string key_path_;
  std::string cert_path_;
};

// A Petrel-glue client endpoint on a real UDP socket.
class UdpClient {
 public:
  UdpClient(SSL_CTX* ctx, uint16_t server_port, uint32_t version,
            std::vector<uint32_t> preferred_versions)
      : preferred_(std::move(preferred_versions)) {
    fd_ = socket(AF_INET, SOCK_DGRAM, 0);
    sockaddr_in local = LoopbackAddr(0);
    EXPECT_EQ(bind(fd_, reinterpret_cast<sockaddr*>(&local), sizeof(local)), 0);
    socklen_t len = sizeof(local);
    getsockname(fd_, reinterpret_cast<sockaddr*>(&local), &len);
    e_.local = local;
    e_.remote = LoopbackAddr(server_port);

    absl::StatusOr<std::unique_ptr<TlsSession>> tls =
        TlsSession::Create(NewClientSsl(ctx, "h3"), /*is_server=*/false);
    EXPECT_TRUE(tls.ok()) << tls.status();
    e_.tls = std::move(*tls);
    ngtcp2_settings settings;
    ngtcp2_settings_default(&settings);
    settings.initial_ts = Now();
    if (!preferred_.empty()) {
      settings.preferred_versions = preferred_.data();
      settings.preferred_versionslen = preferred_.size();
      settings.other_versions = preferred_.data();
      settings.other_versionslen = preferred_.size();
    }
    const ngtcp2_transport_params params = TestTransportParams();
    const ngtcp2_callbacks cb = TestCallbacks(false);
    ngtcp2_cid dcid, scid;
    dcid.datalen = 18;
    scid.datalen = 16;
    RAND_bytes(dcid.data, dcid.datalen);
    RAND_bytes(scid.data, scid.datalen);
    const ngtcp2_path path = e_.path();
    const int rv = ngtcp2_conn_client_new(&e_.conn, &dcid, &scid, &path, version, &cb, &settings,
                                          &params, nullptr, &e_);
    EXPECT_EQ(rv, 0) << ngtcp2_strerror(rv);
    EXPECT_TRUE(e_.tls->Attach(e_.conn).ok());
  }

  ~UdpClient() {
    ngtcp2_conn_del(e_.conn);
    close(fd_);
  }

  Endpoint& endpoint() { return e_; }

  // Exchanges packets with the server until `step()` is true or the deadline passes.
  bool Run(absl::FunctionRef<bool()> step) {
    const auto deadline = std::chrono::steady_clock::now() + kCaseDeadline;
    while (std::chrono::steady_clock::now() < deadline) {
      if (step()) return true;
      if (e_.failed()) return false;
      WritePackets();
      const ngtcp2_tstamp expiry = ngtcp2_conn_get_expiry(e_.conn);
      const ngtcp2_tstamp now = Now();
      const int timeout_ms =
          expiry <= now ? 0
                        : static_cast<int>(std::min<ngtcp2_tstamp>((expiry - now) / 1000000, 50));
      pollfd pfd{fd_, POLLIN, 0};
      poll(&pfd, 1, timeout_ms);
      ReadPackets();
      if (ngtcp2_conn_get_expiry(e_.conn) <= Now()) {
        const int rv = ngtcp2_conn_handle_expiry(e_.conn, Now());
        if (rv != 0) e_.read_error = rv;
      }
    }
    return step();
  }

  void Close() {
    ngtcp2_connection_close_error ccerr;
    ngtcp2_connection_close_error_default(&ccerr);
    ngtcp2_connection_close_error_set_application_error(&ccerr, 0x100 /* H3_NO_ERROR */, nullptr,
                                                        0);
    uint8_t buf[1500];
    ngtcp2_path_storage ps;
    ngtcp2_path_storage_zero(&ps);
    ngtcp2_pkt_info pi{};
    const ngtcp2_ssize n =
        ngtcp2_conn_write_connection_close(e_.conn, &ps.path, &pi, buf, sizeof(buf), &ccerr, Now());
    if (n > 0) Send(buf, static_cast<size_t>(n));
  }

 private:
  void Send(const uint8_t* data, size_t len) {
    sendto(fd_, data, len, 0, reinterpret_cast<const sockaddr*>(&e_.remote), sizeof(e_.remote));
  }

  void WritePackets() {
    for (int i = 0; i < 64; ++i) {
      uint8_t buf[1500];
      ngtcp2_path_storage ps;
      ngtcp2_path_storage_zero(&ps);
      ngtcp2_pkt_info pi{};
      const ngtcp2_ssize n = ngtcp2_conn_write_pkt(e_.conn, &ps.path, &pi, buf, sizeof(buf), Now());
      if (n < 0) {
        e_.write_error = static_cast<int>(n);
        return;
      }
      if (n == 0) return;
      Send(buf, static_cast<size_t>(n));
    }
  }

  void ReadPackets() {
    for (;;) {
      uint8_t buf[2048];
      const ssize_t n = recv(fd_, buf, sizeof(buf), MSG_DONTWAIT);
      if (n <= 0) return;  // EAGAIN, or ECONNREFUSED before the server is up
      const ngtcp2_path path = e_.path();
      const ngtcp2_pkt_info pi{};
      const int rv = ngtcp2_conn_read_pkt(e_.conn, &path, &pi, buf, static_cast<size_t>(n), Now());
      if (rv != 0) {
        e_.read_error = rv;
        return;
      }
      ++e_.packets_received;
    }
  }

  std::vector<uint32_t> preferred_;
  int fd_ = -1;
  Endpoint e_;
};

struct InteropCase {
  const char* name;
  std::vector<std::string> server_args;
  uint32_t client_version;
  std::vector<uint32_t> client_preferred_versions;
  uint16_t expected_cipher;
  uint32_t expected_version;
  bool expect_retry;
};

class GtlsInteropTest : public ::testing::TestWithParam<InteropCase> {};

TEST_P(GtlsInteropTest, HandshakeAndKeyUpdate) {
  if (FindGtlsServer().empty()) GTEST_SKIP() << "gtlsserver (package ngtcp2-server) not installed";
  const InteropCase& c = GetParam();
  const TestCertificate cert = MakeSelfSignedP256();
  bssl::UniquePtr<SSL_CTX> ctx = MakeClientCtx(cert.cert.get());
  GtlsServer server(cert, c.server_args);
  ASSERT_TRUE(server.WaitReady()) << "gtlsserver did not start";

  UdpClient client(ctx.get(), server.port(), c.client_version, c.client_preferred_versions);
  Endpoint& e = client.endpoint();
  ASSERT_TRUE(client.Run([&] { return e.handshake_completed; }))
      << "handshake: " << ngtcp2_strerror(e.read_error) << " / " << ngtcp2_strerror(e.write_error)
      << ", alert " << int{ngtcp2_conn_get_tls_alert(e.conn)};
  EXPECT_EQ(ngtcp2_conn_get_negotiated_version(e.conn), c.expected_version);
  EXPECT_EQ(c.expect_retry, ngtcp2_conn_after_retry(e.conn) != 0);
  const SSL_CIPHER* cipher = SSL_get_current_cipher(e.tls->ssl());
  ASSERT_NE(cipher, nullptr);
  EXPECT_EQ(SSL_CIPHER_get_protocol_id(cipher), c.expected_cipher) << SSL_CIPHER_get_name(cipher);

  // Key update once the handshake is confirmed; PINGs (keep-alive) then make the server
  // answer. Our updated-key packets must open on the server (else it never updates) and its
  // updated-key packets must open here.
  ngtcp2_conn_set_keep_alive_timeout(e.conn, 20 * NGTCP2_MILLISECONDS);
  bool initiated = false;
  ASSERT_TRUE(client.Run([&] {
    if (!initiated && e.handshake_confirmed &&
        ngtcp2_conn_initiate_key_update(e.conn, Now()) == 0) {
      initiated = true;
    }
    return initiated && e.sealed_with_updated_keys > 0 && e.opened_with_updated_keys > 0;
  })) << "key update: initiated="
      << initiated << " sealed=" << e.sealed_with_updated_keys
      << " opened=" << e.opened_with_updated_keys << " error=" << ngtcp2_strerror(e.read_error);
  EXPECT_FALSE(e.failed());
  client.Close();
}

INSTANTIATE_TEST_SUITE_P(
    Cases, GtlsInteropTest,
    ::testing::Values(
        InteropCase{"V1Aes256Gcm",
                    {"--ciphers=NORMAL:-VERS-ALL:+VERS-TLS1.3:-CIPHER-ALL:+AES-256-GCM"},
                    NGTCP2_PROTO_VER_V1,
                    {},
                    kTlsAes256GcmSha384,
                    NGTCP2_PROTO_VER_V1,
                    false},
        InteropCase{"V2DraftChaCha20",
                    {"--ciphers=NORMAL:-VERS-ALL:+VERS-TLS1.3:-CIPHER-ALL:+CHACHA20-POLY1305",
                     "--preferred-versions=v2draft,v1"},
                    NGTCP2_PROTO_VER_V2_DRAFT,
                    {NGTCP2_PROTO_VER_V2_DRAFT, NGTCP2_PROTO_VER_V1},
                    kTlsChaCha20Poly1305Sha256,
                    NGTCP2_PROTO_VER_V2_DRAFT,
                    false},
        InteropCase{"V1ToV2DraftByCompatibleNegotiationAes128Gcm",
                    {"--ciphers=NORMAL:-VERS-ALL:+VERS-TLS1.3:-CIPHER-ALL:+AES-128-GCM",
                     "--preferred-versions=v2draft,v1"},
                    NGTCP2_PROTO_VER_V1,
                    {NGTCP2_PROTO_VER_V2_DRAFT, NGTCP2_PROTO_VER_V1},
                    kTlsAes128GcmSha256,
                    NGTCP2_PROTO_VER_V2_DRAFT,
                    false},
        InteropCase{"RetryV2Draft",
                    {"--validate-addr", "--preferred-versions=v2draft,v1"},
                    NGTCP2_PROTO_VER_V2_DRAFT,
                    {NGTCP2_PROTO_VER_V2_DRAFT, NGTCP2_PROTO_VER_V1},
                    kTlsAes128GcmSha256,
                    NGTCP2_PROTO_VER_V2_DRAFT,
                    true},
        InteropCase{"RetryV1ThenV2Draft",
                    {"--validate-addr", "--preferred-versions=v2draft,v1"},
                    NGTCP2_PROTO_VER_V1,
                    {NGTCP2_PROTO_VER_V2_DRAFT, NGTCP2_PROTO_VER_V1},
                    kTlsAes128GcmSha256,
                    NGTCP2_PROTO_VER_V2_DRAFT,
                    true}),
    [](const ::testing::TestParamInfo<InteropCase>& param_info) {
      return std::string(param_info.param.name);
    });

}  // namespace
}  // namespace petrel::quic::crypto
