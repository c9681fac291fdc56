// Internal: a BoringSSL BIO over a non-blocking socket that sends with MSG_NOSIGNAL, so that a
// peer closing mid-response gives EPIPE instead of killing the process with SIGPIPE (BoringSSL's
// own socket BIO uses write(2)). Applications need not ignore SIGPIPE.
#ifndef PETREL_HTTP_TCP_SOCKET_BIO_H_
#define PETREL_HTTP_TCP_SOCKET_BIO_H_

#include <openssl/bio.h>

namespace petrel::http {

// A new BIO for `fd` (not owned: closing the BIO does not close the fd). Null on failure.
BIO* NewSocketBio(int fd);

}  // namespace petrel::http

#endif  // PETREL_HTTP_TCP_SOCKET_BIO_H_
