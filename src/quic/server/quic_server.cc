// QuicServer: Master + Workers + EventLoopThreads, wired (DESIGN §3).
#include "petrel/quic/quic_server.h"

#include <errno.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <optional>
#include <utility>

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
  size_t workers_done = 0;    // master loop thread
  bool stop_started = false;  // master loop thread
  std::atomic<bool> stop_requested{false};
  std::atomic<bool> ran{false};
  QuicServerStats stats;

  // How far Run() is. Tasks a reconfiguration runs on the loops report under state_mu too.
  enum class State : uint8_t { kCreated, kRunning, kFinished };
  std::mutex state_mu;
  std::condition_variable state_cv;
  State state = State::kCreated;  // under state_mu

  // One reconfiguration at a time, and not while Run() leaves kCreated: what follows is
  // guarded by it (and immutable after Create otherwise).
  std::mutex reconfigure_mu;
  quic::UdpSocketOptions socket_options;
  struct Listening {
    SocketAddress address;  // bound, with the real port
    size_t socket_index;
  };
  std::vector<Listening> listening;  // accepting, in the order given
  std::optional<SocketAddress> preferred;
  size_t socket_count = 0;  // the master's socket slots, closed ones included

  mutable std::mutex addresses_mu;
  std::vector<SocketAddress> addresses;  // local_addresses(); under addresses_mu

  Impl(QuicServerConfig c, QuicServerCallbacks cb)
      : config(std::move(c)), observer(std::move(cb)) {}
  ~Impl() {
    for (auto& t : threads) t->Stop();
    workers.clear();  // their senders use the master's sockets
    master.reset();
  }

  EventLoop* WorkerLoop(size_t i) { return threads.empty() ? &master_loop : threads[i]->loop(); }

  // Whether the caller runs one of the server's loops (a callback, say).
  bool OnServerThread() {
    const EventLoop* current = EventLoop::Current();
    if (current == nullptr) return false;
    if (current == &master_loop) return true;
    for (auto& t : threads) {
      if (current == t->loop()) return true;
    }
    return false;
  }

  // Runs each task on its loop and waits until all have run. Before Run() they run here, in
  // order (the loops are not running and reconfigure_mu keeps Run() from starting them).
  // Returns false if Run() finished first: its loops never run again, so a task not run by
  // then never runs (it is destroyed with its loop, unrun). Never on a server thread: it would
  // wait for itself.
  bool RunOnLoops(std::vector<std::pair<EventLoop*, EventLoop::Task>> tasks) {
    State now;
    {
      std::lock_guard<std::mutex> lock(state_mu);
      now = state;
    }
    if (now == State::kFinished) return false;
    if (now == State::kCreated) {
      for (auto& [loop, task] : tasks) task();
      return true;
    }
    size_t done = 0;  // under state_mu
    for (auto& [loop, task] : tasks) {
      loop->Post([this, &done, task = std::move(task)]() mutable {
        task();
        std::lock_guard<std::mutex> lock(state_mu);
        ++done;
        state_cv.notify_all();
      });
    }
    std::unique_lock<std::mutex> lock(state_mu);
    state_cv.wait(lock, [&] { return done == tasks.size() || state == State::kFinished; });
    return done == tasks.size();
  }

  void SetState(State s) {
    std::lock_guard<std::mutex> lock(state_mu);
    state = s;
    state_cv.notify_all();
  }

  // Refuses a reconfiguration once the server is stopping or done. Under reconfigure_mu.
  absl::Status CheckReconfigurable() {
    if (stop_requested.load()) return absl::FailedPreconditionError("the QUIC server is stopping");
    std::lock_guard<std::mutex> lock(state_mu);
    if (state == State::kFinished) return absl::FailedPreconditionError("the QUIC server is done");
    return absl::OkStatus();
  }

  // Publishes local_addresses(). Under reconfigure_mu.
  void PublishAddresses() {
    std::vector<SocketAddress> all;
    for (const Listening& l : listening) all.push_back(l.address);
    if (preferred.has_value()) all.push_back(*preferred);
    std::lock_guard<std::mutex> lock(addresses_mu);
    addresses = std::move(all);
  }

  absl::Status SetListenAddresses(const std::vector<SocketAddress>& listen);
  absl::Status SetTransportLimits(const QuicTransportLimits& limits);

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

