// A Petrel QUIC server and a QUIC client talking over two UDP sockets on 127.0.0.1, on one
// EventLoop that the fuzz target turns. The server is what QuicServer runs with workers = 0: a
// Master reading its socket and routing to a Worker, which accepts the connection and runs the
// application's callbacks (the h3 engine) on it. Everything but the TLS contexts and the token
// key is made anew for each input: no connection, socket, timer or CID of one input reaches the
// next.
//
// The client is a QuicRawClient (quic_raw_client.h) on the same loop: the target decides what
// goes on which stream and when, and may stop the client and speak for it, sealing 1-RTT packets
// with its keys. Time is the process's virtual monotonic clock (virtual_clock.h): where nothing
// moves, the harness moves the clock instead of sleeping.
#ifndef PETREL_FUZZ_QUIC_LOOPBACK_H_
#define PETREL_FUZZ_QUIC_LOOPBACK_H_

#include <ngtcp2/ngtcp2.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "fuzz_check.h"
#include "petrel/common/clock.h"
#include "petrel/common/event_loop.h"
#include "petrel/common/log.h"
#include "petrel/common/socket_address.h"
#include "petrel/quic/quic_server.h"
#include "quic/cid/stateless_reset.h"
#include "quic/crypto/quic_method.h"
#include "quic/crypto/retry.h"
#include "quic/dispatch/master.h"
#include "quic/packet/versions.h"
#include "quic/server/callback_observer.h"
#include "quic/server/worker.h"
#include "quic/tls/certificate.h"
#include "quic/tls/tls_context.h"
#include "quic/token/address_token.h"
#include "quic_one_rtt.h"
#include "quic_raw_client.h"
#include "virtual_clock.h"

namespace petrel::fuzz {

class QuicLoopback final {
 public:
  using Stream = QuicRawClient::Stream;

  // `callbacks` are the server application's, for ALPN "h3". `retry` and `retry_threshold` are
  // the worker's Retry policy (WorkerConfig).
  explicit QuicLoopback(QuicServerCallbacks callbacks,
                        quic::RetryPolicy retry = quic::RetryPolicy::kNever,
                        size_t retry_threshold = 64)
      : observer_(NoticeEnd(std::move(callbacks), &server_ended_)) {
    const Shared& shared = GetShared();
    quic::WorkerConfig wc;
    wc.connection.versions.assign(quic::SupportedVersions().begin(),
                                  quic::SupportedVersions().end());
    wc.reset_key = quic::StatelessResetTokens::RandomKey();
    wc.tls = shared.server_tls.get();
    wc.tokens = shared.tokens.get();
    wc.retry_writer = shared.retry_writer.get();
    wc.retry = retry;
    wc.retry_threshold = retry_threshold;
    wc.memory_trim_delay = std::chrono::milliseconds(0);
    worker_ = std::make_unique<quic::Worker>(&loop_, std::move(wc), &observer_);
    quic::MasterConfig mc;
    mc.listen = {*SocketAddress::Parse("127.0.0.1", 0)};
    mc.socket_options.enable_gro = false;  // 2 KiB datagram buffers instead of 64 KiB ones
    absl::StatusOr<std::unique_ptr<quic::Master>> master =
        quic::Master::Create(mc, &loop_, {quic::WorkerPort{&loop_, worker_.get()}});
    PETREL_FUZZ_CHECK(master.ok());
    master_ = *std::move(master);
    worker_->Attach(*master_);
    PETREL_FUZZ_CHECK(master_->Start().ok());
    server_address_ = master_->sockets()[0]->local_address();
    client_ = std::make_unique<QuicRawClient>(&loop_, server_address_);
    PETREL_FUZZ_CHECK(client_->ok());
  }

  // Teardown: the client (its ngtcp2 connection before its TlsSession), then the server's
  // connections (the Worker), then the sockets they send on (the Master), the loop last.
  ~QuicLoopback() {
    client_.reset();
    master_->StopReceiving();
    worker_.reset();
    master_.reset();
  }

