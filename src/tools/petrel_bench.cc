// petrel-bench: an HTTP/3 load generator in the manner of h2load, on Petrel's Http3Client.
//
// CONNS connections (one Http3Client each) are spread over THREADS loop threads; the clients of
// a thread share its EventLoop (Http3ClientConfig::loop). Each connection keeps STREAMS requests
// in flight: when one completes, the next one is submitted from its on_complete, into the same
// slot. Bodies are counted, never stored. Everything a request needs is preallocated per
// connection (its slot) or fits the small-object storage of the handlers and strings, so the
// bench allocates per request only what the library does (and a copy of a URL path longer than
// the std::string small buffer).
//
// Each thread records into its own statistics (no shared writes on the request path); the main
// thread merges them after the threads are joined and prints the report.
#include <netdb.h>
#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "petrel/common/clock.h"
#include "petrel/common/event_loop.h"
#include "petrel/common/socket_address.h"
#include "petrel/common/thread.h"
#include "petrel/common/timer.h"
#include "petrel/http/http3_client.h"
#include "tools/bench_stats.h"
#include "tools/url.h"

namespace petrel::tools {
namespace {

constexpr absl::string_view kUsage =
    R"(usage: petrel-bench [--h3] -c CONNS -m STREAMS (-D SECONDS | -n REQUESTS) [options] URL...

HTTP/3 load generator. CONNS connections, each keeping STREAMS requests in flight (a new request
is submitted as soon as one completes), run until SECONDS have passed or REQUESTS requests in
total were started. The URLs (same scheme, host and port; different paths) are requested
round-robin. Response bodies are counted, not stored.

  --h3                 HTTP/3 (the default and the only protocol; accepted for symmetry
                       with h2load-style command lines)
  -c, --clients N      connections (default 1)
  -m, --max-concurrent-streams N
                       requests in flight per connection (default 1)
  -n, --requests N     requests in total, split evenly over the connections (N >= CONNS)
  -D, --duration S     measure for S seconds (may be fractional); requests still in flight at
                       the end are not counted; the connections are then closed
  --warm-up S          with -D: run S seconds of load before measuring (not counted)
  -t, --threads N      loop threads the connections are spread over (default 1; at most CONNS)
  -k, --insecure       do not verify the server's certificate
  --ca FILE            trust the CAs in FILE (PEM) instead of the system store
  --sni NAME           TLS server name (default: the URL's host)
  -h, --help           this text

Latency is measured from Submit to on_complete per request; connect time from Connect to the
completed handshake. Requests are submitted only once a connection's handshake completed, and
a failed connection is counted and not retried. Requests the server refused without processing
them (GOAWAY, H3_REQUEST_REJECTED: a server stopping gracefully) are counted as refused, not as
failed, and a connection the server closed after its GOAWAY as goaway, not as lost. The last
line of the report is a summary of key=value pairs for scripts.

Exit status: 0 when at least one request succeeded and nothing failed or was refused; 1 when a
request failed (status >= 400 or a transport error, warm-up included) or was refused, a
connection failed or was closed by the server, or no request succeeded; 2 for a usage error.
)";

constexpr uint64_t kUnlimited = std::numeric_limits<uint64_t>::max();
// How long after the end of a -D run connections may take to finish their requests in flight
// before they are stopped, and how long after that the loop waits for them to report closed: a
// closed QUIC connection reports so only after its closing period (three PTOs), which on a
// loaded machine can take seconds. Connections still closing then are just destroyed.
constexpr Duration kDrainGrace = std::chrono::seconds(2);
constexpr Duration kCloseGrace = std::chrono::seconds(5);

struct Options {
  int connections = 1;
  int streams = 1;
  uint64_t requests = 0;  // -n; 0 = not given
  double duration_s = 0;  // -D; 0 = not given
  double warm_up_s = 0;
  int threads = 1;
  bool insecure = false;
  std::string ca_file;
  std::string sni;
  std::vector<Url> urls;
  SocketAddress server;
};

// Read-only for the workers once the threads start.
struct RunPlan {
  const Options* options = nullptr;
  TimePoint measure_start;  // requests submitted before this are warm-up
  TimePoint measure_end;    // requests completing after this are not counted
  bool by_duration = false;
};

struct WorkerStats {
  LatencyHistogram latency;
  LatencyHistogram connect;
  uint64_t started = 0;  // submitted inside the measurement window
  uint64_t done = 0;     // completed inside it (succeeded + failed)
  uint64_t succeeded = 0;
  uint64_t failed_status = 0;     // a response with status >= 400
  uint64_t failed_transport = 0;  // on_complete with an error
  uint64_t failed_submit = 0;     // Submit refused the request
  uint64_t failed_warm_up = 0;    // any failure of a warm-up request
  // The server said it would not process the request (GOAWAY before it went out,
  // H3_REQUEST_REJECTED): safe to retry, not a failure of the server, but not a success either.
  uint64_t refused = 0;
  uint64_t not_counted = 0;                    // warm-up, or still in flight at the end of a -D run
  std::array<uint64_t, 6> status_classes{};    // [1] = 1xx ... [5] = 5xx, [0] = other
  std::array<uint64_t, 17> transport_codes{};  // by absl::StatusCode
  uint64_t body_bytes = 0;
  uint64_t header_bytes = 0;
  int connections = 0;
  int connected = 0;
  int connect_failed = 0;  // Create/Connect failed, or closed before the handshake completed
  int lost = 0;            // closed by the peer or an error while we still had work
  int goaway = 0;          // closed by the peer after its GOAWAY (a server stopping gracefully)
  int not_closed = 0;      // still closing when the loop gave up waiting (not a failure)
  int idle_slots = 0;      // slots left without a request after a re-entrant completion
  TimePoint last_completion{};
  TimePoint finished{};
  std::string first_error;
  std::string first_connect_error;
};

void NoteError(std::string* first, absl::string_view what) {
  if (first->empty()) *first = std::string(what);
}

class Worker;
class Connection;

// One request in flight. The handler lambdas capture only this slot's address, so they fit the
// handlers' inline storage; a connection's slots never move.
struct Slot {
  Connection* connection = nullptr;
  TimePoint submitted{};
  uint64_t body_bytes = 0;
  uint64_t header_bytes = 0;
  int status = 0;
};

class Connection {
 public:
  Connection(Worker* worker, int index, uint64_t quota);

