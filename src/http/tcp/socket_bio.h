// Internal: a BoringSSL BIO over a non-blocking socket.
//  - It sends with MSG_NOSIGNAL, so that a peer closing mid-response gives EPIPE instead of
//    killing the process with SIGPIPE (BoringSSL's own socket BIO uses write(2)). Applications
//    need not ignore SIGPIPE.
//  - It reads ahead: BoringSSL asks for a record header, then for the record, each with its own
//    read; the BIO takes in up to kSocketBioReadAhead bytes with one recv() and serves those
//    reads from them. A recv() that returned fewer bytes than asked drained the socket, so later
//    reads report "retry" without a syscall until SocketBioArmRead() — the owner calls it on the
//    next readable event (level-triggered epoll reports bytes that arrived meanwhile). Bytes the
//    BIO holds produce no socket event: the owner checks SocketBioBuffered() like SSL_pending().
#ifndef PETREL_HTTP_TCP_SOCKET_BIO_H_
#define PETREL_HTTP_TCP_SOCKET_BIO_H_

#include <openssl/bio.h>

#include <cstddef>
#include <cstdint>

namespace petrel::http {

// Socket-level calls a stream made: reads (EAGAIN ones included) and writes (send, sendfile).
struct TcpIoCounters {
  uint64_t reads = 0;
  uint64_t writes = 0;
};

// One maximum-size TLS record (16 KiB of plaintext plus its overhead) fits.
inline constexpr size_t kSocketBioReadAhead = 17 * 1024;

// A new BIO for `fd` (not owned: closing the BIO does not close the fd). `counters` (not owned,
// may be null) counts its syscalls and must outlive the BIO. Null on failure.
BIO* NewSocketBio(int fd, TcpIoCounters* counters);

// Received bytes the BIO holds that the TLS session has not read yet.
size_t SocketBioBuffered(BIO* bio);

// A readable event arrived: the next read that finds the BIO empty calls recv() again.
void SocketBioArmRead(BIO* bio);

}  // namespace petrel::http

#endif  // PETREL_HTTP_TCP_SOCKET_BIO_H_