  QuicLoopback(const QuicLoopback&) = delete;
  QuicLoopback& operator=(const QuicLoopback&) = delete;

  // Connects, and turns the loop until the client has the server's HANDSHAKE_DONE (the server's
  // handshake is complete) and both 1-RTT secrets. False if that takes too long.
  // A second Connect (after DropClient) starts a new client connection from the same socket;
  // what the harness knew of the first is forgotten.
  bool Connect() {
    if (!client_->Start()) return false;
    const bool up = Pump([this] { return client_->Ready(); },
                         /*max_turns=*/500, /*quiet_turns=*/500, std::chrono::milliseconds(1));
    return up && client_open() && client_->TakeKeys();
  }

  // Turns the loop until `done()` (asked before every turn), until `quiet_turns` turns in a row
  // moved no datagram, or for `max_turns` turns. Before a quiet turn the clock moves forward by
  // `idle_step` (at most to the client's next timer), as a loop waiting for its timers would.
  // Returns done().
  bool Pump(absl::FunctionRef<bool()> done, int max_turns, int quiet_turns,
            Duration idle_step = Duration::zero()) {
    return Turn(done, max_turns, quiet_turns, idle_step) == End::kDone;
  }
  // Turns the loop until `quiet_turns` turns in a row moved no datagram, each after moving the
  // clock by `idle_step`. False if that did not happen within `max_turns` turns.
  bool Settle(int max_turns, int quiet_turns, Duration idle_step) {
    return Turn([] { return false; }, max_turns, quiet_turns, idle_step) == End::kQuiet;
  }

  // ---- The client's streams (only while client_open()); see QuicRawClient ----
  int64_t OpenStream(bool bidi) { return client_->OpenStream(bidi); }
  bool Write(int64_t id, std::string data, bool fin) {
    return client_->Write(id, std::move(data), fin);
  }
  void ResetStream(int64_t id, uint64_t app_error) { client_->ResetStream(id, app_error); }
  void StopSending(int64_t id, uint64_t app_error) { client_->StopSending(id, app_error); }
  std::map<int64_t, Stream>& streams() { return client_->streams(); }

  // Whether the client's connection is up: not failed, not closing or draining, not dropped.
  bool client_open() const { return client_->open(); }
  // The client connection's first error: NGTCP2_ERR_DRAINING when the server closed it.
  int client_error() const { return client_->error(); }
  // Forgets the client connection without a word to the server: from now on only the target's
  // own packets reach it.
  void DropClient() { client_->Drop(); }

  // The server's worker (its counters) and address.
  const quic::Worker& worker() const { return *worker_; }
  const SocketAddress& server_address() const { return server_address_; }
  // Whether the server's connection has ended (its closing or draining period over, or dropped):
  // the application heard on_connection_closed.
  bool server_ended() const { return server_ended_; }
  // The server's first CONNECTION_CLOSE, once one came.
  const std::optional<FrameWalk>& server_close() const { return client_->server_close(); }
  // Whether the server acknowledged the client's 1-RTT packet `pn`.
  bool Acked(uint64_t pn) const { return client_->Acked(pn); }

  // The client's 1-RTT keys by key phase (the phase after the first one: 1).
  const OneRttKeys& client_keys(int phase) const { return client_->keys(phase); }
  // The connection ID the client sends to.
  absl::Span<const uint8_t> server_cid() const { return client_->server_cid(); }
  // A connection ID the target gave the server (NEW_CONNECTION_ID) in its own packets.
  void AddClientCid(absl::Span<const uint8_t> cid) { client_->AddClientCid(cid); }
  // A client's first Initial datagram for a new connection of its own; empty on failure.
  std::vector<uint8_t> FreshInitial() { return client_->FreshInitial(); }
  // Sends `datagram` from the client's socket to the server's, as the client would.
  void SendFromClient(absl::Span<const uint8_t> datagram) { client_->Send(datagram); }
  // UDP payload octets the client's socket sent and received (the server's datagrams).
  uint64_t client_sent_bytes() const { return client_->sent_bytes(); }
  uint64_t client_received_bytes() const { return client_->received_bytes(); }

