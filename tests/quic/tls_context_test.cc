#include "quic/tls/tls_context.h"

#include <gtest/gtest.h>
#include <openssl/err.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "quic/tls/key_log.h"
#include "quic/tls/ticket_keys.h"

namespace petrel::quic {
namespace {

// Drives a TLS handshake between two SSLs over a non-blocking socketpair on this thread, then
// lets the client read once so that it processes the server's session tickets.
struct Handshake {
  bool client_done = false;
  bool server_done = false;
  int client_error = 0;
  int server_error = 0;
};

Handshake RunHandshake(SSL* client, SSL* server) {
  int fds[2];
  EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, fds), 0);
  SSL_set_fd(client, fds[0]);
  SSL_set_fd(server, fds[1]);
  Handshake h;
  for (int i = 0; i < 100 && !(h.client_done && h.server_done); ++i) {
    if (!h.client_done) {
      // A client resuming a session that allows early data finishes SSL_do_handshake at once,
      // in the early-data state; it is done only when the server's flight is processed.
      int r = SSL_do_handshake(client);
      if (r == 1 && !SSL_in_early_data(client)) h.client_done = true;
      int e = SSL_get_error(client, r);
      if (e == SSL_ERROR_EARLY_DATA_REJECTED) {
        SSL_reset_early_data_reject(client);
        continue;
      }
      if (r != 1 && e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE) {
        h.client_error = e;
        break;
      }
    }
    if (!h.server_done) {
      int r = SSL_do_handshake(server);
      if (r == 1) h.server_done = true;
      int e = SSL_get_error(server, r);
      if (r != 1 && e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE) {
        h.server_error = e;
        break;
      }
    }
  }
  if (h.client_done && h.server_done) {
    const char ping[] = "ping";
    EXPECT_EQ(SSL_write(server, ping, 4), 4);
    char buf[16];
    EXPECT_EQ(SSL_read(client, buf, sizeof(buf)), 4);  // also consumes the NewSessionTickets
  }
  ERR_clear_error();
  close(fds[0]);
  close(fds[1]);
  return h;
}

class TlsContextTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto pem = GenerateSelfSigned({"localhost", "127.0.0.1", "::1"});
    ASSERT_TRUE(pem.ok()) << pem.status();
    pem_ = *pem;
    dir_ = std::filesystem::temp_directory_path() /
           ("petrel-tls-" + std::to_string(getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
    ca_file_ = (dir_ / "cert.pem").string();
    ASSERT_TRUE(WritePemFiles(pem_, ca_file_, (dir_ / "key.pem").string()).ok());
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::unique_ptr<TlsServerContext> Server(std::vector<std::string> alpn,
                                           TicketKeyRing* tickets = nullptr,
                                           KeyLogFile* key_log = nullptr) {
    TlsServerConfig config;
    config.certificate = pem_;
    config.alpn = std::move(alpn);
    config.tickets = tickets;
    config.key_log = key_log;
    auto s = TlsServerContext::Create(config);
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? *std::move(s) : nullptr;
  }

  std::unique_ptr<TlsClientContext> Client(std::vector<std::string> alpn, bool verify = true) {
    TlsClientConfig config;
    config.alpn = std::move(alpn);
    config.verify_peer = verify;
    config.ca_file = ca_file_;
    config.on_new_session = [this](const SSL*, std::string s) {
      sessions_.push_back(std::move(s));
    };
    auto c = TlsClientContext::Create(config);
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? *std::move(c) : nullptr;
  }

  CertificatePem pem_;
  std::filesystem::path dir_;
  std::string ca_file_;
  std::vector<std::string> sessions_;
};

TEST_F(TlsContextTest, HandshakeSelectsServerPreferredAlpnAndSeesSni) {
  auto server = Server({"h3", "hq-interop"});
  auto client = Client({"hq-interop", "h3"});
  auto c = client->NewSsl("localhost");
  ASSERT_TRUE(c.ok()) << c.status();
  auto s = server->NewSsl();
  Handshake h = RunHandshake(c->get(), s.get());
  ASSERT_TRUE(h.client_done && h.server_done) << h.client_error << " " << h.server_error;
  EXPECT_EQ(SelectedAlpn(c->get()), "h3");
  EXPECT_EQ(SelectedAlpn(s.get()), "h3");
  EXPECT_EQ(ServerName(s.get()), "localhost");
  EXPECT_EQ(SSL_version(c->get()), TLS1_3_VERSION);
}

TEST_F(TlsContextTest, VerifiesIpAddressAndRejectsWrongHost) {
  auto server = Server({"h3"});
  auto client = Client({"h3"});
  auto ip = client->NewSsl("127.0.0.1");
  auto s1 = server->NewSsl();
  ASSERT_TRUE(ip.ok());
  Handshake ok = RunHandshake(ip->get(), s1.get());
  EXPECT_TRUE(ok.client_done && ok.server_done);
  EXPECT_TRUE(ServerName(s1.get()).empty());  // no SNI for IP literals

  auto wrong = client->NewSsl("example.com");
  auto s2 = server->NewSsl();
  Handshake bad = RunHandshake(wrong->get(), s2.get());
  EXPECT_FALSE(bad.client_done);
  EXPECT_NE(SSL_get_verify_result(wrong->get()), X509_V_OK);
}

// A renewed certificate: every handshake that reaches the certificate after ReplaceCertificates
// presents it (also on an SSL made before), and a key that does not match the certificate, or
// text that is not PEM, is refused with nothing changed.
TEST_F(TlsContextTest, ReplacedCertificateServesTheHandshakesThatFollow) {
  auto other = GenerateSelfSigned({"localhost"});
  ASSERT_TRUE(other.ok());
  TlsServerConfig config;
  config.certificate = *other;  // the client does not trust this one
  config.alpn = {"h3"};
  auto server = TlsServerContext::Create(config);
  ASSERT_TRUE(server.ok());
  auto client = Client({"h3"});  // trusts pem_
  auto before = (*server)->NewSsl();
  auto c0 = client->NewSsl("localhost");
  EXPECT_FALSE(RunHandshake(c0->get(), before.get()).client_done);

  const CertificatePem mismatched{pem_.certificate_chain, other->private_key};
  absl::Status refused = (*server)->ReplaceCertificates(mismatched, {});
  EXPECT_FALSE(refused.ok());
  EXPECT_NE(refused.message().find("does not match"), std::string::npos) << refused;
  EXPECT_FALSE((*server)->ReplaceCertificates(CertificatePem{"junk", "junk"}, {}).ok());
  auto still_old = (*server)->NewSsl();
  auto c1 = client->NewSsl("localhost");
  EXPECT_FALSE(RunHandshake(c1->get(), still_old.get()).client_done);

  auto made_before = (*server)->NewSsl();
  ASSERT_TRUE((*server)->ReplaceCertificates(pem_, {}).ok());
  auto after = (*server)->NewSsl();
  auto c2 = client->NewSsl("localhost");
  Handshake h = RunHandshake(c2->get(), after.get());
  EXPECT_TRUE(h.client_done && h.server_done) << h.client_error << " " << h.server_error;
  // The certificate is chosen when the handshake reaches it, so an SSL made before the
  // replacement but not yet in its handshake presents the new one as well.
  auto c3 = client->NewSsl("localhost");
  EXPECT_TRUE(RunHandshake(c3->get(), made_before.get()).client_done);
}

TEST_F(TlsContextTest, UntrustedCertificateFailsUnlessVerificationIsOff) {
  auto other = GenerateSelfSigned({"localhost"});
  ASSERT_TRUE(other.ok());
  TlsServerConfig config;
  config.certificate = *other;
  config.alpn = {"h3"};
  auto server = TlsServerContext::Create(config);
  ASSERT_TRUE(server.ok());
  auto strict = Client({"h3"});
  auto c1 = strict->NewSsl("localhost");
  auto s1 = (*server)->NewSsl();
  EXPECT_FALSE(RunHandshake(c1->get(), s1.get()).client_done);

  auto lax = Client({"h3"}, /*verify=*/false);
  auto c2 = lax->NewSsl("localhost");
  auto s2 = (*server)->NewSsl();
  Handshake h = RunHandshake(c2->get(), s2.get());
  EXPECT_TRUE(h.client_done && h.server_done);
}

TEST_F(TlsContextTest, NoCommonAlpnFailsHandshake) {
  auto server = Server({"h3"});
  auto client = Client({"h2"});
  auto c = client->NewSsl("localhost");
  auto s = server->NewSsl();
  Handshake h = RunHandshake(c->get(), s.get());
  EXPECT_FALSE(h.server_done);
}

TEST_F(TlsContextTest, ResumesWithTicketsUntilTheirKeyRotatesOut) {
  TimePoint now = MonotonicNow();
  TicketKeyRing ring(std::chrono::hours(1), /*keys_kept=*/2);
  ring.SetClockForTest([&now] { return now; });
  auto server = Server({"h3"}, &ring);
  auto client = Client({"h3"});

  auto c1 = client->NewSsl("localhost");
  auto s1 = server->NewSsl();
  ASSERT_TRUE(RunHandshake(c1->get(), s1.get()).client_done);
  ASSERT_FALSE(sessions_.empty());
  EXPECT_FALSE(SSL_session_reused(c1->get()));
  const std::string ticket = sessions_.back();

  // One rotation later the ticket's key still opens it.
  now += std::chrono::minutes(61);
  auto c2 = client->NewSsl("localhost", ticket);
  ASSERT_TRUE(c2.ok()) << c2.status();
  auto s2 = server->NewSsl();
  ASSERT_TRUE(RunHandshake(c2->get(), s2.get()).client_done);
  EXPECT_TRUE(SSL_session_reused(c2->get()));
  EXPECT_TRUE(SSL_session_reused(s2.get()));

  // Two rotations later its key has left the ring: a full handshake.
  now += std::chrono::minutes(61);
  auto c3 = client->NewSsl("localhost", ticket);
  auto s3 = server->NewSsl();
  ASSERT_TRUE(RunHandshake(c3->get(), s3.get()).client_done);
  EXPECT_FALSE(SSL_session_reused(c3->get()));
  EXPECT_EQ(ring.keys_generated(), 3u);
}

TEST_F(TlsContextTest, WritesNssKeyLog) {
  const std::string path = (dir_ / "keys.log").string();
  auto log = KeyLogFile::Open(path);
  ASSERT_TRUE(log.ok());
  auto server = Server({"h3"}, nullptr, log->get());
  auto client = Client({"h3"});
  auto c = client->NewSsl("localhost");
  auto s = server->NewSsl();
  ASSERT_TRUE(RunHandshake(c->get(), s.get()).server_done);
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  for (const char* label : {"CLIENT_HANDSHAKE_TRAFFIC_SECRET ", "SERVER_HANDSHAKE_TRAFFIC_SECRET ",
                            "CLIENT_TRAFFIC_SECRET_0 ", "SERVER_TRAFFIC_SECRET_0 "}) {
    EXPECT_NE(text.str().find(label), std::string::npos) << label;
  }
  // Each line: label, 64 hex digits of client random, the secret.
  std::string line;
  std::istringstream lines(text.str());
  while (std::getline(lines, line)) {
    std::istringstream fields(line);
    std::string label, random, secret;
    fields >> label >> random >> secret;
    EXPECT_EQ(random.size(), 64u) << line;
    EXPECT_GE(secret.size(), 64u) << line;
  }
}

TEST_F(TlsContextTest, PemFilesRoundTripAndBadKeyIsRefused) {
  auto read = ReadPemFiles(ca_file_, (dir_ / "key.pem").string());
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->certificate_chain, pem_.certificate_chain);
  EXPECT_EQ(
      std::filesystem::status(dir_ / "key.pem").permissions() & std::filesystem::perms::others_read,
      std::filesystem::perms::none);
  EXPECT_FALSE(ReadPemFiles((dir_ / "missing.pem").string(), ca_file_).ok());

  auto other = GenerateSelfSigned({"localhost"});
  TlsServerConfig mismatched;
  mismatched.certificate = {pem_.certificate_chain, other->private_key};
  mismatched.alpn = {"h3"};
  auto s = TlsServerContext::Create(mismatched);
  EXPECT_FALSE(s.ok());
}

}  // namespace
}  // namespace petrel::quic

