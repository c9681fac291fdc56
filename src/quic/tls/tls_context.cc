#include "quic/tls/tls_context.h"

#include <arpa/inet.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/pool.h>
#include <openssl/x509.h>
#include <unistd.h>

#include <cstring>
#include <mutex>
#include <optional>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/host_name.h"
#include "quic/tls/key_log.h"
#include "quic/tls/ticket_keys.h"

namespace petrel::quic {
namespace {

constexpr const char* kSystemCaBundle = "/etc/ssl/certs/ca-certificates.crt";

absl::Status SslError(absl::string_view what) {
  char buf[256] = "unknown error";
  if (uint32_t e = ERR_get_error(); e != 0) ERR_error_string_n(e, buf, sizeof(buf));
  ERR_clear_error();
  return absl::InvalidArgumentError(absl::StrCat(what, ": ", buf));
}

int ContextIndex() {
  static const int index = SSL_CTX_get_ex_new_index(0, nullptr, nullptr, nullptr, nullptr);
  return index;
}

template <typename T>
T* ContextOf(const SSL* ssl) {
  return static_cast<T*>(SSL_CTX_get_ex_data(SSL_get_SSL_CTX(ssl), ContextIndex()));
}

// Server preference: the first protocol of ours that the client offers.
int SelectAlpn(SSL* ssl, const uint8_t** out, uint8_t* out_len, const uint8_t* in, unsigned in_len,
               void*) {
  const auto* server = ContextOf<TlsServerContext>(ssl);
  const std::vector<uint8_t>& ours = server->alpn_wire();
  for (size_t i = 0; i < ours.size(); i += 1 + ours[i]) {
    for (unsigned j = 0; j < in_len; j += 1u + in[j]) {
      if (j + 1u + in[j] > in_len) break;  // malformed list: BoringSSL checks too
      if (ours[i] == in[j] && std::memcmp(&ours[i + 1], &in[j + 1], ours[i]) == 0) {
        *out = &in[j + 1];
        *out_len = in[j];
        return SSL_TLSEXT_ERR_OK;
      }
    }
  }
  return SSL_TLSEXT_ERR_ALERT_FATAL;  // no_application_protocol
}

}  // namespace

// A parsed certificate chain and key, as SSL_set_chain_and_key takes them.
struct ServerCredential {
  std::vector<bssl::UniquePtr<CRYPTO_BUFFER>> chain;  // leaf first
  std::vector<CRYPTO_BUFFER*> raw_chain;
  bssl::UniquePtr<EVP_PKEY> key;
};

// What SelectCertificate chooses from: a credential per name, and the default one (null: the
// SSL_CTX's own, set at creation).
struct CertificateSet {
  std::shared_ptr<const ServerCredential> fallback;
  std::vector<std::shared_ptr<const ServerCredential>> named;
  HostTable names;  // -> index into `named`
};

namespace {

absl::StatusOr<std::shared_ptr<const ServerCredential>> ParseCredential(const CertificatePem& pem) {
  auto c = std::make_shared<ServerCredential>();
  bssl::UniquePtr<BIO> key_bio(
      BIO_new_mem_buf(pem.private_key.data(), static_cast<int>(pem.private_key.size())));
  c->key.reset(PEM_read_bio_PrivateKey(key_bio.get(), nullptr, nullptr, nullptr));
  if (!c->key) return SslError("private key PEM");
  bssl::UniquePtr<BIO> cert_bio(BIO_new_mem_buf(pem.certificate_chain.data(),
                                                static_cast<int>(pem.certificate_chain.size())));
  while (true) {
    bssl::UniquePtr<X509> cert(PEM_read_bio_X509(cert_bio.get(), nullptr, nullptr, nullptr));
    if (!cert) break;
    if (c->chain.empty() && !X509_check_private_key(cert.get(), c->key.get())) {
      return SslError("private key does not match certificate");
    }
    uint8_t* der = nullptr;
    const int len = i2d_X509(cert.get(), &der);
    if (len <= 0) return SslError("certificate DER");
    c->chain.emplace_back(CRYPTO_BUFFER_new(der, static_cast<size_t>(len), nullptr));
    OPENSSL_free(der);
    if (!c->chain.back()) return SslError("certificate buffer");
    c->raw_chain.push_back(c->chain.back().get());
  }
  ERR_clear_error();  // the loop ends on a "no start line" error
  if (c->chain.empty()) return SslError("certificate PEM");
  return std::shared_ptr<const ServerCredential>(std::move(c));
}

absl::StatusOr<std::shared_ptr<const CertificateSet>> ParseCertificateSet(
    const CertificatePem* default_pem, const std::vector<NamedCertificate>& named) {
  auto set = std::make_shared<CertificateSet>();
  if (default_pem != nullptr) {
    absl::StatusOr<std::shared_ptr<const ServerCredential>> c = ParseCredential(*default_pem);
    if (!c.ok()) return c.status();
    set->fallback = *std::move(c);
  }
  for (const NamedCertificate& n : named) {
    const std::string label = n.names.empty() ? std::string("(no name)") : n.names[0];
    if (n.names.empty()) return absl::InvalidArgumentError("a named certificate without names");
    absl::StatusOr<std::shared_ptr<const ServerCredential>> c = ParseCredential(n.pem);
    if (!c.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("certificate for ", label, ": ", c.status().message()));
    }
    for (const std::string& name : n.names) {
      if (absl::Status s = set->names.Add(name, set->named.size()); !s.ok()) return s;
    }
    set->named.push_back(*std::move(c));
  }
  return std::shared_ptr<const CertificateSet>(std::move(set));
}

absl::Status SetVersions(SSL_CTX* ctx, bool tls13_only) {
  if (!SSL_CTX_set_min_proto_version(ctx, tls13_only ? TLS1_3_VERSION : TLS1_2_VERSION) ||
      !SSL_CTX_set_max_proto_version(ctx, TLS1_3_VERSION)) {
    return SslError("protocol versions");
  }
  return absl::OkStatus();
}

}  // namespace