 private:
  struct Shared {
    std::unique_ptr<quic::TlsServerContext> server_tls;
    std::unique_ptr<quic::AddressTokenCodec> tokens;
    std::unique_ptr<quic::crypto::RetryPacketWriter> retry_writer;
  };

  static QuicServerCallbacks NoticeEnd(QuicServerCallbacks callbacks, bool* ended) {
    callbacks.on_connection_closed =
        [ended, app = std::move(callbacks.on_connection_closed)](QuicConnection& conn) {
          *ended = true;
          if (app) app(conn);
        };
    return callbacks;
  }

  // Made once per process: a self-signed certificate takes a while, and these hold no state of
  // a connection (no session cache).
  static const Shared& GetShared() {
    static const Shared* shared = [] {
      SetLogLevel(LogLevel::kError);
      auto* s = new Shared;
      quic::TlsServerConfig server;
      absl::StatusOr<quic::CertificatePem> pem = quic::GenerateSelfSigned({"localhost"});
      PETREL_FUZZ_CHECK(pem.ok());
      server.certificate = *std::move(pem);
      server.alpn = {"h3"};
      server.early_data = false;
      server.quic_method = quic::crypto::PetrelQuicMethod();
      absl::StatusOr<std::unique_ptr<quic::TlsServerContext>> st =
          quic::TlsServerContext::Create(server);
      PETREL_FUZZ_CHECK(st.ok());
      s->server_tls = *std::move(st);
      s->tokens = std::make_unique<quic::AddressTokenCodec>(quic::AddressTokenCodec::RandomKey());
      absl::StatusOr<quic::crypto::RetryPacketWriter> rw =
          quic::crypto::RetryPacketWriter::Create();
      PETREL_FUZZ_CHECK(rw.ok());
      s->retry_writer = std::make_unique<quic::crypto::RetryPacketWriter>(*std::move(rw));
      return s;
    }();
    return *shared;
  }

  enum class End { kDone, kQuiet, kTurns };
  End Turn(absl::FunctionRef<bool()> done, int max_turns, int quiet_turns, Duration idle_step) {
    int quiet = 0;
    for (int turn = 0; turn < max_turns; ++turn) {
      if (done()) return End::kDone;
      const uint64_t before = Moved();
      Duration step = quiet == 0 ? Duration::zero() : idle_step;
      const ngtcp2_tstamp expiry = client_->expiry();
      const ngtcp2_tstamp now = QuicRawClient::Now();
      if (expiry != UINT64_MAX) {
        step = std::min<Duration>(
            step, expiry <= now ? Duration::zero() : std::chrono::nanoseconds(expiry - now));
      }
      AdvanceMonotonicClock(step);
      loop_.RunOnce(Duration::zero());
      client_->OnTimer();
      client_->Flush();
      if (Moved() != before) {
        quiet = 0;
      } else if (++quiet >= quiet_turns) {
        return done() ? End::kDone : End::kQuiet;
      }
    }
    return done() ? End::kDone : End::kTurns;
  }

  uint64_t Moved() const { return master_->datagrams_received() + client_->moved(); }

  EventLoop loop_;  // destroyed last
  bool server_ended_ = false;
  quic::CallbackObserver observer_;
  std::unique_ptr<quic::Worker> worker_;
  std::unique_ptr<quic::Master> master_;
  SocketAddress server_address_;
  std::unique_ptr<QuicRawClient> client_;
};

}  // namespace petrel::fuzz

#endif  // PETREL_FUZZ_QUIC_LOOPBACK_H_