  // Creates the client on the worker's loop and sends the first flight. False when that failed
  // (counted); the connection is then closed.
  bool Start();
  void CloseWhenDone();
  // Stops the client if it is still open.
  void Stop();
  bool closed() const { return closed_; }

 private:
  friend struct SlotHandlers;

  void OnConnected();
  void OnClosed();
  void Submit(Slot* slot);
  void OnComplete(Slot* slot, const absl::Status& status);
  void MarkClosed();

  Worker* const worker_;
  uint64_t to_start_;  // requests this connection may still start; kUnlimited for -D
  size_t next_url_;
  std::vector<Slot> slots_;
  std::unique_ptr<Http3Client> client_;
  TimePoint connect_begin_{};
  bool connected_ = false;
  bool closed_ = false;
  bool close_requested_ = false;
  bool in_submit_ = false;
  bool goaway_ = false;  // the server sent GOAWAY
};

class Worker {
 public:
  Worker(const RunPlan& plan, std::vector<uint64_t> quotas)
      : plan_(plan), quotas_(std::move(quotas)) {}

  // The thread body: runs the loop with this worker's connections until they are all closed.
  void Run();

  const RunPlan& plan() const { return plan_; }
  const Options& options() const { return *plan_.options; }
  EventLoop* loop() { return loop_; }
  WorkerStats& stats() { return stats_; }
  const WorkerStats& stats() const { return stats_; }
  bool ending() const { return ending_; }
  void ConnectionClosed();

 private:
  void EndRun();

