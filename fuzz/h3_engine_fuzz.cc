// The h3 engine (H3Connection on nghttp3) on a real server QUIC connection — QuicServer's
// single-loop Master and Worker, after a real handshake with a Petrel client (quic_loopback.h) —
// fed what a client may write on its streams: the control stream (the harness writes its type,
// 0x00), the QPACK encoder (0x02) and decoder (0x03) streams, a unidirectional stream whose type
// the input writes, and four request streams; with FIN, RESET_STREAM and STOP_SENDING where the
// input asks. The server answers with FuzzRouter (engine_harness.h).
//
// Input: chunks of
//   op      bits 0-2: the stream (0 control, 1 QPACK encoder, 2 QPACK decoder, 3 a
//           unidirectional stream of the input's type, 4-7 request streams 0-3);
//           0x08: FIN after the bytes; 0x10: then reset the stream (H3_REQUEST_CANCELLED);
//           0x20: then turn the loop until nothing moves (else chunks travel together);
//           0x40: the length takes two octets; 0x80: STOP_SENDING first (request streams).
//   length  one octet (two, big-endian, with 0x40); that many bytes follow (fewer at the end).
//
// Properties: no crash or sanitizer report, and once nothing moves either the server has closed
// the connection with an HTTP/3, QPACK or QUIC error (its CONNECTION_CLOSE, opened by the
// harness, never says NO_ERROR), or the connection is open and a well-formed GET / on a new
// request stream gets a 200 within a bounded number of loop turns — one bad stream never harms a
// connection that stays open — after which the exchange comes to rest within a bounded number of
// turns.
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "engine_harness.h"
#include "fuzz_check.h"
#include "http/h3/h3_server_callbacks.h"
#include "quic_loopback.h"
#include "quic_one_rtt.h"

