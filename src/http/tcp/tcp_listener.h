// Internal: a listening TCP socket on an event loop, with the accept discipline of DESIGN §5:
// accept4(NONBLOCK|CLOEXEC) until EAGAIN, TCP_NODELAY on every accepted socket, and — at the
// connection limit or when the process runs out of descriptors (EMFILE/ENFILE) — stop watching
// the listener until a connection closes (or, for descriptor exhaustion, a retry timer of
// `exhaustion_retry` fires, since descriptors may be freed elsewhere), so a full server never
// spins on a readable listener.
//
// One per worker with SO_REUSEPORT (the kernel spreads connections), or one in single-thread
// mode. Loop thread only.
#ifndef PETREL_HTTP_TCP_TCP_LISTENER_H_
#define PETREL_HTTP_TCP_TCP_LISTENER_H_

#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "petrel/common/event_loop.h"
#include "petrel/common/socket_address.h"
#include "petrel/common/timer.h"

namespace petrel::http {

struct TcpListenerOptions {
  bool reuse_port = false;
  int backlog = 1024;
  // Connections this listener may have open at once; beyond it, accepting pauses.
  size_t max_connections = 10000;
  Duration exhaustion_retry = std::chrono::milliseconds(100);
  // IPv6 addresses take IPv6 only (false: "::" takes IPv4 too, as IPv4-mapped addresses).
  bool ipv6_only = true;
  // A socket already bound to the address and listening (handed over by a service manager):
  // the listener accepts on a duplicate of it, and neither binds nor sets socket options (the
  // options above but the backlog and the limits do not apply). -1: bind a socket of its own.
  int inherited_fd = -1;
};

class TcpListener final : public IoHandler {
 public:
  // Gets each accepted socket (non-blocking, TCP_NODELAY) and owns it from then on. The owner
  // must call ConnectionClosed() once for each accepted socket it closes.
  using AcceptCallback =
      absl::AnyInvocable<void(int fd, const SocketAddress& peer, const SocketAddress& local)>;

  static absl::StatusOr<std::unique_ptr<TcpListener>> Listen(EventLoop* loop,
                                                             const SocketAddress& address,
                                                             const TcpListenerOptions& options,
                                                             AcceptCallback on_accept);
  ~TcpListener() override;
  TcpListener(const TcpListener&) = delete;
  TcpListener& operator=(const TcpListener&) = delete;

  const SocketAddress& local_address() const { return local_; }
  size_t open_connections() const { return open_; }
  bool paused() const { return paused_; }
  // Times the listener's readiness was handled (to show that a paused listener is not polled).
  uint64_t accept_wakeups() const { return wakeups_; }
  uint64_t accepted() const { return accepted_; }
  uint64_t descriptor_exhaustions() const { return emfile_; }

  // An accepted connection was closed: accepting resumes if it was paused.
  void ConnectionClosed();
  // A new connection limit (a reload): accepting pauses or resumes by it from now on; open
  // connections beyond it are not touched.
  void set_max_connections(size_t n);
  // Stops accepting for good (graceful shutdown); open connections are not touched.
  void Close();

  void OnIoEvent(uint32_t events) override;

 private:
  TcpListener(EventLoop* loop, int fd, const SocketAddress& local,
              const TcpListenerOptions& options, AcceptCallback on_accept);
  static absl::StatusOr<std::unique_ptr<TcpListener>> Adopt(EventLoop* loop,
                                                            const TcpListenerOptions& options,
                                                            AcceptCallback on_accept);
  // Registers the listening `fd` (owned from here on, closed on error).
  static absl::StatusOr<std::unique_ptr<TcpListener>> Watch(EventLoop* loop, int fd,
                                                            const TcpListenerOptions& options,
                                                            AcceptCallback on_accept);
  void Pause();
  void Resume();

  EventLoop* const loop_;
  int fd_;
  const SocketAddress local_;
  TcpListenerOptions options_;
  AcceptCallback on_accept_;
  Timer retry_;
  size_t open_ = 0;
  bool paused_ = false;
  uint64_t wakeups_ = 0;
  uint64_t accepted_ = 0;
  uint64_t emfile_ = 0;
};

}  // namespace petrel::http

#endif  // PETREL_HTTP_TCP_TCP_LISTENER_H_
