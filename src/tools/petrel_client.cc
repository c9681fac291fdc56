// petrel-client: a curl-like command-line HTTP/3 client on Http3Client. Every URL goes over one
// QUIC connection, bodies stream to files or stdout as they arrive, and the exit status says
// whether every request succeeded (see kClientUsage in client_options.cc). With --websocket it
// opens one WebSocket (RFC 9220) instead: stdin lines out, messages in.
#include <fcntl.h>
#include <netdb.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "petrel/common/clock.h"
#include "petrel/common/timer.h"
#include "petrel/http/http3_client.h"
#include "petrel/http/websocket.h"
#include "petrel/http/websocket_client.h"
#include "petrel/quic/quic_connection.h"
#include "tools/client_options.h"
#include "tools/session_file.h"

namespace petrel::tools {
namespace {

// Exit statuses; the numbers follow curl's where curl has one (kClientUsage lists them).
enum ExitCode : int {
  kExitOk = 0,
  kExitOther = 1,
  kExitUsage = 2,
  kExitResolve = 6,
  kExitConnect = 7,
  kExitHttpError = 22,
  kExitWrite = 23,
  kExitRead = 26,
  kExitTimeout = 28,
  kExitCipher = 35,
  kExitTransfer = 56,
};

// Set in the re-executed process so it does not re-execute again.
constexpr char kReexecMarker[] = "PETREL_CLIENT_CHACHA_REEXEC";
// Clears bit 57 of BoringSSL's capability vector: CPUID.1:ECX bit 25, AES-NI.
constexpr char kNoAesNi[] = "~0x200000000000000";
// After the deadline: how long the closing connection may take before the loop is stopped, and
// how long Run() may then take to return before the process just exits.
constexpr auto kCloseGrace = std::chrono::milliseconds(200);
constexpr auto kStopGrace = std::chrono::seconds(5);

// BoringSSL offers (and, as a server, prefers) ChaCha20 first only when it believes the CPU has
// no AES hardware, it exposes no call to reorder or restrict TLS 1.3 suites, and it reads
// OPENSSL_ia32cap once in a static initializer, before main() — so the only way to change its
// mind is to start the program again with the variable set. Returns only when no re-exec is
// needed or exec failed.
void MaybeReexecForChaCha(const ClientOptions& o, char** argv) {
  if (!WantsChaChaPreference(o.ciphers) || std::getenv(kReexecMarker) != nullptr) return;
  if (std::getenv("OPENSSL_ia32cap") != nullptr) return;  // the user's own setting wins
  ::setenv("OPENSSL_ia32cap", kNoAesNi, 1);
  ::setenv(kReexecMarker, "1", 1);
  ::execv("/proc/self/exe", argv);
  std::fprintf(stderr,
               "petrel-client: warning: cannot re-execute (%s); ChaCha20 may not be "
               "offered first\n",
               std::strerror(errno));
}

absl::StatusOr<SocketAddress> Resolve(const Url& url, const std::string& connect_to) {
  if (!connect_to.empty()) return SocketAddress::ParseHostPort(connect_to);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  hints.ai_protocol = IPPROTO_UDP;
  addrinfo* res = nullptr;
  const int rc = ::getaddrinfo(url.host.c_str(), std::to_string(url.port).c_str(), &hints, &res);
  if (rc != 0 || res == nullptr) {
    return absl::NotFoundError(absl::StrCat("cannot resolve ", url.host, ": ", gai_strerror(rc)));
  }
  SocketAddress address(res->ai_addr, res->ai_addrlen);
  ::freeaddrinfo(res);
  return address;
}

bool WriteAll(int fd, absl::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

std::string VersionName(uint32_t version) {
  const char* name = version == kQuicVersion1        ? "v1"
                     : version == kQuicVersion2Draft ? "v2 (draft)"
                                                     : "unknown";
  return absl::StrFormat("%s (0x%08x)", name, version);
}

// The client's configuration from the command line, with the saved session loaded if there is
// one (petrel-client and petrel-client --websocket alike).
Http3ClientConfig BuildConfig(const ClientOptions& o, const SocketAddress& server) {
  const Url& origin = o.urls.front();
  Http3ClientConfig config;
  config.server = server;
  config.server_name = origin.host;
  config.authority = origin.authority;
  config.verify_peer = !o.insecure;
  // --timeout bounds the whole run, the handshake included: no separate, shorter limit that a
  // lossy path would hit first.
  config.limits.handshake_timeout_ms = static_cast<uint64_t>(o.timeout_seconds * 1000);
  config.ca_file = o.ca_file;
  config.version = o.quic_version;
  config.other_versions = {o.quic_version == kQuicVersion1 ? kQuicVersion2Draft : kQuicVersion1};
  config.early_data = o.early_data;
  config.qlog_dir = o.qlog_dir;
  if (o.preferred_address_at_once) config.preferred_address_move = QuicMigration::kImmediate;
  config.limits.keep_alive_ms = o.keep_alive_ms;
  if (o.limit_rate > 0) {
    // An eighth of a second of data per stream window: what the rate keeps back waits at the
    // server, and what the client holds while paused (delivered at once on resume) stays small.
    config.limits.max_stream_data =
        std::clamp<uint64_t>(o.limit_rate / 8, 64 << 10, config.limits.max_stream_data);
  }
  if (!o.qlog_dir.empty()) {
    std::error_code ec;  // a failure shows up as the connection's qlog warning
    std::filesystem::create_directories(o.qlog_dir, ec);
  }
  config.key_log_file = o.key_log_file;
  if (config.key_log_file.empty()) {
    if (const char* env = std::getenv("SSLKEYLOGFILE"); env != nullptr) config.key_log_file = env;
  }
  if (!o.session_file.empty()) {
    absl::StatusOr<SavedSession> saved = LoadSessionFile(o.session_file);
    if (saved.ok()) {
      config.session = std::move(saved->session);
      config.transport_params = std::move(saved->transport_params);
      if (o.verbose) {
        std::fprintf(stderr, "* resuming with the session in %s%s\n", o.session_file.c_str(),
                     o.early_data ? ", requests in 0-RTT" : "");
      }
    } else if (!absl::IsNotFound(saved.status())) {
      std::fprintf(stderr, "petrel-client: warning: ignoring %s: %s\n", o.session_file.c_str(),
                   std::string(saved.status().message()).c_str());
    } else if (o.verbose) {
      std::fprintf(stderr, "* no saved session in %s: full handshake\n", o.session_file.c_str());
    }
  }
  if (o.verbose) {
    std::fprintf(stderr, "* connecting to %s (server name %s), QUIC version %s\n",
                 server.ToString().c_str(), origin.host.c_str(),
                 VersionName(o.quic_version).c_str());
  }
  return config;
}

// One URL's request and where its body goes.
struct Transfer {
  const Url* url = nullptr;
  std::string file;  // -o / --download destination; empty: stdout
  int fd = -1;
  std::string held;  // stdout bytes waiting for the URLs before this one
  int status = 0;
  uint64_t bytes = 0;
  uint64_t id = 0;         // the client's request id
  TimePoint first_byte{};  // --limit-rate counts from here
  TimePoint resume_at{};   // paused by --limit-rate until then
  bool rate_paused = false;
  bool done = false;
  bool discard = false;  // the body is not wanted (status >= 400, write error, abort)
};

class ClientRun {
 public:
  explicit ClientRun(const ClientOptions& options) : o_(options) {}
  ~ClientRun() {
    for (Transfer& t : transfers_) {
      if (t.fd >= 0) ::close(t.fd);
    }
  }

  int Execute();

 private:
  absl::StatusOr<Http3Request> MakeRequest(const Transfer& t);
  // Submits while --parallel allows and URLs remain; after the last one, CloseWhenDone.
  void SubmitMore();
  void OnConnected();
  void OnSession(std::string session, std::string transport_params);
  void OnHead(size_t i, int status);
  void OnData(size_t i, absl::string_view data);
  void OnComplete(size_t i, const absl::Status& status);
  // Hands stdout bytes over in URL order once the transfers before them are done.
  void AdvanceStdout();
  // Records a failure (the first one sets the exit status) and tells the user.
  void Fail(int code, const std::string& message);
  // Stops everything (later, not inside the client's callback).
  void Abort();
  void RunWithDeadline();
  // --limit-rate: pauses transfer `t` if it is ahead of the rate; the rate timer resumes it.
  void PaceTransfer(Transfer& t);
  void OnRateTimer();

  const ClientOptions& o_;
  std::unique_ptr<Http3Client> client_;
  std::vector<Transfer> transfers_;
  size_t next_ = 0;         // next transfer to submit
  size_t in_flight_ = 0;    // submitted, not complete
  size_t stdout_next_ = 0;  // the transfer whose bytes stdout takes now
  bool close_requested_ = false;
  bool connected_ = false;
  bool aborted_ = false;
  bool key_update_started_ = false;
  std::unique_ptr<Timer> rate_timer_;  // --limit-rate: resumes paused transfers
  std::atomic<bool> timed_out_{false};
  int exit_code_ = kExitOk;
};

void ClientRun::Fail(int code, const std::string& message) {
  std::fprintf(stderr, "petrel-client: %s\n", message.c_str());
  if (exit_code_ == kExitOk) exit_code_ = code;
}

void ClientRun::Abort() {
  if (aborted_) return;
  aborted_ = true;
  client_->loop()->Post([this] { client_->Stop(); });
}

absl::StatusOr<Http3Request> ClientRun::MakeRequest(const Transfer& t) {
  Http3Request request;
  request.method = o_.method;
  request.path = t.url->path;
  request.authority = t.url->authority;
  bool user_agent = false;
  for (const auto& [name, value] : o_.headers) {
    request.headers.Add(name, value);
    if (absl::EqualsIgnoreCase(name, "user-agent")) user_agent = true;
  }
  if (!user_agent) request.headers.Add("user-agent", "petrel-client");
  if (!o_.body_file.empty()) {
    // Streamed from the file as the stream has room, never read whole.
    absl::StatusOr<FileBody> file = FileBody::Open(o_.body_file);
    if (!file.ok()) return file.status();
    request.body = ResponseBody(*std::move(file));
  } else if (o_.has_body) {
    request.body = ResponseBody(o_.body);
  }
  return request;
}

void ClientRun::SubmitMore() {
  while (!aborted_ && next_ < transfers_.size() && (o_.parallel == 0 || in_flight_ < o_.parallel)) {
    const size_t i = next_++;
    Transfer& t = transfers_[i];
    absl::StatusOr<Http3Request> request = MakeRequest(t);
    if (!request.ok()) {
      Fail(kExitRead, absl::StrCat("cannot read ", o_.body_file, ": ", request.status().message()));
      t.done = true;
      continue;
    }
    Http3ResponseHandler handler;
    handler.on_head = [this, i](int status, const HeaderMap&) { OnHead(i, status); };
    handler.on_data = [this, i](absl::string_view data) { OnData(i, data); };
    handler.on_complete = [this, i](absl::Status status, const HeaderMap&) {
      OnComplete(i, status);
    };
    absl::StatusOr<uint64_t> id = client_->Submit(*std::move(request), std::move(handler));
    if (!id.ok()) {
      Fail(kExitTransfer, absl::StrCat("https://", t.url->authority, t.url->path,
                                       ": not sent: ", id.status().message()));
      t.done = true;
      continue;
    }
    t.id = *id;
    ++in_flight_;
  }
  AdvanceStdout();
  if (next_ == transfers_.size() && !close_requested_) {
    close_requested_ = true;
    client_->CloseWhenDone();
  }
}

void ClientRun::OnConnected() {
  connected_ = true;
  const std::string cipher = client_->cipher();
  if (o_.verbose) {
    // Http3Client offers only "h3" and QUIC forbids a handshake without an agreed ALPN, so a
    // completed handshake means h3.
    std::fprintf(stderr,
                 "* connected: QUIC version %s, cipher %s, ALPN h3\n"
                 "* session resumed: %s\n* 0-RTT: %s\n",
                 VersionName(client_->version()).c_str(), cipher.c_str(),
                 client_->session_reused() ? "yes" : "no",
                 client_->early_data_accepted() ? "accepted"
                 : o_.early_data                ? "not accepted"
                                                : "not attempted");
  }
  if (!o_.ciphers.empty() &&
      std::find(o_.ciphers.begin(), o_.ciphers.end(), cipher) == o_.ciphers.end()) {
    Fail(kExitCipher,
         absl::StrCat("the server chose ", cipher, ", which --ciphers does not allow; closing"));
    Abort();
  }
}

void ClientRun::OnSession(std::string session, std::string transport_params) {
  if (o_.session_file.empty()) return;
  absl::Status s = SaveSessionFile(o_.session_file,
                                   SavedSession{std::move(session), std::move(transport_params)});
  if (!s.ok()) {
    std::fprintf(stderr, "petrel-client: warning: session not saved: %s\n",
                 std::string(s.message()).c_str());
  } else if (o_.verbose) {
    std::fprintf(stderr, "* session ticket saved to %s\n", o_.session_file.c_str());
  }
}

void ClientRun::OnHead(size_t i, int status) {
  Transfer& t = transfers_[i];
  t.status = status;
  if (aborted_) return;
  if (status >= 400) {
    t.discard = true;
    Fail(kExitHttpError,
         absl::StrCat("https://", t.url->authority, t.url->path, ": the server answered ", status));
    return;
  }
  if (t.file.empty()) return;
  std::error_code ec;
  const std::filesystem::path parent = std::filesystem::path(t.file).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  t.fd = ::open(t.file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (t.fd < 0) {
    t.discard = true;
    Fail(kExitWrite, absl::StrCat("cannot create ", t.file, ": ", std::strerror(errno)));
    Abort();
  }
}

void ClientRun::OnData(size_t i, absl::string_view data) {
  // The handshake is confirmed by the time response bytes arrive, or soon after; retried on
  // each piece until ngtcp2 allows it.
  if (o_.key_update && !key_update_started_ && client_->InitiateKeyUpdate()) {
    key_update_started_ = true;
    if (o_.verbose) std::fprintf(stderr, "* key update started\n");
  }
  Transfer& t = transfers_[i];
  t.bytes += data.size();
  if (o_.limit_rate > 0) PaceTransfer(t);
  if (t.discard || aborted_) return;
  if (t.fd >= 0) {
    if (!WriteAll(t.fd, data)) {
      t.discard = true;
      Fail(kExitWrite, absl::StrCat("cannot write ", t.file, ": ", std::strerror(errno)));
      Abort();
    }
  } else if (i == stdout_next_) {
    if (!WriteAll(STDOUT_FILENO, data)) {
      t.discard = true;
      Fail(kExitWrite, absl::StrCat("cannot write to stdout: ", std::strerror(errno)));
      Abort();
    }
  } else {
    t.held.append(data.data(), data.size());
  }
}

void ClientRun::OnComplete(size_t i, const absl::Status& status) {
  Transfer& t = transfers_[i];
  t.done = true;
  --in_flight_;
  if (t.fd >= 0) {
    if (::close(t.fd) != 0 && status.ok() && !t.discard) {
      Fail(kExitWrite, absl::StrCat("cannot write ", t.file, ": ", std::strerror(errno)));
    }
    t.fd = -1;
  }
  const std::string url = absl::StrCat("https://", t.url->authority, t.url->path);
  if (!status.ok()) {
    if (timed_out_.load()) {
      Fail(kExitTimeout, absl::StrCat(url, ": timed out after ", o_.timeout_seconds, " s"));
    } else if (!aborted_) {
      Fail(connected_ ? kExitTransfer : kExitConnect,
           absl::StrCat(url, connected_ ? ": failed: " : ": no connection: ", status.ToString()));
    }
  }
  if (o_.verbose) {
    if (status.ok()) {
      std::fprintf(stderr, "* [%zu] %s %s: %d, %llu bytes\n", i + 1, o_.method.c_str(), url.c_str(),
                   t.status, static_cast<unsigned long long>(t.bytes));
    } else {
      std::fprintf(stderr, "* [%zu] %s %s: failed (%s)\n", i + 1, o_.method.c_str(), url.c_str(),
                   status.ToString().c_str());
    }
  }
  AdvanceStdout();
  // Not from inside the client's callback: the next Submit runs on a clean stack.
  if (next_ < transfers_.size()) client_->loop()->Post([this] { SubmitMore(); });
}

void ClientRun::PaceTransfer(Transfer& t) {
  const TimePoint now = client_->loop()->now();
  if (t.first_byte == TimePoint{}) t.first_byte = now;
  if (t.rate_paused || t.done) return;
  // When the bytes so far are due at `rate`; ahead of that, the transfer waits.
  const TimePoint due =
      t.first_byte + std::chrono::duration_cast<Duration>(std::chrono::duration<double>(
                         static_cast<double>(t.bytes) / o_.limit_rate));
  if (due <= now) return;
  t.rate_paused = true;
  t.resume_at = due;
  client_->SetReadingPaused(t.id, true);
  if (!rate_timer_->armed()) rate_timer_->StartAt(due);
}

void ClientRun::OnRateTimer() {
  const TimePoint now = client_->loop()->now();
  TimePoint next{};
  for (Transfer& t : transfers_) {
    if (!t.rate_paused) continue;
    if (t.resume_at <= now || t.done) {
      t.rate_paused = false;
      if (!t.done) client_->SetReadingPaused(t.id, false);
    } else if (next == TimePoint{} || t.resume_at < next) {
      next = t.resume_at;
    }
  }
  if (next != TimePoint{}) rate_timer_->StartAt(next);
}

void ClientRun::AdvanceStdout() {
  while (stdout_next_ < transfers_.size() && transfers_[stdout_next_].done) {
    ++stdout_next_;
    if (stdout_next_ == transfers_.size()) break;
    Transfer& t = transfers_[stdout_next_];
    if (!t.held.empty() && !aborted_ && t.file.empty()) {
      if (!WriteAll(STDOUT_FILENO, t.held)) {
        Fail(kExitWrite, absl::StrCat("cannot write to stdout: ", std::strerror(errno)));
        Abort();
      }
    }
    std::string().swap(t.held);
  }
}

// Runs the client with --timeout as a deadline for the whole run: a watchdog thread stops the
// client (Stop() is safe from any thread for a client with its own loop) and, should Run()
// still not return, ends the process.
void ClientRun::RunWithDeadline() {
  std::mutex mu;
  std::condition_variable cv;
  bool finished = false;
  const auto timeout = std::chrono::duration<double>(o_.timeout_seconds);
  std::thread watchdog([&] {
    std::unique_lock<std::mutex> lock(mu);
    if (cv.wait_for(lock, timeout, [&] { return finished; })) return;
    timed_out_.store(true);
    client_->Stop();
    // The first Stop() closes the connection, which still waits out its closing period (three
    // PTOs, seconds before a handshake) before Run() returns; a second one stops the loop.
    if (cv.wait_for(lock, kCloseGrace, [&] { return finished; })) return;
    client_->Stop();
    if (cv.wait_for(lock, kStopGrace, [&] { return finished; })) return;
    std::fprintf(stderr, "petrel-client: timed out after %g s (the client did not stop)\n",
                 o_.timeout_seconds);
    std::_Exit(kExitTimeout);
  });
  client_->Run();
  {
    std::lock_guard<std::mutex> lock(mu);
    finished = true;
  }
  cv.notify_all();
  watchdog.join();
}

int ClientRun::Execute() {
  const Url& origin = o_.urls.front();
  absl::StatusOr<SocketAddress> server = Resolve(origin, o_.connect_to);
  if (!server.ok()) {
    Fail(kExitResolve, std::string(server.status().message()));
    return exit_code_;
  }
  if (!o_.body_file.empty()) {
    if (absl::StatusOr<FileBody> f = FileBody::Open(o_.body_file); !f.ok()) {
      Fail(kExitRead, absl::StrCat("cannot read ", o_.body_file, ": ", f.status().message()));
      return exit_code_;
    }
  }

  Http3ClientConfig config = BuildConfig(o_, *server);
  Http3ClientCallbacks callbacks;
  callbacks.on_connected = [this] { OnConnected(); };
  callbacks.on_session = [this](std::string session, std::string params) {
    OnSession(std::move(session), std::move(params));
  };
  absl::StatusOr<std::unique_ptr<Http3Client>> client =
      Http3Client::Create(std::move(config), std::move(callbacks));
  if (!client.ok()) {
    Fail(kExitOther, absl::StrCat("cannot start the client: ", client.status().ToString()));
    return exit_code_;
  }
  client_ = *std::move(client);
  rate_timer_ = std::make_unique<Timer>(client_->loop(), [this] { OnRateTimer(); });

  transfers_.resize(o_.urls.size());
  for (size_t i = 0; i < o_.urls.size(); ++i) {
    transfers_[i].url = &o_.urls[i];
    if (!o_.output_file.empty()) transfers_[i].file = o_.output_file;
    if (!o_.download_dir.empty()) {
      // Validated by ParseClientOptions already.
      transfers_[i].file = *DownloadPath(o_.download_dir, o_.urls[i].path);
    }
  }
  // Submitted before Connect() so that, when resuming with --0rtt, they go out as early data.
  SubmitMore();
  if (absl::Status s = client_->Connect(); !s.ok()) {
    Fail(kExitConnect, absl::StrCat("cannot connect: ", s.ToString()));
    return exit_code_;
  }
  RunWithDeadline();

  if (timed_out_.load() && exit_code_ != kExitTimeout) {
    Fail(kExitTimeout, absl::StrCat("timed out after ", o_.timeout_seconds, " s"));
  }
  // Whatever the connection's end left unsent or unfinished is a failure too.
  for (const Transfer& t : transfers_) {
    if (!t.done) {
      Fail(timed_out_.load() ? kExitTimeout
           : connected_      ? kExitTransfer
                             : kExitConnect,
           absl::StrCat("https://", t.url->authority, t.url->path, ": not completed"));
    }
  }
  if (o_.verbose) {
    std::fprintf(stderr, "* %zu request(s), exit status %d\n", transfers_.size(), exit_code_);
  }
  return exit_code_;
}

// Lines of stdin, read on a thread of their own (stdin may be a terminal, a pipe or a file, and
// only the first two can be polled) and handed to the loop. Shared with that thread, which may
// outlive the run: it is left blocked in read() when the run ends first.
struct StdinLines {
  // Lines read ahead of the WebSocket at most; the reader waits beyond it.
  static constexpr size_t kMaxPending = 1 << 20;

  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::string> lines;
  size_t bytes = 0;
  bool eof = false;
  bool stopped = false;  // the run is over: read no more
  // Runs on the reader thread (under mu) when lines or the end are there and the loop was not
  // told yet; the loop clears `told` when it takes them.
  absl::AnyInvocable<void()> tell;
  bool told = false;
  bool read_failed = false;

  static void Read(std::shared_ptr<StdinLines> in) {
    std::string partial;
    char buf[64 * 1024];
    for (;;) {
      const ssize_t n = ::read(STDIN_FILENO, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      std::unique_lock<std::mutex> lock(in->mu);
      if (in->stopped) return;
      if (n <= 0) {
        if (!partial.empty()) in->Push(std::move(partial));
        in->read_failed = n < 0;
        in->eof = true;
        in->Tell();
        return;
      }
      lock.unlock();
      partial.append(buf, static_cast<size_t>(n));
      size_t begin = 0;
      for (size_t nl; (nl = partial.find('\n', begin)) != std::string::npos; begin = nl + 1) {
        lock.lock();
        in->cv.wait(lock, [&] { return in->bytes < kMaxPending || in->stopped; });
        if (in->stopped) return;
        size_t end = nl;
        if (end > begin && partial[end - 1] == '\r') --end;  // CRLF input counts as lines too
        in->Push(partial.substr(begin, end - begin));
        in->Tell();
        lock.unlock();
      }
      partial.erase(0, begin);
    }
  }

 private:
  void Push(std::string line) {
    bytes += line.size();
    lines.push_back(std::move(line));
  }
  void Tell() {
    if (told || !tell) return;
    told = true;
    tell();
  }
};

// petrel-client --websocket: one WebSocket over HTTP/3 at the URL; stdin lines out, messages
// to stdout, a close with 1000 at the end of stdin.
class WebSocketRun {
 public:
  explicit WebSocketRun(const ClientOptions& options)
      : o_(options), in_(std::make_shared<StdinLines>()) {}
  ~WebSocketRun() {
    std::lock_guard<std::mutex> lock(in_->mu);
    in_->stopped = true;
    in_->tell = nullptr;
    in_->cv.notify_all();
  }

  int Execute();

 private:
  void OnOpen(const absl::Status& status, absl::string_view subprotocol);
  void OnMessage(WebSocketMessageType type, absl::string_view data);
  void OnClose(uint16_t code, absl::string_view reason);
  // Sends the lines that arrived while the WebSocket takes them; closes after the last one.
  void SendLines();
  void OnDeadline();
  void Fail(int code, const std::string& message) {
    std::fprintf(stderr, "petrel-client: %s\n", message.c_str());
    if (exit_code_ == kExitOk) exit_code_ = code;
  }
  // Ends the run: the connection closes once the stream is done.
  void End() {
    if (ended_) return;
    ended_ = true;
    deadline_->Cancel();
    client_->CloseWhenDone();
  }

  const ClientOptions& o_;
  std::shared_ptr<StdinLines> in_;
  std::unique_ptr<Http3Client> client_;
  std::unique_ptr<WebSocketClient> ws_;
  std::unique_ptr<Timer> deadline_;  // --timeout: the opening, then the wait for the close
  std::string url_;
  bool connected_ = false;
  bool closing_ = false;  // our close is out
  bool closed_ = false;   // on_close ran
  bool ended_ = false;
  int stops_ = 0;
  int exit_code_ = kExitOk;
};

void WebSocketRun::OnOpen(const absl::Status& status, absl::string_view subprotocol) {
  if (!status.ok()) {
    const bool refused = absl::IsPermissionDenied(status) || absl::IsNotFound(status) ||
                         absl::IsFailedPrecondition(status);
    Fail(refused      ? kExitHttpError
         : connected_ ? kExitTransfer
                      : kExitConnect,
         absl::StrCat(url_, ": no WebSocket: ", status.message()));
    return End();
  }
  deadline_->Cancel();  // the session itself lasts as long as stdin does
  if (o_.verbose) {
    std::fprintf(stderr, "* WebSocket open at %s, subprotocol %s\n", url_.c_str(),
                 subprotocol.empty() ? "(none)" : std::string(subprotocol).c_str());
  }
  {
    std::lock_guard<std::mutex> lock(in_->mu);
    in_->tell = [loop = client_->loop(), this] { loop->Post([this] { SendLines(); }); };
    in_->told = false;
    if (!in_->lines.empty() || in_->eof) {
      in_->told = true;
      client_->loop()->Post([this] { SendLines(); });
    }
  }
  std::thread(&StdinLines::Read, in_).detach();
}

void WebSocketRun::SendLines() {
  if (ws_ == nullptr || !ws_->is_open() || closing_) return;
  std::unique_lock<std::mutex> lock(in_->mu);
  in_->told = false;
  while (!in_->lines.empty()) {
    std::string line = std::move(in_->lines.front());
    in_->lines.pop_front();
    in_->bytes -= line.size();
    in_->cv.notify_all();
    lock.unlock();
    const bool sent = ws_->SendText(line);
    lock.lock();
    if (!sent) {
      // Full: back in front; on_writable comes back here.
      in_->bytes += line.size();
      in_->lines.push_front(std::move(line));
      in_->told = true;
      return;
    }
  }
  if (!in_->eof) return;
  if (in_->read_failed) std::fprintf(stderr, "petrel-client: warning: reading stdin failed\n");
  lock.unlock();
  closing_ = true;
  ws_->Close(WebSocketClose::kNormal, {});
  deadline_->StartAfter(
      std::chrono::duration_cast<Duration>(std::chrono::duration<double>(o_.timeout_seconds)));
}

void WebSocketRun::OnMessage(WebSocketMessageType, absl::string_view data) {
  // A message and its newline in one write, so a reader sees whole lines.
  std::string line;
  line.reserve(data.size() + 1);
  line.append(data.data(), data.size());
  line.push_back('\n');
  if (!WriteAll(STDOUT_FILENO, line)) {
    Fail(kExitWrite, absl::StrCat("cannot write to stdout: ", std::strerror(errno)));
    ws_->Close(WebSocketClose::kGoingAway, {});
  }
}

void WebSocketRun::OnClose(uint16_t code, absl::string_view reason) {
  closed_ = true;
  if (code != WebSocketClose::kNormal) {
    Fail(kExitTransfer, absl::StrCat(url_, ": the WebSocket closed with ", code,
                                     reason.empty() ? "" : ": ", reason));
  } else if (o_.verbose) {
    std::fprintf(stderr, "* WebSocket closed with 1000%s%s\n", reason.empty() ? "" : ": ",
                 std::string(reason).c_str());
  }
  End();
}

void WebSocketRun::OnDeadline() {
  if (stops_++ == 0) {
    Fail(kExitTimeout, absl::StrCat(url_, closing_ ? ": no close from the server" : ": not open",
                                    " after ", o_.timeout_seconds, " s"));
    client_->Stop();
    // The first Stop() waits out the connection's closing period; a second one ends the loop.
    deadline_->StartAfter(kCloseGrace);
  } else {
    client_->Stop();
  }
}

int WebSocketRun::Execute() {
  const Url& url = o_.urls.front();
  url_ = absl::StrCat(url.scheme, "://", url.authority, url.path);
  absl::StatusOr<SocketAddress> server = Resolve(url, o_.connect_to);
  if (!server.ok()) {
    Fail(kExitResolve, std::string(server.status().message()));
    return exit_code_;
  }
  Http3ClientCallbacks callbacks;
  callbacks.on_connected = [this] {
    connected_ = true;
    if (o_.verbose) {
      std::fprintf(stderr, "* connected: QUIC version %s, cipher %s, ALPN h3\n",
                   VersionName(client_->version()).c_str(), client_->cipher().c_str());
    }
  };
  callbacks.on_session = [this](std::string session, std::string params) {
    if (o_.session_file.empty()) return;
    absl::Status s =
        SaveSessionFile(o_.session_file, SavedSession{std::move(session), std::move(params)});
    if (!s.ok()) {
      std::fprintf(stderr, "petrel-client: warning: session not saved: %s\n",
                   std::string(s.message()).c_str());
    }
  };
  absl::StatusOr<std::unique_ptr<Http3Client>> client =
      Http3Client::Create(BuildConfig(o_, *server), std::move(callbacks));
  if (!client.ok()) {
    Fail(kExitOther, absl::StrCat("cannot start the client: ", client.status().ToString()));
    return exit_code_;
  }
  client_ = *std::move(client);
  deadline_ = std::make_unique<Timer>(client_->loop(), [this] { OnDeadline(); });

  WebSocketClientOptions options;
  options.path = url.path;
  options.authority = url.authority;
  options.subprotocols = o_.ws_protocols;
  bool user_agent = false;
  for (const auto& [name, value] : o_.headers) {
    options.headers.Add(name, value);
    if (absl::EqualsIgnoreCase(name, "user-agent")) user_agent = true;
  }
  if (!user_agent) options.headers.Add("user-agent", "petrel-client");
  WebSocketClientCallbacks cb;
  cb.on_open = [this](absl::Status s, absl::string_view p) { OnOpen(s, p); };
  cb.on_message = [this](WebSocketMessageType t, absl::string_view d) { OnMessage(t, d); };
  cb.on_writable = [this] { SendLines(); };
  cb.on_close = [this](uint16_t code, absl::string_view reason) { OnClose(code, reason); };
  absl::StatusOr<std::unique_ptr<WebSocketClient>> ws =
      WebSocketClient::Open(*client_, std::move(options), std::move(cb));
  if (!ws.ok()) {
    Fail(kExitOther, absl::StrCat("cannot open the WebSocket: ", ws.status().ToString()));
    return exit_code_;
  }
  ws_ = *std::move(ws);
  if (absl::Status s = client_->Connect(); !s.ok()) {
    Fail(kExitConnect, absl::StrCat("cannot connect: ", s.ToString()));
    return exit_code_;
  }
  deadline_->StartAfter(
      std::chrono::duration_cast<Duration>(std::chrono::duration<double>(o_.timeout_seconds)));
  client_->Run();
  if (exit_code_ == kExitOk && !closed_) {
    Fail(connected_ ? kExitTransfer : kExitConnect,
         absl::StrCat(url_, ": the connection ended before the WebSocket closed"));
  }
  ws_.reset();
  return exit_code_;
}

}  // namespace
}  // namespace petrel::tools

int main(int argc, char** argv) {
  absl::StatusOr<petrel::tools::ClientOptions> options =
      petrel::tools::ParseClientOptions(argc, argv);
  if (!options.ok()) {
    std::fprintf(stderr, "petrel-client: %s\n(see --help)\n",
                 std::string(options.status().message()).c_str());
    return petrel::tools::kExitUsage;
  }
  if (options->help) {
    std::fputs(petrel::tools::kClientUsage, stdout);
    return 0;
  }
  petrel::tools::MaybeReexecForChaCha(*options, argv);
  // A closed stdout (| head) must fail a write, not kill the process.
  ::signal(SIGPIPE, SIG_IGN);
  if (options->websocket) {
    petrel::tools::WebSocketRun run(*options);
    return run.Execute();
  }
  petrel::tools::ClientRun run(*options);
  return run.Execute();
}