namespace petrel::quic {
namespace {

// Whether the certificate `client` got in its handshake is valid for `name`.
bool PeerCertificateIsFor(SSL* client, const std::string& name) {
  bssl::UniquePtr<X509> cert(SSL_get_peer_certificate(client));
  return cert != nullptr && X509_check_host(cert.get(), name.data(), name.size(), 0, nullptr) == 1;
}

// Certificates chosen by the client's server name: exact names, one-label wildcards, and the
// default for every other name and for no SNI at all; then the whole set replaced at once.
TEST_F(TlsContextTest, NamedCertificatesAreChosenBySni) {
  auto a = GenerateSelfSigned({"a.example", "www.a.example"});
  auto b = GenerateSelfSigned({"*.b.example"});
  ASSERT_TRUE(a.ok() && b.ok());
  TlsServerConfig config;
  config.certificate = pem_;  // localhost
  config.named_certificates = {{{"a.example", "www.a.example"}, *a}, {{"*.b.example"}, *b}};
  config.alpn = {"h3"};
  auto server = TlsServerContext::Create(config);
  ASSERT_TRUE(server.ok()) << server.status();
  auto client = Client({"h3"}, /*verify=*/false);
  auto presented_for = [&](const std::string& sni, const std::string& name) {
    auto c = client->NewSsl(sni);
    auto s = (*server)->NewSsl();
    EXPECT_TRUE(RunHandshake(c->get(), s.get()).client_done) << sni;
    return PeerCertificateIsFor(c->get(), name);
  };
  EXPECT_TRUE(presented_for("a.example", "a.example"));
  EXPECT_TRUE(presented_for("WWW.A.EXAMPLE", "www.a.example"));
  EXPECT_TRUE(presented_for("x.b.example", "x.b.example"));
  EXPECT_TRUE(presented_for("b.example", "localhost"));      // not covered by the wildcard
  EXPECT_TRUE(presented_for("y.x.b.example", "localhost"));  // nor two labels
  EXPECT_TRUE(presented_for("other.example", "localhost"));
  EXPECT_TRUE(presented_for("127.0.0.1", "localhost"));  // an IP literal sends no SNI

  // A bad certificate anywhere in the new set, or a name given twice, changes nothing.
  const CertificatePem broken{a->certificate_chain, b->private_key};
  EXPECT_FALSE((*server)->ReplaceCertificates(pem_, {{{"a.example"}, broken}}).ok());
  EXPECT_FALSE(
      (*server)->ReplaceCertificates(pem_, {{{"a.example"}, *a}, {{"a.example"}, *b}}).ok());
  EXPECT_TRUE(presented_for("a.example", "a.example"));
  // A new set: b's certificate is the default now, and a.example gets the localhost one.
  ASSERT_TRUE((*server)->ReplaceCertificates(*b, {{{"a.example"}, pem_}}).ok());
  EXPECT_TRUE(presented_for("a.example", "localhost"));
  EXPECT_TRUE(presented_for("x.b.example", "x.b.example"));  // now through the default
  EXPECT_TRUE(presented_for("other.example", "q.b.example"));
}

TEST(CertificateCoversTest, DnsNamesWildcardsAndIpAddresses) {
  auto pem = GenerateSelfSigned({"a.example", "*.b.example", "127.0.0.1", "::1"});
  ASSERT_TRUE(pem.ok());
  auto leaf = LeafCertificate(*pem);
  ASSERT_TRUE(leaf.ok()) << leaf.status();
  X509* cert = leaf->get();
  EXPECT_TRUE(CertificateCovers(cert, "a.example"));
  EXPECT_TRUE(CertificateCovers(cert, "A.EXAMPLE"));
  EXPECT_TRUE(CertificateCovers(cert, "x.b.example"));
  EXPECT_FALSE(CertificateCovers(cert, "b.example"));
  EXPECT_FALSE(CertificateCovers(cert, "y.x.b.example"));
  EXPECT_FALSE(CertificateCovers(cert, "c.example"));
  EXPECT_TRUE(CertificateCovers(cert, "127.0.0.1"));
  EXPECT_TRUE(CertificateCovers(cert, "::1"));
  EXPECT_FALSE(CertificateCovers(cert, "127.0.0.2"));
  EXPECT_FALSE(CertificateCovers(cert, ""));
  EXPECT_FALSE(LeafCertificate(CertificatePem{"junk", ""}).ok());
}

}  // namespace
}  // namespace petrel::quic
