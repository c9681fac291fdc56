// Internal: versions of the transport libraries linked into petrel_quic.
#ifndef PETREL_QUIC_VERSION_H_
#define PETREL_QUIC_VERSION_H_

#include <string>

namespace petrel::quic {

// "ngtcp2/0.12.1 BoringSSL/<api>", as the libraries report at run time.
std::string TransportLibraryVersions();

}  // namespace petrel::quic

#endif  // PETREL_QUIC_VERSION_H_
