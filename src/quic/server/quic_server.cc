// QuicServer: Master + Workers + EventLoopThreads, wired (DESIGN §3).
#include "petrel/quic/quic_server.h"

#include <atomic>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "petrel/common/event_loop_thread.h"
#include "petrel/common/metrics.h"
#include "quic/crypto/quic_method.h"
#include "quic/crypto/retry.h"
#include "quic/dispatch/master.h"
#include "quic/packet/versions.h"
#include "quic/server/callback_observer.h"
#include "quic/server/worker.h"
#include "quic/tls/key_log.h"
#include "quic/tls/tls_context.h"
#include "quic/token/address_token.h"

namespace petrel {

using quic::Worker;

class QuicServer::Impl {
 public:
  QuicServerConfig config;
  quic::CallbackObserver observer;
  EventLoop master_loop;
  std::unique_ptr<quic::KeyLogFile> key_log;
  std::unique_ptr<quic::TlsServerContext> tls;
  std::unique_ptr<quic::AddressTokenCodec> tokens;
  std::unique_ptr<quic::crypto::RetryPacketWriter> retry_writer;
  std::vector<std::unique_ptr<EventLoopThread>> threads;  // destroyed last
  std::unique_ptr<quic::Master> master;
  std::vector<std::unique_ptr<Worker>> workers;
  std::vector<SocketAddress> addresses;
  size_t workers_done = 0;  // master loop thread
  bool stop_started = false;
  std::atomic<bool> ran{false};
  QuicServerStats stats;

  Impl(QuicServerConfig c, QuicServerCallbacks cb)
      : config(std::move(c)), observer(std::move(cb)) {}
  ~Impl() {
    for (auto& t : threads) t->Stop();
    workers.clear();  // their senders use the master's sockets
    master.reset();
  }

