// Public: an HTTP request as every engine (h1, h2, h3) presents it to handlers.
#ifndef PETREL_HTTP_REQUEST_H_
#define PETREL_HTTP_REQUEST_H_

#include <cstdint>
#include <string>
#include <utility>

#include "absl/container/inlined_vector.h"
#include "absl/strings/string_view.h"
#include "petrel/common/socket_address.h"
#include "petrel/http/body.h"
#include "petrel/http/header_map.h"
#include "petrel/http/method.h"
#include "petrel/http/request_context.h"

namespace petrel {

enum class HttpVersion : uint8_t { k10, k11, k2, k3 };

// "HTTP/1.0", "HTTP/1.1", "HTTP/2", "HTTP/3".
absl::string_view HttpVersionName(HttpVersion version);

class RequestObserver;

// Values the router captured from the path, by name (":id" -> "id", a trailing "*" -> "*").
// Names point into the Router and values into Request::path(): valid while both are unchanged.
// Values are raw (still percent-encoded).
class RouteParams {
 public:
  struct Param {
    absl::string_view name;
    absl::string_view value;
  };

  void Add(absl::string_view name, absl::string_view value);
  void Clear() { params_.clear(); }
  // The value of `name`, or "" if there is no such parameter.
  absl::string_view Get(absl::string_view name) const;
  bool Contains(absl::string_view name) const;

  size_t size() const { return params_.size(); }
  bool empty() const { return params_.empty(); }
  // The last parameter (a wildcard's, if the route has one); !empty().
  const Param& back() const { return params_.back(); }
  auto begin() const { return params_.begin(); }
  auto end() const { return params_.end(); }

 private:
  absl::InlinedVector<Param, 4> params_;
};

// One request. The engine creates it, fills it (the setters are engine-facing, though
// middleware may rewrite fields too), keeps it alive until the stream ends and hands it to the
// handler by reference. Lives on the connection's loop thread; not copyable or movable, since
// the body and route parameters refer into it.
class Request {
 public:
  Request() = default;
  Request(const Request&) = delete;
  Request& operator=(const Request&) = delete;

  const Method& method() const { return method_; }
  void set_method(Method method) { method_ = std::move(method); }

  // The path part of the target, raw (not percent-decoded), e.g. "/a%20b". "*" for
  // "OPTIONS *"; engines turn absolute-form targets into authority + path.
  absl::string_view path() const { return path_; }
  // The query after '?', raw, without the '?'; "" if none.
  absl::string_view query() const { return query_; }
  // Splits an origin-form target ("/p?q") at the first '?' into path and query.
  void SetTarget(absl::string_view target);
  void set_path(std::string path) { path_ = std::move(path); }
  void set_query(std::string query) { query_ = std::move(query); }

  // Host (h1) or :authority (h2/h3), as received.
  absl::string_view authority() const { return authority_; }
  void set_authority(std::string authority) { authority_ = std::move(authority); }
  // "http" or "https" (h2/h3 :scheme as received).
  absl::string_view scheme() const { return scheme_; }
  void set_scheme(std::string scheme) { scheme_ = std::move(scheme); }
  // Engine-facing twins of set_authority / set_scheme that copy into the existing string, so an
  // engine that recycles its Requests reuses their capacity.
  void AssignAuthority(absl::string_view authority) { CopyInto(authority_, authority); }
  void AssignScheme(absl::string_view scheme) { CopyInto(scheme_, scheme); }
  // The :protocol of an extended CONNECT (RFC 8441, RFC 9220: "websocket"); empty otherwise.
  absl::string_view protocol() const { return protocol_; }
  void AssignProtocol(absl::string_view protocol) { CopyInto(protocol_, protocol); }
  // HTTP/1.1: the Upgrade field of a request whose Connection field lists "upgrade" (RFC 9110
  // §7.8), which the engine consumes with the other connection fields; empty otherwise. A 101
  // answer switches the connection to what it names (see Router::WebSocket).
  absl::string_view upgrade() const { return upgrade_; }
  void AssignUpgrade(absl::string_view upgrade) { CopyInto(upgrade_, upgrade); }

