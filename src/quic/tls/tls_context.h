// Internal: BoringSSL contexts for Petrel servers and clients — certificates, ALPN, SNI, session
// tickets and resumption, 0-RTT, key logging and peer verification. Shared by the QUIC transport
// and TLS over TCP. A context serves every thread and is immutable once created, but for the
// server's certificates, which ReplaceCertificates swaps for the handshakes that follow.
#ifndef PETREL_QUIC_TLS_TLS_CONTEXT_H_
#define PETREL_QUIC_TLS_TLS_CONTEXT_H_

#include <openssl/ssl.h>

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "quic/tls/certificate.h"

namespace petrel::quic {

class KeyLogFile;
class TicketKeyRing;
struct CertificateSet;

struct TlsServerConfig {
  CertificatePem certificate;  // the default, for handshakes no named certificate matches
  // Chosen by the client's server name (SNI): exact names first, then wildcards.
  std::vector<NamedCertificate> named_certificates;
  // Application protocols in the server's order of preference ("h3", "hq-interop", "h2", ...).
  // A client that offers none of them fails the handshake with no_application_protocol.
  std::vector<std::string> alpn;
  bool tls13_only = true;            // QUIC requires TLS 1.3; TCP servers also allow 1.2
  bool early_data = true;            // accept 0-RTT (QUIC) / early data
  KeyLogFile* key_log = nullptr;     // observer; must outlive the context
  TicketKeyRing* tickets = nullptr;  // observer; null: BoringSSL's own keys, rotated every 48 h
  // Set by the QUIC transport on contexts it drives (SSL_CTX_set_quic_method).
  const SSL_QUIC_METHOD* quic_method = nullptr;
};

class TlsServerContext {
 public:
  static absl::StatusOr<std::unique_ptr<TlsServerContext>> Create(const TlsServerConfig& config);
  ~TlsServerContext();

  SSL_CTX* ctx() const { return ctx_.get(); }
  // A new server-side SSL for one connection.
  bssl::UniquePtr<SSL> NewSsl() const;

  // Used by the ALPN callback; the wire form of the configured list.
  const std::vector<uint8_t>& alpn_wire() const { return alpn_wire_; }

  // The certificates that handshakes starting from now present (renewed ones, or another set
  // of names): all checked first (each key must match its leaf, each name be well formed), and
  // on any error nothing changes. Connections already up, and session tickets, are not
  // affected. Any thread.
  absl::Status ReplaceCertificates(const CertificatePem& default_pem,
                                   const std::vector<NamedCertificate>& named);

 private:
  TlsServerContext();
  static int SelectCertificate(SSL* ssl, void* arg);

  bssl::UniquePtr<SSL_CTX> ctx_;
  std::vector<uint8_t> alpn_wire_;
  KeyLogFile* key_log_ = nullptr;
  // Set once there are named certificates or a replacement; until then the SSL_CTX's own
  // certificate serves every handshake, at no cost.
  std::atomic<bool> selecting_{false};
  std::mutex certificates_mu_;
  std::shared_ptr<const CertificateSet> certificates_;  // guarded by certificates_mu_
  // Replaced sets, freed with the context. Freeing them at once would be safe (each SSL holds
  // references to the chain and key it was given), but those reference counts live inside
  // BoringSSL, where ThreadSanitizer cannot see them, and it would report the free as a race
  // with the handshakes that used them; a reload's certificates are a few kilobytes.
  std::vector<std::shared_ptr<const CertificateSet>> retired_;  // guarded by certificates_mu_
  friend void ServerKeyLog(const SSL*, const char*);
};

struct TlsClientConfig {
  std::vector<std::string> alpn;  // offered in this order
  bool verify_peer = true;        // verify the certificate chain and the host name
  std::string ca_file;            // trust these CAs (PEM); empty: the system's store
  bool tls13_only = true;
  bool early_data = true;  // offer 0-RTT when resuming a session that allows it
  KeyLogFile* key_log = nullptr;
  // Called with each new session the server issues, serialized (SSL_SESSION_to_bytes); the
  // caller stores it for resumption. Runs on the thread driving the connection.
  std::function<void(const SSL* ssl, std::string session)> on_new_session;
  const SSL_QUIC_METHOD* quic_method = nullptr;
};

class TlsClientContext {
 public:
  static absl::StatusOr<std::unique_ptr<TlsClientContext>> Create(const TlsClientConfig& config);

  SSL_CTX* ctx() const { return ctx_.get(); }
  // A new client-side SSL for `server_name` (SNI for DNS names; verified against the
  // certificate as DNS name or IP address), resuming `session` (serialized) if it is non-empty.
  absl::StatusOr<bssl::UniquePtr<SSL>> NewSsl(absl::string_view server_name,
                                              absl::string_view session = {}) const;

 private:
  TlsClientContext() = default;
  bssl::UniquePtr<SSL_CTX> ctx_;
  std::vector<uint8_t> alpn_wire_;
  bool verify_peer_ = true;
  bool early_data_ = true;
  KeyLogFile* key_log_ = nullptr;
  std::function<void(const SSL*, std::string)> on_new_session_;
  friend void ClientKeyLog(const SSL*, const char*);
  friend int ClientNewSession(SSL*, SSL_SESSION*);
};

// Whether a server could use `pem`: the chain and key parse and the key matches the leaf.
absl::Status CheckServerCertificate(const CertificatePem& pem);

// The negotiated ALPN protocol, or empty.
absl::string_view SelectedAlpn(const SSL* ssl);
// The SNI host name the client sent, or empty.
absl::string_view ServerName(const SSL* ssl);
// Encodes protocol names as the length-prefixed ALPN wire list.
std::vector<uint8_t> EncodeAlpn(const std::vector<std::string>& protocols);

}  // namespace petrel::quic

#endif  // PETREL_QUIC_TLS_TLS_CONTEXT_H_
