// Internal (tests): a small h3 server — a QuicServer (ALPN h3, 127.0.0.1, ephemeral port, a
// self-signed certificate) running on its own thread, with H3ServerCallbacks and a Router with
// the routes the h3 tests and gtlsclient exercise:
//   GET  /hello            "hello"
//   GET  /files/:name      the file `name` of the fixture's directory (FileBody), 404 if absent
//   GET  /static/*         StaticFiles(Options::static_dir) with its defaults, when set
//   POST /sha256           streams the request body through SHA-256, answers the hex digest
//   GET  /trailers         "body" followed by trailer x-checksum: 42
//   GET  /gate             a producer that sends "gate:" then parks (WOULDBLOCK) until a
//                          /release on the same worker thread resumes it, then sends "open"
//   GET  /release          resumes every parked /gate of this thread, answers "released N"
//   GET  /hold             never answers; counts the engine's cancellation (SetOnCancel)
#ifndef PETREL_TESTS_HTTP_H3_TEST_SERVER_H_
#define PETREL_TESTS_HTTP_H3_TEST_SERVER_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "http/h3/h3_server_callbacks.h"
#include "petrel/http/router.h"
#include "petrel/quic/quic_server.h"

namespace petrel::http {

class H3TestServer {
 public:
  struct Options {
    size_t workers = 0;
    std::string files_dir;   // served under /files/
    std::string static_dir;  // served under /static/ by StaticFiles with its defaults, when set
    H3Options h3;
  };

  // Binds and starts serving on a new thread; ok() says whether that worked.
  explicit H3TestServer(const Options& options);
  ~H3TestServer();  // Stop() and join
  H3TestServer(const H3TestServer&) = delete;
  H3TestServer& operator=(const H3TestServer&) = delete;

  bool ok() const { return port_ != 0; }
  uint16_t port() const { return port_; }
  // Bodies /sha256 hashed completely, and /gate responses resumed.
  int uploads_hashed() const { return uploads_hashed_.load(); }
  int gates_opened() const { return gates_opened_.load(); }
  // /hold responses the engine cancelled.
  int holds_cancelled() const { return holds_cancelled_.load(); }

 private:
  absl::Status AddRoutes(Router& router);

  Options options_;
  std::atomic<int> uploads_hashed_{0};
  std::atomic<int> gates_opened_{0};
  std::atomic<int> holds_cancelled_{0};
  std::unique_ptr<Router> router_;
  std::unique_ptr<H3ServerCallbacks> callbacks_;  // outlives server_
  std::unique_ptr<QuicServer> server_;
  std::thread thread_;
  uint16_t port_ = 0;
};

}  // namespace petrel::http

#endif  // PETREL_TESTS_HTTP_H3_TEST_SERVER_H_
