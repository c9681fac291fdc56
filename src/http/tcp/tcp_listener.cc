#include "http/tcp/tcp_listener.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "petrel/common/log.h"

namespace petrel::http {
namespace {

bool SetInt(int fd, int level, int name, int value) {
  return setsockopt(fd, level, name, &value, sizeof(value)) == 0;
}

}  // namespace

absl::StatusOr<std::unique_ptr<TcpListener>> TcpListener::Listen(EventLoop* loop,
                                                                 const SocketAddress& address,
                                                                 const TcpListenerOptions& options,
                                                                 AcceptCallback on_accept) {
  loop->AssertInLoopThread();
  if (options.inherited_fd >= 0) return Adopt(loop, options, std::move(on_accept));
  if (address.empty()) return absl::InvalidArgumentError("TCP listen address is empty");
  int fd = socket(address.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, IPPROTO_TCP);
  if (fd < 0) return absl::ErrnoToStatus(errno, "socket(TCP)");
  auto fail = [fd](absl::string_view what) {
    absl::Status s = absl::ErrnoToStatus(errno, what);
    close(fd);
    return s;
  };
  if (!SetInt(fd, SOL_SOCKET, SO_REUSEADDR, 1)) return fail("setsockopt(SO_REUSEADDR)");
  if (options.reuse_port && !SetInt(fd, SOL_SOCKET, SO_REUSEPORT, 1)) {
    return fail("setsockopt(SO_REUSEPORT)");
  }
  if (address.is_v6() && !SetInt(fd, IPPROTO_IPV6, IPV6_V6ONLY, options.ipv6_only ? 1 : 0)) {
    return fail("setsockopt(IPV6_V6ONLY)");
  }
  if (bind(fd, address.sockaddr_ptr(), address.length()) != 0) {
    return fail(absl::StrCat("bind(TCP ", address.ToString(), ")"));
  }
  if (listen(fd, options.backlog) != 0) return fail("listen");
  return Watch(loop, fd, options, std::move(on_accept));
}

absl::StatusOr<std::unique_ptr<TcpListener>> TcpListener::Adopt(EventLoop* loop,
                                                                const TcpListenerOptions& options,
                                                                AcceptCallback on_accept) {
  // Each loop that serves the address accepts on a duplicate: they share one accept queue.
  const int fd = fcntl(options.inherited_fd, F_DUPFD_CLOEXEC, 0);
  if (fd < 0) return absl::ErrnoToStatus(errno, "fcntl(F_DUPFD_CLOEXEC)");
  const int flags = fcntl(fd, F_GETFL);
  if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0) {
    absl::Status s = absl::ErrnoToStatus(errno, "fcntl(O_NONBLOCK)");
    close(fd);
    return s;
  }
  return Watch(loop, fd, options, std::move(on_accept));
}

absl::StatusOr<std::unique_ptr<TcpListener>> TcpListener::Watch(EventLoop* loop, int fd,
                                                                const TcpListenerOptions& options,
                                                                AcceptCallback on_accept) {
  sockaddr_storage bound{};
  socklen_t len = sizeof(bound);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len) != 0) {
    absl::Status s = absl::ErrnoToStatus(errno, "getsockname");
    close(fd);
    return s;
  }
  auto l = std::unique_ptr<TcpListener>(
      new TcpListener(loop, fd, SocketAddress(reinterpret_cast<sockaddr*>(&bound), len), options,
                      std::move(on_accept)));
  if (absl::Status s = loop->Register(fd, EventLoop::kReadable, l.get()); !s.ok()) return s;
  return l;
}

TcpListener::TcpListener(EventLoop* loop, int fd, const SocketAddress& local,
                         const TcpListenerOptions& options, AcceptCallback on_accept)
    : loop_(loop),
      fd_(fd),
      local_(local),
      options_(options),
      on_accept_(std::move(on_accept)),
      retry_(loop, [this] {
        if (open_ < options_.max_connections) Resume();
      }) {}

TcpListener::~TcpListener() { Close(); }

void TcpListener::Close() {
  if (fd_ < 0) return;
  retry_.Cancel();
  loop_->Unregister(fd_);
  close(fd_);
  fd_ = -1;
}

void TcpListener::Pause() {
  if (paused_ || fd_ < 0) return;
  paused_ = true;
  (void)loop_->SetInterest(fd_, 0);
}

void TcpListener::Resume() {
  if (!paused_ || fd_ < 0) return;
  paused_ = false;
  (void)loop_->SetInterest(fd_, EventLoop::kReadable);
}

void TcpListener::ConnectionClosed() {
  if (open_ > 0) --open_;
  if (open_ < options_.max_connections) Resume();
}

void TcpListener::set_max_connections(size_t n) {
  options_.max_connections = n;
  if (open_ < n) {
    Resume();
  } else {
    Pause();
  }
}

void TcpListener::OnIoEvent(uint32_t /*events*/) {
  ++wakeups_;
  while (fd_ >= 0 && open_ < options_.max_connections) {
    sockaddr_storage peer{};
    socklen_t peer_len = sizeof(peer);
    int c =
        accept4(fd_, reinterpret_cast<sockaddr*>(&peer), &peer_len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (c < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        // Out of descriptors or memory: wait for a connection to close instead of spinning.
        ++emfile_;
        PETREL_LOG(kWarning,
                   "accept on %s: %s; pausing until a connection closes or the retry timer fires",
                   local_.ToString(), strerror(errno));
        Pause();
        retry_.StartAfter(options_.exhaustion_retry);
        return;
      }
      PETREL_LOG(kWarning, "accept on %s: %s", local_.ToString(), strerror(errno));
      return;
    }
    SetInt(c, IPPROTO_TCP, TCP_NODELAY, 1);
    sockaddr_storage local{};
    socklen_t local_len = sizeof(local);
    getsockname(c, reinterpret_cast<sockaddr*>(&local), &local_len);
    ++open_;
    ++accepted_;
    on_accept_(c, SocketAddress(reinterpret_cast<sockaddr*>(&peer), peer_len),
               SocketAddress(reinterpret_cast<sockaddr*>(&local), local_len));
  }
  if (fd_ >= 0 && open_ >= options_.max_connections) Pause();
}

}  // namespace petrel::http