void ServerKeyLog(const SSL* ssl, const char* line) {
  if (auto* c = ContextOf<TlsServerContext>(ssl); c != nullptr && c->key_log_ != nullptr) {
    c->key_log_->Write(line);
  }
}

void ClientKeyLog(const SSL* ssl, const char* line) {
  if (auto* c = ContextOf<TlsClientContext>(ssl); c != nullptr && c->key_log_ != nullptr) {
    c->key_log_->Write(line);
  }
}

int ClientNewSession(SSL* ssl, SSL_SESSION* session) {
  auto* c = ContextOf<TlsClientContext>(ssl);
  if (c == nullptr || !c->on_new_session_) return 0;
  uint8_t* bytes = nullptr;
  size_t len = 0;
  if (!SSL_SESSION_to_bytes(session, &bytes, &len)) return 0;
  c->on_new_session_(ssl, std::string(reinterpret_cast<char*>(bytes), len));
  OPENSSL_free(bytes);
  return 0;  // we did not keep a reference to `session`
}

std::vector<uint8_t> EncodeAlpn(const std::vector<std::string>& protocols) {
  std::vector<uint8_t> wire;
  for (const std::string& p : protocols) {
    if (p.empty() || p.size() > 255) continue;
    wire.push_back(static_cast<uint8_t>(p.size()));
    wire.insert(wire.end(), p.begin(), p.end());
  }
  return wire;
}

absl::Status CheckServerCertificate(const CertificatePem& pem) {
  return ParseCredential(pem).status();
}

absl::string_view SelectedAlpn(const SSL* ssl) {
  const uint8_t* data = nullptr;
  unsigned len = 0;
  SSL_get0_alpn_selected(ssl, &data, &len);
  return absl::string_view(reinterpret_cast<const char*>(data), len);
}

absl::string_view ServerName(const SSL* ssl) {
  const char* name = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name);
  return name != nullptr ? absl::string_view(name) : absl::string_view();
}

