// Internal (tests): a small HTTP/1.1 server on its own loop thread — TcpListener + TcpStream
// (TLS with a generated certificate and ALPN http/1.1, or cleartext) + H1Connection + a Router
// with the routes the h1 engine tests exercise through curl and raw sockets:
//   GET  /hello            "hello"
//   GET  /info?...         "<scheme> <authority> <version> <path> <query> <alpn>"
//   ANY  /sha256           reads the body streaming; "<hex sha-256> <bytes>"
//   ANY  /echo             streams the request body back (StreamingBody, backpressure both ways)
//   POST /pause            reads the first body chunk, then pauses for good; never answers
//   POST /noread           answers "ignored" without reading the body
//   GET  /file             Options::file_path as a FileBody (sendfile on cleartext)
//   GET  /static/*         StaticFiles(Options::static_dir) with its defaults, when set
//   GET  /big?kib=N        N KiB of BigByte(i) from a producer that knows its length
//   GET  /stream?kib=N     the same bytes from a producer of unknown length (chunked / 1.0 close)
//   GET  /204, /304        bodiless statuses (the handler sets a body; the engine drops it)
//   GET  /trailers         "body" then trailer x-checksum: 42 (StreamingBody::Finish)
//   GET  /slow?ms=N        "slow" after a Timer of N ms
#ifndef PETREL_TESTS_HTTP_H1_TEST_SERVER_H_
#define PETREL_TESTS_HTTP_H1_TEST_SERVER_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "absl/functional/any_invocable.h"
#include "absl/functional/function_ref.h"
#include "http/h1/h1_connection.h"
#include "http/tcp/tcp_stream.h"

namespace petrel::http {

// The byte at offset `i` of /big and /stream.
inline char H1BigByte(uint64_t i) { return static_cast<char>('a' + (i * 7 + i / 4099) % 26); }

class H1TestServer {
 public:
  struct Options {
    bool tls = false;
    H1Options h1;
    TcpStreamOptions stream;
    std::string file_path;
    std::string static_dir;
    // SO_SNDBUF of accepted sockets; 0 keeps the kernel's autotuning. A fixed size bounds what
    // the kernel can hold for a peer that does not read, so a test knows how large a response
    // must be to leave output pending in the stream.
    int sndbuf = 0;
  };

  // One open connection as the loop thread sees it.
  struct LiveConnection {
    size_t pending_output = 0;      // TcpStream::pending_output(): queued, not yet in the kernel
    size_t max_pending_output = 0;  // H1Connection::max_pending_output() so far
  };

  // Starts listening on 127.0.0.1 (ephemeral port) and runs the loop on a new thread.
  explicit H1TestServer(const Options& options);
  ~H1TestServer();  // stops the loop and joins
  H1TestServer(const H1TestServer&) = delete;
  H1TestServer& operator=(const H1TestServer&) = delete;

  uint16_t port() const { return port_; }
  bool ok() const { return port_ != 0; }
  // Graceful shutdown of every open connection; returns once done on the loop thread.
  void ShutdownConnections();
  // Waits until `n` connections have closed (and were released), or `timeout` passes.
  bool WaitClosed(int n, std::chrono::milliseconds timeout);
  // Runs `task` on the loop thread and returns once it ran.
  void RunOnLoop(absl::AnyInvocable<void()> task);
  // Socket syscalls of the connections still open (read on the loop thread).
  TcpIoCounters live_io_counters();
  // The open connection whose client port is `peer_port`; nullopt if there is none (not yet
  // accepted, or released) or the loop did not answer within `timeout` (it is stuck).
  std::optional<LiveConnection> live_connection(
      uint16_t peer_port, std::chrono::milliseconds timeout = std::chrono::milliseconds(20000));
  // Waits until the open connection from `peer_port` satisfies `pred`, or `timeout` passes.
  // It polls live_connection(): meant for states a connection stays in until the test acts
  // (output blocked on a peer that reads nothing), which a poll cannot miss.
  bool WaitLiveConnection(uint16_t peer_port, absl::FunctionRef<bool(const LiveConnection&)> pred,
                          std::chrono::milliseconds timeout);
  // Waits until `n` /slow requests have arrived.
  bool WaitSlowStarted(int n, std::chrono::milliseconds timeout);

  // Totals over closed connections (updated when a connection is released).
  int closed_connections() const { return closed_connections_.load(); }
  uint64_t continues_sent() const { return continues_sent_.load(); }
  uint64_t error_responses() const { return error_responses_.load(); }
  size_t max_pending_output() const { return max_pending_output_.load(); }
  uint64_t sendfile_responses() const { return sendfile_responses_.load(); }
  // Live counters.
  uint64_t hello_hits() const { return hello_hits_.load(); }
  uint64_t big_produced() const { return big_produced_.load(); }
  uint64_t accepted() const { return accepted_.load(); }
  // Body bytes the /pause handler saw before it paused.
  uint64_t pause_seen() const { return pause_seen_.load(); }

  struct Impl;

 private:
  void NotifyAll();

  std::unique_ptr<Impl> impl_;
  std::thread thread_;
  uint16_t port_ = 0;
  std::mutex mu_;
  std::condition_variable cv_;
  std::atomic<int> closed_connections_{0};
  std::atomic<int> slow_started_{0};
  std::atomic<uint64_t> continues_sent_{0};
  std::atomic<uint64_t> error_responses_{0};
  std::atomic<size_t> max_pending_output_{0};
  std::atomic<uint64_t> sendfile_responses_{0};
  std::atomic<uint64_t> hello_hits_{0};
  std::atomic<uint64_t> big_produced_{0};
  std::atomic<uint64_t> accepted_{0};
  std::atomic<uint64_t> pause_seen_{0};
};

}  // namespace petrel::http

#endif  // PETREL_TESTS_HTTP_H1_TEST_SERVER_H_