// 0-RTT is accepted only under the same limits and ALPNs as the ticket's connection.
std::vector<uint8_t> EarlyDataContext(const QuicServerConfig& config,
                                      const QuicTransportLimits& limits) {
  if (!config.early_data) return {};
  std::string early =
      absl::StrCat("petrel-quic/", limits.max_streams_bidi, "/", limits.max_streams_uni, "/",
                   limits.max_data, "/", limits.max_stream_data);
  for (const std::string& a : config.alpn) absl::StrAppend(&early, "/", a);
  return std::vector<uint8_t>(early.begin(), early.end());
}

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
  for (int fd : cfg.listen_fds) {
    sockaddr_storage bound{};
    socklen_t len = sizeof(bound);
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len) != 0) {
      return absl::ErrnoToStatus(errno, absl::StrCat("listen_fds: getsockname(", fd, ")"));
    }
    const SocketAddress address(reinterpret_cast<sockaddr*>(&bound), len);
    if (std::find(cfg.listen.begin(), cfg.listen.end(), address) == cfg.listen.end()) {
      return absl::InvalidArgumentError(absl::StrCat("listen_fds: fd ", fd, " is bound to ",
                                                     address.ToString(), ", no listen address"));
    }
    mc.socket_options.inherited.emplace_back(address, fd);
  }

  impl->socket_options = mc.socket_options;

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
    if (preferred) wc.preferred_socket = cfg.listen.size();  // after the listen sockets
    Impl* raw = impl.get();
    wc.on_socket_released = [raw](size_t index) {
      // Direct mode: the worker runs on the master's loop, and never inside its reads here.
      if (EventLoop::Current() == &raw->master_loop) {
        raw->master->OnSocketReleased(index);
      } else {
        raw->master_loop.Post([raw, index] { raw->master->OnSocketReleased(index); });
      }
    };
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
    wc.early_data_context = EarlyDataContext(cfg, cfg.limits);
    impl->workers.push_back(std::make_unique<Worker>(loop, std::move(wc), &impl->observer));
    ports.push_back({loop, impl->workers.back().get()});
  }
  absl::StatusOr<std::unique_ptr<quic::Master>> master =
      quic::Master::Create(mc, &impl->master_loop, std::move(ports), cfg.metrics);
  if (!master.ok()) return master.status();
  impl->master = *std::move(master);
  for (auto& w : impl->workers) w->Attach(*impl->master);
  const auto& sockets = impl->master->sockets();
  for (size_t i = 0; i < cfg.listen.size(); ++i) {
    impl->listening.push_back({sockets[i]->local_address(), i});
  }
  if (preferred) impl->preferred = sockets.back()->local_address();
  impl->socket_count = sockets.size();
  impl->PublishAddresses();
  return std::unique_ptr<QuicServer>(new QuicServer(std::move(impl)));
}

std::vector<SocketAddress> QuicServer::local_addresses() const {
  std::lock_guard<std::mutex> lock(impl_->addresses_mu);
  return impl_->addresses;
}

absl::Status QuicServer::SetListenAddresses(std::vector<SocketAddress> listen) {
  return impl_->SetListenAddresses(listen);
}

absl::Status QuicServer::SetTransportLimits(const QuicTransportLimits& limits) {
  return impl_->SetTransportLimits(limits);
}

absl::Status QuicServer::Impl::SetListenAddresses(const std::vector<SocketAddress>& listen) {
  if (listen.empty()) return absl::InvalidArgumentError("no listen address");
  if (OnServerThread()) {
    return absl::FailedPreconditionError(
        "SetListenAddresses waits for the server's threads: not from one of them");
  }
  std::lock_guard<std::mutex> lock(reconfigure_mu);
  if (absl::Status s = CheckReconfigurable(); !s.ok()) return s;

  // Which requested addresses keep a socket, which need a new one, which sockets retire.
  constexpr size_t kNew = SIZE_MAX;
  std::vector<size_t> kept(listen.size(), kNew);  // index into `listening`
  std::vector<bool> still_listed(listening.size(), false);
  for (size_t i = 0; i < listen.size(); ++i) {
    if (listen[i].empty()) return absl::InvalidArgumentError("empty listen address");
    for (size_t j = 0; j < i; ++j) {
      if (listen[i].port() != 0 && listen[j] == listen[i]) {
        return absl::InvalidArgumentError(
            absl::StrCat("listen address ", listen[i].ToString(), " given twice"));
      }
    }
    if (listen[i].port() == 0) continue;
    for (size_t j = 0; j < listening.size(); ++j) {
      if (listening[j].address == listen[i]) {
        kept[i] = j;
        still_listed[j] = true;
      }
    }
  }
  std::vector<std::unique_ptr<quic::UdpSocket>> fresh;
  for (size_t i = 0; i < listen.size(); ++i) {
    if (kept[i] != kNew) continue;
    absl::StatusOr<std::unique_ptr<quic::UdpSocket>> sock =
        quic::UdpSocket::Bind(listen[i], socket_options);
    if (!sock.ok()) return sock.status();  // `fresh` closes what this call bound
    fresh.push_back(*std::move(sock));
  }
  std::vector<size_t> retiring;
  for (size_t j = 0; j < listening.size(); ++j) {
    if (!still_listed[j]) retiring.push_back(listening[j].socket_index);
  }

  // Every worker gets its sender for each new socket before the master reads it.
  const size_t first = socket_count;
  std::vector<const quic::UdpSocket*> added;
  std::vector<SocketAddress> added_addresses;  // read now: the master owns them soon
  for (const auto& sock : fresh) {
    added.push_back(sock.get());
    added_addresses.push_back(sock->local_address());
  }
  std::vector<std::pair<EventLoop*, EventLoop::Task>> tasks;
  auto for_each_worker = [&](auto fn) {
    tasks.clear();
    for (size_t i = 0; i < workers.size(); ++i) {
      tasks.emplace_back(WorkerLoop(i), [w = workers[i].get(), fn] { fn(*w); });
    }
    return RunOnLoops(std::move(tasks));
  };
  if (!for_each_worker([first, added](Worker& w) {
        for (size_t k = 0; k < added.size(); ++k) w.AddSocket(first + k, *added[k]);
      })) {
    return absl::FailedPreconditionError("the QUIC server is done");
  }
  // The switch, at one instant for the master: new sockets read, dropped ones accept no more.
  absl::Status switched;
  tasks.clear();
  tasks.emplace_back(&master_loop, [&] {
    if (stop_started) {
      switched = absl::FailedPreconditionError("the QUIC server is stopping");
      return;
    }
    switched = master->AddSockets(fresh);
    if (!switched.ok()) return;
    for (size_t index : retiring) master->StopAccepting(index);
  });
  if (!RunOnLoops(std::move(tasks))) {
    switched = absl::FailedPreconditionError("the QUIC server is done");
  }
  if (!switched.ok()) {
    // The master never read them: the workers' senders go before the sockets (`fresh`) close.
    for_each_worker([first, n = added.size()](Worker& w) {
      for (size_t k = 0; k < n; ++k) w.ForgetSocket(first + k);
    });
    return switched;
  }
  socket_count += added.size();
  // Each worker releases a retiring socket once its connections on it are gone; the master
  // closes it when all have.
  for_each_worker([retiring](Worker& w) {
    for (size_t index : retiring) w.RetireSocket(index);
  });

  std::vector<Listening> now;
  size_t next_new = first;
  for (size_t i = 0; i < listen.size(); ++i) {
    if (kept[i] != kNew) {
      now.push_back(listening[kept[i]]);
    } else {
      now.push_back({added_addresses[next_new - first], next_new});
      ++next_new;
    }
  }
  listening = std::move(now);
  PublishAddresses();
  return absl::OkStatus();
}