absl::StatusOr<std::unique_ptr<TlsServerContext>> TlsServerContext::Create(
    const TlsServerConfig& config) {
  if (config.alpn.empty()) return absl::InvalidArgumentError("TLS server needs an ALPN list");
  auto c = std::unique_ptr<TlsServerContext>(new TlsServerContext());
  c->ctx_.reset(SSL_CTX_new(TLS_method()));
  if (!c->ctx_) return SslError("SSL_CTX_new");
  SSL_CTX* ctx = c->ctx_.get();
  SSL_CTX_set_ex_data(ctx, ContextIndex(), c.get());
  if (absl::Status s = SetVersions(ctx, config.tls13_only); !s.ok()) return s;
  // The configured pair is the context's own; a replacement goes to each handshake instead
  // (SelectCertificate), since changing the context under concurrent SSL_new is not safe.
  absl::StatusOr<std::shared_ptr<const ServerCredential>> credential =
      ParseCredential(config.certificate);
  if (!credential.ok()) return credential.status();
  if (!SSL_CTX_set_chain_and_key(ctx, (*credential)->raw_chain.data(),
                                 (*credential)->raw_chain.size(), (*credential)->key.get(),
                                 nullptr)) {
    return SslError("certificate and key");
  }
  SSL_CTX_set_cert_cb(ctx, SelectCertificate, nullptr);
  if (!config.named_certificates.empty()) {
    absl::StatusOr<std::shared_ptr<const CertificateSet>> set =
        ParseCertificateSet(nullptr, config.named_certificates);
    if (!set.ok()) return set.status();
    c->certificates_ = *std::move(set);
    c->selecting_.store(true, std::memory_order_release);
  }
  c->alpn_wire_ = EncodeAlpn(config.alpn);
  SSL_CTX_set_alpn_select_cb(ctx, SelectAlpn, nullptr);
  SSL_CTX_set_early_data_enabled(ctx, config.early_data ? 1 : 0);
  // Stateless resumption by tickets only; no server-side session cache to grow.
  SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
  if (config.tickets != nullptr) config.tickets->Install(ctx);
  c->key_log_ = config.key_log;
  if (config.key_log != nullptr) SSL_CTX_set_keylog_callback(ctx, ServerKeyLog);
  if (config.quic_method != nullptr && !SSL_CTX_set_quic_method(ctx, config.quic_method)) {
    return SslError("SSL_CTX_set_quic_method");
  }
  return c;
}

TlsServerContext::TlsServerContext() = default;
TlsServerContext::~TlsServerContext() = default;

int TlsServerContext::SelectCertificate(SSL* ssl, void*) {
  auto* c = ContextOf<TlsServerContext>(ssl);
  if (c == nullptr || !c->selecting_.load(std::memory_order_acquire)) return 1;
  std::shared_ptr<const CertificateSet> set;
  {
    std::lock_guard<std::mutex> lock(c->certificates_mu_);
    set = c->certificates_;
  }
  const ServerCredential* credential = set->fallback.get();
  if (std::optional<size_t> i = set->names.Find(ServerName(ssl)); i.has_value()) {
    credential = set->named[*i].get();
  }
  if (credential == nullptr) return 1;  // the context's own
  // Takes references to the buffers and the key: the set may go once this returns.
  return SSL_set_chain_and_key(ssl, credential->raw_chain.data(), credential->raw_chain.size(),
                               credential->key.get(), nullptr);
}

absl::Status TlsServerContext::ReplaceCertificates(const CertificatePem& default_pem,
                                                   const std::vector<NamedCertificate>& named) {
  absl::StatusOr<std::shared_ptr<const CertificateSet>> set =
      ParseCertificateSet(&default_pem, named);
  if (!set.ok()) return set.status();
  {
    std::lock_guard<std::mutex> lock(certificates_mu_);
    if (certificates_ != nullptr) retired_.push_back(std::move(certificates_));
    certificates_ = *std::move(set);
  }
  selecting_.store(true, std::memory_order_release);
  return absl::OkStatus();
}