  HttpVersion version() const { return version_; }
  void set_version(HttpVersion version) { version_ = version; }

  // Regular fields only: engines keep pseudo-headers and (h1) connection-specific fields
  // they consumed out of here.
  HeaderMap& headers() { return headers_; }
  const HeaderMap& headers() const { return headers_; }

  RequestBody& body() { return body_; }
  const RequestBody& body() const { return body_; }

  const SocketAddress& peer_address() const { return peer_address_; }
  void set_peer_address(const SocketAddress& address) { peer_address_ = address; }
  const SocketAddress& local_address() const { return local_address_; }
  void set_local_address(const SocketAddress& address) { local_address_ = address; }

  // TLS facts, "" on cleartext. Views into the connection's state: the engine guarantees the
  // connection outlives its requests.
  absl::string_view alpn() const { return alpn_; }
  void set_alpn(absl::string_view alpn) { alpn_ = alpn; }
  absl::string_view sni() const { return sni_; }
  void set_sni(absl::string_view sni) { sni_ = sni; }

  // The request arrived in TLS 1.3 / QUIC 0-RTT data and may be a replay (RFC 8470): servers
  // answer unsafe methods with 425 Too Early.
  bool early_data() const { return early_data_; }
  void set_early_data(bool early_data) { early_data_ = early_data; }

  // Engine-facing: the observer of the engine that carries the request (metrics, access log),
  // or null. For what outlives the response head, such as a WebSocket's end.
  RequestObserver* observer() const { return observer_; }
  void set_observer(RequestObserver* observer) { observer_ = observer; }

  // The size of the request head as the server's limit counts it (HttpServerConfig::
  // max_header_bytes): h1 the header section's bytes, h2 and h3 the field section's size (names
  // and values, plus 32 per field). Set by the engine.
  size_t head_bytes() const { return head_bytes_; }
  void set_head_bytes(size_t bytes) { head_bytes_ = bytes; }

  // Route parameters, set by the router before the handler runs.
  absl::string_view Param(absl::string_view name) const { return params_.Get(name); }
  const RouteParams& params() const { return params_; }
  void set_params(RouteParams params) { params_ = std::move(params); }
  // The pattern of the route that matched, as registered ("/users/:id"); "" before routing or
  // when none did. Set by the router; points into it.
  absl::string_view route_pattern() const { return route_pattern_; }
  void set_route_pattern(absl::string_view pattern) { route_pattern_ = pattern; }

  // Values the code handling this request shares, by type (RequestContext).
  RequestContext& context() { return context_; }
  const RequestContext& context() const { return context_; }

  // Engine-facing: back to the state of a new Request, keeping the capacity of its strings and
  // header storage, for engines that recycle Requests across streams (h2). Only when nothing
  // refers to the request any more: the body is rebuilt, its callbacks dropped unrun, and the
  // context's values destroyed.
  void Reset();

 private:
  // std::string::assign allows for a source inside the string itself (its general replace
  // path); an engine's source, its receive buffer, never is: a length check and one copy.
  static void CopyInto(std::string& to, absl::string_view from) {
    if (from.data() >= to.data() && from.data() <= to.data() + to.size()) {
      to.assign(from.data(), from.size());
      return;
    }
    to.clear();
    to.append(from.data(), from.size());
  }

  Method method_;
  HttpVersion version_ = HttpVersion::k11;
  bool early_data_ = false;
  RequestObserver* observer_ = nullptr;
  size_t head_bytes_ = 0;
  std::string path_;
  std::string query_;
  std::string authority_;
  std::string scheme_;
  std::string protocol_;
  std::string upgrade_;
  HeaderMap headers_;
  RequestBody body_;
  SocketAddress peer_address_;
  SocketAddress local_address_;
  absl::string_view alpn_;
  absl::string_view sni_;
  RouteParams params_;
  absl::string_view route_pattern_;
  RequestContext context_;
};

}  // namespace petrel

#endif  // PETREL_HTTP_REQUEST_H_
