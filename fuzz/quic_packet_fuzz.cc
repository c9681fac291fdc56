// A Petrel server QUIC connection (QuicServer's single-loop Master and Worker, running the h3
// engine) fed arbitrary 1-RTT frames after a real handshake (quic_loopback.h). Arbitrary
// datagrams would only fail decryption, so the input is a list of packet payloads that the
// harness seals as the client would — short header to the server's CID, the client's real 1-RTT
// keys (or those of the next key phase), header protection (quic_one_rtt.h) — and sends from the
// client's socket. The client's own connection is dropped first: from then on the input speaks
// for it alone.
//
// Input: packets of
//   flags   0x03: packet number length - 1; 0x04: the next key phase (a key update); 0x18: the
//           reserved bits, sent as they are (non-zero is a PROTOCOL_VIOLATION); 0x20: the spin
//           bit; 0x40: turn the loop after this packet (else they go in one burst); 0x80: the
//           previous packet's number again (a duplicate).
//   length  two octets, big-endian; that many payload octets follow (fewer at the end).
//
// Properties: no crash or sanitizer report, and once nothing moves either the server has closed
// the connection with an error (its CONNECTION_CLOSE, opened by the harness, never says
// NO_ERROR), or it keeps the connection usable: a PING gets acknowledged within a bounded number
// of loop turns. Only an input that may hold a CONNECTION_CLOSE of its own may leave the server
// silent, and then the connection must end (it drained, RFC 9000 §10.2.2).
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "absl/types/span.h"
#include "engine_harness.h"
#include "fuzz_check.h"
#include "http/h3/h3_server_callbacks.h"
#include "quic_loopback.h"
#include "quic_one_rtt.h"

namespace petrel::fuzz {
namespace {

// Above every 1-RTT packet number the client used in the handshake (a handful), and close
// enough to them that a one-octet packet number still decodes to it (RFC 9000 §A.3).
constexpr uint64_t kFirstPacketNumber = 64;
constexpr size_t kMaxPackets = 32;
constexpr size_t kMaxPayload = 1200;

const http::H3ServerCallbacks& Callbacks() {
  static const http::H3ServerCallbacks* callbacks = new http::H3ServerCallbacks(
      [](Request& req, Response& res) { FuzzRouter().Handle(req, res); });
  return *callbacks;
}

// The server's close must name an error: any QUIC transport error but NO_ERROR, or one of the
// HTTP/3 (0x101-0x110) or QPACK (0x200-0x202) errors of the h3 engine it runs.
void CheckCloseCode(const FrameWalk& close) {
  const uint64_t code = close.close_code;
  if (close.app_close ? (code > 0x100 && code <= 0x110) || (code >= 0x200 && code <= 0x202)
                      : code != 0) {
    return;
  }
  std::fprintf(stderr, "server closed with %s code 0x%llx\n",
               close.app_close ? "application" : "transport",
               static_cast<unsigned long long>(code));
  PETREL_FUZZ_CHECK(!"the server closed the connection without an error code");
}

void Run(absl::Span<const uint8_t> in) {
  QuicLoopback net(Callbacks().Build());
  PETREL_FUZZ_CHECK(net.Connect());
  net.DropClient();
  uint64_t pn = kFirstPacketNumber;
  bool used_next_phase = false;
  bool sent_close = false;
  for (size_t packets = 0; packets < kMaxPackets && in.size() >= 3; ++packets) {
    const uint8_t flags = in[0];
    const size_t len = std::min<size_t>({size_t{in[1]} << 8 | in[2], in.size() - 3, kMaxPayload});
    const absl::Span<const uint8_t> payload = in.subspan(3, len);
    in.remove_prefix(3 + len);

    // What the server will make of the frames, as far as the harness needs to know. A new CID of
    // ours may become its destination. A CONNECTION_CLOSE lets it fall silent: any octet that
    // could be one's type counts, because ngtcp2 0.12 reads unknown frame types with bit 0x08
    // set (0x2a, say) as STREAM frames, so where its frames start is not where WalkFrames' do.
    for (const std::vector<uint8_t>& cid : WalkFrames(payload).new_cids) net.AddClientCid(cid);
    sent_close = sent_close || std::any_of(payload.begin(), payload.end(),
                                           [](uint8_t b) { return b == 0x1c || b == 0x1d; });

    if ((flags & 0x80) != 0 && pn > kFirstPacketNumber) --pn;
    const int phase = (flags & kKeyPhaseBit) != 0 ? 1 : 0;
    used_next_phase = used_next_phase || phase == 1;
    const std::vector<uint8_t> packet = SealShortPacket(
        net.client_keys(phase), net.server_cid(), pn++, (flags & 0x03) + 1, flags & 0x3c, payload);
    PETREL_FUZZ_CHECK(!packet.empty());
    net.SendFromClient(packet);
    if ((flags & 0x40) != 0) (void)net.Settle(50, 2, Duration::zero());
  }
  net.Pump([&] { return net.server_close().has_value(); }, 200, 2);
  if (net.server_close().has_value()) return CheckCloseCode(*net.server_close());

  // Still open, or silently draining: a PING in each key phase the server may be in now.
  const uint64_t ping_pn = pn;
  static constexpr uint8_t kPing[] = {0x01};
  net.SendFromClient(SealShortPacket(net.client_keys(0), net.server_cid(), pn++, 4, 0, kPing));
  if (used_next_phase) {
    net.SendFromClient(
        SealShortPacket(net.client_keys(1), net.server_cid(), pn++, 4, kKeyPhaseBit, kPing));
  }
  const auto acked = [&] {
    return net.Acked(ping_pn) || (used_next_phase && net.Acked(ping_pn + 1));
  };
  // A draining connection ends after three PTOs. The PTO follows the RTT the handshake measured,
  // which a loaded machine inflates (the clock is the kernel's plus the harness's offset), so
  // the wait is 30 s of virtual time in 10 ms steps — not a second, which a PTO of ~0.4 s
  // overran (seen once beside a full CI run). An open server's ACK or a drain that ends
  // returns at once.
  net.Pump([&] { return net.server_close().has_value() || acked() || net.server_ended(); }, 3000,
           3000, std::chrono::milliseconds(10));
  if (net.server_close().has_value()) return CheckCloseCode(*net.server_close());
  if (acked()) return;
  if (!net.server_ended()) {
    PETREL_FUZZ_CHECK(!"the server neither closed the connection nor acknowledged a PING");
  }
  if (!sent_close) PETREL_FUZZ_CHECK(!"the server dropped the connection without a word");
}

}  // namespace
}  // namespace petrel::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 16 * 1024) return 0;
  petrel::fuzz::Run(absl::MakeConstSpan(data, size));
  return 0;
}