absl::Status QuicServer::Impl::SetTransportLimits(const QuicTransportLimits& limits) {
  if (OnServerThread()) {
    return absl::FailedPreconditionError(
        "SetTransportLimits waits for the server's threads: not from one of them");
  }
  std::lock_guard<std::mutex> lock(reconfigure_mu);
  if (absl::Status s = CheckReconfigurable(); !s.ok()) return s;
  const std::vector<uint8_t> early = EarlyDataContext(config, limits);
  std::vector<std::pair<EventLoop*, EventLoop::Task>> tasks;
  for (size_t i = 0; i < workers.size(); ++i) {
    tasks.emplace_back(WorkerLoop(i), [w = workers[i].get(), limits, early] {
      w->SetConnectionLimits(limits, early);
    });
  }
  if (!RunOnLoops(std::move(tasks))) {
    return absl::FailedPreconditionError("the QUIC server is done");
  }
  return absl::OkStatus();
}

absl::Status QuicServer::ReplaceCertificates(const std::string& certificate_pem,
                                             const std::string& key_pem,
                                             const std::vector<QuicNamedCertificate>& named) {
  return impl_->tls->ReplaceCertificates(quic::CertificatePem{certificate_pem, key_pem},
                                         ToNamedCertificates(named));
}

absl::Status QuicServer::Run() {
  if (impl_->ran.exchange(true)) return absl::FailedPreconditionError("Run() called twice");
  {
    // From here on reconfigurations go through the loops.
    std::lock_guard<std::mutex> lock(impl_->reconfigure_mu);
    impl_->SetState(Impl::State::kRunning);
  }
  absl::Status status = absl::OkStatus();
  for (auto& t : impl_->threads) {
    if (status = t->Start(); !status.ok()) break;
  }
  if (status.ok()) status = impl_->master->Start();
  if (status.ok()) impl_->master_loop.Run();
  for (auto& t : impl_->threads) t->Stop();
  impl_->SetState(Impl::State::kFinished);
  if (!status.ok()) return status;
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
    st.transport_errors += w->transport_errors();
    st.sendmsg_calls += w->sendmsg_calls();
    st.sendmmsg_calls += w->sendmmsg_calls();
    st.send_wakeups += w->send_wakeups();
  }
  st.stateless_resets_sent += impl_->master->stateless_resets_sent();
  for (size_t r = 0; r < static_cast<size_t>(quic::DropReason::kCount); ++r) {
    st.master_drops += impl_->master->drops(static_cast<quic::DropReason>(r));
  }
  st.not_listening_drops = impl_->master->drops(quic::DropReason::kNotListening);
  st.overload_drops = impl_->master->drops(quic::DropReason::kOverload);
  impl_->stats = st;
  return absl::OkStatus();
}

void QuicServer::Stop(Duration deadline) {
  Impl* impl = impl_.get();
  impl->stop_requested.store(true);
  impl->master_loop.Post([impl, deadline] { impl->BeginStop(deadline); });
}

QuicServerStats QuicServer::stats() const { return impl_->stats; }

}  // namespace petrel
