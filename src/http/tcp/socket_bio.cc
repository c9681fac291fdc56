#include "http/tcp/socket_bio.h"

#include <errno.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstring>
#include <memory>

namespace petrel::http {
namespace {

struct SocketBioState {
  int fd = -1;
  TcpIoCounters* counters = nullptr;
  // Read-ahead: bytes [begin, end) of `buffer` are received and not yet handed to the session.
  std::unique_ptr<char[]> buffer;  // allocated on the first read
  size_t begin = 0;
  size_t end = 0;
  bool drained = false;  // the last recv() came back short: wait for the next readable event
};

SocketBioState* StateOf(BIO* bio) { return static_cast<SocketBioState*>(BIO_get_data(bio)); }

bool Retriable(int err) { return err == EAGAIN || err == EWOULDBLOCK || err == EINTR; }

int SocketWrite(BIO* bio, const char* data, int len) {
  BIO_clear_retry_flags(bio);
  SocketBioState* s = StateOf(bio);
  if (s->counters != nullptr) ++s->counters->writes;
  const ssize_t n = send(s->fd, data, static_cast<size_t>(len), MSG_NOSIGNAL);
  if (n < 0 && Retriable(errno)) BIO_set_retry_write(bio);
  return static_cast<int>(n);
}

int SocketRead(BIO* bio, char* out, int len) {
  BIO_clear_retry_flags(bio);
  if (len <= 0) return 0;
  SocketBioState* s = StateOf(bio);
  if (s->begin == s->end) {
    if (s->drained) {
      BIO_set_retry_read(bio);
      return -1;
    }
    if (s->buffer == nullptr) s->buffer = std::make_unique<char[]>(kSocketBioReadAhead);
    if (s->counters != nullptr) ++s->counters->reads;
    const ssize_t n = recv(s->fd, s->buffer.get(), kSocketBioReadAhead, 0);
    if (n < 0) {
      if (Retriable(errno)) {
        s->drained = errno != EINTR;
        BIO_set_retry_read(bio);
      }
      return -1;
    }
    if (n == 0) {
      errno = 0;  // a clean EOF: the stream tells it from a failed read by errno 0
      return 0;
    }
    s->begin = 0;
    s->end = static_cast<size_t>(n);
    s->drained = s->end < kSocketBioReadAhead;
  }
  const size_t take = std::min(s->end - s->begin, static_cast<size_t>(len));
  std::memcpy(out, s->buffer.get() + s->begin, take);
  s->begin += take;
  return static_cast<int>(take);
}

long SocketCtrl(BIO* bio, int cmd, long /*num*/, void* /*ptr*/) {
  switch (cmd) {
    case BIO_CTRL_FLUSH:
      return 1;  // writes are not buffered
    case BIO_CTRL_PENDING: {
      const SocketBioState* s = StateOf(bio);
      return static_cast<long>(s->end - s->begin);
    }
    default:
      return 0;
  }
}

int SocketDestroy(BIO* bio) {
  delete StateOf(bio);
  BIO_set_data(bio, nullptr);
  return 1;
}

const BIO_METHOD* Method() {
  static const BIO_METHOD* method = [] {
    BIO_METHOD* m = BIO_meth_new(BIO_TYPE_SOCKET, "petrel socket");
    BIO_meth_set_write(m, SocketWrite);
    BIO_meth_set_read(m, SocketRead);
    BIO_meth_set_ctrl(m, SocketCtrl);
    BIO_meth_set_destroy(m, SocketDestroy);
    return m;
  }();
  return method;
}

}  // namespace

BIO* NewSocketBio(int fd, TcpIoCounters* counters) {
  BIO* bio = BIO_new(Method());
  if (bio == nullptr) return nullptr;
  auto* state = new SocketBioState;
  state->fd = fd;
  state->counters = counters;
  BIO_set_data(bio, state);
  BIO_set_init(bio, 1);
  return bio;
}

size_t SocketBioBuffered(BIO* bio) {
  const SocketBioState* s = StateOf(bio);
  return s == nullptr ? 0 : s->end - s->begin;
}

void SocketBioArmRead(BIO* bio) {
  if (SocketBioState* s = StateOf(bio)) s->drained = false;
}

}  // namespace petrel::http