  void BeginStop(Duration deadline) {
    if (stop_started) return;
    stop_started = true;
    const size_t n = workers.size();
    for (size_t i = 0; i < n; ++i) {
      EventLoop* loop = threads.empty() ? &master_loop : threads[i]->loop();
      Worker* w = workers[i].get();
      loop->RunInLoop([this, w, loop, deadline] {
        w->Shutdown(loop->now() + deadline, [this] {
          master_loop.RunInLoop([this] {
            if (++workers_done == workers.size()) {
              master->StopReceiving();
              master_loop.Stop();
            }
          });
        });
      });
    }
  }
};

namespace {
std::vector<quic::NamedCertificate> ToNamedCertificates(
    const std::vector<QuicNamedCertificate>& named) {
  std::vector<quic::NamedCertificate> out;
  out.reserve(named.size());
  for (const QuicNamedCertificate& n : named) {
    out.push_back({n.names, quic::CertificatePem{n.certificate_pem, n.key_pem}});
  }
  return out;
}
}  // namespace

QuicServer::QuicServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
QuicServer::~QuicServer() = default;

absl::StatusOr<std::unique_ptr<QuicServer>> QuicServer::Create(QuicServerConfig config,
                                                               QuicServerCallbacks callbacks) {
  auto impl = std::make_unique<Impl>(std::move(config), std::move(callbacks));
  const QuicServerConfig& cfg = impl->config;
  if (cfg.listen.empty()) return absl::InvalidArgumentError("no listen address");
  if (cfg.workers > 200) return absl::InvalidArgumentError("too many workers");

  quic::TlsServerConfig tls;
  if (cfg.certificate_file.empty() && !cfg.certificate_pem.empty()) {
    tls.certificate.certificate_chain = cfg.certificate_pem;
    tls.certificate.private_key = cfg.key_pem;
  } else if (cfg.certificate_file.empty()) {
    absl::StatusOr<quic::CertificatePem> pem = quic::GenerateSelfSigned(cfg.self_signed_names);
    if (!pem.ok()) return pem.status();
    tls.certificate = *std::move(pem);
  } else {
    absl::StatusOr<quic::CertificatePem> pem =
        quic::ReadPemFiles(cfg.certificate_file, cfg.key_file);
    if (!pem.ok()) return pem.status();
    tls.certificate = *std::move(pem);
  }
  if (!cfg.key_log_file.empty()) {
    absl::StatusOr<std::unique_ptr<quic::KeyLogFile>> kl = quic::KeyLogFile::Open(cfg.key_log_file);
    if (!kl.ok()) return kl.status();
    impl->key_log = *std::move(kl);
    tls.key_log = impl->key_log.get();
  }
  tls.named_certificates = ToNamedCertificates(cfg.named_certificates);
  tls.alpn = cfg.alpn;
  tls.early_data = cfg.early_data;
  tls.quic_method = quic::crypto::PetrelQuicMethod();
  absl::StatusOr<std::unique_ptr<quic::TlsServerContext>> ctx = quic::TlsServerContext::Create(tls);
  if (!ctx.ok()) return ctx.status();
  impl->tls = *std::move(ctx);
  impl->tokens = std::make_unique<quic::AddressTokenCodec>(quic::AddressTokenCodec::RandomKey());
  absl::StatusOr<quic::crypto::RetryPacketWriter> rw = quic::crypto::RetryPacketWriter::Create();
  if (!rw.ok()) return rw.status();
  impl->retry_writer = std::make_unique<quic::crypto::RetryPacketWriter>(*std::move(rw));

  quic::MasterConfig mc;
  mc.listen = cfg.listen;
  const bool preferred = !cfg.preferred_address.empty();
  if (preferred) {
    if (cfg.preferred_address.is_any()) {
      return absl::InvalidArgumentError("preferred_address must be a concrete address");
    }
    mc.listen.push_back(cfg.preferred_address);
  }
  std::vector<uint32_t> versions = cfg.versions;
  if (versions.empty()) {
    const absl::Span<const uint32_t> all = quic::SupportedVersions();
    versions.assign(all.begin(), all.end());
  }
  for (uint32_t v : versions) {
    if (!quic::IsSupportedVersion(v)) {
      return absl::InvalidArgumentError(absl::StrCat("unsupported QUIC version 0x", absl::Hex(v)));
    }
  }
  mc.reset_key = quic::StatelessResetTokens::RandomKey();
  if (!cfg.stateless_reset_secret.empty()) {
    if (cfg.stateless_reset_secret.size() != mc.reset_key.size()) {
      return absl::InvalidArgumentError("stateless_reset_secret must be 32 octets");
    }
    std::memcpy(mc.reset_key.data(), cfg.stateless_reset_secret.data(), mc.reset_key.size());
  }
  mc.socket_options.test_rx_loss = cfg.test_loss;
  mc.socket_options.enable_gso = cfg.gso;
  mc.socket_options.ipv6_only = cfg.ipv6_only;
  mc.socket_options.send_buffer_bytes = cfg.socket_send_buffer_bytes;

  // 0-RTT is accepted only under the same limits and ALPNs as the ticket's connection.
  std::string early =
      absl::StrCat("petrel-quic/", cfg.limits.max_streams_bidi, "/", cfg.limits.max_streams_uni,
                   "/", cfg.limits.max_data, "/", cfg.limits.max_stream_data);
  for (const std::string& a : cfg.alpn) absl::StrAppend(&early, "/", a);

  const size_t n = cfg.workers == 0 ? 1 : cfg.workers;
  std::vector<quic::WorkerPort> ports;
  for (size_t i = 0; i < n; ++i) {
    EventLoop* loop = &impl->master_loop;
    if (cfg.workers > 0) {
      impl->threads.push_back(std::make_unique<EventLoopThread>(absl::StrCat("petrel-quic-w", i)));
      loop = impl->threads.back()->loop();
    }
    quic::WorkerConfig wc;
    wc.worker_id = static_cast<uint8_t>(i);
    wc.connection.limits = cfg.limits;
    wc.connection.cc = cfg.cc;
    wc.connection.qlog_dir = cfg.qlog_dir;
    wc.connection.versions = versions;
    wc.last_socket_is_preferred_address = preferred;
    wc.shutdown_error_code = cfg.shutdown_error_code;
    wc.memory_trim_delay = cfg.memory_trim_delay;
    wc.retry = static_cast<quic::RetryPolicy>(cfg.retry);
    wc.retry_threshold = cfg.retry_threshold;
    wc.reset_key = mc.reset_key;
    wc.tls = impl->tls.get();
    wc.tokens = impl->tokens.get();
    wc.retry_writer = impl->retry_writer.get();
    wc.sender_options.test_tx_loss = cfg.test_loss;
    wc.metrics = cfg.metrics;
    if (cfg.early_data) wc.early_data_context.assign(early.begin(), early.end());
    impl->workers.push_back(std::make_unique<Worker>(loop, std::move(wc), &impl->observer));
    ports.push_back({loop, impl->workers.back().get()});
  }
  absl::StatusOr<std::unique_ptr<quic::Master>> master =
      quic::Master::Create(mc, &impl->master_loop, std::move(ports), cfg.metrics);
  if (!master.ok()) return master.status();
  impl->master = *std::move(master);
  for (auto& w : impl->workers) w->Attach(*impl->master);
  for (const auto& s : impl->master->sockets()) impl->addresses.push_back(s->local_address());
  return std::unique_ptr<QuicServer>(new QuicServer(std::move(impl)));
}

const std::vector<SocketAddress>& QuicServer::local_addresses() const { return impl_->addresses; }

absl::Status QuicServer::ReplaceCertificates(const std::string& certificate_pem,
                                             const std::string& key_pem,
                                             const std::vector<QuicNamedCertificate>& named) {
  return impl_->tls->ReplaceCertificates(quic::CertificatePem{certificate_pem, key_pem},
                                         ToNamedCertificates(named));
}

absl::Status QuicServer::Run() {
  if (impl_->ran.exchange(true)) return absl::FailedPreconditionError("Run() called twice");
  for (auto& t : impl_->threads) {
    if (absl::Status s = t->Start(); !s.ok()) return s;
  }
  if (absl::Status s = impl_->master->Start(); !s.ok()) return s;
  impl_->master_loop.Run();
  for (auto& t : impl_->threads) t->Stop();
  QuicServerStats st;
  for (auto& w : impl_->workers) {
    st.connections_accepted += w->accepted();
    st.unknown_connection_drops += w->unknown_connection_drops();
    st.retries_sent += w->retries_sent();
    st.stateless_resets_sent += w->stateless_resets_sent();
    st.connections_per_worker.push_back(w->accepted());
    st.misrouted_datagrams += w->misrouted_datagrams();
    st.paths_validated += w->paths_validated();
    st.sends_blocked += w->sends_blocked();
    st.memory_trims += w->memory_trims();
    st.sendmsg_calls += w->sendmsg_calls();
    st.send_wakeups += w->send_wakeups();
  }
  st.stateless_resets_sent += impl_->master->stateless_resets_sent();
  for (size_t r = 0; r < static_cast<size_t>(quic::DropReason::kCount); ++r) {
    st.master_drops += impl_->master->drops(static_cast<quic::DropReason>(r));
  }
  impl_->stats = st;
  return absl::OkStatus();
}

void QuicServer::Stop(Duration deadline) {
  Impl* impl = impl_.get();
  impl->master_loop.Post([impl, deadline] { impl->BeginStop(deadline); });
}

QuicServerStats QuicServer::stats() const { return impl_->stats; }

}  // namespace petrel
