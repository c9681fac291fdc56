// Public (engine-facing): RequestObserver, told once about every request an HTTP engine (h1, h2,
// h3) finished — for metrics and access logs. HttpServer installs one; handlers never see it.
#ifndef PETREL_HTTP_REQUEST_OBSERVER_H_
#define PETREL_HTTP_REQUEST_OBSERVER_H_

#include <cstdint>

#include "petrel/common/clock.h"
#include "petrel/common/socket_address.h"
#include "petrel/http/request.h"

namespace petrel {

enum class HttpProtocol : uint8_t { kHttp1, kHttp2, kHttp3 };

struct RequestRecord {
  HttpProtocol protocol = HttpProtocol::kHttp1;
  // Null when the engine answered bytes that never became a request (an h1 parse error or a
  // header timeout): there is no method or path then.
  const Request* request = nullptr;
  const SocketAddress* peer = nullptr;  // never null
  // The status of the response head that went out; 0 if none did (reset, connection lost).
  int status = 0;
  uint64_t body_bytes = 0;  // response body bytes handed to the transport (none for HEAD)
  TimePoint start;          // the request head was complete (MonotonicNow)
  // Every byte of the response was handed to the transport; false: cancelled or cut short.
  bool completed = false;
};

class RequestObserver {
 public:
  virtual ~RequestObserver() = default;
  // Once per request, on the loop thread of its connection (any of a server's threads, so an
  // implementation must be thread-safe), when the response completed or the request ended
  // without one. `record` and what it points to are valid only during the call. Must not call
  // back into the engine, and should be quick: it runs on the connection's event loop.
  virtual void OnRequestDone(const RequestRecord& record) = 0;
};

}  // namespace petrel

#endif  // PETREL_HTTP_REQUEST_OBSERVER_H_
