#include "server/virtual_hosts.h"

#include <optional>

#include "absl/strings/str_cat.h"

namespace petrel::server {

absl::StatusOr<std::unique_ptr<SiteTable>> SiteTable::Build(
    const Router* default_router, bool default_alt_svc, const std::vector<SiteSpec>& sites,
    const quic::CertificatePem* default_pem, const std::vector<quic::NamedCertificate>& named,
    MetricsRegistry* registry) {
  auto t = std::unique_ptr<SiteTable>(new SiteTable());
  t->sites_.push_back(Site{default_router, default_alt_svc, "default", nullptr});
  for (const SiteSpec& spec : sites) {
    if (spec.names.empty()) return absl::InvalidArgumentError("a virtual host needs a name");
    for (const std::string& name : spec.names) {
      if (absl::Status s = t->names_.Add(name, t->sites_.size()); !s.ok()) return s;
    }
    t->sites_.push_back(Site{spec.router, spec.alt_svc, spec.names[0], nullptr});
  }
  if (registry != nullptr && !sites.empty()) {
    for (Site& site : t->sites_) {
      site.requests =
          &registry->AddCounter("petrel_http_requests_by_host_total",
                                "HTTP requests routed, by virtual host", {{"host", site.label}});
    }
  }
  if (default_pem != nullptr) {
    if (absl::Status s = t->SetCertificates(*default_pem, named); !s.ok()) return s;
  }
  return t;
}

absl::Status SiteTable::SetCertificates(const quic::CertificatePem& default_pem,
                                        const std::vector<quic::NamedCertificate>& named) {
  tls_ = true;
  auto add = [this](const quic::CertificatePem& pem) -> absl::Status {
    absl::StatusOr<bssl::UniquePtr<X509>> leaf = quic::LeafCertificate(pem);
    if (!leaf.ok()) return leaf.status();
    certificates_.push_back(*std::move(leaf));
    return absl::OkStatus();
  };
  if (absl::Status s = add(default_pem); !s.ok()) return s;
  for (const quic::NamedCertificate& n : named) {
    for (const std::string& name : n.names) {
      if (absl::Status s = by_sni_.Add(name, certificates_.size()); !s.ok()) return s;
    }
    if (absl::Status s = add(n.pem); !s.ok()) return s;
  }
  return absl::OkStatus();
}

const SiteTable::Site& SiteTable::SiteFor(absl::string_view host) const {
  const std::optional<size_t> i = names_.Find(host);
  return sites_[i.value_or(0)];
}

bool SiteTable::Misdirected(const Site& site, absl::string_view sni, absl::string_view host) const {
  if (!tls_ || sni.empty() || &SiteFor(sni) == &site) return false;
  const size_t certificate = by_sni_.Find(sni).value_or(0);
  return !quic::CertificateCovers(certificates_[certificate].get(), host);
}

void SiteTable::Handle(Request& req, Response& res, absl::string_view alt_svc) const {
  if (names_.empty()) {  // one site: nothing to choose, nothing to misdirect
    const Site& site = sites_[0];
    if (site.alt_svc && !alt_svc.empty()) res.headers().Set("alt-svc", alt_svc);
    site.router->Handle(req, res);
    return;
  }
  absl::string_view host = HostOfAuthority(req.authority());
  // No Host (HTTP/1.0): the site the TLS server name picks, if any.
  if (host.empty()) host = req.sni();
  const Site& site = SiteFor(host);
  // A rejected request is answered by its site's error pages, whichever connection it came on.
  if (res.rejected_status() != 0) {
    site.router->Handle(req, res);
    return;
  }
  if (site.requests != nullptr) site.requests->Inc();
  if (Misdirected(site, req.sni(), host)) {
    res.set_error_pages(site.router, &req);
    res.SendError(421, absl::StrCat("misdirected request: this connection is for ", req.sni(),
                                    ", not for ", host));
    return;
  }
  if (site.alt_svc && !alt_svc.empty()) res.headers().Set("alt-svc", alt_svc);
  site.router->Handle(req, res);
}

void VirtualHosts::Install(std::unique_ptr<SiteTable> table) {
  std::lock_guard<std::mutex> lock(mu_);
  current_.store(table.get(), std::memory_order_release);
  tables_.push_back(std::move(table));
}

}  // namespace petrel::server