  const RunPlan plan_;
  const std::vector<uint64_t> quotas_;  // per connection; kUnlimited for -D
  EventLoop* loop_ = nullptr;
  std::vector<std::unique_ptr<Connection>>* connections_ = nullptr;
  Timer* close_timer_ = nullptr;
  int live_ = 0;
  bool ending_ = false;
  WorkerStats stats_;
};

Connection::Connection(Worker* worker, int index, uint64_t quota)
    : worker_(worker),
      to_start_(quota),
      next_url_(static_cast<size_t>(index)),
      slots_(static_cast<size_t>(worker->options().streams)) {
  for (Slot& slot : slots_) slot.connection = this;
}

bool Connection::Start() {
  const Options& o = worker_->options();
  WorkerStats& stats = worker_->stats();
  Http3ClientConfig config;
  config.server = o.server;
  config.server_name = o.sni.empty() ? o.urls[0].host : o.sni;
  config.authority = o.urls[0].authority;
  config.verify_peer = !o.insecure;
  config.ca_file = o.ca_file;
  config.loop = worker_->loop();
  // Room for every slot's stream at once, whatever the server grants.
  config.limits.max_streams_bidi = std::max<uint64_t>(config.limits.max_streams_bidi, o.streams);
  Http3ClientCallbacks callbacks;
  callbacks.on_connected = [this] { OnConnected(); };
  callbacks.on_closed = [this] { OnClosed(); };
  callbacks.on_goaway = [this](int64_t) { goaway_ = true; };
  absl::StatusOr<std::unique_ptr<Http3Client>> client =
      Http3Client::Create(std::move(config), std::move(callbacks));
  if (!client.ok()) {
    ++stats.connect_failed;
    NoteError(&stats.first_connect_error, client.status().ToString());
    closed_ = true;
    return false;
  }
  client_ = *std::move(client);
  connect_begin_ = MonotonicNow();
  if (absl::Status s = client_->Connect(); !s.ok()) {
    ++stats.connect_failed;
    NoteError(&stats.first_connect_error, s.ToString());
    closed_ = true;  // a later on_closed is ignored
    return false;
  }
  return true;
}

void Connection::OnConnected() {
  WorkerStats& stats = worker_->stats();
  connected_ = true;
  ++stats.connected;
  stats.connect.Record(ToNanos(MonotonicNow()) - ToNanos(connect_begin_));
  if (worker_->ending()) return;
  for (Slot& slot : slots_) {
    if (to_start_ == 0 || closed_ || close_requested_) break;
    Submit(&slot);
  }
}

// The response handler of a slot. Each lambda captures one pointer.
struct SlotHandlers {
  static Http3ResponseHandler Make(Slot* slot) {
    Http3ResponseHandler h;
    h.on_head = [slot](int status, const HeaderMap& headers) {
      slot->status = status;
      slot->header_bytes += headers.byte_size();
    };
    h.on_data = [slot](absl::string_view data) { slot->body_bytes += data.size(); };
    h.on_complete = [slot](absl::Status status, const HeaderMap& trailers) {
      slot->header_bytes += trailers.byte_size();
      slot->connection->OnComplete(slot, status);
    };
    return h;
  }
};

void Connection::Submit(Slot* slot) {
  const Options& o = worker_->options();
  WorkerStats& stats = worker_->stats();
  Http3Request request;
  request.path = o.urls[next_url_ % o.urls.size()].path;
  ++next_url_;
  slot->status = 0;
  slot->body_bytes = 0;
  slot->header_bytes = 0;
  slot->submitted = MonotonicNow();
  if (to_start_ != kUnlimited) --to_start_;
  const bool counted = slot->submitted >= worker_->plan().measure_start &&
                       slot->submitted <= worker_->plan().measure_end;
  if (counted) ++stats.started;
  in_submit_ = true;
  absl::StatusOr<uint64_t> id = client_->Submit(std::move(request), SlotHandlers::Make(slot));
  in_submit_ = false;
  if (!id.ok()) {
    if (counted && Http3Client::IsRefused(id.status())) {
      ++stats.refused;
    } else if (counted) {
      ++stats.failed_submit;
    } else {
      ++stats.failed_warm_up;
    }
    NoteError(&stats.first_error, absl::StrCat("Submit: ", id.status().ToString()));
  }
  if (to_start_ == 0) CloseWhenDone();
}

void Connection::OnComplete(Slot* slot, const absl::Status& status) {
  const TimePoint now = MonotonicNow();
  const RunPlan& plan = worker_->plan();
  WorkerStats& stats = worker_->stats();
  const bool failed = !status.ok() || slot->status >= 400;
  if (Http3Client::IsRefused(status) && slot->submitted >= plan.measure_start &&
      now <= plan.measure_end) {
    ++stats.refused;
    NoteError(&stats.first_error, status.ToString());
  } else if (slot->submitted >= plan.measure_start && now <= plan.measure_end) {
    ++stats.done;
    stats.latency.Record(ToNanos(now) - ToNanos(slot->submitted));
    stats.body_bytes += slot->body_bytes;
    stats.header_bytes += slot->header_bytes;
    stats.last_completion = now;
    if (!status.ok()) {
      ++stats.failed_transport;
      ++stats.transport_codes[std::min<size_t>(static_cast<size_t>(status.code()),
                                               stats.transport_codes.size() - 1)];
      NoteError(&stats.first_error, status.ToString());
    } else {
      const int cls = slot->status / 100;
      ++stats.status_classes[cls >= 1 && cls <= 5 ? cls : 0];
      if (slot->status >= 400) {
        ++stats.failed_status;
      } else {
        ++stats.succeeded;
      }
    }
  } else {
    ++stats.not_counted;
    // Failures of warm-up requests still count against the run; those of requests cut off by
    // the end of a -D run (which we close ourselves) do not.
    if (failed && slot->submitted < plan.measure_start && !worker_->ending()) {
      ++stats.failed_warm_up;
      NoteError(&stats.first_error, status.ok()
                                        ? absl::StrCat("warm-up request got status ", slot->status)
                                        : absl::StrCat("warm-up request: ", status.ToString()));
    }
  }
  if (worker_->ending() || closed_ || close_requested_ || to_start_ == 0 || client_->closed()) {
    return;
  }
  if (in_submit_) {
    // Completed from inside Submit: submitting again here could recurse without bound.
    ++stats.idle_slots;
    return;
  }
  Submit(slot);
}

void Connection::CloseWhenDone() {
  if (closed_ || close_requested_ || client_ == nullptr) return;
  close_requested_ = true;
  client_->CloseWhenDone();
}

void Connection::Stop() {
  if (closed_ || client_ == nullptr) return;
  close_requested_ = true;
  client_->Stop();
}

void Connection::OnClosed() {
  if (closed_) return;
  WorkerStats& stats = worker_->stats();
  if (!connected_) {
    ++stats.connect_failed;
    NoteError(&stats.first_connect_error, "closed before the handshake completed");
  } else if (!close_requested_ && !worker_->ending()) {
    if (goaway_) {
      ++stats.goaway;
    } else {
      ++stats.lost;
    }
  }
  MarkClosed();
}

void Connection::MarkClosed() {
  closed_ = true;
  worker_->ConnectionClosed();
}

void Worker::ConnectionClosed() {
  if (--live_ == 0) loop_->Stop();
}

void Worker::EndRun() {
  ending_ = true;
  for (auto& c : *connections_) c->CloseWhenDone();
}

void Worker::Run() {
  EventLoop loop;
  loop_ = &loop;
  std::vector<std::unique_ptr<Connection>> connections;
  connections_ = &connections;
  connections.reserve(quotas_.size());
  stats_.connections = static_cast<int>(quotas_.size());
  for (size_t i = 0; i < quotas_.size(); ++i) {
    connections.push_back(std::make_unique<Connection>(this, static_cast<int>(i), quotas_[i]));
  }
  // A connection reports closed (and decrements live_) only after it started.
  live_ = static_cast<int>(connections.size());
  for (auto& c : connections) {
    if (!c->Start()) --live_;
  }
  // Last resort: give up on connections that never report closed.
  Timer give_up(&loop, [&] {
    for (auto& c : connections) {
      if (!c->closed()) ++stats_.not_closed;
    }
    loop.Stop();
  });
  Timer stop_timer(&loop, [&] {
    for (auto& c : connections) c->Stop();
    give_up.StartAfter(kCloseGrace);
  });
  Timer end_timer(&loop, [&] {
    EndRun();
    stop_timer.StartAfter(kDrainGrace);
  });
  if (live_ > 0) {
    if (plan_.by_duration) end_timer.StartAt(plan_.measure_end);
    loop.Run();
  }
  stats_.finished = MonotonicNow();
  // The clients go before the timers and the loop they use.
  connections.clear();
  connections_ = nullptr;
  loop_ = nullptr;
}

// --- Command line -----------------------------------------------------------------------------

absl::StatusOr<SocketAddress> Resolve(const Url& url) {
  if (absl::StatusOr<SocketAddress> a = SocketAddress::Parse(url.host, url.port); a.ok()) return a;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* res = nullptr;
  const int rc = ::getaddrinfo(url.host.c_str(), nullptr, &hints, &res);
  if (rc != 0 || res == nullptr) {
    return absl::NotFoundError(absl::StrCat("cannot resolve ", url.host, ": ", gai_strerror(rc)));
  }
  SocketAddress address(res->ai_addr, res->ai_addrlen);
  ::freeaddrinfo(res);
  address.set_port(url.port);
  return address;
}

template <typename T>
bool ParseNumber(absl::string_view text, T* out) {
  if constexpr (std::is_floating_point_v<T>) {
    return absl::SimpleAtod(text, out) && *out >= 0;
  } else {
    return absl::SimpleAtoi(text, out);
  }
}

// Returns the options, or a usage error; prints --help itself (then returns nullopt).
absl::StatusOr<std::optional<Options>> ParseArgs(int argc, char** argv) {
  Options o;
  std::vector<absl::string_view> urls;
  bool have_n = false;
  bool have_d = false;
  for (int i = 1; i < argc; ++i) {
    absl::string_view arg = argv[i];
    std::string name;
    std::optional<absl::string_view> inline_value;
    if (arg.size() > 2 && arg.substr(0, 2) == "--") {
      const size_t eq = arg.find('=');
      name = std::string(arg.substr(0, eq));
      if (eq != absl::string_view::npos) inline_value = arg.substr(eq + 1);
    } else if (arg.size() >= 2 && arg[0] == '-' && arg != "-") {
      name = std::string(arg.substr(0, 2));
      if (arg.size() > 2) inline_value = arg.substr(2);  // -c50
    } else {
      urls.push_back(arg);
      continue;
    }
    auto flag = [&]() -> absl::Status {
      if (inline_value) return absl::InvalidArgumentError(absl::StrCat(name, " takes no value"));
      return absl::OkStatus();
    };
    auto value = [&]() -> absl::StatusOr<absl::string_view> {
      if (inline_value) return *inline_value;
      if (i + 1 >= argc) return absl::InvalidArgumentError(absl::StrCat(name, " needs a value"));
      return absl::string_view(argv[++i]);
    };
    auto number = [&](auto* out) -> absl::Status {
      absl::StatusOr<absl::string_view> v = value();
      if (!v.ok()) return v.status();
      if (!ParseNumber(*v, out)) {
        return absl::InvalidArgumentError(absl::StrCat("bad number for ", name, ": ", *v));
      }
      return absl::OkStatus();
    };
    absl::Status s;
    if (name == "-h" || name == "--help") {
      std::fputs(kUsage.data(), stdout);
      return std::optional<Options>();
    } else if (name == "--h3") {
      s = flag();
    } else if (name == "-c" || name == "--clients") {
      s = number(&o.connections);
    } else if (name == "-m" || name == "--max-concurrent-streams") {
      s = number(&o.streams);
    } else if (name == "-n" || name == "--requests") {
      s = number(&o.requests);
      have_n = true;
    } else if (name == "-D" || name == "--duration") {
      s = number(&o.duration_s);
      have_d = true;
    } else if (name == "--warm-up" || name == "--warm-up-time") {
      s = number(&o.warm_up_s);
    } else if (name == "-t" || name == "--threads") {
      s = number(&o.threads);
    } else if (name == "-k" || name == "--insecure") {
      s = flag();
      o.insecure = true;
    } else if (name == "--ca") {
      absl::StatusOr<absl::string_view> v = value();
      s = v.status();
      if (v.ok()) o.ca_file = std::string(*v);
    } else if (name == "--sni") {
      absl::StatusOr<absl::string_view> v = value();
      s = v.status();
      if (v.ok()) o.sni = std::string(*v);
    } else {
      s = absl::InvalidArgumentError(absl::StrCat("unknown option: ", name));
    }
    if (!s.ok()) return s;
  }
  if (o.connections < 1) return absl::InvalidArgumentError("-c must be at least 1");
  if (o.streams < 1) return absl::InvalidArgumentError("-m must be at least 1");
  if (o.threads < 1) return absl::InvalidArgumentError("-t must be at least 1");
  if (have_n == have_d) return absl::InvalidArgumentError("give exactly one of -n and -D");
  if (have_n && o.requests < static_cast<uint64_t>(o.connections)) {
    return absl::InvalidArgumentError("-n must be at least -c (every connection makes a request)");
  }
  if (have_d && !(o.duration_s > 0)) return absl::InvalidArgumentError("-D must be > 0");
  if (o.warm_up_s > 0 && !have_d) return absl::InvalidArgumentError("--warm-up needs -D");
  if (urls.empty()) return absl::InvalidArgumentError("no URL given");
  o.threads = std::min(o.threads, o.connections);
  for (absl::string_view text : urls) {
    absl::StatusOr<Url> url = ParseUrl(text);
    if (!url.ok()) return url.status();
    if (url->scheme != "https") {
      return absl::InvalidArgumentError(absl::StrCat("HTTP/3 needs an https:// URL: ", text));
    }
    if (!o.urls.empty() && (url->host != o.urls[0].host || url->port != o.urls[0].port)) {
      return absl::InvalidArgumentError(
          absl::StrCat("all URLs must name the same host and port: ", text));
    }
    o.urls.push_back(*std::move(url));
  }
  absl::StatusOr<SocketAddress> server = Resolve(o.urls[0]);
  if (!server.ok()) return server.status();
  o.server = *server;
  return std::optional<Options>(std::move(o));
}

// --- Report -----------------------------------------------------------------------------------

std::string LatencyRow(absl::string_view label, const LatencyHistogram& h) {
  if (h.count() == 0) return absl::StrFormat("%-18s (none)\n", label);
  return absl::StrFormat("%-18s %10s %10s %10s %10s %10s %10s\n", label,
                         FormatNanos(static_cast<double>(h.min())), FormatNanos(h.mean()),
                         FormatNanos(static_cast<double>(h.ValueAtPercentile(50))),
                         FormatNanos(static_cast<double>(h.ValueAtPercentile(90))),
                         FormatNanos(static_cast<double>(h.ValueAtPercentile(99))),
                         FormatNanos(static_cast<double>(h.max())));
}

int Report(const Options& o, const RunPlan& plan,
           const std::vector<std::unique_ptr<Worker>>& workers) {
  auto total = std::make_unique<WorkerStats>();
  WorkerStats& t = *total;
  TimePoint finished{};
  for (const auto& w : workers) {
    const WorkerStats& s = w->stats();
    t.latency.Merge(s.latency);
    t.connect.Merge(s.connect);
    t.started += s.started;
    t.done += s.done;
    t.succeeded += s.succeeded;
    t.failed_status += s.failed_status;
    t.failed_transport += s.failed_transport;
    t.failed_submit += s.failed_submit;
    t.failed_warm_up += s.failed_warm_up;
    t.refused += s.refused;
    t.not_counted += s.not_counted;
    for (size_t i = 0; i < t.status_classes.size(); ++i) t.status_classes[i] += s.status_classes[i];
    for (size_t i = 0; i < t.transport_codes.size(); ++i) {
      t.transport_codes[i] += s.transport_codes[i];
    }
    t.body_bytes += s.body_bytes;
    t.header_bytes += s.header_bytes;
    t.connections += s.connections;
    t.connected += s.connected;
    t.connect_failed += s.connect_failed;
    t.lost += s.lost;
    t.goaway += s.goaway;
    t.not_closed += s.not_closed;
    t.idle_slots += s.idle_slots;
    t.last_completion = std::max(t.last_completion, s.last_completion);
    finished = std::max(finished, s.finished);
    if (t.first_error.empty()) t.first_error = s.first_error;
    if (t.first_connect_error.empty()) t.first_connect_error = s.first_connect_error;
  }
  // -D: the measurement window, cut short if every connection ended early. -n: from the start
  // to the last completion.
  TimePoint end = plan.by_duration ? std::min(plan.measure_end, finished)
                                   : (t.done > 0 ? t.last_completion : finished);
  const double elapsed_s =
      std::max(0.0, std::chrono::duration<double>(end - plan.measure_start).count());
  const double per_s = elapsed_s > 0 ? 1.0 / elapsed_s : 0;
  const uint64_t failed = t.failed_status + t.failed_transport + t.failed_submit;

  std::string out;
  absl::StrAppendFormat(
      &out, "petrel-bench: HTTP/3 to %s (%s), %d connections x %d streams on %d thread%s, ",
      o.urls[0].authority, o.server.ToString(), o.connections, o.streams, o.threads,
      o.threads == 1 ? "" : "s");
  if (plan.by_duration) {
    absl::StrAppendFormat(&out, "%.3g s measured after %.3g s of warm-up\n", o.duration_s,
                          o.warm_up_s);
  } else {
    absl::StrAppendFormat(&out, "%u requests\n", o.requests);
  }
  absl::StrAppendFormat(&out, "finished in %.2fs, %.2f req/s, %s/s body\n", elapsed_s,
                        static_cast<double>(t.succeeded) * per_s,
                        FormatBytes(static_cast<double>(t.body_bytes) * per_s));
  absl::StrAppendFormat(&out,
                        "requests: %u started, %u done, %u succeeded, %u failed (%u status >= 400, "
                        "%u transport errors, %u refused by Submit), %u not counted (warm-up or "
                        "in flight at the end)\n",
                        t.started, t.done, t.succeeded, failed, t.failed_status, t.failed_transport,
                        t.failed_submit, t.not_counted);
  if (t.failed_warm_up > 0) {
    absl::StrAppendFormat(&out, "warm-up failures: %u\n", t.failed_warm_up);
  }
  if (t.refused > 0) {
    absl::StrAppendFormat(&out,
                          "refused: %u requests the server did not process (GOAWAY or "
                          "H3_REQUEST_REJECTED; safe to retry)\n",
                          t.refused);
  }
  absl::StrAppendFormat(&out, "status codes: %u 2xx, %u 3xx, %u 4xx, %u 5xx, %u other\n",
                        t.status_classes[2], t.status_classes[3], t.status_classes[4],
                        t.status_classes[5], t.status_classes[0] + t.status_classes[1]);
  if (t.failed_transport > 0) {
    out += "transport errors by code:";
    for (size_t i = 0; i < t.transport_codes.size(); ++i) {
      if (t.transport_codes[i] == 0) continue;
      absl::StrAppendFormat(&out, " %s %u",
                            absl::StatusCodeToString(static_cast<absl::StatusCode>(i)),
                            t.transport_codes[i]);
    }
    out += "\n";
  }
  if (!t.first_error.empty()) absl::StrAppendFormat(&out, "first error: %s\n", t.first_error);
  absl::StrAppendFormat(&out,
                        "traffic: %s (%u) response body, %s (%u) decoded header fields; %s/s "
                        "body (wire bytes, QUIC and QPACK overhead included, are not counted)\n",
                        FormatBytes(static_cast<double>(t.body_bytes)), t.body_bytes,
                        FormatBytes(static_cast<double>(t.header_bytes)), t.header_bytes,
                        FormatBytes(static_cast<double>(t.body_bytes) * per_s));
  absl::StrAppendFormat(&out,
                        "connections: %d requested, %d connected, %d failed to connect, %d lost "
                        "during the run, %d closed by the server after GOAWAY\n",
                        t.connections, t.connected, t.connect_failed, t.lost, t.goaway);
  if (!t.first_connect_error.empty()) {
    absl::StrAppendFormat(&out, "first connection error: %s\n", t.first_connect_error);
  }
  if (t.not_closed > 0) {
    absl::StrAppendFormat(&out,
                          "note: %d connections had not reported closed %.0f s after being "
                          "stopped at the end (closing period); they were destroyed\n",
                          t.not_closed, std::chrono::duration<double>(kCloseGrace).count());
  }
  if (t.idle_slots > 0) {
    absl::StrAppendFormat(&out,
                          "client anomaly: %d request slots went idle after a completion inside "
                          "Submit\n",
                          t.idle_slots);
  }
  absl::StrAppendFormat(&out, "%-18s %10s %10s %10s %10s %10s %10s\n", "", "min", "mean", "p50",
                        "p90", "p99", "max");
  out += LatencyRow("request latency:", t.latency);
  out += LatencyRow("connect time:", t.connect);
  const bool ok = failed == 0 && t.failed_warm_up == 0 && t.connect_failed == 0 && t.lost == 0 &&
                  t.refused == 0 && t.goaway == 0 && t.succeeded > 0;
  absl::StrAppendFormat(
      &out,
      "summary: requests=%u succeeded=%u failed=%u failed_status=%u failed_transport=%u "
      "failed_warm_up=%u elapsed_s=%.6f req_per_s=%.2f body_bytes=%u body_bytes_per_s=%.0f "
      "latency_min_us=%.1f latency_mean_us=%.1f latency_p50_us=%.1f latency_p90_us=%.1f "
      "latency_p99_us=%.1f latency_max_us=%.1f connect_mean_us=%.1f connections=%d "
      "connected=%d connect_failed=%d lost=%d refused=%u goaway=%d ok=%d\n",
      t.done, t.succeeded, failed, t.failed_status, t.failed_transport, t.failed_warm_up, elapsed_s,
      static_cast<double>(t.succeeded) * per_s, t.body_bytes,
      static_cast<double>(t.body_bytes) * per_s, t.latency.min() / 1e3, t.latency.mean() / 1e3,
      t.latency.ValueAtPercentile(50) / 1e3, t.latency.ValueAtPercentile(90) / 1e3,
      t.latency.ValueAtPercentile(99) / 1e3, t.latency.max() / 1e3, t.connect.mean() / 1e3,
      t.connections, t.connected, t.connect_failed, t.lost, t.refused, t.goaway, ok ? 1 : 0);
  std::fputs(out.c_str(), stdout);
  std::fflush(stdout);
  return ok ? 0 : 1;
}

int Main(int argc, char** argv) {
  absl::StatusOr<std::optional<Options>> parsed = ParseArgs(argc, argv);
  if (!parsed.ok()) {
    std::fprintf(stderr, "petrel-bench: %s\n(see petrel-bench --help)\n",
                 std::string(parsed.status().message()).c_str());
    return 2;
  }
  if (!parsed->has_value()) return 0;  // --help
  const Options options = **std::move(parsed);

  // -n: connection i gets n / c requests, the first n % c one more.
  std::vector<std::vector<uint64_t>> quotas(static_cast<size_t>(options.threads));
  for (int i = 0; i < options.connections; ++i) {
    uint64_t quota = kUnlimited;
    if (options.requests > 0) {
      const uint64_t c = static_cast<uint64_t>(options.connections);
      quota = options.requests / c + (static_cast<uint64_t>(i) < options.requests % c ? 1 : 0);
    }
    quotas[static_cast<size_t>(i % options.threads)].push_back(quota);
  }

  const TimePoint start = MonotonicNow();
  RunPlan plan;
  plan.options = &options;
  plan.by_duration = options.duration_s > 0;
  if (plan.by_duration) {
    plan.measure_start = start + std::chrono::duration_cast<Duration>(
                                     std::chrono::duration<double>(options.warm_up_s));
    plan.measure_end = plan.measure_start + std::chrono::duration_cast<Duration>(
                                                std::chrono::duration<double>(options.duration_s));
  } else {
    plan.measure_start = start;
    plan.measure_end = TimePoint::max();
  }

  std::vector<std::unique_ptr<Worker>> workers;
  std::vector<std::unique_ptr<Thread>> threads;
  for (auto& q : quotas) workers.push_back(std::make_unique<Worker>(plan, std::move(q)));
  for (size_t i = 0; i < workers.size(); ++i) {
    auto thread = std::make_unique<Thread>(absl::StrCat("bench-", i));
    Worker* w = workers[i].get();
    if (absl::Status s = thread->Start([w] { w->Run(); }); !s.ok()) {
      std::fprintf(stderr, "petrel-bench: cannot start a thread: %s\n", s.ToString().c_str());
      return 2;  // the started threads are joined by their destructors
    }
    threads.push_back(std::move(thread));
  }
  for (auto& t : threads) t->Join();
  return Report(options, plan, workers);
}

}  // namespace
}  // namespace petrel::tools

int main(int argc, char** argv) { return petrel::tools::Main(argc, argv); }