bssl::UniquePtr<SSL> TlsServerContext::NewSsl() const {
  bssl::UniquePtr<SSL> ssl(SSL_new(ctx_.get()));
  if (ssl) SSL_set_accept_state(ssl.get());
  return ssl;
}

absl::StatusOr<std::unique_ptr<TlsClientContext>> TlsClientContext::Create(
    const TlsClientConfig& config) {
  auto c = std::unique_ptr<TlsClientContext>(new TlsClientContext());
  c->ctx_.reset(SSL_CTX_new(TLS_method()));
  if (!c->ctx_) return SslError("SSL_CTX_new");
  SSL_CTX* ctx = c->ctx_.get();
  SSL_CTX_set_ex_data(ctx, ContextIndex(), c.get());
  if (absl::Status s = SetVersions(ctx, config.tls13_only); !s.ok()) return s;
  c->alpn_wire_ = EncodeAlpn(config.alpn);
  c->verify_peer_ = config.verify_peer;
  c->early_data_ = config.early_data;
  if (config.verify_peer) {
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
    const std::string& ca = config.ca_file.empty() ? std::string(kSystemCaBundle) : config.ca_file;
    if (!SSL_CTX_load_verify_locations(ctx, ca.c_str(), nullptr)) {
      return SslError(absl::StrCat("CA file ", ca));
    }
  } else {
    SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, nullptr);
  }
  SSL_CTX_set_early_data_enabled(ctx, config.early_data ? 1 : 0);
  c->on_new_session_ = config.on_new_session;
  SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL);
  SSL_CTX_sess_set_new_cb(ctx, ClientNewSession);
  c->key_log_ = config.key_log;
  if (config.key_log != nullptr) SSL_CTX_set_keylog_callback(ctx, ClientKeyLog);
  if (config.quic_method != nullptr && !SSL_CTX_set_quic_method(ctx, config.quic_method)) {
    return SslError("SSL_CTX_set_quic_method");
  }
  return c;
}

absl::StatusOr<bssl::UniquePtr<SSL>> TlsClientContext::NewSsl(absl::string_view server_name,
                                                              absl::string_view session) const {
  bssl::UniquePtr<SSL> ssl(SSL_new(ctx_.get()));
  if (!ssl) return SslError("SSL_new");
  SSL_set_connect_state(ssl.get());
  if (!alpn_wire_.empty() &&
      SSL_set_alpn_protos(ssl.get(), alpn_wire_.data(), alpn_wire_.size()) != 0) {
    return SslError("ALPN");
  }
  const std::string name(server_name);
  in6_addr a6;
  in_addr a4;
  const bool is_ip =
      inet_pton(AF_INET, name.c_str(), &a4) == 1 || inet_pton(AF_INET6, name.c_str(), &a6) == 1;
  // RFC 6066: SNI carries DNS names only, never IP literals.
  if (!name.empty() && !is_ip && !SSL_set_tlsext_host_name(ssl.get(), name.c_str())) {
    return SslError("SNI");
  }
  if (verify_peer_ && !name.empty()) {
    X509_VERIFY_PARAM* param = SSL_get0_param(ssl.get());
    const int ok = is_ip ? X509_VERIFY_PARAM_set1_ip_asc(param, name.c_str())
                         : X509_VERIFY_PARAM_set1_host(param, name.data(), name.size());
    if (!ok) return SslError("verification host name");
  }
  if (!session.empty()) {
    bssl::UniquePtr<SSL_SESSION> s(SSL_SESSION_from_bytes(
        reinterpret_cast<const uint8_t*>(session.data()), session.size(), ctx_.get()));
    if (!s) return SslError("stored TLS session");
    SSL_set_session(ssl.get(), s.get());
    SSL_set_early_data_enabled(ssl.get(), early_data_ ? 1 : 0);
  }
  return ssl;
}

}  // namespace petrel::quic
