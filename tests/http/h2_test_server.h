// Internal (tests): a small h2 server on its own loop thread — TcpListener + TcpStream (TLS
// with a generated certificate and ALPN h2, or cleartext prior knowledge) + H2Connection + a
// Router with the routes the h2 tests and external clients (curl, nghttp, h2load, python-h2)
// exercise:
//   GET  /hello          "hello"
//   POST /echo           streams the request body back (StreamingBody, backpressure both ways)
//   GET  /big?mib=N      N MiB of BigByte(i) (a producer that knows its length)
//   GET  /slow?ms=N      "slow" after a Timer of N ms
//   GET  /trailers       "body" followed by trailer x-checksum: 42
//   POST /request-trailers  answers "<body>|<value of request trailer x-t>"
//   POST /hold           never reads the body nor answers (flow-control test)
#ifndef PETREL_TESTS_HTTP_H2_TEST_SERVER_H_
#define PETREL_TESTS_HTTP_H2_TEST_SERVER_H_

#include <atomic>
#include <cstdint>
#include <future>
#include <memory>
#include <string>
#include <thread>

#include "absl/functional/any_invocable.h"
#include "http/h2/h2_connection.h"

namespace petrel::http {

// The byte at offset `i` of /big.
inline char BigByte(uint64_t i) { return static_cast<char>('a' + (i * 7 + i / 4099) % 26); }

class H2TestServer {
 public:
  struct Options {
    bool tls = false;
    H2Options h2;
    std::string static_dir;  // served under /static/ by StaticFiles with its defaults, when set
  };

  // Starts listening on 127.0.0.1 (ephemeral port) and runs the loop on a new thread.
  explicit H2TestServer(const Options& options);
  ~H2TestServer();  // stops the loop and joins
  H2TestServer(const H2TestServer&) = delete;
  H2TestServer& operator=(const H2TestServer&) = delete;

  uint16_t port() const { return port_; }
  bool ok() const { return port_ != 0; }
  // Graceful shutdown of every open connection; returns once requested on the loop thread.
  void ShutdownConnections();
  // Completed connections and the last calm reason, for assertions.
  int closed_connections() const { return closed_connections_.load(); }
  std::string last_calm_reason();
  // Responses of /slow that completed (the handler's timer fired and the response was sent).
  int slow_done() const { return slow_done_.load(); }
  // Responses of /slow the engine cancelled (stream reset by the client) before they were sent.
  int slow_cancelled() const { return slow_cancelled_.load(); }
  // Bytes the /big producers have produced so far (pulled by the engine).
  uint64_t big_produced() const { return big_produced_.load(); }
  // TcpStream writes and turn-end flushes of the h2 connection that closed last.
  uint64_t last_connection_writes() const { return last_writes_.load(); }
  uint64_t last_connection_flushes() const { return last_flushes_.load(); }
  // Blocks nghttp2 got from malloc rather than from the connection's pool (H2MemPool::fresh).
  uint64_t last_connection_pool_fresh() const { return last_pool_fresh_.load(); }
  // Waits (bounded) until `n` connections have closed; false on timeout.
  bool WaitForClosedConnections(int n);
  // Runs `fn` on the loop thread and returns when it has run.
  void RunOnLoop(absl::AnyInvocable<void()> fn);

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
  std::thread thread_;
  uint16_t port_ = 0;
  std::atomic<int> closed_connections_{0};
  std::atomic<int> slow_done_{0};
  std::atomic<int> slow_cancelled_{0};
  std::atomic<uint64_t> big_produced_{0};
  std::atomic<uint64_t> last_writes_{0};
  std::atomic<uint64_t> last_flushes_{0};
  std::atomic<uint64_t> last_pool_fresh_{0};
};

}  // namespace petrel::http

#endif  // PETREL_TESTS_HTTP_H2_TEST_SERVER_H_
