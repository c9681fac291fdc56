// Internal: the ngtcp2 callbacks table of Connection: Petrel's crypto callbacks plus C
// trampolines named after the Connection method they call (user_data is the Connection).
#ifndef PETREL_QUIC_CONNECTION_CONNECTION_CALLBACKS_H_
#define PETREL_QUIC_CONNECTION_CONNECTION_CALLBACKS_H_

#include <ngtcp2/ngtcp2.h>

namespace petrel::quic {

// The table for a client or a server connection.
ngtcp2_callbacks ConnectionCallbacksFor(bool is_server);

}  // namespace petrel::quic

#endif  // PETREL_QUIC_CONNECTION_CONNECTION_CALLBACKS_H_
