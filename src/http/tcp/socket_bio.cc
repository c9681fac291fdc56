#include "http/tcp/socket_bio.h"

#include <errno.h>
#include <sys/socket.h>

#include <cstdint>

namespace petrel::http {
namespace {

int FdOf(BIO* bio) { return static_cast<int>(reinterpret_cast<intptr_t>(BIO_get_data(bio))); }

bool Retriable(int err) { return err == EAGAIN || err == EWOULDBLOCK || err == EINTR; }

int SocketWrite(BIO* bio, const char* data, int len) {
  BIO_clear_retry_flags(bio);
  const ssize_t n = send(FdOf(bio), data, static_cast<size_t>(len), MSG_NOSIGNAL);
  if (n < 0 && Retriable(errno)) BIO_set_retry_write(bio);
  return static_cast<int>(n);
}

int SocketRead(BIO* bio, char* out, int len) {
  BIO_clear_retry_flags(bio);
  const ssize_t n = recv(FdOf(bio), out, static_cast<size_t>(len), 0);
  if (n < 0 && Retriable(errno)) BIO_set_retry_read(bio);
  return static_cast<int>(n);
}

long SocketCtrl(BIO* /*bio*/, int cmd, long /*num*/, void* /*ptr*/) {
  return cmd == BIO_CTRL_FLUSH ? 1 : 0;  // nothing is buffered here
}

const BIO_METHOD* Method() {
  static const BIO_METHOD* method = [] {
    BIO_METHOD* m = BIO_meth_new(BIO_TYPE_SOCKET, "petrel socket");
    BIO_meth_set_write(m, SocketWrite);
    BIO_meth_set_read(m, SocketRead);
    BIO_meth_set_ctrl(m, SocketCtrl);
    return m;
  }();
  return method;
}

}  // namespace

BIO* NewSocketBio(int fd) {
  BIO* bio = BIO_new(Method());
  if (bio == nullptr) return nullptr;
  BIO_set_data(bio, reinterpret_cast<void*>(static_cast<intptr_t>(fd)));
  BIO_set_init(bio, 1);
  return bio;
}

}  // namespace petrel::http
