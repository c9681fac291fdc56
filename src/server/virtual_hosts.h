// Internal: VirtualHosts, HttpServer's choice of site for each request on every protocol — by
// the host of its Host header (h1) or :authority (h2, h3) — and the check that a TLS connection
// is not used for a site it was not set up for (421, RFC 9110 §15.5.20).
//
// A site is a Router for some host names (exact or "*.example"); requests for any other host,
// or with none, go to the default site. The 421 rule: on a connection whose client sent a
// server name (SNI), a request whose host picks a different site than that name picks is
// misdirected unless the certificate the connection got is valid for the request's host (a client
// may reuse a connection for every name its certificate lists, RFC 9110 §4.3.3). With no named
// sites nothing is ever misdirected.
//
// Reloads: the sites and certificates live in an immutable SiteTable; a reload installs a new
// one, which connections from then on use; a connection keeps the table it started with (one
// atomic load per connection), so its requests finish on the sites they began with. Tables are
// therefore kept until the VirtualHosts goes (a few kilobytes per reload).
#ifndef PETREL_SERVER_VIRTUAL_HOSTS_H_
#define PETREL_SERVER_VIRTUAL_HOSTS_H_

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/host_name.h"
#include "petrel/common/metrics.h"
#include "petrel/http/router.h"
#include "quic/tls/certificate.h"

namespace petrel::server {

// One generation of sites and certificates. Built, then installed, then only read.
class SiteTable {
 public:
  struct SiteSpec {
    std::vector<std::string> names;
    const Router* router = nullptr;  // not owned
    bool alt_svc = true;             // its h1/h2 responses advertise h3
  };

  // The sites, and the certificates handshakes choose from (null `default_pem`: no TLS, nothing
  // is misdirected); counts requests per site into `registry` when it is set and there are
  // sites (petrel_http_requests_by_host_total{host}, host = a site's first name or "default").
  // InvalidArgument / AlreadyExists for a bad or repeated name.
  static absl::StatusOr<std::unique_ptr<SiteTable>> Build(
      const Router* default_router, bool default_alt_svc, const std::vector<SiteSpec>& sites,
      const quic::CertificatePem* default_pem, const std::vector<quic::NamedCertificate>& named,
      MetricsRegistry* registry);

  void Handle(Request& req, Response& res, absl::string_view alt_svc) const;

 private:
  struct Site {
    const Router* router = nullptr;
    bool alt_svc = true;
    std::string label;
    Counter* requests = nullptr;
  };

  absl::Status SetCertificates(const quic::CertificatePem& default_pem,
                               const std::vector<quic::NamedCertificate>& named);
  const Site& SiteFor(absl::string_view host) const;
  bool Misdirected(const Site& site, absl::string_view sni, absl::string_view host) const;

  std::vector<Site> sites_;  // [0]: the default
  HostTable names_;          // -> index into sites_
  bool tls_ = false;
  HostTable by_sni_;  // -> index into certificates_, [0] being the default one
  std::vector<bssl::UniquePtr<X509>> certificates_;  // each one's leaf
};

// What TcpHost and the h3 glue dispatch through: the table installed last.
class VirtualHosts {
 public:
  VirtualHosts() = default;
  VirtualHosts(const VirtualHosts&) = delete;
  VirtualHosts& operator=(const VirtualHosts&) = delete;

  // Requests from now on use `table`. Any thread.
  void Install(std::unique_ptr<SiteTable> table);

  // The table installed last (one must be installed); valid while this object lives.
  const SiteTable* current() const { return current_.load(std::memory_order_acquire); }

 private:
  std::mutex mu_;
  std::vector<std::unique_ptr<SiteTable>> tables_;  // guarded by mu_; every generation
  std::atomic<const SiteTable*> current_{nullptr};
};

}  // namespace petrel::server

#endif  // PETREL_SERVER_VIRTUAL_HOSTS_H_
