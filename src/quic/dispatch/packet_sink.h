// Internal: the hand-off between the master, which reads datagrams and routes them by
// connection ID, and a worker, which owns the connections (DESIGN §3). The master produces
// ReceivedPackets; a worker's PacketSink consumes them on the worker's thread.
#ifndef PETREL_QUIC_DISPATCH_PACKET_SINK_H_
#define PETREL_QUIC_DISPATCH_PACKET_SINK_H_

#include <cstddef>
#include <cstdint>

#include "absl/types/span.h"
#include "petrel/common/clock.h"
#include "petrel/common/socket_address.h"

namespace petrel::quic {

class UdpSocket;

// One received datagram, or a GRO batch of datagrams of `segment_size` bytes (the last may be
// shorter) from one peer, routed to a worker by the first datagram's DCID. Later segments may
// carry other DCIDs; the worker looks each up.
struct ReceivedPacket {
  const uint8_t* data = nullptr;  // valid only during PacketSink::OnPackets
  size_t length = 0;
  size_t segment_size = 0;  // 0: one datagram
  SocketAddress peer;
  SocketAddress local;  // the address the peer sent to
  uint8_t ecn = 0;
  TimePoint received{};
  // The socket it arrived on: replies go out on the same one (through the worker's UdpSender
  // for it). Index into the master's sockets().
  uint32_t socket_index = 0;
};

// Implemented by a worker. Runs on the worker's loop thread.
class PacketSink {
 public:
  virtual ~PacketSink() = default;
  // Handles a batch. The bytes of each packet are valid only until this returns: the master
  // reuses their buffers afterwards.
  virtual void OnPackets(absl::Span<const ReceivedPacket> packets) = 0;
};

}  // namespace petrel::quic

#endif  // PETREL_QUIC_DISPATCH_PACKET_SINK_H_