namespace petrel::fuzz {
namespace {

constexpr uint64_t kH3NoError = 0x100;
constexpr uint64_t kH3RequestCancelled = 0x10c;

// GET / with static-table references and a literal :authority (RFC 9204: required insert count
// 0, base 0, :method GET (17), :scheme https (23), :path / (1), :authority (0) "localhost").
constexpr char kGetFields[] = "\x00\x00\xd1\xd7\xc1\x50\x09localhost";
const std::string& GetRequest() {
  static const std::string* request = [] {
    const std::string fields(kGetFields, sizeof(kGetFields) - 1);
    return new std::string("\x01" + std::string(1, static_cast<char>(fields.size())) + fields);
  }();
  return *request;
}

const http::H3ServerCallbacks& Callbacks() {
  static const http::H3ServerCallbacks* callbacks = new http::H3ServerCallbacks(
      [](Request& req, Response& res) { FuzzRouter().Handle(req, res); });
  return *callbacks;
}

// Skips a QPACK prefixed integer (RFC 9204 §4.1.1) whose prefix has `bits` bits.
bool SkipPrefixInt(absl::Span<const uint8_t>& in, int bits) {
  if (in.empty()) return false;
  const uint8_t max = static_cast<uint8_t>((1u << bits) - 1);
  const bool more = (in[0] & max) == max;
  in.remove_prefix(1);
  if (!more) return true;
  for (int i = 0; i < 10 && !in.empty(); ++i) {
    const uint8_t b = in[0];
    in.remove_prefix(1);
    if ((b & 0x80) == 0) return true;
  }
  return false;
}

// Whether a response stream starts (after any frames of reserved types) with a HEADERS frame
// whose first field line is :status 200 from the static table — how nghttp3 always encodes it.
bool StartsWith200(absl::string_view bytes) {
  absl::Span<const uint8_t> in(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  while (!in.empty()) {
    uint64_t type, len;
    if (!ReadVarint(in, &type) || !ReadVarint(in, &len) || in.size() < len) return false;
    absl::Span<const uint8_t> payload = in.subspan(0, len);
    in.remove_prefix(len);
    if (type == 0x00) return false;  // DATA before HEADERS
    if (type != 0x01) continue;
    if (!SkipPrefixInt(payload, 8) || !SkipPrefixInt(payload, 7)) return false;
    return !payload.empty() && payload[0] == 0xd9;  // indexed, static, 25: ":status: 200"
  }
  return false;
}

// The server's close must name an error: any QUIC transport error, or an HTTP/3 (0x101-0x110)
// or QPACK (0x200-0x202) error — the codes nghttp3 and the engine use. Not the codes of one
// request's end (H3_REQUEST_REJECTED, _CANCELLED, _INCOMPLETE, H3_MESSAGE_ERROR: RFC 9114
// §4.1.2, §8.1): a bad request ends its stream, not the connection.
bool IsRequestErrorCode(uint64_t code) { return code >= 0x10b && code <= 0x10e; }

void CheckCloseCode(const FrameWalk& close) {
  if (close.app_close) {
    if (IsRequestErrorCode(close.close_code)) {
      std::fprintf(stderr, "server closed the connection with request error 0x%llx\n",
                   static_cast<unsigned long long>(close.close_code));
      PETREL_FUZZ_CHECK(!"a request's error code ended the whole connection");
    }
    if ((close.close_code > kH3NoError && close.close_code <= 0x110) ||
        (close.close_code >= 0x200 && close.close_code <= 0x202)) {
      return;
    }
  } else if (close.close_code != 0) {
    return;
  }
  std::fprintf(stderr, "server closed with %s code 0x%llx\n",
               close.app_close ? "application" : "transport",
               static_cast<unsigned long long>(close.close_code));
  PETREL_FUZZ_CHECK(!"the server closed the connection without an error code");
}

struct StreamSlot {
  int64_t id = -1;
  bool open_failed = false;
};

void Run(absl::Span<const uint8_t> in) {
  QuicLoopback net(Callbacks().Build());
  PETREL_FUZZ_CHECK(net.Connect());
  StreamSlot slots[8];
  while (in.size() >= 2) {
    const uint8_t op = in[0];
    size_t len = in[1];
    in.remove_prefix(2);
    if ((op & 0x40) != 0) {
      if (in.empty()) break;
      len = len << 8 | in[0];
      in.remove_prefix(1);
    }
    len = std::min(len, in.size());
    const absl::string_view bytes(reinterpret_cast<const char*>(in.data()), len);
    in.remove_prefix(len);

    if (!net.client_open()) break;  // the server closed the connection
    const size_t which = op & 0x07;
    StreamSlot& slot = slots[which];
    if (slot.open_failed) continue;
    std::string data;
    if (slot.id < 0) {
      slot.id = net.OpenStream(/*bidi=*/which >= 4);
      if (slot.id < 0) {
        slot.open_failed = true;
        continue;
      }
      static constexpr char kTypes[] = {0x00, 0x02, 0x03};
      if (which < 3) data.push_back(kTypes[which]);
    }
    data.append(bytes.data(), bytes.size());
    if ((op & 0x80) != 0 && which >= 4) net.StopSending(slot.id, kH3RequestCancelled);
    (void)net.Write(slot.id, std::move(data), (op & 0x08) != 0);  // refused once it has ended
    if ((op & 0x10) != 0) net.ResetStream(slot.id, kH3RequestCancelled);
    if ((op & 0x20) != 0) (void)net.Settle(200, 2, Duration::zero());
  }
  (void)net.Settle(400, 2, Duration::zero());

  if (!net.client_open()) {
    if (!net.server_close().has_value()) {
      std::fprintf(stderr, "client error: %d\n", net.client_error());
      PETREL_FUZZ_CHECK(!"the connection ended without the server's CONNECTION_CLOSE");
    }
    CheckCloseCode(*net.server_close());
    return;
  }
  const int64_t id = net.OpenStream(/*bidi=*/true);
  PETREL_FUZZ_CHECK(id >= 0);
  PETREL_FUZZ_CHECK(net.Write(id, GetRequest(), true));
  auto& streams = net.streams();
  const bool answered = net.Pump(
      [&] {
        auto it = streams.find(id);
        return !net.client_open() || (it != streams.end() && (it->second.fin || it->second.reset));
      },
      /*max_turns=*/3000, /*quiet_turns=*/3000, std::chrono::milliseconds(1));
  if (!answered) PETREL_FUZZ_CHECK(!"GET / was not answered within 3000 loop turns");
  if (!net.client_open()) {
    std::fprintf(stderr, "client error: %d\n", net.client_error());
    if (net.server_close().has_value()) {
      std::fprintf(stderr, "server closed with %s code 0x%llx\n",
                   net.server_close()->app_close ? "application" : "transport",
                   static_cast<unsigned long long>(net.server_close()->close_code));
    }
    PETREL_FUZZ_CHECK(!"the connection closed while a well-formed GET / was waiting");
  }
  const QuicLoopback::Stream& response = streams[id];
  if (!StartsWith200(response.data)) {
    std::fprintf(stderr, "GET / response: %zu octets, fin %d, reset %d\n", response.data.size(),
                 response.fin, response.reset);
    PETREL_FUZZ_CHECK(!"GET / on an open connection did not get a 200");
  }
  // Every handler answers at once and the client reads everything: nothing may keep the two
  // busy (a retransmission loop, a stream that spins between blocked and writable).
  PETREL_FUZZ_CHECK(
      net.Settle(/*max_turns=*/3000, /*quiet_turns=*/5, std::chrono::milliseconds(1)));
}

}  // namespace
}  // namespace petrel::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 16 * 1024) return 0;
  petrel::fuzz::Run(absl::MakeConstSpan(data, size));
  return 0;
}
